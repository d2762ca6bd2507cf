"""`Trajectory`: one rolled-out episode as a trainer consumes it, and its model inputs.

It keeps the token record (`prompt_ids`, `response_ids`, `response_mask`, `response_logprobs`,
`turn_spans`), the images the model saw, and the `EpisodeResult` (turn records with the pages
retrieved per turn in rank order, crops, the credit graph) — everything the reward and GGPO need.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from PIL import Image

from vrag_rl.agent.credit_graph import CreditGraph
from vrag_rl.agent.policies.local_transformers import expected_image_tokens, image_token_id, vision_inputs
from vrag_rl.agent.result import EpisodeResultBase, TurnRecord
from vrag_rl.training.algos.ggpo import ggpo_turn_mask
from vrag_rl.training.algos.settings import AlgorithmSettings


@dataclass
class Trajectory:
    group_id: str  # the question's id: GRPO groups by it
    index: int  # rollout index within the group
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float]
    turn_spans: list[tuple[int, int]]
    images: list[Image.Image]
    result: EpisodeResultBase  # the agent's result (VRAG: `EpisodeResult`), its credit graph set
    seed: int | None = None
    reward: Any = None  # a RewardBreakdown once scored
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def turn_records(self) -> list[TurnRecord]:
        return self.result.turn_records

    @property
    def credit_graph(self) -> CreditGraph:
        return self.result.credit_graph

    @property
    def pages_per_turn(self) -> list[list[list[str]]]:
        """Per model turn, per query, the page ids the engine returned in rank order."""
        return [record.retrieved for record in self.result.turn_records]

    @property
    def num_turns(self) -> int:
        return len(self.turn_spans)

    @property
    def num_model_tokens(self) -> int:
        return sum(self.response_mask)

    def ggpo_pruned_turns(self, correct: bool, reference_evidence: set[str],
                          advantage: float | None = None) -> list[int]:
        """The model turns GGPO removes from the loss (VimRAG's μ = 1), decided on the credit graph; sign-gated
        by the trajectory's advantage (every turn of this one sequence has it) when given
        (`vrag_rl.training.algos.ggpo.gate_by_advantage`).

        One place for the local trainer and the verl agent loop, so both prune the same turns.
        """
        n_turns = max(len(self.turn_spans), len(self.turn_records))
        per_turn = None if advantage is None else [float(advantage)] * n_turns
        mask = ggpo_turn_mask(self.credit_graph, n_turns, correct, reference_evidence, per_turn)
        return [turn for turn in range(len(self.turn_spans)) if mask[turn]]

    def pruned_turns(self, settings: AlgorithmSettings, outcome: float | None,
                     reference_pages: Iterable[str], advantage: float | None = None) -> list[int]:
        """The turns the configured algorithm removes from the loss: none for GRPO / GSPO (or an unscored
        episode), GGPO's prune set for GGPO with `settings.is_correct(outcome)` as r, sign-gated when the
        trajectory's `advantage` is given (the local trainer has it; verl's agent loop prunes before the group's
        advantages exist). The local trainer and the verl agent loop both call this.
        """
        if not settings.prunes or outcome is None:
            return []
        return self.ggpo_pruned_turns(settings.is_correct(outcome), set(reference_pages), advantage)

    def loss_mask(self, pruned_turns: Sequence[int] = ()) -> list[int]:
        """`response_mask` with the tokens of `pruned_turns` set to 0."""
        mask = list(self.response_mask)
        for turn in pruned_turns:
            start, end = self.turn_spans[turn]
            mask[start:end] = [0] * (end - start)
        return mask

    def summary(self) -> dict[str, Any]:
        """A JSON-ready record of the episode (no tensors, no pixels)."""
        return {"group_id": self.group_id, "index": self.index, "seed": self.seed, "status": self.result.status,
                "answer": self.result.answer, "turns": self.num_turns, "model_tokens": self.num_model_tokens,
                "response_tokens": len(self.response_ids), "images": len(self.images),
                "actions": [r.action for r in self.result.turn_records],
                "replies": [r.reply for r in self.result.turn_records],
                "pages_per_turn": self.pages_per_turn,
                "reward": None if self.reward is None else self.reward.to_dict()}


class TokenizedSample(Protocol):
    """What a training forward reads of a sample: a `Trajectory` (RL) or an SFT sample has these."""

    group_id: str
    index: int
    prompt_ids: list[int]
    response_ids: list[int]
    images: list[Image.Image]


def model_inputs(trajectory: TokenizedSample, processor: Any, model: Any | None = None) -> dict[str, Any]:
    """The training forward's inputs: the whole sequence with the images the model saw.

    Returns `input_ids` (1, L), `attention_mask`, and `pixel_values` / `image_grid_thw` when the
    trajectory has images; `response_start` is where `response_ids` begin. Raises `ValueError` when
    the image tokens of the ids and the images disagree — a trainer must never run a blind forward.
    """
    import torch

    ids = trajectory.prompt_ids + trajectory.response_ids
    input_ids = torch.tensor([ids], dtype=torch.long)
    out: dict[str, Any] = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
                           "response_start": len(trajectory.prompt_ids)}
    vision = vision_inputs(processor, trajectory.images)
    n_tokens = int((input_ids == image_token_id(processor, model)).sum())
    expected = expected_image_tokens(processor, vision["image_grid_thw"]) if vision else 0
    if n_tokens != expected:
        raise ValueError(f"trajectory {trajectory.group_id}/{trajectory.index}: {n_tokens} image tokens in the ids "
                         f"but {len(trajectory.images)} image(s) needing {expected}")
    out.update(vision)
    return out
