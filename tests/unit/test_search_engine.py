"""SearchEngine and Ingestor on the generated sample corpus (real MiniLM text channel, tiny ColQwen2)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from search_engine.engine import SearchEngine
from search_engine.index.manifest import Manifest
from search_engine.ingest import IndexLockedError, Ingestor, index_lock

REPO = Path(__file__).resolve().parents[2]


def _page_id(qa) -> str:
    return f"{Path(qa.file_name).stem}_{qa.pages[0]}"


def test_text_path_finds_the_answer_page(sample_engine, sample_corpus):
    """Real pretrained MiniLM + BM25 on page text (text layer and OCR) must rank the answer page first."""
    ranks = {}
    for qa in sample_corpus.qa:
        hits = sample_engine.search(qa.query, top_k=5, channels=["text", "bm25"])
        ids = [h.page_id for h in hits]
        ranks[qa.query] = ids.index(_page_id(qa)) + 1 if _page_id(qa) in ids else None
    assert all(r is not None and r <= 2 for r in ranks.values()), ranks
    assert sum(r == 1 for r in ranks.values()) >= len(ranks) - 1, ranks


def test_dense_text_channel_alone_finds_pages(sample_engine, sample_corpus):
    top3 = 0
    for qa in sample_corpus.qa:
        ids = [h.page_id for h in sample_engine.search(qa.query, top_k=3, channels=["text"])]
        top3 += _page_id(qa) in ids
    assert top3 >= len(sample_corpus.qa) - 1


def test_ocr_page_is_searchable(sample_engine):
    record = sample_engine.page("board_memo_scan_1")
    assert record.text_source == "ocr" and "0.42" in record.text
    hits = sample_engine.search("dividend per share board memo", top_k=3, channels=["bm25"])
    assert hits[0].page_id == "board_memo_scan_1"


def _stored_vectors(engine: SearchEngine, channel: str) -> dict[str, np.ndarray]:
    """Each page's stored vectors, read straight from the segment files the manifest names."""
    manifest = Manifest.load(engine.index_dir)
    pages = {}
    for entry in manifest.documents.values():
        segment = entry.segments[channel]
        vectors = np.load(engine.index_dir / segment["file"]).astype(np.float32)
        offsets = np.concatenate([[0], np.cumsum(segment["counts"])])
        for i, page_id in enumerate(entry.page_ids):
            pages[page_id] = vectors[offsets[i]:offsets[i + 1]]
    return pages


def test_visual_channel_through_colpali_engine(sample_engine):
    """Tiny random ColQwen2 ranks meaninglessly, but exactly: the engine's ranks and scores equal MaxSim
    computed here from colpali-engine's query embedding and the stored page tokens, loop by loop."""
    first = sample_engine.search("revenue by region", top_k=5, channels=["visual"])
    again = sample_engine.search("revenue by region", top_k=5, channels=["visual"])
    assert [h.page_id for h in first] == [h.page_id for h in again]
    assert [h.rank for h in first] == [1, 2, 3, 4, 5]
    query = sample_engine.embedders["visual"].embed_queries(["revenue by region"])[0].astype(np.float64)
    expected = {}
    for page_id, tokens in _stored_vectors(sample_engine, "visual").items():
        expected[page_id] = sum(max(float(q @ t) for t in tokens.astype(np.float64)) for q in query)
    ranked = sorted(expected, key=lambda p: -expected[p])[:5]
    assert [h.page_id for h in first] == ranked
    for hit in first:
        assert hit.score == pytest.approx(expected[hit.page_id], rel=2e-3, abs=2e-3)


