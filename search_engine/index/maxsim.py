"""Exact late-interaction (MaxSim) scoring over every page token of the index.

Why not colpali-engine's `score_multi_vector`: it pads every page to the longest one and scores
query by query. Here all page tokens live in one flat (tokens, dim) float16 matrix with page
offsets; the queries of a batch are stacked, multiplied with the page tokens in chunks (one
BLAS/cuBLAS matmul each), and reduced per page with a segmented max. Same scores, exactly — a
fraction of the time and memory.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


class MaxSimScorer:
    def __init__(self, vectors: np.ndarray, token_counts: Sequence[int], device: str = "cpu",
                 chunk_tokens: int = 262_144, cpu_fp32_budget_gib: float = 8.0):
        self.token_counts = np.asarray(token_counts, dtype=np.int64)
        if int(self.token_counts.sum()) != vectors.shape[0]:
            raise ValueError("token counts do not add up to the number of stored vectors")
        if (self.token_counts <= 0).any():
            raise ValueError("every page needs at least one vector")
        self.num_pages = len(self.token_counts)
        self.starts = np.concatenate([[0], np.cumsum(self.token_counts)[:-1]]).astype(np.int64)
        self.device = device
        self.chunk_tokens = chunk_tokens
        self.dim = vectors.shape[1] if vectors.ndim == 2 else 0
        if device == "cpu":
            # CPUs have no fast fp16 GEMM: converting each chunk per query costs 3x the matmul.
            # Keep float32 in RAM while it fits the budget (fp16 stays the on-disk format).
            fp32_bytes = vectors.shape[0] * max(self.dim, 1) * 4
            keep_fp32 = fp32_bytes <= cpu_fp32_budget_gib * 2**30
            self._vectors = np.ascontiguousarray(vectors, dtype=np.float32 if keep_fp32 else np.float16)
        else:
            import torch

            self._torch = torch
            self._vectors = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float16)).to(device)
            page_of_token = np.repeat(np.arange(self.num_pages), self.token_counts)
            self._page_of_token = torch.from_numpy(page_of_token).to(device)

    def score(self, queries: Sequence[np.ndarray]) -> np.ndarray:
        """(num_queries, num_pages) MaxSim scores: for each query token, its best page token, summed."""
        if self.num_pages == 0:
            return np.zeros((len(queries), 0), np.float32)
        lengths = [q.shape[0] for q in queries]
        stacked = np.concatenate([np.asarray(q, np.float32) for q in queries], axis=0)
        if self.device == "cpu":
            token_best = self._score_cpu(stacked)
        else:
            token_best = self._score_torch(stacked)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        return np.stack([token_best[bounds[i] : bounds[i + 1]].sum(axis=0) for i in range(len(queries))])

    def _page_chunks(self):
        """Page-aligned slices of about chunk_tokens tokens each."""
        start_page = 0
        while start_page < self.num_pages:
            end_page = start_page
            tokens = 0
            while end_page < self.num_pages and (tokens == 0 or tokens + self.token_counts[end_page] <= self.chunk_tokens):
                tokens += self.token_counts[end_page]
                end_page += 1
            yield start_page, end_page
            start_page = end_page

    def _score_cpu(self, stacked: np.ndarray) -> np.ndarray:
        out = np.empty((stacked.shape[0], self.num_pages), np.float32)
        for p0, p1 in self._page_chunks():
            t0 = self.starts[p0]
            t1 = self.starts[p1 - 1] + self.token_counts[p1 - 1]
            sims = stacked @ self._vectors[t0:t1].astype(np.float32, copy=False).T  # (query tokens, chunk tokens)
            out[:, p0:p1] = np.maximum.reduceat(sims, self.starts[p0:p1] - t0, axis=1)
        return out

    def _score_torch(self, stacked: np.ndarray) -> np.ndarray:
        torch = self._torch
        q = torch.from_numpy(stacked).to(self._vectors.device, dtype=torch.float16)
        out = torch.empty((q.shape[0], self.num_pages), dtype=torch.float32, device=q.device)
        for p0, p1 in self._page_chunks():
            t0 = int(self.starts[p0])
            t1 = int(self.starts[p1 - 1] + self.token_counts[p1 - 1])
            sims = (q @ self._vectors[t0:t1].T).float()
            index = (self._page_of_token[t0:t1] - p0).unsqueeze(0).expand_as(sims)
            best = torch.full((q.shape[0], p1 - p0), float("-inf"), device=q.device)
            out[:, p0:p1] = best.scatter_reduce(1, index, sims, reduce="amax", include_self=True)
        return out.cpu().numpy()
