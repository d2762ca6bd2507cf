"""Every agent is a plugin: the generic rooms find VRAG and VimRAG by name, import neither, and the entry points
import cleanly in a fresh interpreter (no import loop at run time)."""

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vrag_rl.agent.plugins import AgentPlugin, UnknownAgentError, agent_plugin, agent_plugins, stand_in_plugins

REPO = Path(__file__).resolve().parents[2]
# the rooms that must pick an agent by name: they may not import one
GENERIC = [REPO / "vrag_rl" / room for room in ("agent", "training", "evaluation", "serving", "scoring", "reader")]


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def _code(path: Path) -> str:
    """The file without docstrings and comments (they may name an agent)."""
    code = re.sub(r'"""[\s\S]*?"""', "", path.read_text())
    return "\n".join(line.split("#")[0] for line in code.splitlines())


# VRAG's episode, its memory and what runs it: only its own package and its plugin may name them
VRAG_EPISODE = ("vrag_rl.vrag.loop", "vrag_rl.vrag.transcript", "vrag_rl.vrag.agent", "vrag_rl.vrag.rollout",
                "vrag_rl.vrag.verl_agent_loop")


def test_no_generic_room_imports_an_agent():
    offenders = []
    for room in [*GENERIC, REPO / "testkit", REPO / "search_engine"]:
        for path in room.rglob("*.py"):
            offenders += [f"{path.relative_to(REPO)}: {name}" for name in _imports(path)
                          if (name.split(".")[0] == "vimrag" and room.name != "testkit") or name in VRAG_EPISODE]
    assert offenders == []


def test_no_generic_room_branches_on_an_agent_name():
    pattern = re.compile(r"""(agent(_type)?|backend)\s*[!=]=\s*["'](vrag|vimrag)["']""")
    files = [p for room in GENERIC for p in room.rglob("*.py")] + [REPO / "scripts" / "train_tiny.py"]
    offenders = [str(p.relative_to(REPO)) for p in files if pattern.search(_code(p))]
    assert offenders == []


def test_the_kit_holds_no_vrag_only_piece():
    """`vrag_rl/agent/` is the kit both agents share: nothing in it names the VRAG agent's loop, transcript,
    prompts, config, result, parser or graph rule (read from the sources, lazy imports included)."""
    vrag_only = (r"vrag_rl\.vrag\b", r"\bAgentConfig\b", r"\bEpisodeResult\b", r"\bvrag_credit_graph\b",
                 r"\bparse_reply\b", r"\bclass Transcript\b", r"\bclass Prompts\b", r"\bclass Episode\b")
    for path in (REPO / "vrag_rl" / "agent").rglob("*.py"):
        found = [marker for marker in vrag_only if re.search(marker, _code(path))]
        assert not found, f"{path.relative_to(REPO)} holds VRAG-only pieces: {found}"


def test_both_agents_are_installed_plugins_and_every_part_loads():
    from vimrag.config import VimRAGConfig
    from vrag_rl.vrag.config import AgentConfig

    plugins = agent_plugins()
    assert set(plugins) == {"vrag", "vimrag"}
    assert plugins["vrag"].config_type is AgentConfig and plugins["vimrag"].config_type is VimRAGConfig
    assert stand_in_plugins() == {"rule-based": plugins["vrag"], "vimrag-rule-based": plugins["vimrag"]}
    for plugin in plugins.values():
        for part in ("agent", "episode", "rollout", "trainer", "stand_in_backend"):
            assert callable(plugin.load(part)), (plugin.name, part)
    assert plugins["vrag"].load("agent").__name__ == "VRAG" and plugins["vimrag"].load("agent").__name__ == "VimRAG"
    with pytest.raises(ValueError, match="no loadable part 'name'"):
        plugins["vrag"].load("name")


def test_an_unknown_agent_names_the_installed_ones():
    with pytest.raises(UnknownAgentError, match=r"no agent plugin 'nope' \(installed: vimrag, vrag\)"):
        agent_plugin("nope")


