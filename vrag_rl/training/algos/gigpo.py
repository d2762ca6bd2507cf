"""A GiGPO-style turn-level advantage (verl-agent, "Group-in-Group Policy Optimization", Feng et al. 2025)
for rebuilt-context agents: the optional turn credit on top of the episode-level GRPO advantage.

GiGPO finds *anchor states*: the same environment state reached by several trajectories of one group. Turns
taken from the same anchor state form a turn group; each turn's return is the discounted outcome that
followed it, R·γ^(T−1−t) for a sparse outcome R at the end of a T-turn trajectory; the turn advantage is
that return normalised within its turn group (0 for a turn group of one: nothing to compare with). The
final advantage of turn t is A_episode + ω · A_turn.

What counts as "the same state" is the caller's key (`vimrag.rollout.turn_state_keys` for
VimRAG: the sub-queries issued so far and the set of pages they retrieved — the graph's searchable content,
independent of how the model worded its summaries). Hand-written: verl-agent's implementation is tied to its
environment manager's observation arrays; this is the dozen lines of its `step_norm_reward` logic over keys.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import torch


def discounted_turn_returns(reward: float, num_turns: int, gamma: float) -> list[float]:
    """R·γ^(T−1−t) for t in 0..T−1: the sparse outcome discounted back to each turn."""
    return [float(reward) * gamma ** (num_turns - 1 - t) for t in range(num_turns)]


def gigpo_turn_advantages(state_keys: Sequence[Sequence[Hashable]], rewards: Sequence[float],
                          group_ids: Sequence[Hashable], gamma: float = 0.95, norm_by_std: bool = True,
                          epsilon: float = 1e-6) -> list[list[float]]:
    """Per trajectory, per turn: the turn-level advantage within the turn's anchor-state group.

    `state_keys[i][t]` is trajectory i's state before turn t; states are compared only within one group (same
    question). A turn group of one gets 0; `norm_by_std=False` only centres (as Dr.GRPO).
    """
    if not len(state_keys) == len(rewards) == len(group_ids):
        raise ValueError("state_keys, rewards and group_ids need one entry per trajectory")
    returns = [discounted_turn_returns(r, len(keys), gamma) for keys, r in zip(state_keys, rewards)]
    anchors: dict[tuple[Hashable, Hashable], list[tuple[int, int]]] = defaultdict(list)
    for i, (keys, group) in enumerate(zip(state_keys, group_ids)):
        for t, key in enumerate(keys):
            anchors[(group, key)].append((i, t))
    out = [[0.0] * len(keys) for keys in state_keys]
    for members in anchors.values():
        if len(members) < 2:
            continue
        values = torch.tensor([returns[i][t] for i, t in members], dtype=torch.float64)
        centred = values - values.mean()
        scaled = centred / (values.std() + epsilon) if norm_by_std else centred
        for (i, t), value in zip(members, scaled.tolist()):
            out[i][t] = float(value)
    return out


def combine(episode: Sequence[Sequence[float]], turn: Sequence[Sequence[float]],
            weight: float = 1.0) -> list[list[float]]:
    """A_episode + ω · A_turn, per trajectory and turn."""
    return [[e + weight * s for e, s in zip(ep, st)] for ep, st in zip(episode, turn)]
