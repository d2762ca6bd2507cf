"""What an episode returns: the answer, its evidence and the full trajectory, JSON-ready."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vrag_rl.agent.events import AgentEvent, ImageRef


@dataclass
class EpisodeResult:
    episode_id: str
    question: str
    answer: str | None
    status: str  # "answered", "forced_answer" or "failed"
    evidence: list[dict[str, Any]]  # per page looked at: page_id, image_path, crop regions (page pixels)
    events: list[AgentEvent]
    messages: list[dict[str, Any]]  # the conversation, images replaced by {"type": "image_ref", "image_id"}
    images: list[ImageRef]
    turns: int
    elapsed_s: float
    timings: dict[str, float] = field(default_factory=dict)  # policy_s, search_s, image_s
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    @property
    def retrieved_page_ids(self) -> list[str]:
        """Pages the agent looked at, in first-seen order (what retrieval metrics score)."""
        return [e["page_id"] for e in self.evidence]

    @property
    def answered(self) -> bool:
        return self.answer is not None and self.status != "failed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "question": self.question,
            "answer": self.answer,
            "status": self.status,
            "evidence": self.evidence,
            "retrieved_page_ids": self.retrieved_page_ids,
            "turns": self.turns,
            "elapsed_s": self.elapsed_s,
            "timings": self.timings,
            "usage": self.usage,
            "error": self.error,
            "images": [i.to_dict() for i in self.images],
            "messages": self.messages,
            "events": [e.to_dict() for e in self.events],
        }
