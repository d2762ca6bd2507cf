"""Moved to `vrag_rl.scoring.metrics` (shared with the RL reward); this path keeps old imports working."""
from vrag_rl.scoring.metrics import (
    Refs,
    anls,
    contains_match,
    exact_match,
    levenshtein,
    ndcg_at_k,
    normalize_answer,
    recall_at_k,
    token_f1,
)

__all__ = ["Refs", "anls", "contains_match", "exact_match", "levenshtein", "ndcg_at_k", "normalize_answer",
           "recall_at_k", "token_f1"]
