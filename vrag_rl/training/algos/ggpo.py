"""GGPO's prune mask (VimRAG, Graph-Guided Policy Optimization) over a `StepGraph`.

    μ_t = 1[r = 1] · 1[v_t ∉ P_ans] + 1[r = 0] · 1[v_t ∈ R_val]

μ_t = 1 removes step t from the policy loss (the loss is multiplied by 1 − μ_t):
- in a *correct* trajectory (r = 1), steps off the root→answer path P_ans — dead ends — get no
  positive gradient;
- in a *wrong* trajectory (r = 0), steps that retrieved reference evidence (R_val) get no negative
  gradient: they did the right thing even though the answer failed.

The definitions, for any agent that hands over a `StepGraph` (VimRAG hands its memory graph):
- a *step* is a node of the graph; its tokens are those of the model turns in `turn_indices`;
- the *answer path* is the answer node and every node it transitively builds on (`answer_path()`);
  a trajectory with no answer node has an empty path (so, if it were counted correct, every step
  would be pruned — the trainer only calls it correct when the outcome is);
- a step *retrieved reference evidence* when its `evidence_ids` meet the reference pages.
For the VRAG agent (`vrag_rl.agent.step_graph.vrag_step_graph`): a search step builds on the root and
its evidence is the pages it showed; a crop builds on the step that showed the image it cuts, its
evidence the page it cuts from; the answer builds on every step that put an image into its context
(what the model could have read). So in a correct episode the pruned steps are those that added
nothing the model could read (failed or empty searches, invalid replies), never the step that showed
the evidence; in a wrong one, the steps that showed a reference page keep their tokens out of the
negative gradient.
"""
from __future__ import annotations

from vrag_rl.agent.step_graph import StepGraph


def ggpo_step_mask(graph: StepGraph, correct: bool, reference_evidence: set[str]) -> dict[str, bool]:
    """step id → True when GGPO prunes the step from the loss (μ = 1)."""
    path = graph.answer_path()
    evidence = set(reference_evidence)
    mask: dict[str, bool] = {}
    for node in graph.steps():
        if correct:
            mask[node.step_id] = node.step_id not in path
        else:
            mask[node.step_id] = bool(evidence.intersection(node.evidence_ids))
    return mask


def ggpo_turn_mask(graph: StepGraph, correct: bool, reference_evidence: set[str], num_turns: int) -> list[bool]:
    """Per model turn, True when pruned. A turn belonging to several steps is pruned only when all of them
    are; a turn no step names is kept (it is trained as in GRPO).
    """
    steps = ggpo_step_mask(graph, correct, reference_evidence)
    verdicts: list[list[bool]] = [[] for _ in range(num_turns)]
    for node in graph.steps():
        for turn in node.turn_indices:
            if not 0 <= turn < num_turns:
                raise ValueError(f"step {node.step_id!r} names turn {turn}, but the trajectory has {num_turns}")
            verdicts[turn].append(steps[node.step_id])
    return [bool(v) and all(v) for v in verdicts]
