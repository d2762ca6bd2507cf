"""`bash scripts/gpu_smoke.sh --cpu --out DIR`: verl's own v1 trainer takes real steps on this machine's CPU.

Nothing is a double: the cluster scripts (`gpu_smoke.sh` → `train_common.sh` → `python -m verl.trainer.main_ppo`),
Ray, FSDP2 on gloo, the `hf` rollout server, TransferQueue, our agent loops against the real search server,
checkpoints, resume, verl's merger + peft, `vrag-policy serve --backend transformers` and `vrag-eval`. The models
are the tiny tasks' Qwen2.5-VL after their SFT warm starts (real classes, tiny sizes; nothing downloaded).
Minutes, not seconds: the one test of the suite that runs verl's trainer end to end.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

REPO = Path(__file__).resolve().parents[2]
LIMIT_S = 15 * 60  # the bound on a quiet 2-core machine; the guard below leaves room for a loaded one
MEMORY_LIMIT = 16 * 2**30


def _tree_rss(pid: int) -> int:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 900)  # the suite's default (600 s) is for ordinary tests
def test_the_cpu_smoke_trains_resumes_merges_and_serves(tmp_path):
    out = tmp_path / "smoke"
    env = {**os.environ, "SEARCH_PORT": "8722", "POLICY_PORT": "8723"}
    started = time.monotonic()
    proc = subprocess.Popen(["bash", str(REPO / "scripts" / "gpu_smoke.sh"), "--cpu", "--out", str(out)], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    peak = [0]

    def watch() -> None:  # the process tree's resident memory (Ray's workers are children of the trainer's driver)
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        output, _ = proc.communicate(timeout=LIMIT_S + 600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        output, _ = proc.communicate()
        pytest.fail(f"the smoke ran past {LIMIT_S + 600}s:\n{output[-4000:]}")
    finally:
        if proc.poll() is None:  # interrupted (pytest-timeout, Ctrl-C): take the smoke's Ray and servers down too
            os.killpg(proc.pid, 9)
    elapsed = time.monotonic() - started
    watcher.join(timeout=5)
    print(f"cpu smoke: {elapsed:.0f}s, peak RSS {peak[0] / 2**30:.1f} GiB")
    assert proc.returncode == 0, output[-6000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failures"] == []
    for run in ("grpo_vrag", "ggpo_vimrag"):
        result = summary[run]
        assert [s["step"] for s in result["steps"]] == [1, 2, 3]  # 2 steps, then 1 resumed
        for step in result["steps"]:
            assert all(math.isfinite(step[k]) for k in ("reward_mean", "pg_loss", "grad_norm"))
        assert any(step["grad_norm"] > 0 for step in result["steps"])  # a group whose rewards differed
        assert result["weights_changed"] is True and result["weights"]["changed"] > 0
        assert result["resumed_from_step"] == 2 and result["data_position_continued"] is True
    merged = summary["merged_eval"]
    assert merged["questions"] == merged["finished"] == 6  # 3 questions through each of the full and LoRA merges
    assert merged["full"]["weights_differ"] and merged["lora"]["weights_differ"]
    assert peak[0] < MEMORY_LIMIT
