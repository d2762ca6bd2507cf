"""Every agent is a plugin on the kit: the generic rooms find it by name through the `vrag_rl.agents` entry points.

The trainer config (`agent_type`), `scripts/train_tiny.py`, the policy-server CLI (`--backend`), `vrag-eval
--agent` and verl's external library (`vrag_rl.training.verl_plugins.register`) choose an agent by name and ask
its plugin for what they need; none of them imports an agent. Each agent package declares one `AgentPlugin`
under the entry-point group `vrag_rl.agents` in `pyproject.toml` (`vrag`: `vrag_rl.vrag.plugin`, `vimrag`:
`vimrag.plugin`), so adding an agent touches no generic room.

What a plugin provides is named as `"module:attribute"` and imported only when asked for (`load`): reading
the registry must not import torch, verl or an agent's HTTP clients.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINT_GROUP = "vrag_rl.agents"


@dataclass(frozen=True)
class AgentPlugin:
    """What the generic rooms need of an agent built on the kit.

    - `config_type` / `prompts_type`: its settings and its words, built from a run config's `agent:` /
      `prompts:` sections;
    - `agent`: its public class (`VRAG`, `VimRAG`: `run` / `stream` / `arun`), what evaluation runs;
    - `episode`: its episode on the kit's engine, which holds its memory (a transcript, a memory graph) and
      its tools;
    - `rollout`: `async rollout_batch(tasks, n, processor, generate, search, config, prompts, seed=, pages=,
      **options) -> list[trajectory]`, its episodes recorded as token trajectories;
    - `trainer`: the local trainer class for its trajectories (`LocalTrainer` or a subclass with its hooks);
    - `verl_loop`: the module whose import registers its verl agent loop, called `verl_loop_name` in verl's
      registry (`rollout.agent.default_agent_loop`, the parquet's `agent_name`); `rows_per_turn` when that loop
      returns one row per turn (verl's v1 trainer then normalises advantages over trajectories with its own
      `grpo` estimator, GGPO's mask travelling in `response_mask`) rather than one row per trajectory;
    - `stand_in` / `stand_in_backend`: the name of its CPU stand-in policy for `vrag-policy serve --backend`
      and the callable that builds it (`search_url=`).
    """

    name: str
    config_type: type
    prompts_type: type
    agent: str
    episode: str
    rollout: str
    trainer: str
    verl_loop: str
    verl_loop_name: str
    rows_per_turn: bool = False
    stand_in: str | None = None
    stand_in_backend: str | None = None

    def load(self, part: str) -> Any:
        """The object a `"module:attribute"` field names (`plugin.load("trainer")`), imported now."""
        reference = getattr(self, part)
        if not isinstance(reference, str) or ":" not in reference:
            raise ValueError(f"agent plugin {self.name!r} has no loadable part {part!r}")
        module, _, attribute = reference.partition(":")
        return getattr(importlib.import_module(module), attribute)

    def register_verl(self) -> None:
        """Register its verl agent loop in the importing process (verl workers call this through the
        external library)."""
        importlib.import_module(self.verl_loop)


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


def verl_loop_plugin(loop_name: str | None) -> AgentPlugin | None:
    """The plugin whose verl agent loop is registered as `loop_name` (None when no installed plugin's is)."""
    return next((p for p in agent_plugins().values() if p.verl_loop_name == loop_name), None)


def stand_in_plugins() -> dict[str, AgentPlugin]:
    """Plugins with a CPU stand-in policy, by the stand-in's backend name."""
    return {plugin.stand_in: plugin for plugin in agent_plugins().values() if plugin.stand_in}
