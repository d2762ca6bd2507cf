"""Old module paths kept importable after the rooms moved (issue 22 item 5): one table, one import hook.

Users, configs and verl's `external_lib` name modules by path (`vrag_rl.policy_server.cli`,
`vrag_rl.verl_plugins`, `python -m vrag_rl.data`, ...). When a module moved, its old path stays importable
through `MOVED`, a table of old → new module paths (a package entry covers everything below it:
`vrag_rl.rollout.runner` → `vrag_rl.training.rollout.runner`). `install()` (called by `vrag_rl/__init__.py`)
puts a finder on `sys.meta_path` that answers for the old names only: importing one emits a
`DeprecationWarning` naming the new path and yields the module object at the new path itself, so classes,
registries (verl's `vrag_agent` / `vimrag_agent`) and monkeypatching are shared, never duplicated.

Why a finder and not a shim file per old module: one table says what moved where, no empty packages stay
behind, and the new module is loaded by name with `importlib`, so an old path under `vrag_rl` never becomes
an import arrow from `vrag_rl` to the package that now owns the module (e.g. `vimrag`).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import CodeType, ModuleType
from typing import Any

# old module path -> new module path (packages: the prefix is rewritten for every module below it)
MOVED: dict[str, str] = {
    # VimRAG's own pieces, out of the kit's package (no arrow from vrag_rl up to vimrag)
    "vrag_rl.rollout.vimrag_rollout": "vimrag.rollout",
    "vrag_rl.train.vimrag_trainer": "vimrag.trainer",
    "vrag_rl.verl_plugins.vimrag_agent_loop": "vimrag.verl_agent_loop",
    "vrag_rl.policy_server.vimrag_rule_based": "vimrag.stand_in",
    # serving: the policy servers and the MCP server in one room
    "vrag_rl.policy_server": "vrag_rl.serving.policy_server",
    "vrag_rl.mcp_server": "vrag_rl.serving.mcp_server",
    # training: rollout, rewards, algorithms, the local trainer, the verl plugins, data converters
    "vrag_rl.rollout": "vrag_rl.training.rollout",
    "vrag_rl.rewards": "vrag_rl.training.rewards",
    "vrag_rl.algos": "vrag_rl.training.algos",
    "vrag_rl.train": "vrag_rl.training.train",
    "vrag_rl.verl_plugins": "vrag_rl.training.verl_plugins",
    "vrag_rl.data": "vrag_rl.training.data",
    # the VRAG agent, out of the kit both agents share (vrag_rl/agent/ keeps the kit)
    "vrag_rl.agent.loop": "vrag_rl.vrag.loop",
    "vrag_rl.agent.transcript": "vrag_rl.vrag.transcript",
    "vrag_rl.agent.prompts": "vrag_rl.vrag.prompts",
    "vrag_rl.agent.vrag": "vrag_rl.vrag.agent",
}

# names that moved out of a module that stays: (old module, name) -> new module. The old module's
# `__getattr__` forwards them through `moved_attribute`.
MOVED_NAMES: dict[tuple[str, str], str] = {
    ("vrag_rl.agent", "AgentConfig"): "vrag_rl.vrag.config",
    ("vrag_rl.agent", "Prompts"): "vrag_rl.vrag.prompts",
    ("vrag_rl.agent.config", "AgentConfig"): "vrag_rl.vrag.config",
    ("vrag_rl.agent.result", "EpisodeResult"): "vrag_rl.vrag.result",
    ("vrag_rl.agent.step_graph", "VRAG_ACTIONS"): "vrag_rl.vrag.step_graph",
    ("vrag_rl.agent.step_graph", "TurnLike"): "vrag_rl.vrag.step_graph",
    ("vrag_rl.agent.step_graph", "is_vrag_episode"): "vrag_rl.vrag.step_graph",
    ("vrag_rl.agent.step_graph", "vrag_step_graph"): "vrag_rl.vrag.step_graph",
}


def _target(fullname: str) -> str | None:
    """The new path of `fullname` when it (or a package above it) moved; None when it did not."""
    if fullname in MOVED:
        return MOVED[fullname]
    head = fullname.rpartition(".")[0]
    while head:
        if head in MOVED:
            return f"{MOVED[head]}.{fullname[len(head) + 1:]}"
        head = head.rpartition(".")[0]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path (same object), warning once per old path."""

    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        # stacklevel 2 skips importlib's own frames (warnings ignores them), pointing at the importing line
        warnings.warn(f"{self.old} moved to {self.new}; import it from there", DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already executed."""

    def get_code(self, fullname: str) -> CodeType | None:
        """The new module's code, for `python -m <old path>` (runpy runs it as `__main__`)."""
        warnings.warn(f"{self.old} moved to {self.new}; run `python -m {self.new.removesuffix('.__main__')}`",
                      DeprecationWarning, stacklevel=2)
        spec = importlib.util.find_spec(self.new)
        loader = spec.loader if spec is not None else None
        get_code = getattr(loader, "get_code", None)
        return get_code(self.new) if get_code is not None else None


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of `MOVED` (and only those) for the import system."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = _target(fullname)
        if new is None:
            return None
        # the new module's spec, not the module: `python -m old.__main__` must not run it on the way here
        found = importlib.util.find_spec(new)
        if found is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new),
                                              is_package=found.submodule_search_locations is not None)


_FINDER = MovedModuleFinder()


def install() -> None:
    """Put the finder first on `sys.meta_path` (once), ahead of the files that still exist at old paths."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def moved_attribute(module: str, name: str) -> Any:
    """`name` looked up at its old home `module` (a module's `__getattr__` calls this): the object from the
    module `MOVED_NAMES` names, with a DeprecationWarning; AttributeError for any other name, as usual."""
    new = MOVED_NAMES.get((module, name))
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return getattr(moved(f"{module}.{name}", new, stacklevel=4), name)


def moved(old: str, new: str, stacklevel: int = 3) -> ModuleType:
    """The module at `new`, with a DeprecationWarning that `old` moved there (for names, not modules, that
    moved: a package's `__getattr__` forwards them through this)."""
    warnings.warn(f"{old} moved to {new}; import it from there", DeprecationWarning, stacklevel=stacklevel)
    return importlib.import_module(new)
