"""scripts/compare_algos.py without training: a finished run is skipped, the report reads the runs' metrics, and
the doc keeps its hand-written text around the generated section."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("compare_algos_under_test", REPO / "scripts" / "compare_algos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _fake_run(out: Path, run, accuracy: list[float]) -> None:
    folder = run.folder(out)
    (folder / run.algo).mkdir(parents=True)
    lines = [json.dumps({"step": i + 1, "accuracy": a, "reward": a / 2, "retrieval": 0.1, "kept_tokens": 0.9,
                         "clipfrac": 0.05}) for i, a in enumerate(accuracy)]
    (folder / run.algo / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "summary.json").write_text(json.dumps({run.algo: {"steps": len(accuracy)}}))


def test_a_finished_run_is_skipped_and_the_report_reads_the_metrics(compare, tmp_path):
    runs = [compare.Run("vrag", "grpo", 0), compare.Run("vrag", "grpo", 1), compare.Run("vrag", "ggpo", 0)]
    for run, acc in zip(runs, ([0.0, 0.5, 1.0, 1.0], [0.0, 0.0, 0.5, 0.5], [0.25] * 4)):
        _fake_run(tmp_path, run, acc)
    assert compare.run_one(tmp_path, runs[0], 4) == f"{runs[0]}: done before"  # no training started
    assert not runs[0].done(tmp_path, 5)
    results = compare.aggregate(tmp_path, runs, steps=4, window=0.5)
    grpo = results["agents"]["vrag"]["grpo"]
    assert grpo["accuracy"]["start"] == [0.25, 0.0] and grpo["accuracy"]["end"] == [1.0, 0.5]
    assert grpo["diagnostics"]["kept_tokens"] == [0.9, 0.9] and grpo["diagnostics"]["spared_turns"] == [0.0, 0.0]
    table = compare.table(results)
    assert "| vrag | GRPO | 2 | 0.12 ± 0.18 | 0.75 ± 0.35 |" in table and "| vrag | GGPO | 1 |" in table


def test_the_doc_keeps_its_text_around_the_generated_section(compare, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\nwhy it matters\n\n{compare.BEGIN}\nold table\n{compare.END}\n\nafter\n")
    compare.write_doc(doc, "new table")
    assert doc.read_text() == f"# Title\n\nwhy it matters\n\n{compare.BEGIN}\nnew table\n{compare.END}\n\nafter\n"
    fresh = tmp_path / "fresh.md"
    compare.write_doc(fresh, "table")
    assert compare.BEGIN in fresh.read_text() and "table" in fresh.read_text()