def test_hybrid_hits_carry_metadata_and_paths(sample_engine, monkeypatch):
    # the channels' fusion as one look ranks it (the second look inside a named document fuses this ranking
    # with another: tests/unit/test_named_document.py)
    monkeypatch.setattr(sample_engine, "second_look", False)
    query = "Kestrel Ridge solar plant power"
    hits = sample_engine.search(query, top_k=4)
    assert len(hits) == 4
    for hit in hits:
        assert Path(hit.image_path).is_file()
        assert set(hit.metadata["channel_ranks"]) <= {"visual", "text", "bm25", "text_regions", "bm25_regions"}
        assert hit.metadata["width"] > 0
    assert set(sample_engine.stats()["channels"]) == {"visual", "text", "bm25"}
    # the visual channel alone ranks as its own search does
    visual = {h.page_id: h.rank for h in sample_engine.search(query, top_k=50, channels=["visual"])}
    everything = sample_engine.search(query, top_k=50)
    for hit in everything:
        assert hit.metadata["channel_ranks"]["visual"] == visual[hit.page_id]
    # the fused order, derived by hand from the rankings: score = sum of weight / (60 + rank), where the visual
    # channel weighs 1, BM25 (1.6) splits its weight between its page ranking and its best-region ranking, and
    # the dense text channel (0.4) votes through its best-region ranking only (engine.DEFAULT_CHANNEL_WEIGHTS,
    # PAGE_VIEW_SHARE)
    view_weight = {"visual": 1.0, "bm25": 0.8, "bm25_regions": 0.8, "text": 0.0, "text_regions": 0.4}
    fused = {h.page_id: sum(view_weight[name] / (60 + rank)
                            for name, rank in h.metadata["channel_ranks"].items()) for h in everything}
    assert all({"text", "text_regions"} <= set(h.metadata["channel_ranks"]) for h in hits)
    expected = sorted(fused, key=lambda p: (-fused[p], list(sample_engine._state.page_ids).index(p)))[:4]
    assert [h.page_id for h in hits] == expected
    assert [h.score for h in hits] == pytest.approx([fused[p] for p in expected], rel=1e-9)
    assert hits[0].page_id.startswith("solar_energy_brief")
    assert hits[0].regions and "Kestrel" in " ".join(r.snippet for r in hits[0].regions)


def test_batch_search_equals_single_searches(sample_engine, sample_corpus):
    queries = [qa.query for qa in sample_corpus.qa[:4]]
    batch = sample_engine.batch_search(queries, top_k=3)
    single = [sample_engine.search(q, top_k=3) for q in queries]
    assert [[h.page_id for h in hits] for hits in batch] == [[h.page_id for h in hits] for hits in single]


def test_doc_filter_and_bad_input(sample_engine):
    hits = sample_engine.search("revenue", top_k=5, doc_ids=["solar_energy_brief"])
    assert hits and {h.doc_id for h in hits} == {"solar_energy_brief"}
    with pytest.raises(KeyError):
        sample_engine.search("revenue", doc_ids=["no_such_doc"])
    for bad in ("", "   ", "x" * 2001):
        with pytest.raises(ValueError):
            sample_engine.search(bad)
    with pytest.raises(ValueError):
        sample_engine.search("revenue", top_k=0)
    with pytest.raises(ValueError):
        sample_engine.search("revenue", channels=["nonsense"])


def test_page_image_path_stays_inside_index(sample_engine):
    path = sample_engine.page_image_path("acme_annual_report_2023_1")
    assert path.is_relative_to(sample_engine.index_dir)
    with pytest.raises(KeyError):
        sample_engine.page_image_path("../manifest.json")


# ---- incremental ingestion -------------------------------------------------------------------------------


@pytest.fixture()
def text_docs(tmp_path, sample_corpus):
    folder = tmp_path / "docs"
    folder.mkdir()
    for f in sample_corpus.files:
        shutil.copy(f, folder / f.name)
    return folder


def _text_ingestor(index_dir, **kwargs):
    return Ingestor(index_dir, visual_model=None, text_model="minilm", progress=False, ocr=False, dpi=50, **kwargs)


