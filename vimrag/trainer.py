"""The local trainer for the VimRAG agent: the same `LocalTrainer` (objective, KL, checkpoints, metrics), with
VimRAG's rollout environment and its turn samples.

What changes against VRAG, and only that (`VimRAGTrainer` overrides two methods of `LocalTrainer`):
- rollouts: `vimrag.rollout.rollout_vim_batch` — the demo's `VimEpisode` recorded one sample
  per model call, within the configured prompt length (`VimRAGTrainingSettings.max_prompt_length`);
- samples: the loss runs over every *turn* of every trajectory (each turn a sequence with its own prompt);
  advantages are GRPO's, normalised over the group's *trajectories* and given to each of their turns
  (`vrag_rl.training.algos.grpo.trajectory_advantages`, the rule verl's v1 trainer applies to multi-output
  agent loops); GGPO drops the turns with μ_t = 1 on the memory graph (`VimTrajectory.pruned_turns`, sign-gated
  by each turn's advantage) and optimises GSPO's sequence ratio per turn ("seq-mean-token-mean" over the turn
  samples, as verl's actor does with one row per turn); GSPO is the same without the mask; `turn_credit: gigpo`
  adds the GiGPO-style turn-level advantage (`vrag_rl.training.algos.gigpo`) to the episode-level one.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch

from vimrag.rollout import VimTrajectory, energy_for_prompt_length
from vrag_rl.training.algos.gigpo import combine, gigpo_turn_advantages
from vrag_rl.training.algos.grpo import trajectory_advantages
from vrag_rl.training.rewards import RewardBreakdown
from vrag_rl.training.rollout.trajectory import Trajectory
from vrag_rl.training.train.config import TrainConfig
from vrag_rl.training.train.trainer import LocalTrainer, PruneCounts

TURN_CREDITS = ("none", "gigpo")


@dataclass(frozen=True)
class VimRAGTrainingSettings:
    """The `agent_training:` section of a local run config with agent_type: vimrag."""

    turn_credit: str = "none"  # "gigpo": add the GiGPO-style turn-level advantage
    gigpo_gamma: float = 0.95  # discount of the outcome back to earlier turns
    gigpo_weight: float = 1.0  # ω in A = A_episode + ω·A_turn
    max_prompt_length: int | None = None  # a turn's prompt never exceeds it (None: no limit)
    text_tokens: int = 0  # with max_prompt_length: the text a turn's prompt may hold (sizes the memory buffer)

    def __post_init__(self) -> None:
        if self.turn_credit not in TURN_CREDITS:
            raise ValueError(f"agent_training.turn_credit must be one of {TURN_CREDITS}, got {self.turn_credit!r}")
        if not 0.0 < self.gigpo_gamma <= 1.0:
            raise ValueError("agent_training.gigpo_gamma must be in (0, 1]")
        if self.max_prompt_length is not None and self.max_prompt_length < 1:
            raise ValueError("agent_training.max_prompt_length must be positive")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VimRAGTrainingSettings:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"agent_training: unknown key(s) {unknown}; known: {sorted(known)}")
        return cls(**data)


class VimRAGTrainer(LocalTrainer):
    """`LocalTrainer` over VimRAG trajectories (see the module docstring)."""

    def __init__(self, config: TrainConfig, progress: bool = True):
        if config.agent_type != "vimrag":
            raise ValueError("VimRAGTrainer needs agent_type: vimrag in the run config")
        self.vim_settings = VimRAGTrainingSettings.from_dict(dict(config.agent_training))
        if config.reward_config().retrieval_source != "ranked":
            raise ValueError("reward.retrieval_source must be 'ranked' for VimRAG: its result lists every page its "
                             "searches returned, in rank order (it has no transcript of shown pages)")
        super().__init__(config, progress)
        if self.vim_settings.max_prompt_length is not None and self.vim_settings.text_tokens > 0:
            self.agent_config = energy_for_prompt_length(self.agent_config, self.vim_settings.max_prompt_length,
                                                         self.vim_settings.text_tokens)

    def rollout_options(self) -> dict[str, Any]:
        """A turn's prompt never exceeds `agent_training.max_prompt_length` (`vimrag.rollout.prompt_budgeted`)."""
        return {"max_prompt_length": self.vim_settings.max_prompt_length}

    def turn_advantages(self, trajectories: list[VimTrajectory], rewards: list[RewardBreakdown]) -> list[list[float]]:
        """Per trajectory, per turn: the episode advantage (trajectory-normalised GRPO) plus, with
        `turn_credit: gigpo`, ω times the turn-level advantage within the turn's anchor-state group."""
        totals = [r.total for r in rewards]
        groups = [t.group_id for t in trajectories]
        episode = trajectory_advantages(totals, groups, [len(t.turns) for t in trajectories],
                                        norm_by_std=self.config.norm_adv_by_std)
        if self.vim_settings.turn_credit == "gigpo":
            turn = gigpo_turn_advantages([t.state_keys() for t in trajectories], totals, groups,
                                         gamma=self.vim_settings.gigpo_gamma, norm_by_std=self.config.norm_adv_by_std)
            return combine(episode, turn, self.vim_settings.gigpo_weight)
        return episode

    def _training_samples(self, trajectories: list[Any], rewards: list[RewardBreakdown]) -> tuple[
            list[Trajectory], torch.Tensor, list[torch.Tensor], PruneCounts]:
        settings = self.config.algorithm_settings()
        per_turn = self.turn_advantages(trajectories, rewards)
        samples: list[Trajectory] = []
        advantages: list[float] = []
        masks: list[torch.Tensor] = []
        counts = PruneCounts()
        for trajectory, reward, turn_adv in zip(trajectories, rewards, per_turn):
            pages = trajectory.extra["reference"].reference_pages
            # sign-gated by each turn's own advantage (vrag_rl.training.algos.ggpo.gate_by_advantage)
            dropped = set(trajectory.pruned_turns(settings, reward.outcome, pages, turn_adv))
            literal = set(trajectory.pruned_turns(settings, reward.outcome, pages))
            counts += PruneCounts(len(dropped), len(literal - dropped))
            for sample, adv in zip(trajectory.turns, turn_adv):
                keep = 0.0 if sample.turn in dropped else 1.0
                samples.append(sample)
                advantages.append(adv)
                masks.append(torch.full((1, len(sample.response_ids)), keep, dtype=torch.float32))
        return samples, torch.tensor(advantages, dtype=torch.float32), masks, counts

    def sft_on_turns(self, turns: list[Trajectory], epochs: int, lr: float, batch_size: int) -> list[dict[str, Any]]:
        """Warm start on recorded turns (token-mean NLL of each turn's response, its images in the forward)."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        history = []
        order = list(range(len(turns)))
        for epoch in range(epochs):
            self.rng.shuffle(order)
            for start in range(0, len(order), batch_size):
                batch = [turns[i] for i in order[start:start + batch_size]]  # SFTSample's fields, duck-typed
                loss, grad_norm = self._sft_update(batch)  # type: ignore[arg-type]
                history.append({"epoch": epoch, "loss": loss, "grad_norm": grad_norm})
        for group in self.optimizer.param_groups:
            group["lr"] = self.config.lr
        self.optimizer.state.clear()
        self.sft_done = True
        return history
