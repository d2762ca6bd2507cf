"""GRPO's group-normalised outcome advantage, exactly as verl computes it.

For trajectory i of group g (the same question): A_i = (r_i − mean_g) / (std_g + ε), with std the
*unbiased* (n−1) standard deviation — verl's `compute_grpo_outcome_advantage`, tested equal to it to
1e-6. A group of one has mean 0 and std 1 (so A = r / (1 + ε)); `norm_by_std=False` is Dr.GRPO
(A_i = r_i − mean_g, no division). The trainer broadcasts A_i over the trajectory's mask-1 tokens.
Written here rather than imported so the local trainer does not need verl and Ray installed.

An agent that trains one sample per turn (VimRAG rebuilds its context at every turn) takes the group statistics
over *trajectories* — one outcome per trajectory — and gives the trajectory's advantage to each of its turns
(`trajectory_advantages`). Normalising over turn rows instead would count a trajectory once per turn, so a long
(often failing, looping) trajectory would pull the group mean and std towards itself. This is also what verl
0.9.1's v1 trainer does with multi-output agent loops (`compute_advantage_for_multi_trajectories`: GRPO on each
session's final output, broadcast to the session's other outputs), so the local trainer and the cluster agree.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import torch


def grpo_advantages(rewards: torch.Tensor, group_ids: Sequence[Hashable], epsilon: float = 1e-6,
                    norm_by_std: bool = True) -> torch.Tensor:
    """Per-sequence advantages (shape of `rewards`, 1-D) from per-sequence scalar rewards."""
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (one scalar per sequence), got shape {tuple(rewards.shape)}")
    if len(group_ids) != rewards.shape[0]:
        raise ValueError(f"{len(group_ids)} group ids for {rewards.shape[0]} rewards")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, gid in enumerate(group_ids):
        members[gid].append(i)
    out = torch.empty_like(rewards)
    with torch.no_grad():
        for rows in members.values():
            scores = rewards[rows]
            if len(rows) == 1:
                mean, std = torch.tensor(0.0, dtype=rewards.dtype), torch.tensor(1.0, dtype=rewards.dtype)
            else:
                mean, std = scores.mean(), scores.std()
            out[rows] = (scores - mean) / (std + epsilon) if norm_by_std else scores - mean
    return out


def trajectory_advantages(rewards: Sequence[float], group_ids: Sequence[Hashable], turns_per_trajectory: Sequence[int],
                          norm_by_std: bool = True, epsilon: float = 1e-6) -> list[list[float]]:
    """GRPO advantages normalised over the trajectories of each group, then given to each turn of a trajectory.

    Returns one list per trajectory with `turns_per_trajectory[i]` equal values.
    """
    if not len(rewards) == len(group_ids) == len(turns_per_trajectory):
        raise ValueError("rewards, group_ids and turns_per_trajectory need one entry per trajectory")
    per_trajectory = grpo_advantages(torch.tensor(list(rewards), dtype=torch.float32), list(group_ids),
                                     epsilon=epsilon, norm_by_std=norm_by_std)
    return [[float(a)] * int(n) for a, n in zip(per_trajectory, turns_per_trajectory)]