def test_incremental_add_update_remove(tmp_path, text_docs):
    index = tmp_path / "index"
    acme, metro = text_docs / "acme_annual_report_2023.pdf", text_docs / "metro_travel_survey_2024.pdf"
    report = _text_ingestor(index).add([acme])
    assert report.added == ["acme_annual_report_2023"]
    engine = SearchEngine.load(index)
    assert engine.stats()["pages"] == 4

    report = _text_ingestor(index).add([acme, metro])
    assert report.unchanged == ["acme_annual_report_2023"] and report.added == ["metro_travel_survey_2024"]
    assert engine.reload() is True
    assert engine.stats()["documents"] == 2
    assert engine.reload() is False  # nothing changed since

    shutil.copy(text_docs / "solar_energy_brief.pdf", acme)  # the file changes content (and page count)
    report = _text_ingestor(index).add([acme])
    assert report.updated == ["acme_annual_report_2023"]
    engine.reload()
    assert engine.page("acme_annual_report_2023_4") is None  # the stale fourth page is gone
    assert not (index / "pages" / "acme_annual_report_2023" / "4.jpg").exists()
    assert "Kestrel" in engine.page("acme_annual_report_2023_3").text

    assert _text_ingestor(index).remove(["metro_travel_survey_2024"]) == ["metro_travel_survey_2024"]
    engine.reload()
    assert engine.stats()["documents"] == 1
    assert not (index / "pages" / "metro_travel_survey_2024").exists()
    segments = list((index / "segments" / "text").glob("*.npy"))
    assert len(segments) == 1  # the replaced and the removed segments were deleted


def test_corrupt_and_encrypted_pdfs_are_skipped_with_a_reason(tmp_path, text_docs):
    import pymupdf

    corrupt = text_docs / "corrupt.pdf"
    corrupt.write_bytes(b"%PDF-1.4\n" + os.urandom(2000))
    encrypted = text_docs / "locked.pdf"
    with pymupdf.open(text_docs / "solar_energy_brief.pdf") as doc:
        doc.save(encrypted, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    report = _text_ingestor(tmp_path / "index").add([corrupt, encrypted, text_docs / "solar_energy_brief.pdf"])
    assert report.added == ["solar_energy_brief"]
    reasons = {Path(k).name: v for k, v in report.failed.items()}
    assert "not a valid PDF" in reasons["corrupt.pdf"]
    assert "encrypted" in reasons["locked.pdf"]


def test_mixing_embedders_is_refused(tmp_path, text_docs, tiny_colqwen2_dir):
    index = tmp_path / "index"
    _text_ingestor(index).add([text_docs / "solar_energy_brief.pdf"])
    with pytest.raises(ValueError, match="visual"):
        Ingestor(index, visual_model=str(tiny_colqwen2_dir), progress=False).add(
            [text_docs / "board_memo_scan.pdf"])


def test_one_ingestor_per_index(tmp_path):
    with index_lock(tmp_path):
        with pytest.raises(IndexLockedError):
            with index_lock(tmp_path):
                pass


KILL_SCRIPT = """
import os, signal, sys
from search_engine.ingest import Ingestor
seen = []
def on_progress(event):
    seen.append(event)
    if event["stage"] == "pages" and event["doc_id"] == "metro_travel_survey_2024" and event["page"] >= 2:
        os.kill(os.getpid(), signal.SIGKILL)  # die mid-document, after a checkpointed chunk
Ingestor(sys.argv[1], visual_model=None, text_model="minilm", progress=False, ocr=False, dpi=50, chunk_pages=1,
         progress_callback=on_progress).add(sys.argv[2:])
"""


def test_killed_ingestion_leaves_a_valid_index_and_resumes(tmp_path, text_docs):
    index = tmp_path / "index"
    files = [str(text_docs / n) for n in ("acme_annual_report_2023.pdf", "metro_travel_survey_2024.pdf",
                                          "solar_energy_brief.pdf")]
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(index), *files], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr
    manifest = Manifest.load(index)  # valid JSON, only complete documents
    assert set(manifest.documents) == {"acme_annual_report_2023"}
    partial = list((index / ".partial" / "metro_travel_survey_2024").glob("*.npz"))
    assert len(partial) == 2  # two one-page chunks were checkpointed before the kill
    assert SearchEngine.load(index).stats()["pages"] == 4  # the damaged run still serves

    events = []
    report = _text_ingestor(index, chunk_pages=1, progress_callback=events.append).add(files)
    assert report.unchanged == ["acme_annual_report_2023"]
    assert sorted(report.added) == ["metro_travel_survey_2024", "solar_energy_brief"]
    assert report.pages == (4 - 2) + 3  # the checkpointed chunks were not recomputed
    assert not (index / ".partial" / "metro_travel_survey_2024").exists()
    engine = SearchEngine.load(index)
    assert engine.stats()["pages"] == 11
    assert engine.search("most used travel app", channels=["bm25"])[0].page_id == "metro_travel_survey_2024_2"


