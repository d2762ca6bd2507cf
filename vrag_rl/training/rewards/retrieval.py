"""Retrieval reward: NDCG of the pages retrieved over the episode, in order, against the reference pages.

VRAG-RL's retrieval-efficiency reward (paper §2.3; upstream `rm.py`): binary relevance,
DCG = Σ_i (2^rel_i − 1) / log2(i + 1) over the retrieved pages in the order they were retrieved,
IDCG = Σ_{i=1..|gold|} 1 / log2(i + 1) — all reference pages first, *not* capped by how many pages
were retrieved, so retrieving fewer pages than the reference holds is penalised (as upstream).
The arithmetic is `vrag_rl.scoring.metrics.ndcg_at_k`, so evaluation and reward agree.
"""
from __future__ import annotations

from vrag_rl.scoring.metrics import ndcg_at_k


def retrieval_ndcg(retrieved: list[str], reference_pages: list[str], k: int | None = None) -> float:
    """NDCG of `retrieved` (page ids in retrieval order; repeats count once) against `reference_pages`.

    With `k`, only the first k retrieved pages count and the ideal list is min(k, |gold|) long.
    0.0 when nothing was retrieved or there are no reference pages (no evidence, no credit).
    """
    if not reference_pages or not retrieved:
        return 0.0
    depth = k if k is not None else max(len(retrieved), len(reference_pages))
    if depth < 1:
        raise ValueError("k must be at least 1")
    return float(ndcg_at_k(retrieved, reference_pages, depth) or 0.0)
