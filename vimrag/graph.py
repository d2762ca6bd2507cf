"""The multimodal memory graph: VimRAG's reasoning state, a DAG of typed nodes holding memory.

Each node is one step of reasoning: the root (the user's question), a search node (a sub-query,
the summary of what its retrieval found, and the memory items it kept), or the answer node.
Parent edges say which earlier nodes a step built on; a node may have several parents.

Why a class of our own rather than networkx: the graph is tiny (tens of nodes), must reject bad
edges with messages a model can act on, must round-trip through JSON with its memory provenance,
and must export to the project's one credit-graph type (`vrag_rl.agent.credit_graph.CreditGraph`) for
GGPO. Cycles are impossible by construction (a node's parents must already exist); `add_edge`
and `from_dict` check them explicitly because they can name any node.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from vrag_rl.agent.credit_graph import ROOT_ID, CreditGraph, GraphNode, ancestors

ANSWER_ID = "answer"
NodeKind = Literal["root", "search", "answer"]
ItemKind = Literal["page", "crop", "video_segment", "text"]
NODE_KINDS = ("root", "search", "answer")
ITEM_KINDS = ("page", "crop", "video_segment", "text")
NODE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
MAX_PRIORITY = 5.0


class GraphError(ValueError):
    """A change that would break the graph (unknown parent, cycle, duplicate or malformed id).

    The message is written for the model: the agent hands it back verbatim as tool feedback.
    """


@dataclass
class MemoryItem:
    """One piece of episodic memory, with where it came from.

    `ref_id` is the search engine's id of the page or video segment (what retrieval rewards and
    GGPO evidence match on); `region` is a crop box in page pixels; `time_range` the segment's
    span and `key_timestamps` the frames kept from it, in seconds of the source video.
    """

    item_id: str  # unique in the graph, e.g. "search_1/Picture 2"
    kind: ItemKind
    label: str  # how the model referred to it ("Picture 2", "Video 1")
    ref_id: str  # page id or video segment id
    doc_id: str = ""
    page_number: int = 0
    priority: float = 0.0  # 0..5, the model's priority_score
    region: list[int] | None = None  # (x1, y1, x2, y2) in page pixels, for crops
    time_range: list[float] | None = None  # [start_s, end_s] of a video segment
    key_timestamps: list[float] = field(default_factory=list)
    frame_boxes: list[list[int]] = field(default_factory=list)  # per kept frame: its box in the segment's sheet
    text: str = ""  # a text passage, or a note
    image_url: str = ""  # where the pixels can be fetched again
    page_size: list[int] | None = None  # (width, height) of the page or segment sheet

    def __post_init__(self) -> None:
        if self.kind not in ITEM_KINDS:
            raise GraphError(f"memory item kind {self.kind!r} is not one of {ITEM_KINDS}")
        if not 0 <= float(self.priority) <= MAX_PRIORITY:
            raise GraphError(f"priority {self.priority} of {self.label!r} is outside 0..{MAX_PRIORITY:g}")
        self.priority = float(self.priority)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryItem:
        return cls(**data)


@dataclass
class MemoryNode:
    """One step. `turn_indices`: the model turns (0-based) that created and filled it (for GGPO)."""

    node_id: str
    kind: NodeKind
    parent_ids: list[str] = field(default_factory=list)
    query: str = ""  # search: the sub-query; root: the question; answer: the answer text
    summary: str = ""
    items: list[MemoryItem] = field(default_factory=list)
    retrieved_ids: list[str] = field(default_factory=list)  # everything its search returned, in rank order
    turn_indices: list[int] = field(default_factory=list)
    order: int = 0  # position in creation order (the energy's time axis)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "items": [i.to_dict() for i in self.items]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryNode:
        data = dict(data)
        items = [MemoryItem.from_dict(i) for i in data.pop("items", [])]
        return cls(**data, items=items)


class MemoryGraph:
    """The episode's DAG, rooted at the question; at most one answer node."""

    def __init__(self, question: str):
        self.question = question
        self.nodes: dict[str, MemoryNode] = {ROOT_ID: MemoryNode(ROOT_ID, "root", query=question, order=0)}
        self.answer_id: str | None = None

    # ---- building -------------------------------------------------------------------------------
    def _check_new_id(self, node_id: Any) -> str:
        if not isinstance(node_id, str) or not NODE_ID_PATTERN.match(node_id):
            raise GraphError(f"node id {node_id!r} is not usable: use 1-64 letters, digits, '_', '-', '.', ':'")
        if node_id in (ROOT_ID, ANSWER_ID):
            raise GraphError(f"node id {node_id!r} is reserved")
        if node_id in self.nodes:
            raise GraphError(f"node id {node_id!r} already exists; pick a new id")
        return node_id

    def _check_parents(self, node_id: str, parent_ids: Iterable[str] | None) -> list[str]:
        parents = list(dict.fromkeys(parent_ids or []))
        if not all(isinstance(p, str) for p in parents):
            raise GraphError(f"parent_ids of {node_id!r} must be a list of node ids")
        if node_id in parents:
            raise GraphError(f"node {node_id!r} cannot be its own parent (the graph must stay acyclic)")
        unknown = [p for p in parents if p not in self.nodes]
        if unknown:
            raise GraphError(f"node {node_id!r} names unknown parent(s) {unknown}; existing nodes: {list(self.nodes)}")
        if self.answer_id is not None and self.answer_id in parents:
            raise GraphError("the answer node cannot be a parent")
        return parents or [ROOT_ID]

    def add_search_node(self, node_id: str, query: str, parent_ids: Iterable[str] | None = None,
                        turn_index: int | None = None) -> MemoryNode:
        """A new search node under existing parents (none given: the root)."""
        node_id = self._check_new_id(node_id)
        if not isinstance(query, str) or not query.strip():
            raise GraphError(f"search node {node_id!r} needs a non-empty query")
        if self.answer_id is not None:
            raise GraphError("the graph already has an answer")
        parents = self._check_parents(node_id, parent_ids)
        node = MemoryNode(node_id, "search", parents, query=query.strip(), order=len(self.nodes),
                          turn_indices=[turn_index] if turn_index is not None else [])
        self.nodes[node_id] = node
        return node

    def add_answer_node(self, answer: str, parent_ids: Iterable[str] | None = None,
                        turn_index: int | None = None) -> MemoryNode:
        """The terminal node; its ancestors form the critical root→answer path."""
        if self.answer_id is not None:
            raise GraphError("the graph already has an answer node")
        if not isinstance(answer, str) or not answer.strip():
            raise GraphError("the answer is empty")
        parents = self._check_parents(ANSWER_ID, parent_ids)
        node = MemoryNode(ANSWER_ID, "answer", parents, query=answer.strip(), order=len(self.nodes),
                          turn_indices=[turn_index] if turn_index is not None else [])
        self.nodes[ANSWER_ID] = node
        self.answer_id = ANSWER_ID
        return node

    def add_edge(self, child_id: str, parent_id: str) -> None:
        """Let `child_id` also build on `parent_id`; refused when it would close a cycle."""
        for node_id in (child_id, parent_id):
            if node_id not in self.nodes:
                raise GraphError(f"unknown node {node_id!r}; existing nodes: {list(self.nodes)}")
        if child_id == ROOT_ID:
            raise GraphError("the root has no parents")
        if child_id in self.ancestors(parent_id):
            raise GraphError(f"edge {parent_id!r} → {child_id!r} would create a cycle")
        node = self.nodes[child_id]
        if parent_id not in node.parent_ids:
            node.parent_ids = [p for p in node.parent_ids if p != ROOT_ID or parent_id == ROOT_ID] + [parent_id]

    def summarize(self, node_id: str, summary: str, items: Iterable[MemoryItem] = (),
                  turn_index: int | None = None) -> MemoryNode:
        """Store what a search node's retrieval found and the memory it keeps."""
        node = self.nodes.get(node_id)
        if node is None or node.kind != "search":
            raise GraphError(f"{node_id!r} is not a search node of this graph")
        node.summary = summary.strip() if isinstance(summary, str) else ""
        taken = {i.item_id for n in self.nodes.values() for i in n.items}
        for item in items:
            if item.item_id in taken:
                raise GraphError(f"memory item {item.item_id!r} is already stored")
            node.items.append(item)
            taken.add(item.item_id)
        if turn_index is not None and turn_index not in node.turn_indices:
            node.turn_indices.append(turn_index)
        return node

    # ---- reading ----------------------------------------------------------------------------------
    def children(self, node_id: str) -> list[str]:
        return [n.node_id for n in self.nodes.values() if node_id in n.parent_ids]

    def out_degree(self, node_id: str) -> int:
        return len(self.children(node_id))

    def ancestors(self, node_id: str) -> set[str]:
        """The node and every node it transitively builds on."""
        return ancestors(node_id, {key: node.parent_ids for key, node in self.nodes.items()})

    def answer_path(self) -> set[str]:
        return self.ancestors(self.answer_id) if self.answer_id else set()

    def search_nodes(self) -> list[MemoryNode]:
        return [n for n in self.nodes.values() if n.kind == "search"]

    def items(self) -> list[tuple[MemoryNode, MemoryItem]]:
        return [(n, i) for n in self.nodes.values() for i in n.items]

    @property
    def answer(self) -> str | None:
        return self.nodes[self.answer_id].query if self.answer_id else None

    # ---- views --------------------------------------------------------------------------------------
    def prompt_view(self) -> list[dict[str, Any]]:
        """The compact linearisation the model reads each turn (upstream's action-graph JSON)."""
        view: list[dict[str, Any]] = []
        for node in self.nodes.values():
            if node.kind == "root":
                view.append({"id": ROOT_ID, "content": f"Initial query from user: {node.query}"})
                continue
            entry: dict[str, Any] = {"id": node.node_id, "parent_ids": node.parent_ids}
            entry["answer" if node.kind == "answer" else "query"] = node.query
            if node.kind == "search":
                entry["summary"] = node.summary or "(not summarised yet)"
                if node.items:
                    entry["memory"] = [i.label for i in node.items]
            view.append(entry)
        return view

    def prompt_json(self) -> str:
        return json.dumps(self.prompt_view(), ensure_ascii=False, separators=(",", ":"))

    def to_credit_graph(self) -> CreditGraph:
        """The GGPO view: search/answer nodes as steps, their turns and memorised evidence ids."""
        steps = [GraphNode(n.node_id, tuple(n.parent_ids), n.kind, tuple(n.turn_indices),
                          tuple(dict.fromkeys(i.ref_id for i in n.items)))
                 for n in self.nodes.values() if n.kind != "root"]
        return CreditGraph.build(steps, self.answer_id)

    def export(self) -> dict[str, Any]:
        """What the demo draws: typed nodes with labels and summaries, edges parent → child."""
        nodes = [{"id": n.node_id, "kind": n.kind, "label": n.query, "summary": n.summary,
                  "items": [{"label": i.label, "kind": i.kind, "ref_id": i.ref_id, "priority": i.priority,
                             "time_range": i.time_range, "key_timestamps": i.key_timestamps, "region": i.region}
                            for i in n.items],
                  "on_answer_path": n.node_id in self.answer_path()} for n in self.nodes.values()]
        edges = [{"source": p, "target": n.node_id} for n in self.nodes.values() for p in n.parent_ids]
        return {"nodes": nodes, "edges": edges, "answer_id": self.answer_id}

    # ---- JSON ------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "answer_id": self.answer_id,
                "nodes": [n.to_dict() for n in self.nodes.values()]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryGraph:
        """Rebuild and validate (unknown parents, cycles, kinds): `GraphError` for a broken graph."""
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise GraphError("a memory graph is a JSON object with a `nodes` list")
        try:
            nodes = [MemoryNode.from_dict(n) for n in data["nodes"]]
        except (TypeError, KeyError) as exc:
            raise GraphError(f"malformed node: {exc}") from None
        by_id: dict[str, MemoryNode] = {}
        for node in nodes:
            if node.node_id in by_id:
                raise GraphError(f"duplicate node id {node.node_id!r}")
            if node.kind not in NODE_KINDS:
                raise GraphError(f"node {node.node_id!r} has unknown kind {node.kind!r}")
            by_id[node.node_id] = node
        if ROOT_ID not in by_id or by_id[ROOT_ID].kind != "root":
            raise GraphError("the graph has no root node")
        for node in nodes:
            unknown = [p for p in node.parent_ids if p not in by_id]
            if unknown:
                raise GraphError(f"node {node.node_id!r} names unknown parent(s) {unknown}")
        _check_acyclic(by_id)
        graph = cls(str(data.get("question", by_id[ROOT_ID].query)))
        graph.nodes = {n.node_id: n for n in sorted(nodes, key=lambda n: n.order)}
        answer_id = data.get("answer_id")
        if answer_id is not None and answer_id not in by_id:
            raise GraphError(f"answer node {answer_id!r} is not in the graph")
        graph.answer_id = answer_id
        return graph

    @classmethod
    def from_json(cls, text: str) -> MemoryGraph:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as exc:
            raise GraphError(f"not JSON: {exc}") from None


def _check_acyclic(nodes: dict[str, MemoryNode]) -> None:
    """Kahn's algorithm; names the nodes left on a cycle."""
    indegree = {k: len(n.parent_ids) for k, n in nodes.items()}
    children: dict[str, list[str]] = {k: [] for k in nodes}
    for node in nodes.values():
        for parent in node.parent_ids:
            children[parent].append(node.node_id)
    ready = [k for k, d in indegree.items() if d == 0]
    done = 0
    while ready:
        current = ready.pop()
        done += 1
        for child in children[current]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    if done != len(nodes):
        stuck = sorted(k for k, d in indegree.items() if d > 0)
        raise GraphError(f"the graph has a cycle through {stuck}")
