"""GGPO's prune mask (VimRAG's Graph-Guided Policy Optimization) over a `CreditGraph`: one rule, both agents.

    μ_t = 1[r = 1] · 1[v_t ∉ P_ans] + 1[r = 0] · 1[v_t ∈ R_val]

μ_t = 1 removes turn t (a model call) from the policy loss (the loss is multiplied by 1 − μ_t):
- in a *correct* trajectory (r = 1), turns whose nodes are off the root→answer path P_ans — dead ends — get
  no positive gradient;
- in a *wrong* trajectory (r = 0), turns whose nodes retrieved reference evidence (R_val) get no negative
  gradient: they did the right thing even though the answer failed.

The definitions, for any agent that hands over a `CreditGraph` (glossary: docs/architecture.md):
- a *node* of the graph names the turns that built it (`turn_indices`); the VRAG agent builds one node per
  turn (`vrag_rl.vrag.credit_graph.vrag_credit_graph`), VimRAG's memory graph nodes are built by one or two
  turns each (`vimrag.rollout.memory_credit_graph`);
- the *answer path* is the answer node and every node it transitively builds on (`answer_path()`); a
  trajectory with no answer node has an empty path (so, if it were counted correct, every turn would be
  pruned — the trainer only calls it correct when the outcome is);
- a node *retrieved reference evidence* when its `evidence_ids` meet the reference pages.

From nodes to turns (`ggpo_turn_mask`, the one function the local trainer and both verl agent loops call):
- a turn that built several nodes (memorised one, opened the next) is pruned only when every one of them is
  (the conservative reading: a turn that also built something worth keeping keeps its gradient);
- a turn that **no node names** (an unusable reply, a call whose action was cut off) is judged as the formula
  judges a node that is neither on the answer path nor retrieved evidence: μ = 1[r = 1]. It is pruned in a
  correct trajectory (no credit for a call that built nothing) and kept in a wrong one (its negative gradient
  stays). The VRAG graph names every turn, so this case arises only for agents whose graph does not.

The sign gate (`gate_by_advantage`, applied when the turns' advantages are known): the paper states the rule for
a binary reward, r ∈ {0, 1}, and says what each half is for — no *positive* reinforcement of dead ends in a
positive sample, no *negative* policy gradient for valuable retrieval in a negative one. With GRPO's group
advantage and a binary reward the two readings agree (r = 1 ⇒ A ≥ 0, r = 0 ⇒ A ≤ 0). With a composite reward
(outcome + format + retrieval, the format gate R = 0) they do not, and the literal mask then removes the
opposite gradient: a wrong answer whose search found the reference page scores the retrieval part, often
above its group's mean, so its A > 0 and the literal rule drops the positive gradient of exactly the search
that should be reinforced; a right answer with a malformed turn scores 0 (format gate), A < 0, and the rule
drops the malformed turn's negative gradient. So a turn is pruned only when the gradient it would get has the
sign the rule targets: μ_t ← μ_t · 1[A_t > 0] when r = 1 and μ_t · 1[A_t < 0] when r = 0. For a binary reward
this is the paper's mask unchanged. How often the literal mask had the wrong sign on the tiny tasks, and what
the gate changed: docs/algorithms_tiny.md.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from vrag_rl.agent.credit_graph import CreditGraph


def ggpo_node_mask(graph: CreditGraph, correct: bool, reference_evidence: Iterable[str]) -> dict[str, bool]:
    """node id → True when GGPO prunes the node (μ = 1)."""
    path = graph.answer_path()
    evidence = set(reference_evidence)
    mask: dict[str, bool] = {}
    for node in graph.non_root_nodes():
        if correct:
            mask[node.node_id] = node.node_id not in path
        else:
            mask[node.node_id] = bool(evidence.intersection(node.evidence_ids))
    return mask


def turn_nodes(graph: CreditGraph, num_turns: int) -> list[tuple[str, ...]]:
    """Per turn, the ids of the graph nodes it built, in graph order; raises on a turn index out of range."""
    nodes: list[list[str]] = [[] for _ in range(num_turns)]
    for node in graph.non_root_nodes():
        for turn in node.turn_indices:
            if not 0 <= turn < num_turns:
                raise ValueError(f"node {node.node_id!r} names turn {turn}, but the trajectory has {num_turns}")
            nodes[turn].append(node.node_id)
    return [tuple(n) for n in nodes]


def gate_by_advantage(mask: Sequence[bool], correct: bool, advantages: Sequence[float]) -> list[bool]:
    """Keep μ_t = 1 only where turn t's advantage has the sign the rule removes: > 0 when r = 1, < 0 when r = 0.

    Why: see the module docstring (the rule's purpose is the sign of the removed gradient; with a composite
    reward r and the advantage's sign can disagree). `advantages` has one value per turn.
    """
    if len(advantages) != len(mask):
        raise ValueError(f"{len(advantages)} advantages for {len(mask)} turns")
    return [bool(m) and (a > 0 if correct else a < 0) for m, a in zip(mask, advantages)]


def ggpo_turn_mask(graph: CreditGraph, num_turns: int, correct: bool, reference_evidence: Iterable[str],
                   advantages: Sequence[float] | None = None) -> list[bool]:
    """μ_t for every turn (True = pruned from the loss); see the module docstring for the rule.

    With `advantages` (one per turn) the mask is sign-gated (`gate_by_advantage`); without them it is the
    paper's literal mask — what a caller gets that prunes before the group's advantages exist.
    """
    pruned = ggpo_node_mask(graph, correct, reference_evidence)
    mask = [all(pruned[node] for node in nodes) if nodes else correct for nodes in turn_nodes(graph, num_turns)]
    return mask if advantages is None else gate_by_advantage(mask, correct, advantages)
