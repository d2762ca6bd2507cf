"""The second look inside a named document (`search_engine.named_document`): a question that names its
document by title words is asked again of that document's pages without them, so the page it asks about
ranks above the title page that alone prints the name."""
from __future__ import annotations

from pathlib import Path

import pytest

from search_engine.lexical import tokenize
from search_engine.named_document import fuse_looks, head_terms, residual_query
from search_engine.types import SearchHit

HEAD = frozenset(tokenize("Disk-Based Storage for Scalable Video. Ed Chang and Avideh Zakhor, Member, IEEE"))


def test_the_words_that_name_the_document_are_left_out():
    question = ("Which hard drive does the video server in Chang and Zakhor's 'Disk-Based Storage for Scalable "
                "Video' use?")
    rest = residual_query(question, HEAD)
    assert rest is not None
    assert "hard drive" in rest and "server" in rest
    assert "Chang" not in rest and "Scalable" not in rest


@pytest.mark.parametrize("question", [
    "Which hard drive does the video server use?",  # one word of the head ("video"): no document named
    "Who are the authors of Disk-Based Storage for Scalable Video?",  # nothing left to ask the other pages
])
def test_no_second_look_without_a_name_or_without_a_question_left(question):
    assert residual_query(question, HEAD) is None


def test_heads_are_the_first_pages_first_words_without_function_words():
    heads = head_terms(["Results of the study", "The Title of the Paper", "Another one"], ["d", "d", "e"], [2, 1, 1])
    assert heads == {"d": {"title", "paper"}, "e": {"another", "one"}}


def _hit(page_id: str, rank: int) -> SearchHit:
    return SearchHit(rank=rank, page_id=page_id, doc_id=page_id.split("_")[0], page_number=1, score=0.0,
                     image_path="")


def test_the_two_looks_fuse_by_rank_and_the_first_keeps_its_hits():
    first = [_hit("paper_1", 1), _hit("other_1", 2), _hit("paper_2", 3)]
    second = [_hit("paper_2", 1), _hit("paper_3", 2)]
    fused = fuse_looks(first, second, top_k=3, k=60)
    # paper_2 is in both; other_1 and paper_3 tie at second place of one look: the first look's order decides
    assert [h.page_id for h in fused] == ["paper_2", "paper_1", "other_1"]
    assert [h.rank for h in fused] == [1, 2, 3] and fused[0] is first[2]
    assert fused[0].score > fused[1].score > fused[2].score


def _pdf(path: Path, pages: list[list[str]]) -> Path:
    import pymupdf

    doc = pymupdf.open()
    for lines in pages:
        page = doc.new_page(width=595, height=842)
        for k, line in enumerate(lines):
            page.insert_text((60, 100 + 28 * k), line, fontsize=12)
    doc.save(path)
    return path


PAPER = [["IEEE TRANSACTIONS ON CIRCUITS AND SYSTEMS FOR VIDEO TECHNOLOGY, VOL. 7, NO. 5, OCTOBER 1997",
          "Disk-Based Storage for Scalable Video", "Ed Chang and Avideh Zakhor, Member, IEEE",
          "Abstract: a video server stores scalable video streams on disks and serves many users",
          "at several bit rates. We study disk-based storage for scalable video and its cost."],
         ["Implementation of the server",
          "The server uses one HP C3325W hard drive per disk slot and a SCSI controller.",
          "Each drive holds the layers of two movies."],
         ["Results", "The server reads each drive at full speed; delays grow with the user load."]]


@pytest.fixture(scope="module")
def paper_index(tmp_path_factory) -> Path:
    from search_engine.ingest import Ingestor

    folder = tmp_path_factory.mktemp("named")
    files = [_pdf(folder / "video_paper.pdf", PAPER),
             _pdf(folder / "ferries.pdf", [["Harbour ferries: timetables, fares and the pilot station."]]),
             _pdf(folder / "birds.pdf", [["A guide to garden birds: feeders, nest boxes and winter food."]])]
    index_dir = folder / "index"
    report = Ingestor(index_dir, visual_model=None, text_model="minilm", progress=False).add(files)
    assert not report.failed, report.failed
    return index_dir


def test_the_engine_fuses_the_whole_question_with_the_question_asked_of_the_named_document(paper_index):
    from search_engine.engine import SearchEngine
    from search_engine.named_document import SECOND_LOOK_DEPTH

    question = "Which hard drive does the server in Chang and Zakhor's 'Disk-Based Storage for Scalable Video' use?"
    plain = SearchEngine(paper_index, second_look=False)
    first = plain.search(question, top_k=SECOND_LOOK_DEPTH)
    assert first[0].doc_id == "video_paper"
    rest = residual_query(question, plain._state.heads["video_paper"])
    assert rest is not None and "Zakhor" not in rest
    second = plain.search(rest, top_k=3, doc_ids=["video_paper"])
    expected = [(h.page_id, h.score) for h in fuse_looks(first, second, top_k=3, k=plain.rrf_k)]
    looked = SearchEngine(paper_index).search(question, top_k=3)
    assert [(h.page_id, h.score) for h in looked] == expected and [h.rank for h in looked] == [1, 2, 3]
    assert [h.score for h in looked] != [h.score for h in plain.search(question, top_k=3)]  # a second look taken
    # a question that names no document is asked once
    other = "Which timetables and fares does the harbour brochure list?"
    assert [h.page_id for h in SearchEngine(paper_index).search(other, top_k=3)] == \
        [h.page_id for h in plain.search(other, top_k=3)]


def test_bm25_inside_some_pages_scores_them_as_the_whole_collection_does():
    import numpy as np

    from search_engine.lexical import BM25Channel, PassageBM25

    texts = ["the server uses one hard drive", "harbour ferries and fares", "garden birds", "drive the server"]
    channel = BM25Channel(texts)
    full = channel.score(["hard drive server"])[0]
    rows = np.array([0, 3])
    part = channel.score(["hard drive server"], rows)[0]
    assert np.allclose(part[rows], full[rows]) and not part[[1, 2]].any()  # same weights: the collection's
    passages = PassageBM25([["server drive", "hard drive"], ["ferries"], [], ["the server"]])
    full = passages.score(["hard drive"])[0]
    part = passages.score(["hard drive"], np.array([0, 2]))[0]
    assert part[0] == full[0] and np.isneginf(part[[1, 2, 3]]).all()
