"""Many episodes at once → trajectories (tokens, masks, logprobs, images, turn records, step graph).

The same code feeds the local trainer (`vrag_rl.training.train`) and the verl agent loop: it drives the one
agent loop (`vrag_rl.vrag.loop.Episode`) with a `TokenRecordingPolicy` per episode.
"""
from vrag_rl.training.rollout.runner import RolloutTask, rollout_batch, rollout_group
from vrag_rl.training.rollout.trajectory import Trajectory, model_inputs

__all__ = ["RolloutTask", "Trajectory", "model_inputs", "rollout_batch", "rollout_group"]
