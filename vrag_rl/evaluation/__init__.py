"""Offline evaluation of the VRAG agent: datasets, metrics, an LLM judge and a concurrent runner.

Exports are lazy so `import vrag_rl.evaluation.metrics` (used by the RL reward) does not pull in
httpx or tqdm.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "normalize_answer": "metrics", "exact_match": "metrics", "token_f1": "metrics", "anls": "metrics",
    "contains_match": "metrics", "recall_at_k": "metrics", "ndcg_at_k": "metrics",
    "EvalExample": "dataset", "load_dataset": "dataset",
    "LLMJudge": "judge", "JudgeVerdict": "judge",
    "evaluate": "runner", "run_evaluation": "runner", "EvalSummary": "runner", "summarize": "runner",
    "read_records": "runner",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
