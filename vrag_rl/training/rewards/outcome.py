"""Outcome reward: a model judge through any OpenAI-compatible endpoint, with a rule-based fallback.

The judge is `vrag_rl.scoring.judge.LLMJudge` (over `OpenAIPolicy`), so evaluation and reward
judge alike: prompt in config, bounded retries. When no judge is configured, or it fails (endpoint
down after its retries, an unparseable verdict), the score falls back to a rule metric from
`vrag_rl.scoring.metrics` and the breakdown says so (`source`, `judge_error`) — never a silent 0,
never a hang (upstream's judge loop never decremented its retry counter).
"""
from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass

from vrag_rl.scoring.judge import JUDGE_PROMPT, LLMJudge
from vrag_rl.scoring.metrics import anls, contains_match, exact_match, token_f1

RULE_METRICS = {"em": exact_match, "f1": token_f1, "anls": anls, "contains": contains_match}


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str
    model: str
    api_key: str | None = None
    prompt: str = JUDGE_PROMPT  # formatted with {question}, {reference}, {prediction}
    max_retries: int = 3
    backoff_s: float = 1.0
    timeout_s: float = 60.0
    max_tokens: int | None = None


@dataclass
class OutcomeScore:
    score: float
    source: str  # "judge", "rule", or "rule (judge failed)"
    judge_error: str | None = None


def rule_outcome(prediction: str | None, reference_answer: str | list[str], metric: str = "em") -> float:
    """Rule-based answer score: exact match (default), token F1, ANLS or containment."""
    try:
        fn = RULE_METRICS[metric]
    except KeyError:
        raise ValueError(f"unknown rule metric {metric!r}; choose one of {sorted(RULE_METRICS)}") from None
    return float(fn(prediction, reference_answer))


_JUDGES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[JudgeConfig, LLMJudge]] = \
    weakref.WeakKeyDictionary()


def judge_for(config: JudgeConfig) -> LLMJudge:
    """One judge client per (config, event loop): connections are reused across episodes."""
    judges = _JUDGES.setdefault(asyncio.get_running_loop(), {})
    if config not in judges:
        judges[config] = LLMJudge(config.base_url, config.model, api_key=config.api_key, timeout=config.timeout_s,
                                  max_retries=config.max_retries, backoff_s=config.backoff_s,
                                  max_tokens=config.max_tokens, prompt=config.prompt)
    return judges[config]


async def outcome_score(question: str, prediction: str | None, reference_answer: str | list[str],
                        judge: LLMJudge | None, rule_metric: str = "em") -> OutcomeScore:
    """The judge's verdict when it gives one, else the rule metric (with the judge's error kept)."""
    if judge is not None:
        verdict = await judge.ajudge(question, reference_answer, prediction)
        if verdict.score is not None:
            return OutcomeScore(verdict.score, "judge")
        return OutcomeScore(rule_outcome(prediction, reference_answer, rule_metric), "rule (judge failed)",
                            verdict.error)
    return OutcomeScore(rule_outcome(prediction, reference_answer, rule_metric), "rule")
