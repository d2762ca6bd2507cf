"""`scripts/cpu_smoke.py`'s merged-model check: an episode that ends without an answer because the freshly trained
model gave none still finished; one that ends on a serving fault did not (the smoke fails and names it)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from vrag_rl.evaluation.runner import summarize

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cpu_smoke.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cpu_smoke_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _record(uid: str, status: str, failure: str | None) -> dict:
    return {"uid": uid, "status": status, "failure": failure, "error": failure and f"{failure}: ...", "turns": 2,
            "elapsed_s": 1.0}


def test_a_model_without_answers_finishes_a_serving_fault_does_not():
    smoke = _module()
    behaviour = [_record("a", "answered", None), _record("b", "failed", "invalid_action"),
                 _record("c", "failed", "budget_exhausted")]
    entry, failure = smoke.merged_eval_entry(summarize(behaviour, k=5).to_dict(), "full")
    assert failure is None and entry["questions"] == entry["finished"] == 3
    assert entry["failures"] == {"invalid_action": 1, "budget_exhausted": 1}

    faulty = behaviour[:2] + [_record("c", "failed", "policy_failed")]
    entry, failure = smoke.merged_eval_entry(summarize(faulty, k=5).to_dict(), "lora")
    assert entry["finished"] == 2 and failure is not None
    assert "2 of 3" in failure and "policy_failed" in failure and "eval_lora.jsonl" in failure

    entry, failure = smoke.merged_eval_entry(summarize(behaviour[:2], k=5).to_dict(), "full")
    assert failure is not None and "2 of 2" in failure  # a question missing from the evaluation is a failure too
