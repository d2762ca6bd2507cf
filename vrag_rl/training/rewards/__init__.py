"""The composite reward of VRAG-RL: outcome (judge or rule) + format + retrieval NDCG.

`score_episode(result, reference, config)` reads only the `EpisodeResult` (its answer, turn records
and the pages retrieved per turn), never decoded observation text — so the observation text cannot
leak into the format check the way it did upstream.
"""
from vrag_rl.training.rewards.composite import RewardBreakdown, RewardConfig, RewardReference, score_episode
from vrag_rl.training.rewards.format import format_score
from vrag_rl.training.rewards.outcome import JudgeConfig, OutcomeScore, judge_for, outcome_score, rule_outcome
from vrag_rl.training.rewards.retrieval import retrieval_ndcg

__all__ = ["JudgeConfig", "OutcomeScore", "RewardBreakdown", "RewardConfig", "RewardReference", "format_score",
           "judge_for", "outcome_score", "retrieval_ndcg", "rule_outcome", "score_episode"]
