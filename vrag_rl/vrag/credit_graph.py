"""The VRAG agent's credit-graph rule: one node per turn of a growing transcript, and which node built on which.

The graph type is the kit's (`vrag_rl.agent.credit_graph.CreditGraph`), shared with VimRAG, whose memory
graph is its credit graph already; this module is the VRAG rule that derives one from turn records.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from vrag_rl.agent.credit_graph import ROOT_ID, CreditGraph, GraphNode


class TurnLike(Protocol):
    """What `vrag_credit_graph` reads of a turn (`vrag_rl.agent.result.TurnRecord` has it). Read-only
    members, so a record whose `action` is a narrower type (a `Literal`) still fits."""

    @property
    def index(self) -> int: ...

    @property
    def action(self) -> str: ...

    @property
    def shown_image_ids(self) -> list[str]: ...

    @property
    def crop_source_image_id(self) -> str | None: ...


def vrag_credit_graph(turns: Sequence[TurnLike], image_pages: Mapping[str, str]) -> CreditGraph:
    """The credit graph of a VRAG episode from its turn records; `image_pages` maps image id → page id.

    - a search node builds on the root; its evidence is the pages it showed (none when it failed or
      found no new page);
    - a crop node builds on the node that showed the image it cuts; its evidence is that page;
    - an invalid turn builds on the root and has no evidence;
    - the answer builds on every earlier node that put an image into the conversation.

    Why the answer rule: the VRAG conversation is append-only, so at the answer every image shown so
    far is in the model's context, and the model never says which one it read. Any narrower rule has
    to guess. The previous guess, "the node that showed the last image", pruned the search that found
    the gold page whenever the model searched once more before answering, and gave the positive
    gradient to the irrelevant search instead. The two errors cost differently: pruning the evidence
    node removes the signal for the behaviour that made the episode correct, while keeping a wasted
    search only trains that node as plain GRPO would. So the answer builds on everything the model could
    have read. In a correct episode GGPO then prunes the nodes that added nothing to the context (a
    failed or empty search, an invalid reply, an action cut off by the budget), never a node whose page
    was on screen. The rule needs no reference pages, so the graph is the same in evaluation and training.
    """
    nodes: list[GraphNode] = []
    node_of_image: dict[str, str] = {}
    showing: list[str] = []  # nodes that put at least one image into the context, in order
    answer_id: str | None = None
    for turn in turns:
        node_id = f"t{turn.index}"
        shown = list(turn.shown_image_ids or [])
        if turn.action == "answer":
            nodes.append(GraphNode(node_id, tuple(showing) or (ROOT_ID,), "answer", (turn.index,), ()))
            answer_id = node_id
            continue
        if turn.action == "crop" and turn.crop_source_image_id is not None:
            source = turn.crop_source_image_id
            parent = node_of_image.get(source, ROOT_ID)
            page = image_pages.get(source)
            nodes.append(GraphNode(node_id, (parent,), "crop", (turn.index,), (page,) if page else ()))
        else:
            kind = turn.action if turn.action in ("search", "invalid") else "invalid"
            evidence = tuple(dict.fromkeys(image_pages[i] for i in shown if i in image_pages))
            nodes.append(GraphNode(node_id, (ROOT_ID,), kind, (turn.index,), evidence))
        for image_id in shown:
            node_of_image[image_id] = node_id
        if shown:
            showing.append(node_id)
    return CreditGraph.build(nodes, answer_id)
