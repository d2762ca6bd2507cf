"""Every knob of an episode in one dataclass, so demo, evaluation and trainer share the defaults.

`EpisodeConfig` holds what the episode engine (`vrag_rl.agent.engine`) reads, for both agents —
sampling, the token budget, clients' timeouts and retries, the search restriction, the image
geometry every shown image shares — each field once. `vrag_rl.vrag.config.AgentConfig` (VRAG) and
`vimrag.config.VimRAGConfig` add their own knobs and their own defaults. Why one base: the two
configs had repeated a dozen fields and their checks, and had started to drift.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vrag_rl.agent.policy import SamplingParams

# Upstream VRAG's pixel budget: 256·28·28 ≤ pixels ≤ 512·28·28 per image shown to the model.
MIN_PIXELS = 256 * 28 * 28
MAX_PIXELS = 512 * 28 * 28


@dataclass
class EpisodeConfig:
    """The engine's knobs (see the module doc). A subclass names its turn limit (`turn_limit`)."""

    search_top_k: int = 5  # hits the search engine returns per query (pages or video segments)
    min_pixels: int = MIN_PIXELS  # the smallest image shown to the model
    resize_factor: int = 28  # 28: Qwen2.5-VL's patch (14) × merge (2); 32: Qwen3-VL
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024  # per model call
    max_episode_tokens: int | None = None  # response tokens per episode; spent → status "token_budget"
    seed: int | None = None  # sampling seed, where the policy supports one
    max_invalid_actions: int = 3  # consecutive unusable replies before the episode is failed
    policy_timeout_s: float = 120.0
    policy_retries: int = 3
    search_timeout_s: float = 30.0
    search_retries: int = 3
    doc_ids: list[str] | None = None  # restrict search to these documents
    extra_body: dict[str, Any] = field(default_factory=dict)  # passed to the chat-completions call

    @property
    def turn_limit(self) -> int:
        """Model calls that may act; one more is made to force an answer."""
        raise NotImplementedError

    def __post_init__(self) -> None:
        if self.turn_limit < 1:
            raise ValueError("the turn limit (max_turns / max_turns) must be at least 1")
        if self.search_top_k < 1:
            raise ValueError("search_top_k must be at least 1")
        if self.max_tokens < 1 or (self.max_episode_tokens is not None and self.max_episode_tokens < 1):
            raise ValueError("max_tokens and max_episode_tokens must be at least 1")

    def sampling(self, max_tokens: int) -> SamplingParams:
        """How the next reply is sampled; `max_tokens` is already capped by the episode's budget."""
        return SamplingParams(temperature=self.temperature, top_p=self.top_p, max_tokens=max_tokens, seed=self.seed,
                              extra_body=dict(self.extra_body))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

