"""The document's head (title and authors) is lexically part of every page of the document
(`search_engine.lexical.with_document_head`): a question that names the document and asks about one of
its pages finds that page, not the title page that alone prints the name."""
from __future__ import annotations

import numpy as np

from search_engine.lexical import DOCUMENT_HEAD_WORDS, BM25Channel, with_document_head

PAPER = ["Disk-Based Storage for Scalable Video. Chang and Zakhor. Abstract: a video server stores scalable "
         "streams on disks and serves many users.",
         "Implementation. The server uses one HP C3325W hard drive per disk slot and a SCSI controller.",
         "Results. Delays grow with the user load; scan speed limits the bit rate."]
OTHERS = ["Annual report of a pizza cooperative: members, slices sold and donations.",
          "A brochure on harbour ferries: timetables, fares and the pilot station.",
          "Minutes of a school meeting: the budget projection and the treasurer report.",
          "A guide to garden birds: feeders, nest boxes and winter food."]


def _channel(texts: list[str], docs: list[str], numbers: list[int], head: bool) -> BM25Channel:
    return BM25Channel(with_document_head(texts, docs, numbers) if head else texts)


def test_a_question_naming_the_document_finds_the_page_it_asks_about():
    texts = PAPER + OTHERS
    docs = ["paper"] * 3 + [f"other{i}" for i in range(len(OTHERS))]
    numbers = [1, 2, 3] + [1] * len(OTHERS)
    question = "Which hard drive does the video server in Chang and Zakhor's paper use?"
    without = _channel(texts, docs, numbers, head=False).score([question])[0]
    assert int(np.argmax(without)) == 0  # the name, printed on the title page only, wins there
    with_head = _channel(texts, docs, numbers, head=True).score([question])[0]
    assert int(np.argmax(with_head)) == 1


def test_the_head_is_the_first_pages_first_words_and_one_page_documents_are_left_alone():
    # the first page prints its head already: a second copy would count its title twice there
    long_title = " ".join(f"w{i}" for i in range(DOCUMENT_HEAD_WORDS + 10))
    out = with_document_head(["body two", long_title, "single"], ["d", "d", "e"], [2, 1, 1])
    head = " ".join(long_title.split()[:DOCUMENT_HEAD_WORDS])
    assert out == [f"body two {head}", long_title, "single"]
