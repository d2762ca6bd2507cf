"""scripts/bench_slides.py and scripts/bench_table_extractors.py: what they count is counted right.

bench_slides rewrites the slide questions for a folder of rendered page images; the rewritten file must
name the pages exactly as the index names an image (one image = one document of one page), or every
question would count as a retrieval miss. bench_table_extractors judges a table extraction by the cell
holding the answer and the row and column keys around it (`vrag_rl.evaluation.table_extractor_bench`). The
real numbers come from running the scripts.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from vrag_rl.evaluation.table_extractor_bench import check_tables, clean, holds

REPO = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def slides():
    return _load("bench_slides")


@pytest.fixture(scope="module")
def tables():
    return _load("bench_table_extractors")


def _question(uid: str, file_name: str, page: int) -> dict:
    return {"uid": uid, "query": f"q {uid}?", "reference_answer": ["a", "b"], "answer": "a",
            "answer_variants": ["b"], "meta_info": {"file_name": file_name, "reference_page": page},
            "page_id": f"{Path(file_name).stem}_{page}", "content_type": "table", "language": "zh"}


def test_rendered_pages_are_one_image_each_and_questions_point_at_them(slides, tmp_path):
    import pymupdf

    from search_engine.corpus import doc_id_for
    from vrag_rl.scoring.qa_dataset import load_dataset

    decks = tmp_path / "decks"
    decks.mkdir()
    with pymupdf.open() as doc:
        for text in ("first slide", "second slide"):
            doc.new_page(width=363, height=272).insert_text((40, 60), text)
        doc.save(decks / "my_deck.pdf")
    names = slides.render_pages(decks, tmp_path / "images", dpi=50)
    assert names == {("my_deck", 1): "my_deck-p01.png", ("my_deck", 2): "my_deck-p02.png"}
    assert sorted(p.name for p in (tmp_path / "images").iterdir()) == ["my_deck-p01.png", "my_deck-p02.png"]

    source = tmp_path / "q.jsonl"
    source.write_text(json.dumps(_question("x1", "my_deck.pdf", 2)) + "\n\n")
    out = tmp_path / "q_images.jsonl"
    assert slides.rewrite_for_images(source, names, out) == 1
    [example] = load_dataset(out)
    # the id the index gives the image's only page, computed the way the engine computes it
    assert example.reference_page_ids == [f"{doc_id_for('my_deck-p02.png')}_1"]
    assert example.uid == "x1" and list(example.reference_answer) == ["a", "b"]
    row = json.loads(out.read_text().splitlines()[0])
    assert row["content_type"] == "table" and row["language"] == "zh" and row["source_page_id"] == "my_deck_2"


def test_a_question_on_a_page_that_was_not_rendered_is_an_error(slides, tmp_path):
    source = tmp_path / "q.jsonl"
    source.write_text(json.dumps(_question("x1", "other_deck.pdf", 1)) + "\n")
    with pytest.raises(SystemExit, match="other_deck page 1"):
        slides.rewrite_for_images(source, {("my_deck", 1): "my_deck-p01.png"}, tmp_path / "out.jsonl")


def test_options_the_script_sets_itself_are_refused(slides, capsys):
    assert slides.main(["--docs", str(REPO / "no-such-folder")]) == 2
    assert "no folder" in capsys.readouterr().err
    assert slides.main(["--out", "x.json"]) == 2
    assert "set by this script" in capsys.readouterr().err


def test_table_check_finds_the_answer_cell_and_its_row_and_column_keys():
    grid = [["", "Mass", "Luminosity"],
            ["Sun", "1.00", "1.00"],
            ["α Cen A", "1.10", "1.52"]]
    check = check_tables([grid], ["1.52"], "α Cen A", "Luminosity")
    assert (check.tables, check.found, check.clean, check.row, check.col) == (1, True, True, True, True)
    # the wrong column header: the answer is under Luminosity, not Mass
    assert check_tables([grid], ["1.52"], "α Cen A", "Mass").col is False
    # a row glued into one cell: found, but not a clean cell, and no other cell in its row holds the key
    glued = [["Star | Mass | Luminosity"], ["α Cen A 1.10 1.52"]]
    check = check_tables([glued], ["1.52"], "α Cen A", "Luminosity")
    assert check.found and not check.clean and check.row is False and check.col is False
    # no key for a check: not counted (None), and no tables at all: nothing found
    assert check_tables([grid], ["1.52"], None, None).row is None
    empty = check_tables([], ["1.52"], "α Cen A", "Luminosity")
    assert (empty.tables, empty.found, empty.row, empty.col) == (0, False, False, False)


def test_cell_matching_is_whitespace_and_width_insensitive_but_short_answers_match_whole_cells():
    assert holds("中易字库 + 微软雅黑", "中易字库+微软雅黑")
    assert holds("１９,２１０,０００", "19,210,000")  # full-width digits (NFKC)
    assert not holds("12", "1")  # a one-character answer only as the whole cell
    assert holds("b", "b") and not holds("", "x")
    assert clean("19,210,000", "19,210,000") and not clean("Shanghai 19,210,000 Peking 15,796,450", "19,210,000")


def test_every_table_question_of_the_dev_sets_has_keys(tables):
    uids = []
    for path, _ in tables.QUESTION_SETS:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("content_type") == "table":
                uids.append(row["uid"])
    assert uids and sorted(uids) == sorted(tables.KEYS)
