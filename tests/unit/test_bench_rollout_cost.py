"""`scripts/bench_rollout_cost.py`: its command line parses, refuses what it cannot run, and (slow) one short run
measures all three loops inside verl on the CPU and writes the numbers docs/training_cluster.md reports."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import typer.main

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_rollout_cost.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_rollout_cost_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_help_runs_from_another_folder():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120,
                          cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: bench_rollout_cost.py ")
    assert "--episodes" in proc.stdout and "--concurrency" in proc.stdout


def test_the_documented_command_line_parses():
    # the script's docstring and docs/training_cluster.md ("Rollout cost inside verl")
    command = typer.main.get_command(_module().app)
    line = "--prepared /tmp/cs1 --episodes 16 --concurrency 8 --rounds 3 --out docs/bench/rollout_cost.json"
    with command.make_context("bench_rollout_cost.py", shlex.split(line)) as ctx:
        got = ctx.params
    assert (got["prepared"], got["episodes"], got["concurrency"], got["rounds"], got["out"]) == \
        (Path("/tmp/cs1"), 16, 8, 3, Path("docs/bench/rollout_cost.json"))
    assert (got["max_turns"], got["max_tokens"], got["torch_threads"], got["loop"] or None) == (3, 24, 1, None)
    with command.make_context("bench_rollout_cost.py", ["--loop", "vrag_agent", "--loop", "tool_agent_tags"]) as ctx:
        assert ctx.params["loop"] == ["vrag_agent", "tool_agent_tags"]


def test_a_missing_prepared_folder_or_loop_is_refused_before_anything_starts(tmp_path, capsys):
    module = _module()
    environment = dict(os.environ)
    assert module.main(["--prepared", str(tmp_path)]) == 2
    assert "--model, --index, --data not found" in capsys.readouterr().err
    assert module.main(["--prepared", str(tmp_path), "--loop", "react"]) == 2
    assert "unknown loop(s) ['react']" in capsys.readouterr().err
    assert dict(os.environ) == environment  # the CPU platform's variables are set only for a real run


@pytest.fixture(scope="module")
def tiny_prepared(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny VRAG task's model (random weights, the task tokenizer) and its four questions as verl rows: what
    `cpu_smoke.py prepare` builds, without the SFT (a random policy still takes turns, which is all this needs)."""
    pytest.importorskip("verl")
    from testkit.tiny_task import PROMPTS, QUESTIONS, build_task_model
    from vrag_rl.agent.plugins import agent_plugin
    from vrag_rl.training.data.verl_parquet import convert_records, write_parquet

    root = tmp_path_factory.mktemp("rollout_cost")
    model = build_task_model(root / "model")
    records = []
    for q in QUESTIONS:
        doc, page = q["reference_pages"][0].rsplit("_", 1)
        records.append({"uid": q["id"], "query": q["question"], "reference_answer": q["answer"],
                        "meta_info": {"file_name": f"{doc}.pdf", "reference_page": int(page)}})
    rows, _ = convert_records(records, "tiny_task", "train", "vrag_agent",
                              prompts=agent_plugin("vrag").prompts_type(**PROMPTS))
    return model, write_parquet(rows, root / "vrag_train.parquet")


@pytest.mark.slow
def test_two_episodes_per_loop_are_measured_inside_verl(tiny_prepared, text_index, tmp_path):
    model, data = tiny_prepared
    out = tmp_path / "cost.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--model", str(model), "--index", str(text_index), "--data",
                           str(data), "--episodes", "2", "--concurrency", "2", "--warmup", "0", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    loops = {row["loop"]: row for row in result["loops"]}
    assert list(loops) == ["vrag_agent", "tool_agent", "tool_agent_tags"]
    for row in loops.values():
        assert row["episodes"] == 2 and 2 <= row["model_turns"] <= 2 * 3  # 1 to max_turns model turns per episode
        assert sum(row["turns_histogram"].values()) == 2
        assert row["generate_cpu_s"] > 0 and row["process_cpu_s"] > row["generate_cpu_s"]
        assert math.isfinite(row["cpu_ms_per_turn_excl_generate"]) and row["cpu_ms_per_turn_excl_generate"] > 0
        assert 0 < row["verl_postprocess_cpu_ms_per_episode"] and row["generated_tokens_per_turn"] <= 24
    # hermes: the task's model never writes <tool_call>, so verl's loop ends after one turn with no tool call
    assert loops["tool_agent"]["model_turns"] == 2 and loops["tool_agent"]["tool_calls"] == 0
    assert "| vrag_agent |" in proc.stdout and result["settings"]["max_tokens"] == 24
