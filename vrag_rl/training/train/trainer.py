"""The local GRPO / GGPO trainer (one machine, CPU or one GPU) on transformers + torch.

Why not TRL: TRL 1.16's `GRPOTrainer` (which fits beside transformers 5.10 and has an experimental
`rollout_func` hook and an `env_mask`) was checked first. It cannot carry this agent's trajectories:
- with `rollout_func`, the images produced *during* the rollout (every retrieved page and crop) are
  dropped: the training forward only receives the dataset's prompt images (`images = dataset_images`
  in `_generate_and_score_completions`), so the policy would be trained blind on its observations and
  the image-token count would not match the pixels;
- its sequence-level importance ratio (`importance_sampling_level="sequence"`) is one ratio per
  whole completion, not one per step/segment (GGPO's paper form; the objective now used here is
  verl's sequence-level GSPO, so this point alone would no longer rule TRL out);
- the loss mask is fixed before rewards and advantages are known, while GGPO's prune mask μ depends
  on the reward (r = 1 prunes dead ends, r = 0 prunes evidence-finding steps) and on the credit graph,
  which TRL has no place for;
- its built-in multi-turn loop parses OpenAI-style tool calls through the chat template's response
  schema, not VRAG's `<search>` / `<bbox>` / `<answer>` protocol, so the shared `Episode` loop could
  only be plugged in through `rollout_func` — which brings back the first point.
So this is a small trainer of its own, built from the project's tested parts: rollouts through the
one agent loop with the token recorder (`vrag_rl.training.rollout`), the composite reward (`vrag_rl.training.rewards`),
GRPO advantages and the GGPO mask (`vrag_rl.training.algos`), and PPO-clip / GSPO / low_var_kl losses.

One step: sample `questions_per_step` questions; roll out `rollouts_per_question` episodes of each,
all concurrently, with the in-process policy; score them; compute group advantages; run the loss
over the mask-1 tokens (the model's own), one trajectory per micro-batch with the images in the
forward pass, accumulating gradients with the whole batch's token / segment count as denominator
(so the accumulated loss equals the full-batch loss); clip; one optimiser step per pass over the batch
(`ppo_epochs` passes; `old_log_prob` is the log-prob under the policy that sampled, taken in the
first pass, so later passes are clipped PPO updates; with one pass the ratio is 1, verl's on-policy
case).
The loss is `vrag_rl.training.algos.policy_objective`, verl 0.9.1's actor loss (tested equal to its `ppo_loss`
on the same batch), with the step's batch as verl's mini-batch:
- GRPO: token-level PPO-clip, "token-mean" over the batch's loss-mask tokens.
- GGPO: the GGPO prune mask zeroing pruned turns (`Trajectory.pruned_turns`, the same call as the verl
  agent loop, here sign-gated by the advantage: `vrag_rl.training.algos.ggpo`), GSPO's sequence ratio over the
  kept tokens, "seq-mean-token-mean" divided by the batch's number of trajectories, fully pruned ones included
  (as verl's `global_batch_size`). GSPO: the same objective with nothing pruned.
- KL: low_var_kl to a frozen reference policy (the policy as RL starts — after any SFT warm start —
  or, with LoRA, the base model with adapters disabled), coefficient `kl_coef`, aggregated like the
  policy loss (as verl's `use_kl_loss`); entropy likewise with `entropy_coef`.
"""
from __future__ import annotations

import asyncio
import copy
import math
import random
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from tqdm.auto import tqdm

from search_engine.client import SearchClient
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policies.local_transformers import LocalTransformersGenerate
from vrag_rl.training.algos import grpo_advantages, policy_objective
from vrag_rl.training.rewards import RewardBreakdown, score_episode
from vrag_rl.training.rollout import Trajectory
from vrag_rl.training.train.config import TrainConfig
from vrag_rl.training.train.data import load_tasks, sample_batch
from vrag_rl.training.train.forward import response_logprobs
from vrag_rl.training.train.metrics import MetricsLog
from vrag_rl.training.train.sft import SFTSample, load_sft_file, record_to_sample

ANSWERED = ("answered", "forced_answer")


