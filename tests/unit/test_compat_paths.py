"""The import paths users, configs and verl rely on keep working after the rooms moved (issue 22 item 5).

Every old path imports, is the very module (or object) at the new path, and warns that it moved; the console
scripts resolve; `python -m` on an old package still runs it; verl's registration names still register when
verl loads the old `external_lib` path. The table of moves is `vrag_rl._moved.MOVED`.
"""
import importlib
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from vrag_rl._moved import MOVED, MOVED_NAMES

REPO = Path(__file__).resolve().parents[2]

# old path -> new path, the ones users, scripts and configs name (the table's entries and modules below them)
OLD_MODULES = {
    "vrag_rl.policy_server": "vrag_rl.serving.policy_server",
    "vrag_rl.policy_server.cli": "vrag_rl.serving.policy_server.cli",
    "vrag_rl.policy_server.rule_based": "vrag_rl.serving.policy_server.rule_based",
    "vrag_rl.policy_server.scripted": "vrag_rl.serving.policy_server.scripted",
    "vrag_rl.policy_server.vimrag_rule_based": "vimrag.stand_in",
    "vrag_rl.mcp_server": "vrag_rl.serving.mcp_server",
    "vrag_rl.rollout": "vrag_rl.training.rollout",
    "vrag_rl.rollout.runner": "vrag_rl.training.rollout.runner",
    "vrag_rl.rollout.vimrag_rollout": "vimrag.rollout",
    "vrag_rl.rewards": "vrag_rl.training.rewards",
    "vrag_rl.algos": "vrag_rl.training.algos",
    "vrag_rl.algos.ggpo": "vrag_rl.training.algos.ggpo",
    "vrag_rl.train": "vrag_rl.training.train",
    "vrag_rl.train.config": "vrag_rl.training.train.config",
    "vrag_rl.train.vimrag_trainer": "vimrag.trainer",
    "vrag_rl.data": "vrag_rl.training.data",
    "vrag_rl.data.verl_parquet": "vrag_rl.training.data.verl_parquet",
    "vrag_rl.agent.loop": "vrag_rl.vrag.loop",
    "vrag_rl.agent.transcript": "vrag_rl.vrag.transcript",
    "vrag_rl.agent.prompts": "vrag_rl.vrag.prompts",
    "vrag_rl.agent.vrag": "vrag_rl.vrag.agent",
}