def test_image_folder_and_single_vector_visual_embedder(tmp_path, tiny_qwen25vl_dir):
    """The GVE / Qwen3-VL-Embedding slot: last-token pooled Qwen-VL vectors in a FAISS channel."""
    from PIL import Image, ImageDraw

    from search_engine.embedders import load_visual_embedder

    folder = tmp_path / "imgs"
    folder.mkdir()
    for i, colour in enumerate(["white", "red", "blue"]):
        image = Image.new("RGB", (320, 240), colour)
        ImageDraw.Draw(image).text((10, 10), f"slide {i}", fill="black")
        image.save(folder / f"slide {i}.png")
    (folder / "notes.txt").write_text("ignored")
    embedder = load_visual_embedder(str(tiny_qwen25vl_dir), kind="gve", device="cpu")
    index = tmp_path / "index"
    report = Ingestor(index, visual_embedder=embedder, text_model=None, progress=False).add([folder])
    assert sorted(report.added) == ["slide_0", "slide_1", "slide_2"]
    engine = SearchEngine.load(index)  # reloads the embedder the manifest names
    assert engine.stats()["embedders"]["visual"]["kind"] == "gve"
    assert engine.stats()["channels"] == ["visual"]
    hits = engine.search("red slide", top_k=3)
    assert sorted(h.page_id for h in hits) == ["slide_0_1", "slide_1_1", "slide_2_1"]
    # ranks and scores are the inner products of the query vector with the stored page vectors
    query = engine.embedders["visual"].embed_queries(["red slide"])[0][0].astype(np.float64)
    expected = {p: float(v[0].astype(np.float64) @ query) for p, v in _stored_vectors(engine, "visual").items()}
    assert [h.page_id for h in hits] == sorted(expected, key=lambda p: -expected[p])
    assert [h.score for h in hits] == pytest.approx([expected[h.page_id] for h in hits], rel=1e-4, abs=1e-5)


def test_upstream_node_files_import_and_search(tmp_path, shared_corpus_dir):
    from search_engine.vrag_nodes import import_vrag_nodes, read_node_file, write_node_file

    data = np.load(shared_corpus_dir / "colqwen2_v1.0_page_embeddings.npz")
    names = sorted(data.files)[:6]
    node_dir = tmp_path / "colqwen_ingestion"
    node_dir.mkdir()
    for name in names:
        write_node_file(node_dir / f"{Path(name).stem}.node", f"search_engine/corpus/img/{name}", data[name])
    (node_dir / "broken.node").write_text("{not json")
    node = read_node_file(node_dir / f"{Path(names[0]).stem}.node")
    assert node.embedding.shape == data[names[0]].shape and node.file_name == names[0]
    report = import_vrag_nodes(tmp_path / "index", node_dir, image_root=shared_corpus_dir / "img", progress=False)
    assert len(report.added) == len(names) and "broken.node" in " ".join(report.failed)
    engine = SearchEngine.load(tmp_path / "index", load_models=False)
    target = names[3]
    rng = np.random.default_rng(0)
    tokens = data[target].astype(np.float32)[rng.choice(data[target].shape[0], 20, replace=False)]
    query = tokens + rng.normal(0, 0.02, tokens.shape).astype(np.float32)
    hits = engine.search_by_vectors([query], top_k=3)[0]
    assert hits[0].page_id == f"{Path(target).stem}_1"
    assert Path(hits[0].image_path).is_file()
