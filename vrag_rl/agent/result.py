"""What an episode returns: the answer, its evidence and the full trajectory, JSON-ready.

`EpisodeResultBase` is what every agent's result has (both agents run on one engine,
`vrag_rl.agent.engine`): the answer, the status, the events, the turn records, the evidence and the
credit graph GGPO reads. `vrag_rl.vrag.result.EpisodeResult` adds the VRAG agent's transcript and images;
`vimrag.result.VimRAGResult` adds the memory graph.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from vrag_rl.agent.credit_graph import CreditGraph
from vrag_rl.agent.events import AgentEvent, EpisodeStatus

# How an episode can end. Every episode ends with exactly one of these, never with an exception.
EPISODE_STATUSES: tuple[EpisodeStatus, ...] = get_args(EpisodeStatus)

# What a model turn did, in one vocabulary for both agents (rewards and GGPO read it): VRAG's
# <search>/<bbox>/<answer> are "search"/"crop"/"answer"; a VimRAG step is named by its main tool call
# (add_answer_node → "answer", add_search_node → "search", summarize_and_memorize alone → "memorize").
TurnAction = Literal["search", "crop", "answer", "memorize", "invalid"]
TURN_ACTIONS: tuple[TurnAction, ...] = get_args(TurnAction)


@dataclass
class TurnRecord:
    """One model turn, as rewards and GGPO need it (nothing else of the episode is required).

    `retrieved` holds, per query of a search turn, the page ids the engine returned in rank
    order; `shown_image_ids` the images appended as this turn's observation. A crop turn names
    the image it cut (`crop_source_image_id`) and the crop in page pixels. `tool_calls` names a
    VimRAG step's tool calls in order (empty for VRAG, whose one action is `action`).
    """

    index: int  # 0-based position among the episode's model turns
    action: TurnAction
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
    tool_calls: list[str] = field(default_factory=list)


@dataclass
class EpisodeResultBase:
    """What every episode returns, whichever memory it kept (see the module doc)."""

    episode_id: str
    question: str
    answer: str | None
    status: EpisodeStatus
    events: list[AgentEvent]
    turns: int
    elapsed_s: float
    evidence: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # policy_s, search_s, image_s
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens
    error: str | None = None
    turn_records: list[TurnRecord] = field(default_factory=list)
    credit_graph: CreditGraph = field(default_factory=CreditGraph)  # what GGPO prunes on (each agent builds it)

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
        """Pages the agent looked at (its evidence), in first-seen order: what retrieval metrics score."""
        return [e["page_id"] for e in self.evidence if "page_id" in e]

    @property
    def answered(self) -> bool:
        return self.answer is not None and self.status != "failed"

    def base_dict(self) -> dict[str, Any]:
        """The shared part of `to_dict()`."""
        return {"episode_id": self.episode_id, "question": self.question, "answer": self.answer,
                "status": self.status, "evidence": self.evidence, "turns": self.turns, "elapsed_s": self.elapsed_s,
                "timings": self.timings, "usage": self.usage, "error": self.error,
                "turn_records": [asdict(r) for r in self.turn_records]}

