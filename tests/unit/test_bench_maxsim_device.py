"""The GPU check of the exact MaxSim scorer runs its whole path on a CPU (torch backend there) and says PASS."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_device_check_compares_both_paths_and_writes_its_numbers(tmp_path):
    out = tmp_path / "maxsim.json"
    run = subprocess.run([sys.executable, str(REPO / "scripts/bench_maxsim_device.py"), "--pages", "120",
                          "--tokens", "32", "--device", "cpu", "--cpu-pages", "80", "--repeats", "1",
                          "--batches", "1", "16",
                          "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert report["verdict"] == "PASS" and report["agreement"]["top10_overlap_mean"] == 1.0
    assert set(report["latency_ms"]) == {"batch1", "batch16"}
