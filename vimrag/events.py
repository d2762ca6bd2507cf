"""VimRAG's typed events (upstream's demo events: think, search, search_done, memorize, answer,
error, max_turns), built on the VRAG agent's `AgentEvent` so the same `to_dict()` logs them and
the same UIs can fall back to rendering them as JSON. Graph-changing events carry the graph's
export (`MemoryGraph.export()`), so a UI can redraw the graph from any single event.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vrag_rl.agent.events import (  # noqa: F401 - re-exported: one event vocabulary for both agents
    AgentEvent,
    EpisodeFinished,
    EpisodeStarted,
    ErrorEvent,
    ImageRef,
    ThinkEvent,
)


@dataclass
class ContextEvent(AgentEvent):
    """The size of the context about to be sent (rebuilt from the graph, plus this step's tail)."""

    type: str = field(init=False, default="context")
    stats: dict[str, Any] = field(default_factory=dict)
    memory: list[dict[str, Any]] = field(default_factory=list)  # node_id, label, energy, pixels


@dataclass
class NodeSearchEvent(AgentEvent):
    """A search node was added to the graph and its query sent."""

    type: str = field(init=False, default="search")
    node_id: str = ""
    query: str = ""
    parent_ids: list[str] = field(default_factory=list)
    graph: dict[str, Any] = field(default_factory=dict)


@dataclass
class SearchDoneEvent(AgentEvent):
    """What a node's search returned: labelled items (pages, video segments) and what was shown."""

    type: str = field(init=False, default="search_done")
    node_id: str = ""
    query: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)  # label, kind, ref_id, score, time_range
    shown: list[ImageRef] = field(default_factory=list)  # pages, or one entry per video frame


@dataclass
class MemorizeEvent(AgentEvent):
    type: str = field(init=False, default="memorize")
    node_ids: list[str] = field(default_factory=list)
    summary: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)  # the memory items stored
    thumbnails: list[ImageRef] = field(default_factory=list)  # what each stored item looks like
    graph: dict[str, Any] = field(default_factory=dict)


@dataclass
class GraphAnswerEvent(AgentEvent):
    type: str = field(init=False, default="answer")
    answer: str = ""
    parent_ids: list[str] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    forced: bool = False
    graph: dict[str, Any] = field(default_factory=dict)


@dataclass
class MaxTurnsEvent(AgentEvent):
    type: str = field(init=False, default="max_turns")
    max_turns: int = 0
    message: str | None = None
