"""Thin adapters that plug the project into verl 0.9.1 through its own extension points (no fork).

verl imports `vrag_rl.training.verl_plugins.register` (the configs' `actor_rollout_ref.model.external_lib`) in
every process that builds the model config (trainer driver, agent-loop workers, actor workers); that module
registers the advantage estimator `ggpo` and the verl agent loop of every installed agent plugin (`vrag_agent`,
`vimrag_agent`: `vrag_rl.agent.plugins`). This package itself registers nothing on import, so an agent's loop can
import the shared pieces (`episode_loop`, `generate`, `settings`, `reward`) without importing itself back.
The reward function for verl's reward workers is the file `reward.py` (`reward.custom_reward_function.path`),
loaded by verl by path.
"""
