"""A second look inside the document a question names: the question asked again of that document's pages
without the words that name it.

Why: a question names its document ("in Chang and Zakhor's 'Disk-Based Storage for Scalable Video'", "the
CHI 2013 study 'Did You Notice?'") and asks about one page of it. The title page prints those words, and its
abstract sums up the whole document, so every channel ranks it first for any question about the document,
whatever page answers. Asked without the naming words ("which hard drive does the server use"), the same
channels rank the document's pages by what the question asks of them; the two rankings are fused by
reciprocal rank (the first keeps the documents apart, the second orders the named one's pages). By hand: a
retrieval pipeline's re-ranking step (llama-index's node postprocessors, a cross-encoder) would need a
model this CPU path does not have; this needs only the index's own channels.

Which words name a document: those of its head (the first `lexical.DOCUMENT_HEAD_WORDS` words of its first page, its
title and authors, as BM25 reads it: `lexical.with_document_head`). The second look is taken only where
the question prints some of them and keeps enough words of its own (`residual_query`).
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from search_engine.lexical import OTHER_LANGUAGE_FUNCTION_WORDS, STOPWORDS, document_heads, tokenize
from search_engine.types import SearchHit

# How deep the first look reads (pages) before the two rankings are fused: a page of the named document
# ranked below the top_k the caller asked for can still come up.
SECOND_LOOK_DEPTH = 20
# The question without the document's name must keep at least this many of its words (function words aside):
# a question about the head itself ("who is the editor of the TeX Live Guide?") has nothing left to ask the
# other pages.
MIN_RESIDUAL_TOKENS = 3
# A question names a document by two of its head's words at least ("Chang and Zakhor", "CHI 2013"): one word
# ("report") is as likely a word of the question that some document's title happens to hold.
MIN_NAMING_TOKENS = 2
_FUNCTION_WORDS = STOPWORDS | OTHER_LANGUAGE_FUNCTION_WORDS  # "the", "of", "der": they name no document


def head_terms(texts: Sequence[str], doc_ids: Sequence[str], page_numbers: Sequence[int]) -> dict[str, frozenset[str]]:
    """The tokens that can name each document: those of its head (`lexical.document_heads`), function words
    aside."""
    heads, _, _ = document_heads(texts, doc_ids, page_numbers)
    return {doc: frozenset(tokenize(head)) - _FUNCTION_WORDS for doc, head in heads.items()}


def _words(text: str) -> set[str]:
    """The tokens of `text` that can name something: no function word, no lone letter (the "s" of "Zakhor's")."""
    return {t for t in tokenize(text) if len(t) > 1 and t not in _FUNCTION_WORDS}


def residual_query(query: str, head: frozenset[str]) -> str | None:
    """The query without the words that name the document (every token of the word in its head, function
    words aside: they name nothing), or None where it names fewer than MIN_NAMING_TOKENS of them or keeps too
    little of its own to ask (MIN_RESIDUAL_TOKENS)."""
    words = re.findall(r"\S+", query)
    kept = [w for w in words if not (tokens := _words(w)) or not tokens <= head]
    naming = _words(" ".join(w for w in words if w not in kept))
    if len(naming) < MIN_NAMING_TOKENS:
        return None
    rest = " ".join(kept)
    return rest if len(_words(rest)) >= MIN_RESIDUAL_TOKENS else None


def fuse_looks(first: Sequence[SearchHit], second: Sequence[SearchHit], top_k: int, k: int) -> list[SearchHit]:
    """The two rankings fused by reciprocal rank (equal votes), the `top_k` best re-ranked from 1. A page in
    both keeps its hit from the first look (its regions match the whole question); ties keep the first
    look's order. Without a second look the first stands as it is (its hits keep their channels' scores)."""
    if not second:
        return list(first[:top_k])
    score: dict[str, float] = {}
    hit_of: dict[str, SearchHit] = {}
    for hits in (first, second):
        for position, hit in enumerate(hits):
            score[hit.page_id] = score.get(hit.page_id, 0.0) + 1.0 / (k + 1 + position)
            hit_of.setdefault(hit.page_id, hit)
    order = sorted(hit_of, key=lambda page: -score[page])[:top_k]  # stable: first-look order on ties
    out = []
    for rank, page in enumerate(order, start=1):
        hit = hit_of[page]
        hit.rank, hit.score = rank, score[page]
        out.append(hit)
    return out
