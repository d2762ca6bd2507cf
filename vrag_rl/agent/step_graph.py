"""The step graph: one small type that says which step of a trajectory built on which.

GGPO (VimRAG) needs, per trajectory, the steps on the root→answer path and the steps that
retrieved reference evidence. Both agents hand it this type and nothing else:

- the VRAG agent's graph is built from its turn records by `vrag_step_graph`: a search step builds
  on the root, a crop step on the step that showed the image it cuts, and the answer on *every* step
  that put an image into the context it answered from (the rule and why: `vrag_step_graph`);
- the VimRAG agent hands over its memory graph (search nodes, answer node, parent edges).

A *step* is a node; `turn_indices` are the model turns (0-based, in trajectory order) whose tokens
belong to it, so a per-step mask becomes a per-turn (and so per-token) mask. The root is the
question itself: it has no turns and no parents.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

ROOT_ID = "root"


class StepGraphError(ValueError):
    """The graph is not a DAG rooted at `root` (unknown parent, cycle, duplicate id)."""


@dataclass(frozen=True)
class StepNode:
    """One step. `evidence_ids` are the page (or memory item) ids this step brought in or memorised."""

    step_id: str
    parent_ids: tuple[str, ...] = ()
    kind: str = "step"  # "root", "search", "crop", "answer", "invalid", "memorize", ...
    turn_indices: tuple[int, ...] = ()
    evidence_ids: tuple[str, ...] = ()


@dataclass
class StepGraph:
    """A DAG of steps rooted at `ROOT_ID`, with at most one answer step."""

    nodes: dict[str, StepNode] = field(default_factory=lambda: {ROOT_ID: StepNode(ROOT_ID, kind="root")})
    answer_id: str | None = None

    @classmethod
    def build(cls, nodes: Iterable[StepNode], answer_id: str | None = None) -> StepGraph:
        """Add nodes in order (parents before children) and validate; raises `StepGraphError`."""
        graph = cls()
        for node in nodes:
            graph.add(node)
        if answer_id is not None and answer_id not in graph.nodes:
            raise StepGraphError(f"answer step {answer_id!r} is not in the graph")
        graph.answer_id = answer_id
        return graph

    def add(self, node: StepNode) -> None:
        """Add one node whose parents already exist: this keeps the graph acyclic by construction."""
        if node.step_id == ROOT_ID:
            return
        if node.step_id in self.nodes:
            raise StepGraphError(f"duplicate step id {node.step_id!r}")
        missing = [p for p in node.parent_ids if p not in self.nodes]
        if missing:
            raise StepGraphError(f"step {node.step_id!r} names unknown parent(s) {missing}")
        if not node.parent_ids:
            node = StepNode(node.step_id, (ROOT_ID,), node.kind, node.turn_indices, node.evidence_ids)
        self.nodes[node.step_id] = node

    def ancestors(self, step_id: str) -> set[str]:
        """The step and every step it transitively built on (root included)."""
        seen: set[str] = set()
        stack = [step_id]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(self.nodes[current].parent_ids)
        return seen

    def answer_path(self) -> set[str]:
        """Steps on a root→answer path (empty when there is no answer step)."""
        return self.ancestors(self.answer_id) if self.answer_id else set()

    def steps(self) -> list[StepNode]:
        """Every node except the root, in insertion order."""
        return [n for n in self.nodes.values() if n.step_id != ROOT_ID]

    def to_dict(self) -> dict[str, Any]:
        return {"answer_id": self.answer_id,
                "nodes": [{**asdict(n), "parent_ids": list(n.parent_ids), "turn_indices": list(n.turn_indices),
                           "evidence_ids": list(n.evidence_ids)} for n in self.steps()]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepGraph:
        nodes = [StepNode(n["step_id"], tuple(n.get("parent_ids", ())), n.get("kind", "step"),
                          tuple(n.get("turn_indices", ())), tuple(n.get("evidence_ids", ())))
                 for n in data.get("nodes", [])]
        return cls.build(nodes, data.get("answer_id"))


VRAG_ACTIONS = frozenset({"search", "crop", "answer", "invalid"})  # what a VRAG turn record's action can be


class TurnLike(Protocol):
    """What `vrag_step_graph` reads of a turn (`vrag_rl.agent.result.TurnRecord` has it). Read-only
    members, so a record whose `action` is a narrower type (a `Literal`) still fits."""

    @property
    def index(self) -> int: ...

    @property
    def action(self) -> str: ...

    @property
    def shown_image_ids(self) -> list[str]: ...

    @property
    def crop_source_image_id(self) -> str | None: ...


def is_vrag_episode(turns: Sequence[Any]) -> bool:
    """True when the turn records are the VRAG agent's (its actions only, no tool calls): other agents
    (VimRAG's memory graph) hand over their own graph, which `vrag_step_graph` must not replace."""
    return all(t.action in VRAG_ACTIONS and not getattr(t, "tool_calls", None) for t in turns)


def vrag_step_graph(turns: Sequence[TurnLike], image_pages: Mapping[str, str]) -> StepGraph:
    """The step graph of a VRAG episode from its turn records; `image_pages` maps image id → page id.

    - a search step builds on the root; its evidence is the pages it showed (none when it failed or
      found no new page);
    - a crop step builds on the step that showed the image it cuts; its evidence is that page;
    - an invalid turn builds on the root and has no evidence;
    - the answer builds on every earlier step that put an image into the conversation.

    Why the answer rule: the VRAG conversation is append-only, so at the answer every image shown so
    far is in the model's context, and the model never says which one it read. Any narrower rule has
    to guess. The previous guess, "the step that showed the last image", pruned the search that found
    the gold page whenever the model searched once more before answering, and gave the positive
    gradient to the irrelevant search instead. The two errors cost differently: pruning the evidence
    step removes the signal for the behaviour that made the episode correct, while keeping a wasted
    search only trains that step as plain GRPO would. So the answer builds on everything the model could
    have read. In a correct episode GGPO then prunes the steps that added nothing to the context (a
    failed or empty search, an invalid reply, an action cut off by the budget), never a step whose page
    was on screen. The rule needs no reference pages, so the graph is the same in evaluation and training.
    """
    nodes: list[StepNode] = []
    step_of_image: dict[str, str] = {}
    showing: list[str] = []  # steps that put at least one image into the context, in order
    answer_id: str | None = None
    for turn in turns:
        step_id = f"t{turn.index}"
        shown = list(turn.shown_image_ids or [])
        if turn.action == "answer":
            nodes.append(StepNode(step_id, tuple(showing) or (ROOT_ID,), "answer", (turn.index,), ()))
            answer_id = step_id
            continue
        if turn.action == "crop" and turn.crop_source_image_id is not None:
            source = turn.crop_source_image_id
            parent = step_of_image.get(source, ROOT_ID)
            page = image_pages.get(source)
            nodes.append(StepNode(step_id, (parent,), "crop", (turn.index,), (page,) if page else ()))
        else:
            kind = turn.action if turn.action in ("search", "invalid") else "invalid"
            evidence = tuple(dict.fromkeys(image_pages[i] for i in shown if i in image_pages))
            nodes.append(StepNode(step_id, (ROOT_ID,), kind, (turn.index,), evidence))
        for image_id in shown:
            step_of_image[image_id] = step_id
        if shown:
            showing.append(step_id)
    return StepGraph.build(nodes, answer_id)
