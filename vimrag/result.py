"""What a VimRAG episode returns: the answer, the final memory graph, its evidence, the trajectory."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vimrag.graph import MemoryGraph
from vrag_rl.agent.events import AgentEvent
from vrag_rl.agent.result import EPISODE_STATUSES, TurnRecord
from vrag_rl.agent.step_graph import StepGraph

__all__ = ["EPISODE_STATUSES", "VimRAGResult"]


@dataclass
class VimRAGResult:
    episode_id: str
    question: str
    answer: str | None
    status: str  # one of EPISODE_STATUSES, as for the VRAG agent
    graph: MemoryGraph
    events: list[AgentEvent]
    turns: int
    elapsed_s: float
    evidence: list[dict[str, Any]] = field(default_factory=list)  # memorised items on the answer path
    context_stats: list[dict[str, Any]] = field(default_factory=list)  # per model call
    timings: dict[str, float] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    turn_records: list[TurnRecord] = field(default_factory=list)

    @classmethod
    def failure(cls, question: Any, error: str, episode_id: str = "") -> VimRAGResult:
        text = question if isinstance(question, str) else repr(question)
        return cls(episode_id=episode_id, question=text, answer=None, status="failed", graph=MemoryGraph(text),
                   events=[], turns=0, elapsed_s=0.0, error=error)

    @property
    def step_graph(self) -> StepGraph:
        """The graph in the shape GGPO consumes (`vrag_rl.algos.ggpo`)."""
        return self.graph.to_step_graph()

    @property
    def retrieved_ranked(self) -> list[str]:
        """Every page/segment id any search returned, first occurrence kept (retrieval rewards)."""
        seen: dict[str, None] = {}
        for node in self.graph.search_nodes():
            for ref in node.retrieved_ids:
                seen.setdefault(ref, None)
        return list(seen)

    @property
    def answered(self) -> bool:
        return self.answer is not None and self.status != "failed"

    def to_dict(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "question": self.question, "answer": self.answer,
                "status": self.status, "evidence": self.evidence, "turns": self.turns, "elapsed_s": self.elapsed_s,
                "timings": self.timings, "usage": self.usage, "error": self.error,
                "graph": self.graph.to_dict(), "step_graph": self.step_graph.to_dict(),
                "context_stats": self.context_stats, "turn_records": [asdict(r) for r in self.turn_records],
                "events": [e.to_dict() for e in self.events]}
