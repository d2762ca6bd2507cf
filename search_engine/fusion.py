"""Reciprocal-rank fusion (Cormack et al., 2009): combine rankings whose scores are not comparable
(MaxSim sums, cosine similarities, BM25) using ranks only."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

RRF_K = 60


def ranks_from_scores(scores: np.ndarray, valid: np.ndarray, depth: int) -> np.ndarray:
    """Page indices of the `depth` best valid pages, best first (ties keep index order)."""
    masked = np.where(valid, scores, -np.inf)
    order = np.argsort(-masked, kind="stable")[:depth]
    return order[np.isfinite(masked[order])]


def reciprocal_rank_fusion(rankings: Mapping[str, np.ndarray], num_pages: int, k: int = RRF_K,
                           weights: Mapping[str, float] | None = None) -> np.ndarray:
    fused = np.zeros(num_pages, np.float64)
    for name, order in rankings.items():
        weight = (weights or {}).get(name, 1.0)
        fused[order] += weight / (k + 1 + np.arange(len(order)))
    return fused
