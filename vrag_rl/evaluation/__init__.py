"""Offline evaluation of the VRAG agent: a concurrent runner that scores episodes, and its CLI (`vrag-eval`).

Datasets, metrics and the LLM judge live in `vrag_rl.scoring` (the RL reward uses them too); they are
re-exported here, and `vrag_rl.evaluation.{metrics,judge,dataset}` still import, for existing users.
Exports are lazy so importing one name does not pull in the runner's tqdm or the judge's HTTP client.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "normalize_answer": "vrag_rl.scoring.metrics", "exact_match": "vrag_rl.scoring.metrics",
    "token_f1": "vrag_rl.scoring.metrics", "anls": "vrag_rl.scoring.metrics",
    "contains_match": "vrag_rl.scoring.metrics", "recall_at_k": "vrag_rl.scoring.metrics",
    "ndcg_at_k": "vrag_rl.scoring.metrics",
    "EvalExample": "vrag_rl.scoring.qa_dataset", "load_dataset": "vrag_rl.scoring.qa_dataset",
    "LLMJudge": "vrag_rl.scoring.judge", "JudgeVerdict": "vrag_rl.scoring.judge",
    "evaluate": "vrag_rl.evaluation.runner", "run_evaluation": "vrag_rl.evaluation.runner",
    "EvalSummary": "vrag_rl.evaluation.runner", "summarize": "vrag_rl.evaluation.runner",
    "read_records": "vrag_rl.evaluation.runner",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
