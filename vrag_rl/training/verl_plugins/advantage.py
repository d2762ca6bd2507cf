"""`algorithm.adv_estimator=ggpo`: GGPO's advantage, registered with verl's `register_adv_est`.

verl hands a custom estimator only tensors (`token_level_rewards`, `response_mask`, `index`,
`config`), never the credit graph (reference §2, the `compute_advantage` caveat). So GGPO is split
where the information lives: the `vrag_agent` loop, which has the graph and the reward, zeroes the
pruned turns in `response_mask` (the (1 − μ) factor); this estimator is the group-relative outcome
advantage (`vrag_rl.training.algos.grpo_advantages`, equal to verl's GRPO) broadcast over that mask. verl's
policy loss, KL and entropy all read the same `response_mask`, so pruned turns get no gradient.
The per-segment ratio of the paper's GSPO variant has no tensor route into verl's actor: the
configs use verl's sequence-level `gspo` loss over the unpruned tokens (configs/verl/parts/ggpo.yaml).
"""
from __future__ import annotations

from typing import Any

import torch
from verl.trainer.ppo.core_algos import register_adv_est

from vrag_rl.training.algos import grpo_advantages


@register_adv_est("ggpo")
def compute_ggpo_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                           epsilon: float = 1e-6, config: Any = None,
                           **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), both (batch, response_length), zero wherever `response_mask` is 0."""
    if index is None:
        raise ValueError("ggpo needs the group ids (uid) of the batch, as GRPO does")
    norm = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
    scores = token_level_rewards.sum(dim=-1)
    advantages = grpo_advantages(scores, list(index), epsilon=epsilon, norm_by_std=norm)
    advantages = advantages.unsqueeze(-1) * response_mask
    return advantages, advantages
