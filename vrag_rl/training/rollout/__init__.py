"""Episodes as training data: the rollout task, the seed rule and the token trajectory every trainer reads.

Each agent records its own episodes (`AgentPlugin.rollout`, found by name in `vrag_rl.agent.plugins`) into
these types; the local trainer and the verl agent loops read them and nothing agent-specific.
"""
from vrag_rl.training.rollout.task import RolloutTask, episode_seed
from vrag_rl.training.rollout.trajectory import Trajectory, model_inputs

__all__ = ["RolloutTask", "Trajectory", "episode_seed", "model_inputs"]
