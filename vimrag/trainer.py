"""The local trainer for the VimRAG agent: the same `LocalTrainer` (objective, KL, checkpoints, metrics), with
VimRAG's rollout environment and its step samples.

What changes against VRAG, and only that (`VimRAGTrainer` overrides two methods of `LocalTrainer`):
- rollouts: `vimrag.rollout.rollout_vim_batch` — the demo's `VimEpisode` recorded one sample
  per model call, within the configured prompt length (`VimRAGTrainingSettings.max_prompt_length`);
- samples: the loss runs over every *step* of every trajectory (each step a sequence with its own prompt);
  advantages are GRPO's, normalised over the group's *trajectories* and given to each of their steps
  (`vrag_rl.training.algos.ggpo_memory.trajectory_advantages`, the rule verl's v1 trainer applies to multi-output
  agent loops); GGPO drops the steps with μ_t = 1 on the memory graph (`VimTrajectory.pruned_steps`) and
  optimises GSPO's sequence ratio per step ("seq-mean-token-mean" over the step samples, as verl's actor
  does with one row per step); `step_credit: gigpo` adds the GiGPO-style step-level advantage
  (`vrag_rl.training.algos.gigpo`) to the episode-level one.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch

from vimrag.rollout import VimTrajectory, energy_for_prompt_length
from vrag_rl.training.algos.ggpo_memory import trajectory_advantages
from vrag_rl.training.algos.gigpo import combine, gigpo_step_advantages
from vrag_rl.training.rewards import RewardBreakdown
from vrag_rl.training.rollout.trajectory import Trajectory
from vrag_rl.training.train.config import TrainConfig
from vrag_rl.training.train.trainer import LocalTrainer

STEP_CREDITS = ("none", "gigpo")


@dataclass(frozen=True)
class VimRAGTrainingSettings:
    """The `agent_training:` section of a local run config with agent_type: vimrag."""

    step_credit: str = "none"  # "gigpo": add the GiGPO-style step-level advantage
    gigpo_gamma: float = 0.95  # discount of the outcome back to earlier steps
    gigpo_weight: float = 1.0  # ω in A = A_episode + ω·A_step
    max_prompt_length: int | None = None  # a step's prompt never exceeds it (None: no limit)
    text_tokens: int = 0  # with max_prompt_length: the text a step's prompt may hold (sizes the memory buffer)

    def __post_init__(self) -> None:
        if self.step_credit not in STEP_CREDITS:
            raise ValueError(f"agent_training.step_credit must be one of {STEP_CREDITS}, got {self.step_credit!r}")
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

    def step_advantages(self, trajectories: list[VimTrajectory], rewards: list[RewardBreakdown]) -> list[list[float]]:
        """Per trajectory, per step: the episode advantage (trajectory-normalised GRPO) plus, with
        `step_credit: gigpo`, ω times the step-level advantage within the step's anchor-state group."""
        totals = [r.total for r in rewards]
        groups = [t.group_id for t in trajectories]
        episode = trajectory_advantages(totals, groups, [len(t.steps) for t in trajectories],
                                        norm_by_std=self.config.norm_adv_by_std)
        if self.vim_settings.step_credit == "gigpo":
            step = gigpo_step_advantages([t.state_keys() for t in trajectories], totals, groups,
                                         gamma=self.vim_settings.gigpo_gamma, norm_by_std=self.config.norm_adv_by_std)
            return combine(episode, step, self.vim_settings.gigpo_weight)
        return episode

    def _training_samples(self, trajectories: list[Any], rewards: list[RewardBreakdown]) -> tuple[
            list[Trajectory], torch.Tensor, list[torch.Tensor], int]:
        settings = self.config.algorithm_settings()
        per_step = self.step_advantages(trajectories, rewards)
        samples: list[Trajectory] = []
        advantages: list[float] = []
        masks: list[torch.Tensor] = []
        pruned = 0
        for trajectory, reward, step_adv in zip(trajectories, rewards, per_step):
            dropped = set(trajectory.pruned_steps(settings, reward.outcome,
                                                  trajectory.extra["reference"].reference_pages))
            pruned += len(dropped)
            for sample, adv in zip(trajectory.steps, step_adv):
                keep = 0.0 if sample.step in dropped else 1.0
                samples.append(sample)
                advantages.append(adv)
                masks.append(torch.full((1, len(sample.response_ids)), keep, dtype=torch.float32))
        return samples, torch.tensor(advantages, dtype=torch.float32), masks, pruned

    def sft_on_steps(self, steps: list[Trajectory], epochs: int, lr: float, batch_size: int) -> list[dict[str, Any]]:
        """Warm start on recorded steps (token-mean NLL of each step's response, its images in the forward)."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        history = []
        order = list(range(len(steps)))
        for epoch in range(epochs):
            self.rng.shuffle(order)
            for start in range(0, len(order), batch_size):
                batch = [steps[i] for i in order[start:start + batch_size]]  # SFTSample's fields, duck-typed
                loss, grad_norm = self._sft_update(batch)  # type: ignore[arg-type]
                history.append({"epoch": epoch, "loss": loss, "grad_norm": grad_norm})
        for group in self.optimizer.param_groups:
            group["lr"] = self.config.lr
        self.optimizer.state.clear()
        self.sft_done = True
        return history
