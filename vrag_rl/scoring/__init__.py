"""Scoring: what counts as a right answer, shared by the RL reward and the offline evaluation.

- `metrics`: answer metrics (exact match, token F1, ANLS, containment) and retrieval metrics
  (recall@k, NDCG@k);
- `judge`: the LLM judge (`LLMJudge`) over any OpenAI-compatible endpoint;
- `qa_dataset`: the question sets those scores are measured against (gold answers, gold pages).

This room sits below both users: `vrag_rl.training.rewards` and `vrag_rl.training.data` (training) and
`vrag_rl.evaluation` import it, it imports neither, so training never depends on the evaluation
harness and both judge an answer the same way. Exports are lazy so `import vrag_rl.scoring.metrics`
(the reward's hot path) does not pull in the judge's HTTP client.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "normalize_answer": "metrics", "exact_match": "metrics", "token_f1": "metrics", "anls": "metrics",
    "contains_match": "metrics", "recall_at_k": "metrics", "ndcg_at_k": "metrics",
    "LLMJudge": "judge", "JudgeVerdict": "judge", "JUDGE_PROMPT": "judge", "parse_verdict": "judge",
    "EvalExample": "qa_dataset", "load_dataset": "qa_dataset", "parse_example": "qa_dataset",
    "read_dataset_records": "qa_dataset", "doc_id_for_file": "qa_dataset",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
