"""Thin adapters that plug the project into verl 0.9.1 through its own extension points (no fork).

Importing this package registers, in the importing process:
- the agent loop `vrag_agent` (`agent_loop.VRAGAgentLoop`) in verl's agent-loop registry;
- the agent loop `vimrag_agent` (`vimrag_agent_loop.VimRAGAgentLoop`: VimRAG, one row per model call, v1 trainer);
- the advantage estimator `ggpo` (`advantage.compute_ggpo_advantage`) with `register_adv_est`.
The configs set `actor_rollout_ref.model.external_lib: vrag_rl.verl_plugins`, which verl imports in
every process that builds the model config (trainer driver, agent-loop workers, actor workers), so
the names resolve wherever verl looks them up. The reward function for verl's reward workers is the
file `reward.py` (`reward.custom_reward_function.path`), loaded by verl by path.
"""
from vrag_rl.verl_plugins import advantage, agent_loop, vimrag_agent_loop  # noqa: F401  (registration side effects)
from vrag_rl.verl_plugins.agent_loop import VRAGAgentLoop
from vrag_rl.verl_plugins.settings import PluginSettings, PluginSettingsError, plugin_settings
from vrag_rl.verl_plugins.vimrag_agent_loop import VimRAGAgentLoop

__all__ = ["PluginSettings", "PluginSettingsError", "VRAGAgentLoop", "VimRAGAgentLoop", "plugin_settings"]
