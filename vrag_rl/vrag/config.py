"""The VRAG agent's knobs: the shared `EpisodeConfig` plus what a growing transcript of page images needs.

Why a subclass: the engine's fields (sampling, budgets, timeouts, search restriction, image geometry) are
`EpisodeConfig`'s, once for both agents; VRAG adds its turn limit, how many pages a search shows, how
often a page may be shown again, its crop geometry and its image budget.
"""
from __future__ import annotations

from dataclasses import dataclass

from vrag_rl.agent.config import MAX_PIXELS, EpisodeConfig


@dataclass
class AgentConfig(EpisodeConfig):
    """The VRAG agent: a transcript that grows by one page image (or crop) per action."""

    max_turns: int = 10  # model calls that may act; one more call is made to force an answer
    pages_per_search: int = 1  # new page images shown per <search> (upstream: 1)
    max_repeats: int = 1  # how often one page may be shown (upstream: repeated_nums = 1)
    max_queries_per_search: int = 4  # RAG-R1-style parallel queries in one <search>
    max_pixels: int = MAX_PIXELS
    crop_padding: int = 56  # page pixels added around a bbox on every side (upstream: 56)
    min_crop_side: int = 28  # a bbox smaller than this (page pixels) is widened to it
    jpeg_quality: int = 90

    @property
    def turn_limit(self) -> int:
        return self.max_turns

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        super().__post_init__()
        if not 0 < self.min_pixels <= self.max_pixels:
            raise ValueError("need 0 < min_pixels <= max_pixels")
        if self.pages_per_search < 1 or self.search_top_k < self.pages_per_search:
            raise ValueError("need 1 <= pages_per_search <= search_top_k")
        if self.crop_padding < 0:
            raise ValueError("crop_padding must be >= 0")
