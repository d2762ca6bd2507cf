"""Every knob of the agent in one dataclass, so demo, evaluation and trainer share the defaults."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Upstream VRAG's pixel budget: 256·28·28 ≤ pixels ≤ 512·28·28 per image shown to the model.
MIN_PIXELS = 256 * 28 * 28
MAX_PIXELS = 512 * 28 * 28


@dataclass
class AgentConfig:
    max_turns: int = 10  # model calls that may act; one more call is made to force an answer
    search_top_k: int = 5  # hits requested per query
    pages_per_search: int = 1  # new page images shown per <search> (upstream: 1)
    max_repeats: int = 1  # how often one page may be shown (upstream: repeated_nums = 1)
    max_queries_per_search: int = 4  # RAG-R1-style parallel queries in one <search>
    min_pixels: int = MIN_PIXELS
    max_pixels: int = MAX_PIXELS
    resize_factor: int = 28  # Qwen2.5-VL's patch (14) × merge (2)
    crop_padding: int = 56  # page pixels added around a bbox on every side (upstream: 56)
    min_crop_side: int = 28  # a bbox smaller than this (page pixels) is widened to it
    jpeg_quality: int = 90
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024  # per model turn
    max_episode_tokens: int | None = None  # response tokens per episode; spent → status "token_budget"
    seed: int | None = None  # sampling seed, where the policy supports one
    policy_timeout_s: float = 120.0
    policy_retries: int = 3
    search_timeout_s: float = 30.0
    search_retries: int = 3
    max_invalid_actions: int = 3  # consecutive malformed turns before the episode is failed
    doc_ids: list[str] | None = None  # restrict search to these documents
    extra_body: dict[str, Any] = field(default_factory=dict)  # passed to the chat-completions call

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if not 0 < self.min_pixels <= self.max_pixels:
            raise ValueError("need 0 < min_pixels <= max_pixels")
        if self.pages_per_search < 1 or self.search_top_k < self.pages_per_search:
            raise ValueError("need 1 <= pages_per_search <= search_top_k")
        if self.crop_padding < 0:
            raise ValueError("crop_padding must be >= 0")
        if self.max_tokens < 1 or (self.max_episode_tokens is not None and self.max_episode_tokens < 1):
            raise ValueError("max_tokens and max_episode_tokens must be at least 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
