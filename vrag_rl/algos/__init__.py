"""Advantage estimators and policy losses: small pure functions, tested against hand values and verl."""
from vrag_rl.algos.ggpo import ggpo_step_mask, ggpo_turn_mask
from vrag_rl.algos.grpo import grpo_advantages
from vrag_rl.algos.losses import aggregate, entropy_from_logits, low_var_kl, ppo_clip_loss

__all__ = ["aggregate", "entropy_from_logits", "ggpo_step_mask", "ggpo_turn_mask", "grpo_advantages", "low_var_kl",
           "ppo_clip_loss"]
