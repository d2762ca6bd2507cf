"""Advantage estimators, policy losses and the one objective: small pure functions, tested against hand values
and verl."""
from vrag_rl.training.algos.ggpo import ggpo_node_mask, ggpo_turn_mask
from vrag_rl.training.algos.grpo import grpo_advantages
from vrag_rl.training.algos.losses import aggregate, entropy_from_logits, low_var_kl, ppo_clip_loss
from vrag_rl.training.algos.objective import policy_objective
from vrag_rl.training.algos.settings import (
    ALGORITHMS,
    AlgorithmSettings,
    AlgorithmSettingsError,
    GGPOSettings,
    algorithm_settings,
)

__all__ = ["ALGORITHMS", "AlgorithmSettings", "AlgorithmSettingsError", "GGPOSettings", "aggregate",
           "algorithm_settings", "entropy_from_logits", "ggpo_node_mask", "ggpo_turn_mask", "grpo_advantages",
           "low_var_kl", "policy_objective", "ppo_clip_loss"]
