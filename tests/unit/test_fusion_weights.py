"""The fusion's weights (`SearchEngine._fusion_weights`): each channel's vote split between its page view
and its best-region view by PAGE_VIEW_SHARE, BM25 and the dense text channel weighted by
DEFAULT_CHANNEL_WEIGHTS unless the caller says otherwise."""
from __future__ import annotations

import numpy as np
import pytest

from search_engine.engine import DEFAULT_CHANNEL_WEIGHTS, PAGE_VIEW_SHARE, SearchEngine


def _weights(channel_weights: dict[str, float] | None, names: list[str]) -> dict[str, float]:
    engine = SearchEngine.__new__(SearchEngine)  # the weights need no index
    engine.channel_weights = {**DEFAULT_CHANNEL_WEIGHTS, **(channel_weights or {})}
    return engine._fusion_weights({name: np.arange(3) for name in names})


def test_default_views_bm25_shares_its_vote_and_dense_text_votes_through_regions_only():
    both = ["visual", "text", "text_regions", "bm25", "bm25_regions"]
    w = _weights(None, both)
    assert PAGE_VIEW_SHARE["text"] == 0.0
    assert w["visual"] == 1.0
    assert w["text"] == 0.0 and w["text_regions"] == pytest.approx(DEFAULT_CHANNEL_WEIGHTS["text"])
    assert w["bm25"] == w["bm25_regions"] == pytest.approx(DEFAULT_CHANNEL_WEIGHTS["bm25"] / 2)
    # the text channels keep their two votes beside the visual one; BM25 has the larger share
    assert w["text"] + w["text_regions"] + w["bm25"] + w["bm25_regions"] == pytest.approx(2.0)
    assert w["bm25"] + w["bm25_regions"] > w["text_regions"]


def test_a_channel_without_region_view_keeps_its_whole_weight_and_callers_override():
    w = _weights(None, ["text", "bm25"])  # an index without layouts: page views only
    assert w == {"text": DEFAULT_CHANNEL_WEIGHTS["text"], "bm25": DEFAULT_CHANNEL_WEIGHTS["bm25"]}
    w = _weights({"bm25": 1.0, "text": 1.0}, ["text", "text_regions", "bm25", "bm25_regions"])
    assert w == {"text": 0.0, "text_regions": 1.0, "bm25": 0.5, "bm25_regions": 0.5}
