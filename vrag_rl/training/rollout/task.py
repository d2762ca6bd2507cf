"""What every agent's rollout starts from: a question to roll out, and the seed each of its episodes samples with.

Agents record their episodes in their own way (`AgentPlugin.rollout`: VRAG's one growing conversation,
VimRAG's one sample per turn); the task and the seed rule are theirs in common, so a rollout is reproducible
whatever order the concurrent episodes reach the model in, for any agent.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RolloutTask:
    """One question to roll out; `reference` is whatever the reward needs (a `RewardReference`)."""

    group_id: str
    question: str
    reference: Any = None


def episode_seed(seed: int, group_id: str, index: int) -> int:
    """The sampling seed of rollout `index` of group `group_id` in a run seeded `seed` (stable across runs)."""
    digest = hashlib.blake2b(f"{seed}:{group_id}:{index}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little")
