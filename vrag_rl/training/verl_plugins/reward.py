"""The reward for verl's reward workers: `compute_score` for `reward.custom_reward_function`.

By default the `vrag_agent` loop scores each trajectory itself (`reward_score`), and verl skips its
reward workers. With `vrag.score_in_loop=false` (e.g. to run the judge calls in verl's reward
workers instead of the rollout workers), verl calls `compute_score(data_source, solution_str,
ground_truth, extra_info)` per trajectory. It scores with the same `score_episode` as the loop,
from the episode record the loop left in `extra_fields["vrag_episode"]` (verl merges a loop's
extra fields into `extra_info`) — never from the decoded response text, which holds observations
too (upstream's reward read that text and leaked the feedback's example tags into the format check).

verl loads this file by path (`load_extern_object`), so it imports only installed modules.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from vrag_rl.agent.credit_graph import CreditGraph
from vrag_rl.agent.result import EpisodeResultBase, TurnRecord
from vrag_rl.training.rewards import RewardReference, score_episode
from vrag_rl.training.verl_plugins.settings import build_reward_config

RECORD_KEY = "vrag_episode"


def episode_record(result: EpisodeResultBase, reward: dict[str, Any], judge: dict[str, Any]) -> dict[str, Any]:
    """What the reward needs of an episode, JSON-ready (no pixels, no messages)."""
    return {"question": result.question, "answer": result.answer, "status": result.status,
            "turn_records": [asdict(r) for r in result.turn_records],
            "shown_pages": list(result.retrieved_page_ids), "credit_graph": result.credit_graph.to_dict(),
            "reward": dict(reward), "judge": dict(judge)}


def episode_from_record(record: dict[str, Any]) -> EpisodeResultBase:
    """The result fields `score_episode` and GGPO read, rebuilt from `episode_record`."""
    return EpisodeResultBase(episode_id="", question=record["question"], answer=record["answer"],
                             status=record["status"], evidence=[{"page_id": p} for p in record["shown_pages"]],
                             events=[], turns=len(record["turn_records"]), elapsed_s=0.0,
                             turn_records=[TurnRecord(**r) for r in record["turn_records"]],
                             credit_graph=CreditGraph.from_dict(record["credit_graph"]))


def reference_from_extra_info(extra_info: dict[str, Any], ground_truth: Any = None) -> RewardReference:
    """The gold answer(s) and pages of a row written by `vrag_rl.training.data` (extra_info)."""
    answers = extra_info.get("reference_answers")
    answers = [str(a) for a in answers] if answers is not None and len(answers) else [str(ground_truth)]
    if not answers or answers == ["None"]:
        raise ValueError("the row has no reference answer (extra_info.reference_answers / ground_truth)")
    pages = extra_info.get("reference_page_ids")
    return RewardReference(answer=answers[0] if len(answers) == 1 else answers,
                           reference_pages=[str(p) for p in (pages if pages is not None else [])])


async def compute_score(data_source: str, solution_str: str, ground_truth: Any,
                        extra_info: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """verl's custom reward signature; returns {"score", "outcome", "format", "retrieval"} (logged by verl)."""
    extra_info = extra_info or {}
    record = extra_info.get(RECORD_KEY)
    if not isinstance(record, dict):
        raise ValueError(f"compute_score needs the episode record the vrag_agent loop leaves in "
                         f"extra_fields[{RECORD_KEY!r}] (data_source {data_source!r}); run the rows with "
                         "agent_name=vrag_agent")
    breakdown = await score_episode(episode_from_record(record), reference_from_extra_info(extra_info, ground_truth),
                                    build_reward_config(record["reward"], record["judge"]))
    return {"score": float(breakdown.total), "outcome": float(breakdown.outcome), "format": float(breakdown.format),
            "retrieval": float(breakdown.retrieval)}
