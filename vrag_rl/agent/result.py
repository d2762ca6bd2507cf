"""What an episode returns: the answer, its evidence and the full trajectory, JSON-ready."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vrag_rl.agent.events import AgentEvent, ImageRef
from vrag_rl.agent.step_graph import StepGraph

# How an episode can end. Every episode ends with exactly one of these, never with an exception.
EPISODE_STATUSES = ("answered", "forced_answer", "token_budget", "failed")


@dataclass
class TurnRecord:
    """One model turn, as rewards and GGPO need it (nothing else of the episode is required).

    `retrieved` holds, per query of a search turn, the page ids the engine returned in rank
    order; `shown_image_ids` the images appended as this turn's observation. A crop turn names
    the image it cut (`crop_source_image_id`) and the crop in page pixels.
    """

    index: int  # 0-based position among the episode's model turns
    action: str  # "search", "crop", "answer" or "invalid"
    reply: str
    valid: bool  # the reply was well-formed (the format reward reads this)
    forced: bool = False  # the turn-budget answer request
    queries: list[str] = field(default_factory=list)
    retrieved: list[list[str]] = field(default_factory=list)
    shown_image_ids: list[str] = field(default_factory=list)
    crop_source_image_id: str | None = None
    crop_page_box: list[int] | None = None
    completion_tokens: int = 0
    reason: str = ""  # why the reply was invalid


@dataclass
class EpisodeResult:
    episode_id: str
    question: str
    answer: str | None
    status: str  # one of EPISODE_STATUSES
    evidence: list[dict[str, Any]]  # per page looked at: page_id, image_path, crop regions (page pixels)
    events: list[AgentEvent]
    messages: list[dict[str, Any]]  # the conversation, images replaced by {"type": "image_ref", "image_id"}
    images: list[ImageRef]
    turns: int
    elapsed_s: float
    timings: dict[str, float] = field(default_factory=dict)  # policy_s, search_s, image_s
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    turn_records: list[TurnRecord] = field(default_factory=list)
    step_graph: StepGraph = field(default_factory=StepGraph)

    @classmethod
    def failure(cls, question: str, error: str, episode_id: str = "") -> EpisodeResult:
        """A result for an episode that could not even start (e.g. an empty question)."""
        return cls(episode_id=episode_id, question=question if isinstance(question, str) else repr(question),
                   answer=None, status="failed", evidence=[], events=[], messages=[], images=[], turns=0,
                   elapsed_s=0.0, error=error)

    @property
    def retrieved_ranked(self) -> list[str]:
        """Every page the engine returned over the episode, in rank order per query, first occurrence kept."""
        seen: dict[str, None] = {}
        for record in self.turn_records:
            for ranked in record.retrieved:
                for page_id in ranked:
                    seen.setdefault(page_id, None)
        return list(seen)

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
            "turn_records": [asdict(r) for r in self.turn_records],
            "step_graph": self.step_graph.to_dict(),
            "images": [i.to_dict() for i in self.images],
            "messages": self.messages,
            "events": [e.to_dict() for e in self.events],
        }