@dataclass(frozen=True)
class PruneCounts:
    """What the prune mask did to a step's turns, for the metrics: `pruned` left the loss; `spared` are the turns
    the paper's literal mask would have pruned that the sign gate kept (their gradient had the other sign)."""

    pruned: int = 0
    spared: int = 0

    def __add__(self, other: PruneCounts) -> PruneCounts:
        return PruneCounts(self.pruned + other.pruned, self.spared + other.spared)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class LocalTrainer:
    """GRPO / GGPO (and SFT) on an in-process transformers VLM; see the module docstring."""

    def __init__(self, config: TrainConfig, progress: bool = True):
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.config = config
        self.progress = progress
        self.out = Path(config.output_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        seed_everything(config.seed)
        self.device = config.device
        dtype = getattr(torch, config.dtype)
        try:
            self.processor = AutoProcessor.from_pretrained(config.model)
            # Any: an Auto class resolves to the checkpoint's own model class only at run time
            model = cast(Any, AutoModelForImageTextToText.from_pretrained(config.model, dtype=dtype))
            self.model = model.to(self.device)
        except (OSError, ValueError) as exc:
            raise ValueError(f"could not load the policy model {config.model!r}: {exc}") from exc
        if config.lora is not None:
            from peft import LoraConfig, get_peft_model

            lora = config.lora
            self.model = get_peft_model(self.model, LoraConfig(r=lora.r, lora_alpha=lora.alpha,
                                                               lora_dropout=lora.dropout,
                                                               target_modules=list(lora.target_modules)))
        if config.freeze_vision:
            for name, param in self.model.named_parameters():
                if ".visual." in f".{name}" or name.startswith("visual."):
                    param.requires_grad_(False)
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        if not self.trainable:
            raise ValueError("nothing to train: every parameter is frozen")
        self.optimizer = torch.optim.AdamW(self.trainable, lr=config.lr, weight_decay=config.weight_decay)
        self.reference: Any = None  # set when RL starts (after SFT)
        self.generate = LocalTransformersGenerate(self.model, self.processor, self.device,
                                                  stop_strings=config.stop_strings)
        self.tasks = load_tasks(config.tasks)
        self.rollout = config.plugin().load("rollout")  # the agent's episodes as trajectories
        self.agent_config = config.agent_config()
        self.prompts = config.prompts_config()
        self.reward_config = config.reward_config()
        self.rng = random.Random(config.seed)
        self.step = 0
        self.sft_done = config.sft.data is None
        self.skipped_steps = 0
        self.pages = PageImageStore()
        self.metrics = MetricsLog(self.out / "metrics.jsonl")
        self.sft_metrics = MetricsLog(self.out / "sft_metrics.jsonl")
        self.episodes_log = MetricsLog(self.out / "episodes.jsonl")  # every rollout of every step, no pixels

    # ---- SFT ---------------------------------------------------------------------------------------------------
    def run_sft(self) -> list[dict[str, Any]]:
        """Train on the SFT file's model turns (token-mean NLL, images in the forward); returns per-step metrics."""
        cfg = self.config.sft
        if cfg.data is None:
            return []
        path = Path(cfg.data)
        records = load_sft_file(path)
        samples = [record_to_sample(r, self.processor, path.parent, i) for i, r in enumerate(records)]
        for group in self.optimizer.param_groups:
            group["lr"] = cfg.lr
        history = []
        order = list(range(len(samples)))
        total = cfg.epochs * ((len(samples) + cfg.batch_size - 1) // cfg.batch_size)
        bar = tqdm(total=total, desc="sft", disable=not self.progress)
        step = 0
        for _epoch in range(cfg.epochs):
            self.rng.shuffle(order)
            for start in range(0, len(order), cfg.batch_size):
                batch = [samples[i] for i in order[start:start + cfg.batch_size]]
                loss, grad_norm = self._sft_update(batch)
                step += 1
                record = {"step": step, "loss": loss, "grad_norm": grad_norm}
                self.sft_metrics.append(record)
                history.append(record)
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}")
        bar.close()
        for group in self.optimizer.param_groups:
            group["lr"] = self.config.lr
        self.optimizer.state.clear()  # RL starts with fresh Adam moments
        self.sft_done = True
        return history

    def _sft_update(self, batch: list[SFTSample]) -> tuple[float, float]:
        self.model.train()
        tokens = sum(sum(s.response_mask) for s in batch)
        total = 0.0
        for sample in batch:
            logprobs, _ = response_logprobs(self.model, self.processor, sample)
            mask = torch.tensor([sample.response_mask], dtype=logprobs.dtype, device=logprobs.device)
            loss = -(logprobs * mask).sum() / max(tokens, 1)
            loss.backward()
            total += float(loss.detach())
        grad_norm = self._apply_gradients()
        return total, grad_norm

    def _apply_gradients(self) -> float:
        """Clip and step; a non-finite gradient norm skips the step (counted, warned), never corrupts the weights."""
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.trainable, self.config.grad_clip))
        if math.isfinite(grad_norm):
            self.optimizer.step()
        else:
            self.skipped_steps += 1
            warnings.warn(f"non-finite gradient norm ({grad_norm}); optimiser step skipped", stacklevel=2)
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    # ---- reference policy ---------------------------------------------------------------------------------------
    def _ensure_reference(self) -> None:
        if self.config.kl_coef <= 0 or self.config.lora is not None or self.reference is not None:
            return
        path = self.out / "reference.pt"
        self.reference = copy.deepcopy(self.model).eval()
        if path.exists():
            self.reference.load_state_dict(torch.load(path, weights_only=True))
        else:
            torch.save(self.reference.state_dict(), path)
        for p in self.reference.parameters():
            p.requires_grad_(False)

    def _reference_logprobs(self, trajectory: Trajectory) -> torch.Tensor | None:
        if self.config.kl_coef <= 0:
            return None
        with torch.no_grad():
            if self.config.lora is not None:
                with self.model.disable_adapter():
                    return response_logprobs(self.model, self.processor, trajectory, self._temperature)[0]
            return response_logprobs(self.reference, self.processor, trajectory, self._temperature)[0]

    @property
    def _temperature(self) -> float:
        return self.agent_config.temperature if self.agent_config.temperature > 0 else 1.0

    # ---- RL ------------------------------------------------------------------------------------------------------
    def rollout_options(self) -> dict[str, Any]:
        """Keyword arguments the agent's rollout takes beyond the common ones (a trainer hook; none here)."""
        return {}

    async def _rollouts(self, step: int) -> tuple[list[Any], list[RewardBreakdown]]:
        tasks = [t.rollout_task() for t in sample_batch(self.tasks, self.config.questions_per_step, self.rng)]
        search = SearchClient(self.config.search_url)
        try:
            trajectories = await self.rollout(tasks, self.config.rollouts_per_question, self.processor, self.generate,
                                              search, self.agent_config, self.prompts,
                                              seed=self.config.seed * 1_000_003 + step, pages=self.pages,
                                              **self.rollout_options())
        finally:
            await search.aclose()
        rewards = await asyncio.gather(*(score_episode(t.result, t.extra["reference"], self.reward_config)
                                         for t in trajectories))
        for trajectory, reward in zip(trajectories, rewards):
            trajectory.reward = reward
        return trajectories, list(rewards)

    def _training_samples(self, trajectories: list[Any], rewards: list[RewardBreakdown]) -> tuple[
            list[Trajectory], torch.Tensor, list[torch.Tensor], PruneCounts]:
        """(the sequences the loss runs over, their advantages, their loss masks, what the prune mask did).

        VRAG: one sequence per trajectory, GRPO advantages over the group's trajectories. A rebuilt-context agent
        (`vimrag.trainer`) overrides this: one sequence per step, the trajectory's advantage.
        """
        totals = torch.tensor([r.total for r in rewards], dtype=torch.float32)
        advantages = grpo_advantages(totals, [t.group_id for t in trajectories],
                                     norm_by_std=self.config.norm_adv_by_std)
        masks, counts = self._loss_masks(trajectories, [float(a) for a in advantages])
        return trajectories, advantages, masks, counts

    def _loss_masks(self, trajectories: list[Trajectory],
                    advantages: list[float]) -> tuple[list[torch.Tensor], PruneCounts]:
        """Per trajectory: the loss mask (model tokens minus the algorithm's pruned turns, sign-gated by the
        trajectory's advantage); and the counts of pruned and gate-spared turns."""
        settings = self.config.algorithm_settings()
        masks, counts = [], PruneCounts()
        for t, advantage in zip(trajectories, advantages, strict=True):
            pages = t.extra["reference"].reference_pages
            pruned_turns = t.pruned_turns(settings, t.reward.outcome, pages, advantage)
            literal = t.pruned_turns(settings, t.reward.outcome, pages)
            counts += PruneCounts(len(pruned_turns), len(set(literal) - set(pruned_turns)))
            masks.append(torch.tensor([t.loss_mask(pruned_turns)], dtype=torch.float32))
        return masks, counts

    def rl_step(self) -> dict[str, Any]:
        """One rollout + update step; returns its metrics record."""
        cfg = self.config
        self._ensure_reference()
        started = time.perf_counter()
        trajectories, rewards = asyncio.run(self._rollouts(self.step))
        rollout_s = time.perf_counter() - started
        samples, advantages, masks, counts = self._training_samples(trajectories, rewards)
        settings = cfg.algorithm_settings()
        token_den = max(float(sum(m.sum() for m in masks)), 1.0)
        sequence_den = float(len(samples))  # verl's global_batch_size: every sequence, fully pruned included
        started = time.perf_counter()
        self.model.train()
        sums = {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clipfrac": 0.0, "logprob_gap": 0.0}
        olds: dict[int, torch.Tensor] = {}
        refs: dict[int, torch.Tensor | None] = {}
        grad_norms: list[float] = []
        for epoch in range(cfg.ppo_epochs):
            last = epoch == cfg.ppo_epochs - 1
            for i, (t, adv, mask) in enumerate(zip(samples, advantages, masks)):
                if mask.sum() == 0:
                    continue
                logprobs, entropy = response_logprobs(self.model, self.processor, t, self._temperature,
                                                      with_entropy=True)
                if epoch == 0:  # the policy that sampled (up to numerics): PPO's pi_old for every epoch
                    olds[i] = logprobs.detach()
                    refs[i] = self._reference_logprobs(t)
                mask = mask.to(logprobs.device)
                adv_t = torch.full_like(logprobs, float(adv))
                ref_i = refs[i]
                ref = ref_i.to(logprobs.device) if ref_i is not None else None
                loss, pg_metrics = policy_objective(
                    logprobs, olds[i], adv_t, mask, settings, batch_tokens=token_den, batch_sequences=sequence_den,
                    ref_log_prob=ref, kl_coef=cfg.kl_coef, entropy=entropy, entropy_coef=cfg.entropy_coef,
                    clip_low=cfg.clip_low, clip_high=cfg.clip_high)
                loss.backward()
                if epoch == 0:  # metrics of the policy that produced the batch
                    sums["loss"] += float(loss.detach())
                    sums["kl"] += pg_metrics["kl_sum"]
                    sums["entropy"] += pg_metrics["entropy_sum"]
                    model_pos = torch.tensor([t.response_mask], device=logprobs.device) > 0
                    recorded = torch.tensor([t.response_logprobs], device=logprobs.device)
                    gap = (logprobs.detach() - recorded).abs()[model_pos]
                    sums["logprob_gap"] = max(sums["logprob_gap"], float(gap.max()) if gap.numel() else 0.0)
                if last:
                    sums["clipfrac"] += pg_metrics["clipfrac"] * float(mask.sum())
            grad_norms.append(self._apply_gradients())
        self.step += 1
        for t in trajectories:
            self.episodes_log.append({"step": self.step, **t.summary()})
        record = self._step_record(trajectories, rewards, advantages, sums, token_den, counts.pruned)
        model_tokens = max(float(sum(sum(s.response_mask) for s in samples)), 1.0)
        record.update(
            # the share of the model's tokens in the loss, and of those with a non-zero advantage (a group whose
            # rewards are all equal has none): what the prune mask and the reward leave to learn from
            kept_tokens=float(sum(m.sum() for m in masks)) / model_tokens,
            signal_tokens=float(sum(m.sum() for m, a in zip(masks, advantages) if float(a) != 0.0)) / model_tokens,
            spared_turns=counts.spared / max(sum(len(t.turn_records) for t in trajectories), 1),
            grad_norm=grad_norms[-1] if grad_norms else 0.0, grad_norm_first=grad_norms[0] if grad_norms else 0.0,
            skipped_steps=self.skipped_steps, rollout_s=round(rollout_s, 3),
            train_s=round(time.perf_counter() - started, 3))
        return record

    def _step_record(self, trajectories: list[Trajectory], rewards: list[RewardBreakdown], advantages: torch.Tensor,
                     sums: dict[str, float], token_den: float, pruned: int) -> dict[str, Any]:
        n = len(trajectories)
        turns = [r for t in trajectories for r in t.turn_records]

        def mean(values: list[float]) -> float:
            return float(sum(values) / len(values)) if values else 0.0

        return {
            "step": self.step, "algorithm": self.config.algorithm, "episodes": n,
            "reward": mean([r.total for r in rewards]),
            "outcome": mean([r.outcome for r in rewards]),
            "format": mean([r.format for r in rewards]),
            "retrieval": mean([r.retrieval for r in rewards]),
            "accuracy": mean([float(self.config.algorithm_settings().is_correct(r.outcome)) for r in rewards]),
            "answer_rate": mean([float(t.result.status in ANSWERED) for t in trajectories]),
            "invalid_action_rate": mean([float(not r.valid) for r in turns]),
            "turns": mean([t.num_turns for t in trajectories]),
            "model_tokens": mean([t.num_model_tokens for t in trajectories]),
            "response_tokens": mean([len(t.response_ids) for t in trajectories]),
            "images": mean([len(t.images) for t in trajectories]),
            "kl": sums["kl"] / token_den,
            "entropy": sums["entropy"] / token_den,
            "loss": sums["loss"],
            "clipfrac": sums["clipfrac"] / token_den,
            "logprob_gap": sums["logprob_gap"],
            "adv_abs": float(advantages.abs().mean()),
            "pruned_turns": pruned / max(len(turns), 1),
            "statuses": {s: sum(t.result.status == s for t in trajectories) for s in
                         sorted({t.result.status for t in trajectories})},
            "sample": trajectories[0].result.turn_records[-1].reply[:120] if trajectories[0].turn_records else "",
        }

    # ---- the run ----------------------------------------------------------------------------------------------------
    def train(self) -> list[dict[str, Any]]:
        """SFT (unless done), then RL to `steps`, resuming from the latest checkpoint; returns the RL metrics."""
        self.resume()
        if not self.sft_done:
            self.run_sft()
            self.save_checkpoint()
        bar = tqdm(total=self.config.steps, initial=self.step, desc=self.config.algorithm, disable=not self.progress)
        while self.step < self.config.steps:
            record = self.rl_step()
            self.metrics.append(record)
            bar.update(1)
            bar.set_postfix(reward=f"{record['reward']:.3f}", acc=f"{record['accuracy']:.2f}")
            if self.step % self.config.checkpoint_every == 0 or self.step == self.config.steps:
                self.save_checkpoint()
        bar.close()
        return self.metrics.read()

    # ---- checkpoints ------------------------------------------------------------------------------------------------
    def _checkpoint_dir(self, step: int) -> Path:
        return self.out / "checkpoints" / f"step_{step:06d}"

    def save_checkpoint(self) -> Path:
        """Trainable weights, optimiser, every RNG, the step: enough to continue bit-for-bit."""
        final = self._checkpoint_dir(self.step)
        tmp = final.with_name(final.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        weights = {name: p.detach().cpu() for name, p in self.model.named_parameters() if p.requires_grad}
        torch.save(weights, tmp / "trainable.pt")
        torch.save({"optimizer": self.optimizer.state_dict(), "step": self.step, "sft_done": self.sft_done,
                    "python_rng": self.rng.getstate(), "global_python_rng": random.getstate(),
                    "numpy_rng": np.random.get_state(), "torch_rng": torch.get_rng_state()}, tmp / "state.pt")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        kept = sorted((self.out / "checkpoints").glob("step_*[0-9]"))
        for old in kept[:-max(self.config.keep_checkpoints, 1)]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def latest_checkpoint(self) -> Path | None:
        found = sorted((self.out / "checkpoints").glob("step_*[0-9]"))
        return found[-1] if found else None

    def resume(self) -> bool:
        """Load the latest checkpoint if there is one; metrics lines beyond it are dropped."""
        path = self.latest_checkpoint()
        if path is None:
            return False
        weights = torch.load(path / "trainable.pt", weights_only=True)
        params = dict(self.model.named_parameters())
        missing = [n for n in weights if n not in params]
        if missing:
            raise ValueError(f"checkpoint {path} does not fit this model: unknown parameters {missing[:3]}")
        with torch.no_grad():
            for name, value in weights.items():
                params[name].copy_(value)
        state = torch.load(path / "state.pt", weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.sft_done = state["step"], state["sft_done"]
        self.rng.setstate(state["python_rng"])
        random.setstate(state["global_python_rng"])
        np.random.set_state(state["numpy_rng"])
        torch.set_rng_state(state["torch_rng"])
        self.metrics.truncate_after(self.step)
        self.episodes_log.truncate_after(self.step)
        return True
