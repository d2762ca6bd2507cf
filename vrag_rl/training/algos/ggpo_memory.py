"""GGPO on a memory graph (VimRAG): μ_t per *step* (model call) of a rebuilt-context trajectory, and the
trajectory-level group normalisation its steps share.

VimRAG rebuilds its context at every model call, so a trajectory is a list of steps, each its own training
sample (`vimrag.rollout`). The paper's prune indicator, per step t with memory-graph node v_t:

    μ_t = 1[r = 1] · 1[v_t ∉ P_ans] + 1[r = 0] · 1[v_t ∈ R_val]

- r: the trajectory's outcome counted correct (`AlgorithmSettings.is_correct`);
- P_ans: the nodes on a root → answer path of the memory graph (`StepGraph.answer_path`);
- R_val: the nodes whose *retrieval returned* a reference page (the step graph's `evidence_ids` hold, for a
  memory graph, every page the node's search returned plus what it memorised — `memory_step_graph`).
μ_t = 1 drops step t from the loss: a successful trajectory gives no positive gradient to dead-end branches;
a failed one gives no negative gradient to the searches that did find the evidence.

Steps and nodes: a node names the model calls that built it (`turn_indices`: the call that added the search
node and the call that summarised it; the answer node its call). A step may touch several nodes (memorise one,
open the next); it is dropped only when every node it touched is dropped (the conservative reading: a step
that also built something worth keeping keeps its gradient). A step that touched no node (an unusable reply)
has v_t ∉ P_ans, so it is dropped in a successful trajectory (no credit for a malformed call), and v_t ∉ R_val,
so it keeps its negative gradient in a failed one.

Normalisation (`trajectory_advantages`): GRPO's group statistics are taken over *trajectories* — one outcome
per trajectory — and the trajectory's advantage is given to each of its steps. Normalising over step rows
instead would count a trajectory once per step, so a long (often failing, looping) trajectory would pull the
group mean and std towards itself. This is also what verl 0.9.1's v1 trainer does with multi-output agent
loops (`compute_advantage_for_multi_trajectories`: GRPO on each session's final output, broadcast to the
session's other outputs), so the local trainer and the cluster agree.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

import torch

from vrag_rl.agent.step_graph import StepGraph
from vrag_rl.training.algos.grpo import grpo_advantages


def step_nodes(graph: StepGraph, num_steps: int) -> list[tuple[str, ...]]:
    """Per step (model call), the ids of the graph nodes it built, in graph order; raises on a bad index."""
    nodes: list[list[str]] = [[] for _ in range(num_steps)]
    for node in graph.steps():
        for turn in node.turn_indices:
            if not 0 <= turn < num_steps:
                raise ValueError(f"node {node.step_id!r} names step {turn}, but the trajectory has {num_steps}")
            nodes[turn].append(node.step_id)
    return [tuple(n) for n in nodes]


def memory_graph_mu(graph: StepGraph, num_steps: int, correct: bool, reference_pages: Iterable[str]) -> list[bool]:
    """μ_t for every step (True = dropped from the loss); see the module docstring for the rule."""
    references = set(reference_pages)
    path = graph.answer_path()
    per_step = step_nodes(graph, num_steps)
    mu = []
    for nodes in per_step:
        if correct:
            dropped = [node not in path for node in nodes] or [True]
        else:
            dropped = [bool(references.intersection(graph.nodes[node].evidence_ids)) for node in nodes] or [False]
        mu.append(all(dropped))
    return mu


def trajectory_advantages(rewards: Sequence[float], group_ids: Sequence[Hashable], steps_per_trajectory: Sequence[int],
                          norm_by_std: bool = True, epsilon: float = 1e-6) -> list[list[float]]:
    """GRPO advantages normalised over the trajectories of each group, then given to each step of a trajectory.

    Returns one list per trajectory with `steps_per_trajectory[i]` equal values.
    """
    if not len(rewards) == len(group_ids) == len(steps_per_trajectory):
        raise ValueError("rewards, group_ids and steps_per_trajectory need one entry per trajectory")
    per_trajectory = grpo_advantages(torch.tensor(list(rewards), dtype=torch.float32), list(group_ids),
                                     epsilon=epsilon, norm_by_std=norm_by_std)
    return [[float(a)] * int(n) for a, n in zip(per_trajectory, steps_per_trajectory)]
