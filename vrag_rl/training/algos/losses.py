"""Policy losses: PPO-clip at token level (GRPO), sequence-level ratios per segment (GSPO, which GGPO
builds on), low-variance KL to a reference policy, and entropy.

Every tensor is (batch, response_length); `mask` is 1 on the tokens that enter the loss (the model's
own tokens, minus GGPO-pruned steps). The formulas are verl 0.9.1's (`compute_policy_loss_vanilla`,
`compute_policy_loss_gspo`, `kl_penalty(low_var_kl)`, `entropy_from_logits`) — tested equal to them —
with one extension verl lacks: GSPO's sequence ratio taken per *segment* (per model turn / graph
step), as GGPO's per-step objective needs. `denominator` makes gradient accumulation exact: pass the
whole batch's token (or sequence / segment) count so micro-batch losses sum to the batch loss.
"""
from __future__ import annotations

from typing import Any

import torch


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1)


def _segments(mask: torch.Tensor, segment_ids: torch.Tensor | None) -> torch.Tensor:
    """Segment id per token (one segment per row when none are given); -1 outside the mask."""
    if segment_ids is None:
        rows = torch.arange(mask.shape[0], device=mask.device).unsqueeze(-1).expand_as(mask)
        segment_ids = rows
    else:
        # make ids unique across rows: row * (max + 1) + id
        width = int(segment_ids.max().item()) + 1 if segment_ids.numel() else 1
        rows = torch.arange(mask.shape[0], device=mask.device).unsqueeze(-1)
        segment_ids = torch.where(segment_ids >= 0, rows * max(width, 1) + segment_ids, segment_ids)
    return torch.where(mask > 0, segment_ids, torch.full_like(segment_ids, -1))


def _segment_mean(values: torch.Tensor, seg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token mean of `values` over its segment, plus the unique segment ids and their sums/counts."""
    valid = seg >= 0
    ids, inverse = torch.unique(seg[valid], return_inverse=True)
    sums = torch.zeros(len(ids), dtype=values.dtype, device=values.device).index_add(0, inverse, values[valid])
    counts = torch.zeros(len(ids), dtype=values.dtype, device=values.device).index_add(
        0, inverse, torch.ones_like(values[valid]))
    per_token = torch.zeros_like(values)
    per_token[valid] = (sums / counts)[inverse]
    return per_token, sums, counts


def aggregate(loss_mat: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean",
              segment_ids: torch.Tensor | None = None, denominator: float | None = None) -> torch.Tensor:
    """Reduce a per-token loss to a scalar.

    - "token-mean": Σ loss·mask / (tokens in the batch) — verl's default for PPO/GRPO;
    - "seq-mean-token-mean": mean over sequences of each sequence's token mean — GSPO's;
    - "segment-mean-token-mean": mean over segments (model turns / steps) of each segment's token mean —
      the GGPO paper's per-step form. verl's actor has no route for it, so the trainers' objective
      (`vrag_rl.training.algos.objective`) uses "seq-mean-token-mean"; this mode stays for experiments.
    `denominator` replaces the local count (tokens / sequences / segments) for gradient accumulation.
    """
    mask = mask.to(loss_mat.dtype)
    if mode == "token-mean":
        return (loss_mat * mask).sum() / (denominator if denominator is not None else mask.sum().clamp(min=1))
    if mode in ("seq-mean-token-mean", "segment-mean-token-mean"):
        seg = _segments(mask, segment_ids if mode == "segment-mean-token-mean" else None)
        _, sums, counts = _segment_mean(loss_mat, seg)
        total = (sums / counts).sum()
        return total / (denominator if denominator is not None else max(len(counts), 1))
    raise ValueError(f"unknown aggregation mode {mode!r}")


def ppo_clip_loss(log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                  clip_low: float = 0.2, clip_high: float = 0.2, clip_ratio_c: float = 3.0, level: str = "token",
                  segment_ids: torch.Tensor | None = None, agg: str | None = None,
                  denominator: float | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate loss. Returns (loss, metrics: clipfrac, ppo_kl).

    - level "token" (PPO / GRPO): r_t = π/π_old per token, loss_t = max(−A·r_t, −A·clip(r_t)), with
      dual-clip (−A·clip_ratio_c bound) for negative advantages, as verl's vanilla loss.
    - level "sequence" (GSPO): one ratio per segment, s = exp(mean_t∈seg log π/π_old), applied to every
      token of the segment through s·π_t/sg(π_t) (so each token still gets its own gradient); segments
      are `segment_ids` (e.g. the model turn of each token) or whole sequences when None (verl's GSPO).
    `agg` defaults to "token-mean" for token level and "seq-mean-token-mean" / "segment-mean-token-mean"
    for sequence level.
    """
    mask_f = mask.to(log_prob.dtype)
    negative_approx_kl = log_prob - old_log_prob
    metrics: dict[str, Any] = {}
    if level == "token":
        ratio = torch.exp(torch.clamp(negative_approx_kl, min=-20.0, max=20.0))
        losses1 = -advantages * ratio
        losses2 = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
        clipped = torch.maximum(losses1, losses2)
        losses3 = -advantages * clip_ratio_c
        losses = torch.where(advantages < 0, torch.minimum(losses3, clipped), clipped)
        agg = agg or "token-mean"
    elif level == "sequence":
        seg = _segments(mask_f, segment_ids)
        seg_mean, _, _ = _segment_mean(negative_approx_kl, seg)
        log_ratio = torch.clamp(log_prob - log_prob.detach() + seg_mean.detach(), max=10.0)
        ratio = torch.exp(log_ratio)
        losses1 = -advantages * ratio
        losses2 = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
        losses = torch.maximum(losses1, losses2)
        agg = agg or ("seq-mean-token-mean" if segment_ids is None else "segment-mean-token-mean")
    else:
        raise ValueError(f"level must be 'token' or 'sequence', not {level!r}")
    loss = aggregate(losses, mask_f, agg, segment_ids, denominator)
    metrics["clipfrac"] = float(_masked_mean(torch.gt(losses2, losses1).to(log_prob.dtype), mask_f))
    metrics["ppo_kl"] = float(_masked_mean(-negative_approx_kl.detach(), mask_f))
    return loss, metrics


def low_var_kl(log_prob: torch.Tensor, ref_log_prob: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(π‖π_ref) (Schulman 2020): r − log r − 1 with r = π_ref/π, clamped as verl."""
    kl = torch.clamp(ref_log_prob - log_prob, min=-20, max=20)
    return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Per-position entropy of the softmax over the last dimension: logsumexp(z) − Σ softmax(z)·z."""
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)
