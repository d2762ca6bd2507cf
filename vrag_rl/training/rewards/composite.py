"""The composite reward: R = w_o·outcome + w_f·format + w_r·retrieval, and 0 when the format fails.

Upstream VRAG-RL's training reward with its defaults (0.7 judge + 0.1 format + 0.2 NDCG; zero, and
no judge call, when the format check fails), computed from the episode result alone:
- outcome on the episode's parsed answer (the last model turn's `<answer>`), never on text found
  by `rfind` over a response that includes observations (upstream could hand the judge the example
  answer from its own invalid-action feedback);
- format from the model turns' own parse (`format_score`);
- retrieval over the pages the model was shown, in the order shown (upstream's
  `retrievaled_images`), or every page the engine returned in rank order (`retrieval_source`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vrag_rl.agent.result import EpisodeResultBase
from vrag_rl.scoring.judge import LLMJudge
from vrag_rl.training.rewards.format import format_score
from vrag_rl.training.rewards.outcome import JudgeConfig, judge_for, outcome_score, rule_outcome
from vrag_rl.training.rewards.retrieval import retrieval_ndcg


@dataclass(frozen=True)
class RewardReference:
    answer: str | list[str]  # the gold answer, or every accepted one
    reference_pages: list[str] = field(default_factory=list)  # page ids "{doc_id}_{page}"


@dataclass(frozen=True)
class RewardConfig:
    outcome: float = 0.7
    format: float = 0.1
    retrieval: float = 0.2
    zero_on_format_failure: bool = True
    rule_metric: str = "em"  # the outcome when no judge is configured or it fails: em | f1 | anls | contains
    retrieval_source: str = "shown"  # "shown": pages shown, in order; "ranked": every hit, in rank order
    retrieval_k: int | None = None
    format_requires_search: bool = False
    judge: JudgeConfig | None = None

    def __post_init__(self) -> None:
        if min(self.outcome, self.format, self.retrieval) < 0:
            raise ValueError("reward weights must be >= 0")
        if self.retrieval_source not in ("shown", "ranked"):
            raise ValueError("retrieval_source must be 'shown' or 'ranked'")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RewardConfig:
        data = dict(data)
        judge = data.pop("judge", None)
        return cls(**data, judge=JudgeConfig(**judge) if judge else None)


@dataclass
class RewardBreakdown:
    total: float
    outcome: float
    format: float
    retrieval: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def score_episode(result: EpisodeResultBase, reference: RewardReference, config: RewardConfig,
                        judge: LLMJudge | None = None) -> RewardBreakdown:
    """Score one episode. `judge` overrides the one `config.judge` describes (shared per event loop)."""
    fmt = format_score(result.turn_records, require_search=config.format_requires_search)
    retrieved = result.retrieved_page_ids if config.retrieval_source == "shown" else result.retrieved_ranked
    retrieval = retrieval_ndcg(retrieved, reference.reference_pages, config.retrieval_k)
    answer = result.answer if result.status != "failed" else None
    details: dict[str, Any] = {"answer": answer, "status": result.status, "retrieved": retrieved}
    if fmt == 0.0 and config.zero_on_format_failure:
        # no judge call for a malformed trajectory (upstream's rule); the rule outcome is kept for the logs
        outcome = rule_outcome(answer, reference.answer, config.rule_metric)
        details.update(outcome_source="rule (format failed, judge skipped)", judge_error=None)
        return RewardBreakdown(0.0, outcome, fmt, retrieval, details)
    if judge is None and config.judge is not None:
        judge = judge_for(config.judge)
    scored = await outcome_score(result.question, answer, reference.answer, judge, config.rule_metric)
    details.update(outcome_source=scored.source, judge_error=scored.judge_error)
    total = config.outcome * scored.score + config.format * fmt + config.retrieval * retrieval
    return RewardBreakdown(total, scored.score, fmt, retrieval, details)
