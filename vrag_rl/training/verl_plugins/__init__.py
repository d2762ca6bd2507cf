"""Thin adapters that plug the project into verl 0.9.1 through its own extension points (no fork).

Importing this package registers, in the importing process:
- the agent loop `vrag_agent` (`agent_loop.VRAGAgentLoop`) in verl's agent-loop registry;
- the agent loops of the installed agent plugins (`vrag_rl.agent.plugins`): `vimrag_agent`
  (`vimrag.verl_agent_loop.VimRAGAgentLoop`: VimRAG, one row per model call, v1 trainer);
- the advantage estimator `ggpo` (`advantage.compute_ggpo_advantage`) with `register_adv_est`.
The configs set `actor_rollout_ref.model.external_lib: vrag_rl.training.verl_plugins`, which verl imports in
every process that builds the model config (trainer driver, agent-loop workers, actor workers), so
the names resolve wherever verl looks them up. The reward function for verl's reward workers is the
file `reward.py` (`reward.custom_reward_function.path`), loaded by verl by path.
"""
from typing import Any

from vrag_rl.agent.plugins import agent_plugins
from vrag_rl.training.verl_plugins import advantage, agent_loop  # noqa: F401  (registration side effects)
from vrag_rl.training.verl_plugins.agent_loop import VRAGAgentLoop
from vrag_rl.training.verl_plugins.settings import PluginSettings, PluginSettingsError, plugin_settings

for _plugin in agent_plugins().values():
    if _plugin.register_verl is not None:
        _plugin.register_verl()

__all__ = ["PluginSettings", "PluginSettingsError", "VRAGAgentLoop", "plugin_settings"]


def __getattr__(name: str) -> Any:
    """`VimRAGAgentLoop` was exported here before VimRAG's loop moved to `vimrag.verl_agent_loop`."""
    if name == "VimRAGAgentLoop":
        from vrag_rl._moved import moved

        return moved("vrag_rl.training.verl_plugins.VimRAGAgentLoop", "vimrag.verl_agent_loop").VimRAGAgentLoop
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
