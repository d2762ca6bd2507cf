"""Agents built on the kit plug into the generic rooms by name: the `vrag_rl.agents` entry points.

The trainer config (`agent_type`), the policy-server CLI (`--backend`) and verl's external library
(`vrag_rl.training.verl_plugins`) choose an agent by name. Importing the agent there would make the kit's own
package import every agent built on it (the arrow that ran back up from `vrag_rl` to `vimrag`); instead
each agent package declares an `AgentPlugin` under the entry-point group `vrag_rl.agents` in its
`pyproject.toml`, and these rooms look it up. The VRAG agent is the kit's own and needs no plugin.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINT_GROUP = "vrag_rl.agents"


@dataclass(frozen=True)
class AgentPlugin:
    """What the generic rooms need of an agent built on the kit.

    `config_type` / `prompts_type` build the agent's settings from a run config's `agent:` / `prompts:`
    sections; `stand_in` names its CPU stand-in policy backend for `vrag-policy serve --backend` and
    `stand_in_backend(search_url=...)` builds it; `register_verl()` registers its verl agent loop (called by
    `vrag_rl.training.verl_plugins` in every verl worker).
    """

    name: str
    config_type: type
    prompts_type: type
    stand_in: str | None = None
    stand_in_backend: Callable[..., Any] | None = None
    register_verl: Callable[[], None] | None = None


class UnknownAgentError(ValueError):
    """No installed agent plugin has that name; the message lists those that are."""


@functools.cache
def agent_plugins() -> dict[str, AgentPlugin]:
    """Every installed agent plugin by name (loaded once per process)."""
    plugins = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        plugin = point.load()
        if not isinstance(plugin, AgentPlugin):
            raise TypeError(f"entry point {point.name!r} ({point.value}) of {ENTRY_POINT_GROUP!r} is not an "
                            f"AgentPlugin but {type(plugin).__name__}")
        plugins[plugin.name] = plugin
    return plugins


def agent_plugin(name: str) -> AgentPlugin:
    """The plugin called `name`; `UnknownAgentError` naming the installed ones (and how to get more)."""
    plugins = agent_plugins()
    if name not in plugins:
        known = ", ".join(sorted(plugins)) or "none"
        raise UnknownAgentError(f"no agent plugin {name!r} (installed: {known}); an agent package declares one "
                                f"under the entry points {ENTRY_POINT_GROUP!r} and needs (re)installing: "
                                "pip install -e .")
    return plugins[name]


def stand_in_plugins() -> dict[str, AgentPlugin]:
    """Plugins with a CPU stand-in policy, by the stand-in's backend name."""
    return {plugin.stand_in: plugin for plugin in agent_plugins().values() if plugin.stand_in}
