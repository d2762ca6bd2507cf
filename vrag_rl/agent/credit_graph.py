"""The credit graph: one small type that says which node of a trajectory built on which, and which turns built
each node — what GGPO assigns credit on (`vrag_rl.training.algos.ggpo`).

GGPO needs, per trajectory, the nodes on the root→answer path and the nodes that retrieved reference
evidence. Both agents hand it this type and nothing else:

- the VRAG agent builds it from its turn records (`vrag_rl.vrag.credit_graph.vrag_credit_graph`), one node
  per turn: a search node builds on the root, a crop node on the node that showed the image it cuts, and the
  answer on *every* node that put an image into the context it answered from;
- the VimRAG agent hands over its memory graph (search nodes, answer node, parent edges).

A node's `turn_indices` are the model turns (0-based, in trajectory order) whose tokens belong to it, so a
per-node mask becomes a per-turn (and so per-token) mask. The root is the question itself: it has no turns
and no parents. Glossary: a *turn* is one model call, a *node* one node of this graph (docs/architecture.md).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

ROOT_ID = "root"


def ancestors(node_id: str, parents: Mapping[str, Iterable[str]]) -> set[str]:
    """`node_id` and every node it transitively builds on, in a DAG given as node → parent ids (a node missing
    from `parents` is not followed; both agents' graphs ask this of their own nodes)."""
    seen: set[str] = set()
    stack = [node_id]
    while stack:
        current = stack.pop()
        if current in seen or current not in parents:
            continue
        seen.add(current)
        stack.extend(parents[current])
    return seen


class CreditGraphError(ValueError):
    """The graph is not a DAG rooted at `root` (unknown parent, cycle, duplicate id)."""


@dataclass(frozen=True)
class GraphNode:
    """One node. `evidence_ids` are the page (or memory item) ids this node brought in or memorised."""

    node_id: str
    parent_ids: tuple[str, ...] = ()
    kind: str = "node"  # "root", "search", "crop", "answer", "invalid", "memorize", ...
    turn_indices: tuple[int, ...] = ()
    evidence_ids: tuple[str, ...] = ()


@dataclass
class CreditGraph:
    """A DAG of nodes rooted at `ROOT_ID`, with at most one answer node."""

    nodes: dict[str, GraphNode] = field(default_factory=lambda: {ROOT_ID: GraphNode(ROOT_ID, kind="root")})
    answer_id: str | None = None

    @classmethod
    def build(cls, nodes: Iterable[GraphNode], answer_id: str | None = None) -> CreditGraph:
        """Add nodes in order (parents before children) and validate; raises `CreditGraphError`."""
        graph = cls()
        for node in nodes:
            graph.add(node)
        if answer_id is not None and answer_id not in graph.nodes:
            raise CreditGraphError(f"answer node {answer_id!r} is not in the graph")
        graph.answer_id = answer_id
        return graph

    def add(self, node: GraphNode) -> None:
        """Add one node whose parents already exist: this keeps the graph acyclic by construction."""
        if node.node_id == ROOT_ID:
            return
        if node.node_id in self.nodes:
            raise CreditGraphError(f"duplicate node id {node.node_id!r}")
        missing = [p for p in node.parent_ids if p not in self.nodes]
        if missing:
            raise CreditGraphError(f"node {node.node_id!r} names unknown parent(s) {missing}")
        if not node.parent_ids:
            node = GraphNode(node.node_id, (ROOT_ID,), node.kind, node.turn_indices, node.evidence_ids)
        self.nodes[node.node_id] = node

    def ancestors(self, node_id: str) -> set[str]:
        """The node and every node it transitively built on (root included)."""
        return ancestors(node_id, {key: node.parent_ids for key, node in self.nodes.items()})

    def answer_path(self) -> set[str]:
        """Nodes on a root→answer path (empty when there is no answer node)."""
        return self.ancestors(self.answer_id) if self.answer_id else set()

    def non_root_nodes(self) -> list[GraphNode]:
        """Every node except the root, in insertion order."""
        return [n for n in self.nodes.values() if n.node_id != ROOT_ID]

    def to_dict(self) -> dict[str, Any]:
        return {"answer_id": self.answer_id,
                "nodes": [{**asdict(n), "parent_ids": list(n.parent_ids), "turn_indices": list(n.turn_indices),
                           "evidence_ids": list(n.evidence_ids)} for n in self.non_root_nodes()]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CreditGraph:
        nodes = [GraphNode(n["node_id"], tuple(n.get("parent_ids", ())), n.get("kind", "node"),
                          tuple(n.get("turn_indices", ())), tuple(n.get("evidence_ids", ())))
                 for n in data.get("nodes", [])]
        return cls.build(nodes, data.get("answer_id"))

