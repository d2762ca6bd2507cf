"""VimRAG plugs into the kit's generic rooms by name; the kit's package never imports it; old paths still work."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vrag_rl.agent.plugins import UnknownAgentError, agent_plugin, agent_plugins, stand_in_plugins

REPO = Path(__file__).resolve().parents[2]
OLD_PATHS = {
    "vrag_rl.rollout.vimrag_rollout": "vimrag.rollout",
    "vrag_rl.train.vimrag_trainer": "vimrag.trainer",
    "vrag_rl.verl_plugins.vimrag_agent_loop": "vimrag.verl_agent_loop",
    "vrag_rl.policy_server.vimrag_rule_based": "vimrag.stand_in",
}


def test_no_module_of_vrag_rl_imports_vimrag():
    offenders = []
    for path in (REPO / "vrag_rl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            offenders += [f"{path.relative_to(REPO)}: {name}" for name in names if name.split(".")[0] == "vimrag"]
    assert offenders == []


def test_vimrag_is_an_installed_agent_plugin():
    from vimrag.config import VimRAGConfig
    from vimrag.prompts import VimPrompts

    plugin = agent_plugin("vimrag")
    assert plugin.config_type is VimRAGConfig and plugin.prompts_type is VimPrompts
    assert stand_in_plugins()["vimrag-rule-based"] is plugin
    assert set(agent_plugins()) == {"vimrag"}


def test_an_unknown_agent_names_the_installed_ones():
    with pytest.raises(UnknownAgentError, match="no agent plugin 'nope' \\(installed: vimrag\\)"):
        agent_plugin("nope")


def test_the_train_config_finds_vimrag_by_name_and_refuses_unknown_agents():
    from vimrag.config import VimRAGConfig
    from vrag_rl.training.train.config import TrainConfig

    paths = {"model": "m", "tasks": "t.json", "output_dir": "out"}
    assert isinstance(TrainConfig(**paths, agent_type="vimrag").agent_config(), VimRAGConfig)
    with pytest.raises(ValueError, match="no agent plugin 'nope'"):
        TrainConfig(**paths, agent_type="nope")


def test_vrag_policy_serves_the_plugins_stand_in_and_refuses_unknown_backends():
    from vrag_rl.serving.policy_server.cli import ServeOptions, app, backend_names, build_app

    assert "vimrag-rule-based" in backend_names()
    assert build_app(ServeOptions(backend="vimrag-rule-based")).state.model_name == "vimrag-rule-based"
    result = CliRunner().invoke(app, ["serve", "--backend", "nope"])
    assert result.exit_code == 2 and "vimrag-rule-based" in result.output


def test_the_verl_external_library_registers_the_plugins_agent_loop():
    code = ("import vrag_rl.training.verl_plugins, json; "
            "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as r; "
            "print(json.dumps(sorted(r)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert {"vrag_agent", "vimrag_agent"} <= set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("old, new", sorted(OLD_PATHS.items()))
def test_an_old_path_is_the_moved_module_and_warns(old, new):
    code = ("import warnings, importlib, json; warnings.simplefilter('always'); "
            "caught = []; warnings.showwarning = lambda m, c, *a, **k: caught.append((c.__name__, str(m))); "
            f"old = importlib.import_module({old!r}); new = importlib.import_module({new!r}); "
            "print(json.dumps([old is new, [m for c, m in caught if c == 'DeprecationWarning']]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    same, messages = json.loads(out.stdout.strip().splitlines()[-1])
    assert same and any(f"{old} moved to {new}" in message for message in messages)


def test_the_old_verl_plugins_export_still_resolves():
    import vrag_rl.training.verl_plugins
    from vimrag.verl_agent_loop import VimRAGAgentLoop

    with pytest.warns(DeprecationWarning, match="moved to vimrag.verl_agent_loop"):
        assert vrag_rl.training.verl_plugins.VimRAGAgentLoop is VimRAGAgentLoop
