"""The generated sample corpus is the main test data: its facts must really be on its pages."""
import json

import fitz  # pymupdf

from search_engine.sample_corpus import QUESTIONS, generate_sample_corpus


def test_every_answer_is_printed_on_its_reference_page(tmp_path):
    corpus = generate_sample_corpus(tmp_path)
    by_name = {p.name: p for p in corpus.files}
    for qa in QUESTIONS:
        with fitz.open(by_name[qa.file_name]) as doc:
            assert all(1 <= p <= doc.page_count for p in qa.pages), qa
            text = " ".join(doc[p - 1].get_text() for p in qa.pages)
        if qa.file_name == "board_memo_scan.pdf":
            assert text.strip() == "", "the memo must be image-only, so only OCR can read it"
            continue
        answer_words = qa.answer.replace("$", "").replace(" million", "").split()
        assert all(word in text for word in answer_words), (qa.query, qa.answer)


def test_dataset_uses_upstream_layout_and_generation_is_idempotent(tmp_path):
    first = generate_sample_corpus(tmp_path)
    mtimes = [p.stat().st_mtime_ns for p in first.files]
    second = generate_sample_corpus(tmp_path)
    assert [p.stat().st_mtime_ns for p in second.files] == mtimes
    data = json.loads(first.dataset_path.read_text())
    example = data["examples"][0]
    assert set(example) == {"uid", "query", "reference_answer", "meta_info"}
    assert example["meta_info"]["reference_page"] == QUESTIONS[0].pages


def test_torchvision_imports_beside_cpu_torch():
    """The shim must let transformers' Qwen-VL processors import (they need torchvision)."""
    from transformers import Qwen2VLImageProcessor

    import search_engine  # noqa: F401  (installs the hook)

    assert Qwen2VLImageProcessor(min_pixels=3136, max_pixels=200704) is not None
