"""BM25 over page text: exact-term matching (names, numbers, codes) that dense embedders blur."""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

_TOKEN = re.compile(r"[0-9a-z]+(?:[.,][0-9]+)*")
STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have how in is it its of on or the this to was "
    "were what when where which who why with according".split()
)


def tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


class BM25Channel:
    def __init__(self, texts: Sequence[str]):
        from rank_bm25 import BM25Okapi

        self.num_pages = len(texts)
        tokenized = [tokenize(t) or ["\x00"] for t in texts]
        self._bm25 = BM25Okapi(tokenized) if tokenized else None
        self.has_text = any(t.strip() for t in texts)

    def score(self, queries: Sequence[str]) -> np.ndarray:
        if self._bm25 is None:
            return np.zeros((len(queries), 0), np.float32)
        return np.stack([np.asarray(self._bm25.get_scores(tokenize(q)), np.float32) for q in queries])