def _import_fresh(name: str) -> tuple[object, list[str]]:
    """Import `name` as a first import would (its alias entry dropped from sys.modules), with the warnings."""
    sys.modules.pop(name, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(name)
    return module, [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]


@pytest.mark.parametrize("old, new", sorted(OLD_MODULES.items()))
def test_an_old_module_path_is_the_new_module_and_warns(old, new):
    module, messages = _import_fresh(old)
    assert module is importlib.import_module(new)
    assert f"{old} moved to {new}; import it from there" in messages


def test_every_entry_of_the_table_points_at_a_module_that_exists():
    for old, new in MOVED.items():
        assert importlib.util.find_spec(new) is not None, f"{old} -> {new}: no such module"
        assert importlib.util.find_spec(old) is not None


def test_a_name_imported_from_an_old_path_is_the_same_object():
    from vimrag.stand_in import VimRAGRuleBasedBackend
    from vrag_rl.policy_server.rule_based import RuleBasedBackend as old_rule_based
    from vrag_rl.policy_server.vimrag_rule_based import VimRAGRuleBasedBackend as old_stand_in
    from vrag_rl.serving.policy_server.rule_based import RuleBasedBackend
    from vrag_rl.train.config import TrainConfig as old_config
    from vrag_rl.training.train.config import TrainConfig

    assert old_stand_in is VimRAGRuleBasedBackend and old_rule_based is RuleBasedBackend
    assert old_config is TrainConfig


@pytest.mark.parametrize("old_module, name", sorted(MOVED_NAMES))
def test_a_name_that_left_a_kit_module_is_still_found_there_and_warns(old_module, name):
    """The VRAG agent's pieces left the kit's modules (`AgentConfig`, `EpisodeResult`, `vrag_step_graph`,
    ...): `from vrag_rl.agent.config import AgentConfig` still gives the class, and says where it lives."""
    new_module = importlib.import_module(MOVED_NAMES[(old_module, name)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(importlib.import_module(old_module), name)
    assert value is getattr(new_module, name)
    assert any(f"{old_module}.{name} moved to {new_module.__name__}" in str(w.message) for w in caught)
    assert caught[0].filename == __file__  # the warning points at the line that used the old path


def test_a_name_that_never_was_in_a_kit_module_is_an_ordinary_import_error():
    with pytest.raises(ImportError, match="cannot import name 'NoSuchThing'"):
        exec("from vrag_rl.agent.config import NoSuchThing", {})
    with pytest.raises(AttributeError):
        _ = importlib.import_module("vrag_rl.agent").NoSuchThing


def test_the_kit_holds_no_vrag_only_piece():
    """The split issue 22 asks for: `vrag_rl/agent/` is the kit both agents share; nothing in it names the VRAG
    agent's loop, transcript, prompts, config or result (read from the sources, lazy imports included)."""
    vrag_only = (r"vrag_rl\.vrag\b", r"\bAgentConfig\b", r"\bEpisodeResult\b", r"\bvrag_step_graph\b",
                 r"\bclass Transcript\b", r"\bclass Prompts\b", r"\bclass Episode\b")
    for path in (REPO / "vrag_rl" / "agent").rglob("*.py"):
        code = re.sub(r'"""[\s\S]*?"""', "", path.read_text())  # docstrings may name the VRAG agent
        code = "\n".join(line.split("#")[0] for line in code.splitlines())
        found = [marker for marker in vrag_only if re.search(marker, code)]
        assert not found, f"{path.relative_to(REPO)} holds VRAG-only pieces: {found}"


def test_modules_that_did_not_move_are_not_answered_by_the_hook():
    assert "vrag_rl.agent" not in MOVED and "vrag_rl.reader" not in MOVED
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("vrag_rl.no_such_room")


def test_the_public_imports_still_work():
    from vimrag import VimRAG
    from vrag_rl import VRAG

    assert VRAG.__module__ == "vrag_rl.vrag.agent" and VimRAG.__name__ == "VimRAG"


def test_the_console_scripts_resolve_to_callables():
    section = (REPO / "pyproject.toml").read_text().split("[project.scripts]")[1].split("\n[")[0]
    scripts = dict(re.findall(r'^(\S+) = "([^"]+)"$', section, flags=re.M))  # (tomllib is 3.11+)
    assert set(scripts) == {"vrag-search", "vrag-policy", "vrag-eval", "vrag-mcp"}
    for name, target in scripts.items():
        module, _, attr = target.partition(":")
        assert not any(module == old or module.startswith(old + ".") for old in MOVED), (name, target)
        assert callable(getattr(importlib.import_module(module), attr)), name


def test_python_dash_m_on_an_old_package_runs_the_moved_one():
    out = subprocess.run([sys.executable, "-W", "always::DeprecationWarning", "-m", "vrag_rl.data", "--help"],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "convert" in out.stdout
    assert "vrag_rl.data moved to vrag_rl.training.data" in out.stderr


def test_verl_loading_the_old_external_lib_registers_both_agent_loops():
    code = ("import warnings, json; warnings.simplefilter('always'); caught = []; "
            "warnings.showwarning = lambda m, c, *a, **k: caught.append(str(m)); "
            "import vrag_rl.verl_plugins, vrag_rl.verl_plugins.agent_loop as old; "
            "import vrag_rl.training.verl_plugins.agent_loop as new; "
            "from vrag_rl.verl_plugins.vimrag_agent_loop import VimRAGAgentLoop; "
            "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as r; "
            "print(json.dumps([sorted(r), old is new, [m for m in caught if 'moved to' in m]]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    registered, same, messages = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"vrag_agent", "vimrag_agent"} <= set(registered) and same
    assert any("vrag_rl.verl_plugins moved to vrag_rl.training.verl_plugins" in m for m in messages)
    assert any("vrag_rl.verl_plugins.vimrag_agent_loop moved to vimrag.verl_agent_loop" in m for m in messages)
