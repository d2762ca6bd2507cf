"""VimRAG's knobs: the episode engine's (`EpisodeConfig`) with VimRAG's defaults, plus its own.

Its own: the step limit, searches per step, how sharp a retrieved item is first shown, the memory
energy and pixel budget (`EnergyConfig`), and "thinking" endpoints (DashScope's `enable_thinking`,
or vLLM's chat-template switch) with upstream's thinking sampling.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from vimrag.energy import EnergyConfig
from vrag_rl.agent.config import EpisodeConfig
from vrag_rl.agent.policy import SamplingParams


@dataclass
class VimRAGConfig(EpisodeConfig):
    """See the module doc; `search_top_k` is the hits per search (pages or video segments), and the
    memory items shown again per step are `energy.memory_top_k`."""

    search_top_k: int = 3
    min_pixels: int = 4 * 28 * 28
    max_tokens: int = 4096
    policy_timeout_s: float = 180.0
    max_turns: int = 20  # model calls that may act; one more is made to force an answer
    max_searches_per_turn: int = 4  # add_search_node calls searched together in one step
    observation_max_pixels: int = 1003520  # a retrieved page as first shown (before memorising)
    observation_video_pixels: int = 401408  # all frames of a retrieved segment together
    energy: EnergyConfig = field(default_factory=EnergyConfig)
    thinking_temperature: float = 0.6  # used instead when enable_thinking is on (upstream)
    thinking_top_p: float = 0.95
    enable_thinking: bool | None = None  # None: say nothing; True/False: ask the endpoint for it
    thinking_style: Literal["dashscope", "vllm"] = "dashscope"  # {"enable_thinking"} or chat_template_kwargs
    stream: bool = False  # SSE streaming through StreamingOpenAIPolicy (URL-built policies only)

    @property
    def turn_limit(self) -> int:
        return self.max_turns

    def __post_init__(self) -> None:
        if isinstance(self.energy, dict):
            self.energy = EnergyConfig(**self.energy)
        if self.max_turns < 1 or self.max_searches_per_turn < 1:
            raise ValueError("max_turns and max_searches_per_turn must be at least 1")
        if self.thinking_style not in ("dashscope", "vllm"):
            raise ValueError("thinking_style is 'dashscope' or 'vllm'")
        super().__post_init__()

    def sampling(self, max_tokens: int) -> SamplingParams:
        thinking = bool(self.enable_thinking)
        return SamplingParams(temperature=self.thinking_temperature if thinking else self.temperature,
                              top_p=self.thinking_top_p if thinking else self.top_p, max_tokens=max_tokens,
                              seed=self.seed, extra_body=self.sampling_extra())

    def sampling_extra(self) -> dict[str, Any]:
        """`extra_body` plus the thinking switch in the endpoint's dialect."""
        extra = dict(self.extra_body)
        if self.enable_thinking is not None:
            if self.thinking_style == "dashscope":
                extra.setdefault("enable_thinking", self.enable_thinking)
            else:
                extra.setdefault("chat_template_kwargs", {"enable_thinking": self.enable_thinking})
        return extra
