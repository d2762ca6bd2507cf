"""How well a piece of a page matches a question: meaning (sentence-embedding cosine) plus the share
of the question's terms it holds, each term weighted by how rare it is on the page.

The two signals do different jobs. The cosine ranks paraphrases ("staff" for "employees") the terms
miss. The weighted term share, `coverage`, is also the reader's honesty test: an answer is only given
from evidence that, with its context (table headers, caption, section heading), holds at least half
of what the question is about — a page that never names the question's subject gets "not found", not
the nearest-sounding sentence.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from search_engine.lexical import has_cjk
from vrag_rl.reader.terms import content_terms, fuzzy_in

# Half of what the question is about must be in the evidence and its context: a majority rule, not a
# value fitted to any document set.
MIN_COVERAGE = 0.5

# How sure the reader must be to answer when it reads with a sentence embedder: the score (`Reader.rank`:
# coverage + a quarter of the evidence's own coverage + half the cosine + the form's bonuses) below which
# the stand-in says "not found". Unlike MIN_COVERAGE this is fitted: calibrated on the development half of
# the world set (docs/benchmarks.md) as the most right answers with at most 15 % wrong there, then
# measured on the held-back half, which was never used to choose it. Without an embedder the scores have
# no cosine term and no threshold applies.
CONFIDENT_SCORE = 1.0


class TermWeights:
    """Smoothed inverse document frequency of the question's terms over the units of one page: a term
    on every unit says little (the page's subject), a term on one unit says a lot, and a term the page
    never prints weighs most (the question asks about something this page does not mention)."""

    def __init__(self, question_terms: Sequence[str], unit_terms: Iterable[set[str]]):
        units = list(unit_terms)
        n = max(1, len(units))
        self.terms = list(question_terms)
        self.weights = {}
        for term in self.terms:
            df = sum(1 for found in units if fuzzy_in(term, found))
            if not df and has_cjk(term):  # a CJK bigram printed nowhere on the page mostly spans two words
                df = n  # of the question: it weighs as little as a word on every unit, not as a missing subject
            self.weights[term] = math.log(1 + n / (1 + df)) + 1.0
        self.total = sum(self.weights.values())

    def coverage(self, found: set[str], elsewhere: AbstractSet[str] = frozenset()) -> float:
        """Weighted share of the question's terms in `found` (full credit) or only `elsewhere` on the
        page (half credit: the page's running title names the company, the evidence the figure)."""
        if not self.total:
            return 0.0
        got = 0.0
        for term, weight in self.weights.items():
            if fuzzy_in(term, found):
                got += weight
            elif term in elsewhere:
                got += weight / 2
        return got / self.total

    def matched(self, found: set[str]) -> list[str]:
        return [t for t in self.terms if fuzzy_in(t, found)]


# Where the cosines of the reader's candidates fall: mean and standard deviation over every candidate the reader
# scored on the reference pages of the world set's development half (scripts/devset; no answer was used, only
# the spread of the scores), MiniLM's between English questions and their candidates, multilingual-e5's between
# CJK questions and theirs. e5 puts nearly every pair of texts at 0.75-0.90, MiniLM spreads them over 0-0.6:
# `Embedder` maps an e5 cosine onto MiniLM's spread, so a CJK candidate as far above a typical candidate as an
# English one reads with the same cosine, and one threshold (CONFIDENT_SCORE) serves both.
MINILM_COSINES = (0.272, 0.155)
E5_CJK_COSINES = (0.839, 0.042)
# Without a multilingual embedder a CJK question's MiniLM cosine is scaled by this: MiniLM reads Chinese as
# little more than shared characters (its cosines there run high and mean little).
MINILM_CJK_DISCOUNT = 0.35


def on_minilm_scale(cosines: np.ndarray, moments: tuple[float, float] = E5_CJK_COSINES) -> np.ndarray:
    """Cosines of another embedder (whose candidates' cosines have mean and sd `moments`) on MiniLM's spread."""
    mean, sd = moments
    return (MINILM_COSINES[0] + MINILM_COSINES[1] * (np.asarray(cosines, np.float32) - mean) / sd).astype(np.float32)


class Embedder:
    """Cosines between a question and texts with a sentence embedder (anything with `embed_queries`),
    caching text vectors: the reader reads the same page again on the zoom turn.

    `multilingual`: an embedder that reads CJK (`search_engine.embedders.e5.E5Embedder`: `embed_queries` for
    the question, `embed_texts` for the candidates, e5's "query:"/"passage:" roles), used for CJK questions,
    its cosines mapped onto MiniLM's spread (`on_minilm_scale`). On the world set it turned CJK candidates the
    discounted MiniLM cosine left under the threshold into answers: development 49 -> 51 right (wrong 18 ->
    18), held back 38 -> 43 right (wrong 20 -> 19); docs/benchmarks.md."""

    def __init__(self, model: Any | None, cache_size: int = 4096, multilingual: Any | None = None):
        self.model = model
        self.multilingual = multilingual
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()

    def _vectors(self, embed: Callable[[list[str]], Sequence[Any]], texts: list[str],
                 role: str = "text") -> dict[str, np.ndarray]:
        """Unit vectors of the texts by `embed` (a model's method), from the cache when there; `role` keeps
        apart one text's vectors by different models or roles (e5's query and passage).

        The cached vectors are taken when they are looked up: the inserts of this call (a full cache evicts
        its oldest entries) or another thread may evict them before the answer is assembled."""
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for text in dict.fromkeys(texts):
                if (role, text) in self._cache:
                    found[text] = self._cache[(role, text)]
                    self._cache.move_to_end((role, text))  # recently used: evicted last
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        fresh: dict[str, np.ndarray] = {}
        if missing:
            rows = embed(missing)
            for text, row in zip(missing, rows):
                vector = np.asarray(row, np.float32).reshape(-1)
                fresh[text] = vector / max(float(np.linalg.norm(vector)), 1e-9)
        with self._lock:
            for text, vector in fresh.items():
                self._cache[(role, text)] = vector
                if len(self._cache) > self._size:
                    self._cache.popitem(last=False)
        return {t: fresh[t] if t in fresh else found[t] for t in texts}

    def cosines(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """Cosine of each text with the question (zeros without a model). A CJK question is read by the
        multilingual embedder when there is one (on MiniLM's spread), else by MiniLM discounted."""
        if self.model is None or not texts:
            return np.zeros(len(texts), np.float32)
        if has_cjk(question) and self.multilingual is not None:
            q = self._vectors(self.multilingual.embed_queries, [question], "multilingual query")[question]
            passages = self._vectors(self.multilingual.embed_texts, list(texts), "multilingual passage")
            return on_minilm_scale(np.array([float(passages[t] @ q) for t in texts], np.float32))
        vectors = self._vectors(self.model.embed_queries, [question, *texts])
        q = vectors[question]
        out = np.array([float(vectors[t] @ q) for t in texts], np.float32)
        return out * (MINILM_CJK_DISCOUNT if has_cjk(question) else 1.0)


def terms_of(text: str) -> set[str]:
    return set(content_terms(text))
