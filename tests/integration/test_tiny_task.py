"""The tiny RL task's premise, checked against the real search engine (fast, no training).

`testkit/tiny_task.py` (and the slow learning test over `scripts/train_tiny.py`) rests on one property of
the sample corpus index: of each question's three query words only the keyword ranks the question's
reference page first. Ranking changes in the text channels (regions, titles, page vectors) have broken
it silently several times — another word also finding the page, or the keyword no longer finding it —
which changes what the RL run can learn and shows up only as a noisy reward curve. This test names the
word that moved instead.
"""
from __future__ import annotations

from testkit.tiny_task import AGENT, QUERY_WORDS, QUESTIONS


def test_only_the_keyword_ranks_the_reference_page_first(text_index):
    from search_engine.engine import SearchEngine

    engine = SearchEngine.load(text_index)
    wrong = []
    for question in QUESTIONS:
        reference = question["reference_pages"][0]
        for word in QUERY_WORDS[question["id"]]:
            hits = engine.search(word, top_k=AGENT["search_top_k"])
            first = hits[0].page_id if hits else None
            if (first == reference) != (word == question["keyword"]):
                wrong.append(f"{question['id']}: {word!r} ranks {first} first")
    assert not wrong, wrong
