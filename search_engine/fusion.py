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


def score_tiebreak(rankings: Mapping[str, np.ndarray], raw_scores: Mapping[str, np.ndarray], num_pages: int,
                   weights: Mapping[str, float] | None = None) -> np.ndarray:
    """A second key for pages that reciprocal-rank fusion ties: each ranking's own scores divided by its best
    score (CombSUM of max-normalised scores, Fox & Shaw 1994), weighted as in the fusion.

    Why: with two views of each text channel, a page ranked (1, 2, 1, 2) and one ranked (2, 1, 2, 1) tie
    exactly, and a stable sort then always prefers the page that comes first in the index — the first page
    of a deck, whatever the question. How far ahead a page is in each ranking breaks the tie instead; it is
    used only between tied pages, so RRF's calibration-free order is otherwise unchanged.
    """
    second = np.zeros(num_pages, np.float64)
    for name, order in rankings.items():
        raw = raw_scores.get(name)
        if raw is None or not len(order):
            continue
        best = float(raw[order[0]])
        if best > 0 and np.isfinite(best):
            second[order] += (weights or {}).get(name, 1.0) * np.nan_to_num(raw[order] / best, nan=0.0, neginf=0.0)
    return second


def fused_order(fused: np.ndarray, tiebreak: np.ndarray, valid: np.ndarray, depth: int) -> np.ndarray:
    """Page indices of the `depth` best valid pages by fused score, ties (equal to 12 significant digits: the
    same ranks summed in another order differ in the last bits) broken by `tiebreak`, then index order."""
    rounded = np.where(valid, np.round(fused, 12), -np.inf)
    order = np.lexsort((np.arange(len(fused)), -tiebreak, -rounded))[:depth]
    return order[np.isfinite(rounded[order])]
