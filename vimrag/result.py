"""What a VimRAG episode returns: the answer, the final memory graph, its evidence, the trajectory.

The shared part (answer, status, events, turn records, usage, `retrieved_ranked`, ...) is
`EpisodeResultBase`'s, as for the VRAG agent; VimRAG adds the graph and the size of every context.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vimrag.graph import MemoryGraph
from vrag_rl.agent.result import EPISODE_STATUSES, EpisodeResultBase

__all__ = ["EPISODE_STATUSES", "VimRAGResult"]


@dataclass(kw_only=True)
class VimRAGResult(EpisodeResultBase):
    """`evidence` is the memorised items on the answer path; `context_stats` one entry per model call."""

    graph: MemoryGraph
    context_stats: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def failure(cls, question: Any, error: str, episode_id: str = "") -> VimRAGResult:
        text = question if isinstance(question, str) else repr(question)
        return cls(episode_id=episode_id, question=text, answer=None, status="failed", graph=MemoryGraph(text),
                   events=[], turns=0, elapsed_s=0.0, error=error)

    def to_dict(self) -> dict[str, Any]:
        return {**self.base_dict(), "graph": self.graph.to_dict(), "credit_graph": self.credit_graph.to_dict(),
                "context_stats": self.context_stats, "events": [e.to_dict() for e in self.events]}
