"""The one training objective of GRPO and GGPO, for the local trainer, equal to verl 0.9.1's actor loss.

verl's actor (`verl.workers.utils.losses.ppo_loss`, called by both its v0 and v1 trainers) computes

    loss = agg(pg_losses) − entropy_coeff · agg(entropy) + kl_loss_coef · agg(low_var_kl)

with one aggregation mode for all three terms (`actor.loss_agg_mode`), where the trainer sets the
aggregation's denominators for the whole mini-batch: `batch_num_tokens` (the loss-mask tokens of the
mini-batch, for "token-mean") and `global_batch_size = ppo_mini_batch_size × rollout.n` (every
sequence of the mini-batch, for "seq-mean-token-mean"). So a sequence whose tokens are all pruned adds
nothing to the numerator but still counts in the denominator. (`agg_loss` divides by the sequences
with at least one kept token only when no `global_batch_size` is passed, i.e. when it is called
directly; the trainers always pass it.) The local trainer's step is one mini-batch, so it passes the
step's kept-token count and its number of trajectories, and gets verl's loss exactly — tested against
verl's own `ppo_loss` on the same batch.

- GRPO: PPO-clip per token (verl's "vanilla", dual clip for negative advantages), "token-mean";
- GGPO: GSPO's sequence-level ratio over the kept (unpruned) tokens (verl's "gspo"),
  "seq-mean-token-mean". The GGPO paper's per-step ratio has no tensor route into verl's actor; the
  local trainer optimises what the cluster does, so a local run predicts a cluster run.
"""
from __future__ import annotations

from typing import Any

import torch

from vrag_rl.training.algos.losses import aggregate, low_var_kl, ppo_clip_loss
from vrag_rl.training.algos.settings import AlgorithmSettings


def _level(settings: AlgorithmSettings) -> str:
    return {"vanilla": "token", "gspo": "sequence"}[settings.loss_mode]


def policy_objective(log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor,
                     mask: torch.Tensor, settings: AlgorithmSettings, *, batch_tokens: float,
                     batch_sequences: float, ref_log_prob: torch.Tensor | None = None, kl_coef: float = 0.0,
                     entropy: torch.Tensor | None = None, entropy_coef: float = 0.0, clip_low: float = 0.2,
                     clip_high: float = 0.2, clip_ratio_c: float = 3.0) -> tuple[torch.Tensor, dict[str, Any]]:
    """The loss of a (micro-)batch, (batch, response_length) tensors; `mask` is the loss mask (pruned turns 0).

    `batch_tokens` / `batch_sequences` are the whole mini-batch's kept tokens and sequences (all of them,
    fully pruned ones included): micro-batch losses then sum to the mini-batch loss, as in verl.
    Returns (loss, metrics) with the aggregated `pg_loss`, `kl_loss`, `entropy_loss` (floats), the
    masked sums `kl_sum` / `entropy_sum` (for token-mean logging), `clipfrac` and `ppo_kl`.
    """
    mode = settings.loss_agg_mode
    denominator = float(batch_tokens if mode == "token-mean" else batch_sequences)
    if denominator <= 0:
        raise ValueError(f"the mini-batch's {'tokens' if mode == 'token-mean' else 'sequences'} count must be > 0")
    mask = mask.to(log_prob.dtype)
    pg_loss, pg_metrics = ppo_clip_loss(log_prob, old_log_prob, advantages, mask, clip_low=clip_low,
                                        clip_high=clip_high, clip_ratio_c=clip_ratio_c, level=_level(settings),
                                        agg=mode, denominator=denominator)
    loss = pg_loss
    metrics: dict[str, Any] = {"pg_loss": float(pg_loss.detach()), **pg_metrics, "kl_loss": 0.0, "kl_sum": 0.0,
                               "entropy_loss": 0.0, "entropy_sum": 0.0}
    if entropy is not None:
        entropy_loss = aggregate(entropy, mask, mode, denominator=denominator)
        loss = loss - entropy_coef * entropy_loss
        metrics.update(entropy_loss=float(entropy_loss.detach()), entropy_sum=float((entropy * mask).sum().detach()))
    if ref_log_prob is not None:
        kl = low_var_kl(log_prob, ref_log_prob)
        kl_loss = aggregate(kl, mask, mode, denominator=denominator)
        loss = loss + kl_coef * kl_loss
        metrics.update(kl_loss=float(kl_loss.detach()), kl_sum=float((kl * mask).sum().detach()))
    return loss, metrics