def test_the_train_config_builds_each_agents_settings_by_name_and_refuses_unknown_agents():
    from vimrag.config import VimRAGConfig
    from vrag_rl.training.train.config import TrainConfig
    from vrag_rl.vrag.config import AgentConfig

    paths = {"model": "m", "tasks": "t.json", "output_dir": "out"}
    assert isinstance(TrainConfig(**paths, agent_type="vimrag").agent_config(), VimRAGConfig)
    assert isinstance(TrainConfig(**paths).agent_config(), AgentConfig)
    assert TrainConfig(**paths, agent_type="vimrag").plugin().load("trainer").__name__ == "VimRAGTrainer"
    assert TrainConfig(**paths).plugin().load("trainer").__name__ == "LocalTrainer"
    with pytest.raises(ValueError, match="no agent plugin 'nope'"):
        TrainConfig(**paths, agent_type="nope")


def test_vrag_policy_serves_every_plugins_stand_in_and_refuses_unknown_backends():
    from vrag_rl.serving.policy_server.cli import ServeOptions, app, backend_names, build_app

    assert {"rule-based", "vimrag-rule-based"} <= set(backend_names())
    for name in ("rule-based", "vimrag-rule-based"):
        assert build_app(ServeOptions(backend=name)).state.model_name == name
    result = CliRunner().invoke(app, ["serve", "--backend", "nope"])
    assert result.exit_code == 2 and "vimrag-rule-based" in result.output


def test_vrag_eval_refuses_an_unknown_agent(tmp_path):
    from vrag_rl.evaluation.cli import main

    dataset = tmp_path / "d.json"
    dataset.write_text(json.dumps([{"uid": "1", "query": "q?", "reference_answer": "a"}]))
    assert main(["--dataset", str(dataset), "--agent", "nope", "--out", str(tmp_path / "o.jsonl")]) == 2


# every module a user, a config or verl names: each must import first in a fresh interpreter (an import loop
# through a package's __init__ shows only when its module is the first one imported)
ENTRY_MODULES = ["vrag_rl", "vimrag", "vrag_rl.vrag.plugin", "vimrag.plugin", "vrag_rl.vrag.verl_agent_loop",
                 "vimrag.verl_agent_loop", "vrag_rl.training.verl_plugins.register",
                 "vrag_rl.training.train.__main__", "vimrag.trainer",
                 "vrag_rl.evaluation.cli", "vrag_rl.serving.policy_server.cli", "vrag_rl.serving.mcp_server",
                 "vrag_rl.training.data.__main__", "search_engine.cli"]


@pytest.mark.parametrize("module", ENTRY_MODULES)
def test_each_entry_point_imports_first_in_a_fresh_interpreter(module):
    out = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=300,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]


def test_the_verl_external_library_registers_every_plugins_agent_loop():
    code = ("import vrag_rl.training.verl_plugins.register, json; "
            "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as r; "
            "print(json.dumps(sorted(r)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    registered = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert {p.verl_loop_name for p in agent_plugins().values()} <= registered


def test_importing_the_verl_package_registers_nothing():
    code = ("import vrag_rl.training.verl_plugins, sys, json; "
            "print(json.dumps([m for m in sys.modules if m.endswith('verl_agent_loop') or m == 'verl']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_console_scripts_resolve_to_callables():
    section = (REPO / "pyproject.toml").read_text().split("[project.scripts]")[1].split("\n[")[0]
    scripts = dict(re.findall(r'^(\S+) = "([^"]+)"$', section, flags=re.M))
    assert set(scripts) == {"vrag-search", "vrag-policy", "vrag-eval", "vrag-mcp"}
    for name, target in scripts.items():
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr)), name


def test_a_plugin_is_a_frozen_record_of_names():
    plugin = agent_plugin("vrag")
    assert isinstance(plugin, AgentPlugin)
    with pytest.raises(AttributeError):
        plugin.name = "other"  # type: ignore[misc]
