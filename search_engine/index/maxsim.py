"""Exact late-interaction (MaxSim) scoring over every page token of the index.

Why not colpali-engine's `score_multi_vector`: it pads every page to the longest one and scores
query by query. Here all page tokens live in one flat (tokens, dim) float16 matrix with page
offsets; the queries of a batch are stacked, multiplied with the page tokens in chunks (one
BLAS/cuBLAS matmul each), and reduced per page with a segmented max. Same scores, exactly — a
fraction of the time and memory.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class MaxSimScorer:
    def __init__(self, vectors: np.ndarray, token_counts: Sequence[int], device: str = "cpu",
                 chunk_tokens: int = 262_144, cpu_fp32_budget_gib: float = 8.0, backend: str = "auto",
                 gpu_block_bytes: int = 1 << 30):
        """`backend`: "numpy" (CPU), "torch" (the GPU code path; fp16 on a GPU, fp32 on CPU so it can
        be checked against numpy anywhere) or "auto" (numpy on CPU, torch on any other device)."""
        self.token_counts = np.asarray(token_counts, dtype=np.int64)
        if int(self.token_counts.sum()) != vectors.shape[0]:
            raise ValueError("token counts do not add up to the number of stored vectors")
        if (self.token_counts <= 0).any():
            raise ValueError("every page needs at least one vector")
        self.num_pages = len(self.token_counts)
        self.starts = np.concatenate([[0], np.cumsum(self.token_counts)[:-1]]).astype(np.int64)
        self.device = device
        self.chunk_tokens = chunk_tokens
        self.gpu_block_bytes = gpu_block_bytes
        self.dim = vectors.shape[1] if vectors.ndim == 2 else 0
        if backend not in ("auto", "numpy", "torch"):
            raise ValueError(f"unknown MaxSim backend {backend!r}")
        self.use_torch = backend == "torch" or (backend == "auto" and device != "cpu")
        self._vectors: Any  # a numpy array on the numpy path, a torch tensor (on `device`) on the torch path
        if not self.use_torch:
            # CPUs have no fast fp16 GEMM: converting each chunk per query costs 3x the matmul.
            # Keep float32 in RAM while it fits the budget (fp16 stays the on-disk format).
            fp32_bytes = vectors.shape[0] * max(self.dim, 1) * 4
            keep_fp32 = fp32_bytes <= cpu_fp32_budget_gib * 2**30
            self._vectors = np.ascontiguousarray(vectors, dtype=np.float32 if keep_fp32 else np.float16)
        else:
            import torch

            self._torch = torch
            self._dtype = torch.float32 if device == "cpu" else torch.float16  # CPUs lack fast fp16 GEMM
            self._vectors = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float16)).to(device, self._dtype)
            self._starts_t = torch.from_numpy(self.starts).to(device)
            self._counts_t = torch.from_numpy(self.token_counts).to(device)

    def score(self, queries: Sequence[np.ndarray]) -> np.ndarray:
        """(num_queries, num_pages) MaxSim scores: for each query token, its best page token, summed."""
        if self.num_pages == 0:
            return np.zeros((len(queries), 0), np.float32)
        lengths = [q.shape[0] for q in queries]
        stacked = np.concatenate([np.asarray(q, np.float32) for q in queries], axis=0)
        if not self.use_torch:
            token_best = self._score_cpu(stacked)
        else:
            token_best = self._score_torch(stacked)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        return np.stack([token_best[bounds[i] : bounds[i + 1]].sum(axis=0) for i in range(len(queries))])

    def _page_chunks(self, chunk_tokens: int | None = None) -> list[tuple[int, int]]:
        """Page-aligned slices of at most `chunk_tokens` tokens each (a page longer than that is a slice
        of its own), found with a binary search per slice rather than a Python step per page: at 20k
        pages the per-page walk cost more than the GPU's whole scoring."""
        limit = chunk_tokens or self.chunk_tokens
        ends = self.starts + self.token_counts  # first token after each page
        bounds: list[tuple[int, int]] = []
        start_page = 0
        while start_page < self.num_pages:
            budget = int(self.starts[start_page]) + limit
            end_page = max(int(np.searchsorted(ends, budget, side="right")), start_page + 1)
            bounds.append((start_page, end_page))
            start_page = end_page
        return bounds

    def _score_cpu(self, stacked: np.ndarray) -> np.ndarray:
        out = np.empty((stacked.shape[0], self.num_pages), np.float32)
        for p0, p1 in self._page_chunks():
            t0 = self.starts[p0]
            t1 = self.starts[p1 - 1] + self.token_counts[p1 - 1]
            sims = stacked @ self._vectors[t0:t1].astype(np.float32, copy=False).T  # (query tokens, chunk tokens)
            out[:, p0:p1] = np.maximum.reduceat(sims, self.starts[p0:p1] - t0, axis=1)
        return out

    def _score_torch(self, stacked: np.ndarray) -> np.ndarray:
        """The device path: per slice one matmul, then each page's tokens gathered into a padded
        (query tokens, pages, longest page) block, the padding set to -inf, and reduced with `amax`. A
        padded gather, not `scatter_reduce`: the scatter's atomic max over every (query token, page token)
        pair was 20x the matmul's time on an H200. Slices are sized by `gpu_block_bytes` (the similarity
        block of one slice), not by `chunk_tokens` (the numpy path's slice)."""
        torch = self._torch
        q = torch.from_numpy(stacked).to(self._vectors.device, dtype=self._dtype)
        out = torch.empty((q.shape[0], self.num_pages), dtype=torch.float32, device=q.device)
        element = 2 if self._dtype == torch.float16 else 4
        chunk = max(1, self.gpu_block_bytes // (element * max(q.shape[0], 1)))
        for p0, p1 in self._page_chunks(chunk):
            t0 = int(self.starts[p0])
            t1 = int(self.starts[p1 - 1] + self.token_counts[p1 - 1])
            sims = q @ self._vectors[t0:t1].T  # (query tokens, slice tokens)
            counts = self._counts_t[p0:p1]
            longest = int(self.token_counts[p0:p1].max())
            offsets = torch.arange(longest, device=q.device)
            index = (self._starts_t[p0:p1] - t0).unsqueeze(1) + offsets  # (pages, longest)
            padding = offsets.unsqueeze(0) >= counts.unsqueeze(1)
            index = index.masked_fill(padding, 0)
            block = sims.index_select(1, index.reshape(-1)).view(q.shape[0], p1 - p0, longest)
            block = block.masked_fill(padding.unsqueeze(0), float("-inf"))
            out[:, p0:p1] = block.amax(dim=2).float()
        return out.cpu().numpy()


def exact_topk_streaming(store, queries: Sequence[np.ndarray], k: int = 100, chunk_tokens: int = 1 << 20,
                         progress=None) -> tuple[np.ndarray, np.ndarray]:
    """Exact MaxSim top-k of every query over a `TokenStore` too large for RAM, in one pass.

    The store is read chunk by chunk (fp16 → fp32), all queries are scored against each chunk with
    one GEMM and a segmented max, and only a running top-k per query is kept — memory stays at one
    chunk. This is the ground truth the approximate paths are measured against (and a fallback
    that works at any corpus size, just slowly). Returns (scores, page_rows), both (queries, k),
    best first.
    """
    lengths = [q.shape[0] for q in queries]
    stacked = np.concatenate([np.asarray(q, np.float32) for q in queries], axis=0)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    nq = len(queries)
    k = min(k, store.num_pages)
    best_scores = np.full((nq, 0), -np.inf, np.float32)
    best_rows = np.zeros((nq, 0), np.int64)
    import torch

    qt = torch.from_numpy(np.ascontiguousarray(stacked.T))
    # keep the (chunk tokens × query tokens) similarity block near 512 MB whatever the query count
    chunk_tokens = int(max(4096, min(chunk_tokens, (128 << 20) // max(stacked.shape[0], 1))))
    for first, last, block in store.iter_chunks(chunk_tokens):
        blk = torch.from_numpy(np.ascontiguousarray(block))
        sims = torch.empty((blk.shape[0], qt.shape[1]), dtype=torch.float32)
        for s in range(0, blk.shape[0], 4096):  # fp16 → fp32 per cache-sized slice (see maxsim_pages)
            torch.matmul(blk[s : s + 4096].float(), qt, out=sims[s : s + 4096])
        starts = np.concatenate([[0], np.cumsum(store.counts[first:last])[:-1]])
        token_best = np.maximum.reduceat(sims.numpy(), starts, axis=0)  # (chunk pages, query tokens)
        scores = np.add.reduceat(token_best, bounds[:-1], axis=1).T  # (queries, chunk pages)
        rows = np.broadcast_to(np.arange(first, last), scores.shape)
        all_scores = np.concatenate([best_scores, scores], axis=1)
        all_rows = np.concatenate([best_rows, rows], axis=1)
        if all_scores.shape[1] > k:
            part = np.argpartition(-all_scores, k - 1, axis=1)[:, :k]
            all_scores = np.take_along_axis(all_scores, part, 1)
            all_rows = np.take_along_axis(all_rows, part, 1)
        best_scores, best_rows = all_scores, all_rows
        if progress is not None:
            progress(last)
    order = np.argsort(-best_scores, axis=1, kind="stable")
    return np.take_along_axis(best_scores, order, 1), np.take_along_axis(best_rows, order, 1)


def maxsim_pages(query: np.ndarray, vectors: np.ndarray, counts: np.ndarray, device: str = "cpu",
                 chunk_tokens: int = 4096) -> np.ndarray:
    """Exact MaxSim of one query against a few pages' fp16 tokens (the rerank step), with torch.

    Why torch and chunks: on CPU the cost is not the GEMM but turning fp16 into fp32; numpy's
    conversion plus BLAS call runs at a fraction of memory speed here, while torch converts a
    cache-sized chunk with F16C and multiplies it at once (measured: 190k tokens in ~11 ms vs
    ~90 ms with numpy on 2 cores). On a GPU the whole block is one fp16 matmul and a scatter-max.
    Returns float32 scores, one per page, in the order of `counts`.
    """
    import torch

    counts = np.asarray(counts, np.int64)
    if counts.size == 0:
        return np.zeros(0, np.float32)
    q = torch.from_numpy(np.ascontiguousarray(query, np.float32))
    v = torch.from_numpy(np.ascontiguousarray(vectors))
    if device != "cpu":
        qd = q.to(device, dtype=torch.float16)
        sims = (v.to(device, dtype=torch.float16) @ qd.T).float()  # (tokens, query tokens)
        page_of_token = torch.from_numpy(np.repeat(np.arange(counts.size), counts)).to(device)
        best = torch.full((counts.size, q.shape[0]), float("-inf"), device=sims.device)
        best = best.scatter_reduce(0, page_of_token.unsqueeze(1).expand_as(sims), sims, reduce="amax")
        return best.sum(1).cpu().numpy()
    sims = torch.empty((v.shape[0], q.shape[0]), dtype=torch.float32)
    qt = q.T.contiguous()
    for s in range(0, v.shape[0], chunk_tokens):
        torch.matmul(v[s : s + chunk_tokens].float(), qt, out=sims[s : s + chunk_tokens])
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return np.maximum.reduceat(sims.numpy(), starts, axis=0).sum(axis=1)
