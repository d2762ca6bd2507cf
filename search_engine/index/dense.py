"""Single-vector channels (MiniLM page text, GVE / Qwen3-VL-Embedding pages) in a FAISS index.

Exact inner product (IndexFlatIP) over L2-normalised vectors is cosine similarity; at the corpus
sizes one machine serves (≤ a few million pages) it answers in milliseconds and needs no training.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class DenseChannel:
    def __init__(self, vectors: np.ndarray):
        import faiss

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.num_pages = vectors.shape[0]
        self.dim = vectors.shape[1] if vectors.ndim == 2 and vectors.shape[0] else 0
        self.index = faiss.IndexFlatIP(max(self.dim, 1))
        if self.num_pages:
            self.index.add(vectors)

    def score(self, queries: Sequence[np.ndarray], top_n: int | None = None) -> np.ndarray:
        """Dense (num_queries, num_pages) scores; the engine masks and ranks them."""
        q = np.ascontiguousarray(np.concatenate([np.asarray(x, np.float32)[:1] for x in queries]), np.float32)
        if self.num_pages == 0:
            return np.zeros((q.shape[0], 0), np.float32)
        k = self.num_pages if top_n is None else min(top_n, self.num_pages)
        scores, ids = self.index.search(q, k)
        full = np.full((q.shape[0], self.num_pages), -np.inf, np.float32)
        rows = np.arange(q.shape[0])[:, None]
        valid = ids >= 0
        full[np.broadcast_to(rows, ids.shape)[valid], ids[valid]] = scores[valid]
        return full
