"""What a VRAG episode returns: the shared result fields plus its transcript, its images and its credit graph."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vrag_rl.agent.events import ImageRef
from vrag_rl.agent.result import EpisodeResultBase


@dataclass(kw_only=True)
class EpisodeResult(EpisodeResultBase):
    """A VRAG episode: `evidence` is, per page looked at, its page_id and crop regions (page pixels)."""

    messages: list[dict[str, Any]] = field(default_factory=list)  # images as {"type": "image_ref", "image_id"}
    images: list[ImageRef] = field(default_factory=list)

    @classmethod
    def failure(cls, question: str, error: str, episode_id: str = "") -> EpisodeResult:
        """A result for an episode that could not even start (e.g. an empty question)."""
        return cls(episode_id=episode_id, question=question if isinstance(question, str) else repr(question),
                   answer=None, status="failed", events=[], turns=0, elapsed_s=0.0, error=error)

    def to_dict(self) -> dict[str, Any]:
        return {**self.base_dict(), "retrieved_page_ids": self.retrieved_page_ids,
                "credit_graph": self.credit_graph.to_dict(), "images": [i.to_dict() for i in self.images],
                "messages": self.messages, "events": [e.to_dict() for e in self.events]}
