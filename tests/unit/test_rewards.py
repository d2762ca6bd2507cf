"""Reward parts with hand-computed values; the composite with a judge over loopback and its rule fallback."""
from __future__ import annotations

import asyncio
import math

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from vrag_rl.agent.credit_graph import CreditGraph
from vrag_rl.agent.result import TurnRecord
from vrag_rl.training.rewards import (
    JudgeConfig,
    RewardConfig,
    RewardReference,
    format_score,
    retrieval_ndcg,
    rule_outcome,
    score_episode,
)
from vrag_rl.vrag.result import EpisodeResult

LOG3 = math.log2(3)


def _turn(i, action, valid=True, reply="", retrieved=None):
    return TurnRecord(index=i, action=action, reply=reply, valid=valid, retrieved=retrieved or [])


def _result(records, answer="42 million", status="answered", shown=("x_1", "a_1")):
    evidence = [{"page_id": p, "image_path": "", "crops": []} for p in shown]
    return EpisodeResult(episode_id="e", question="What is the revenue?", answer=answer, status=status,
                         evidence=evidence, events=[], messages=[], images=[], turns=len(records), elapsed_s=0.0,
                         turn_records=records, credit_graph=CreditGraph())


GOOD = [_turn(0, "search", retrieved=[["x_1", "a_1", "b_1"]]), _turn(1, "search", retrieved=[["a_1", "c_1"]]),
        _turn(2, "answer")]


# ------------------------------------------------------------------------------------------------ parts
def test_retrieval_ndcg_hand_values():
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3)
    assert retrieval_ndcg(["a", "x", "b"], ["a", "b"]) == pytest.approx(1.5 / (1 + 1 / LOG3), abs=1e-12)
    assert retrieval_ndcg(["a"], ["a", "b"]) == pytest.approx(1 / (1 + 1 / LOG3))  # fewer pages than gold: penalised
    assert retrieval_ndcg(["x", "a"], ["a"]) == pytest.approx(1 / LOG3)
    assert retrieval_ndcg(["x", "a"], ["a"], k=1) == 0.0
    assert retrieval_ndcg(["a", "a", "b"], ["a", "b"]) == pytest.approx(1.0)  # a repeat counts once
    assert retrieval_ndcg(["b", "a"], ["a", "b"]) == pytest.approx(1.0)
    assert retrieval_ndcg([], ["a"]) == 0.0 and retrieval_ndcg(["a"], []) == 0.0


def test_format_score_reads_model_turns_only():
    assert format_score(GOOD) == 1.0
    assert format_score([]) == 0.0
    assert format_score([_turn(0, "search"), _turn(1, "invalid", valid=False), _turn(2, "answer")]) == 0.0
    assert format_score([_turn(0, "search"), _turn(1, "search")]) == 0.0  # never answered
    assert format_score([_turn(0, "answer")]) == 1.0
    assert format_score([_turn(0, "answer")], require_search=True) == 0.0
    # upstream's leak: the feedback text holds example tags; here a reply is judged by its own parse only
    feedback = "Please try again. <search> q </search> <answer> Beijing </answer>"
    leaky = [_turn(0, "invalid", valid=False, reply=feedback)]
    assert format_score(leaky) == 0.0


def test_rule_outcome_metrics():
    assert rule_outcome("The 42 million.", "42 million") == 1.0
    assert rule_outcome("41 million", "42 million") == 0.0
    assert rule_outcome("42 million dollars", "42 million", "f1") == pytest.approx(0.8)  # p=2/3, r=1
    assert rule_outcome("42 milion", "42 million", "anls") == pytest.approx(0.9)  # 1 edit / 10 chars
    assert rule_outcome("it was 42 million", "42 million", "contains") == 1.0
    assert rule_outcome(None, "42 million") == 0.0
    with pytest.raises(ValueError, match="unknown rule metric"):
        rule_outcome("a", "a", "bleu")


# --------------------------------------------------------------------------------------------- composite
def test_composite_hand_values_and_format_gate():
    config = RewardConfig()
    assert (config.outcome, config.format, config.retrieval, config.zero_on_format_failure) == (0.7, 0.1, 0.2, True)
    ref = RewardReference("42 million", ["a_1"])
    good = asyncio.run(score_episode(_result(GOOD), ref, config))
    assert (good.outcome, good.format) == (1.0, 1.0) and good.retrieval == pytest.approx(1 / LOG3)
    assert good.total == pytest.approx(0.7 + 0.1 + 0.2 / LOG3)  # shown pages [x_1, a_1]: a_1 at rank 2
    assert good.details["outcome_source"] == "rule"
    ranked = asyncio.run(score_episode(_result(GOOD), ref, RewardConfig(retrieval_source="ranked")))
    assert ranked.details["retrieved"] == ["x_1", "a_1", "b_1", "c_1"] and ranked.retrieval == pytest.approx(1 / LOG3)
    wrong = asyncio.run(score_episode(_result(GOOD, answer="7"), ref, config))
    assert wrong.total == pytest.approx(0.1 + 0.2 / LOG3) and wrong.outcome == 0.0
    bad = [_turn(0, "invalid", valid=False), _turn(1, "answer")]
    gated = asyncio.run(score_episode(_result(bad), ref, config))
    assert gated.total == 0.0 and gated.format == 0.0 and gated.outcome == 1.0  # kept for the logs only
    ungated = asyncio.run(score_episode(_result(bad), ref, RewardConfig(zero_on_format_failure=False)))
    assert ungated.total == pytest.approx(0.7 + 0.2 / LOG3)
    failed = asyncio.run(score_episode(_result(GOOD, status="failed"), ref, config))
    assert failed.outcome == 0.0
    with pytest.raises(ValueError):
        RewardConfig(outcome=-1)


def _judge_app(mode: str):
    app = FastAPI()
    app.state.calls = 0

    @app.get("/health")
    def health():
        return {"ok": True}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        app.state.calls += 1
        body = await request.json()
        if mode == "down":
            return JSONResponse({"error": "overloaded"}, status_code=503)
        prompt = body["messages"][-1]["content"]
        content = "<judge>True</judge>" if "CANDIDATE=about forty-two million" in prompt else "maybe?"
        return {"id": "x", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}]}

    return app


def test_outcome_judge_then_rule_fallback():
    from testkit.loopback import serve

    ref = RewardReference("42 million", ["a_1"])
    prompt = "Q={question} REF={reference} CANDIDATE={prediction}"
    with serve(_judge_app("ok")) as ok, serve(_judge_app("down")) as down:
        judged = RewardConfig(judge=JudgeConfig(ok.url, "judge", prompt=prompt, max_retries=1, backoff_s=0.01))
        paraphrase = asyncio.run(score_episode(_result(GOOD, answer="about forty-two million"), ref, judged))
        assert paraphrase.outcome == 1.0 and paraphrase.details["outcome_source"] == "judge"  # EM would say 0
        # a verdict the judge does not give clearly → the rule metric, with the reason kept
        unclear = asyncio.run(score_episode(_result(GOOD, answer="42 million"), ref, judged))
        assert unclear.outcome == 1.0 and unclear.details["outcome_source"] == "rule (judge failed)"
        assert unclear.details["judge_error"] == "unparseable verdict"
        # a malformed trajectory never reaches the judge
        before = _calls(ok)
        asyncio.run(score_episode(_result([_turn(0, "invalid", valid=False)]), ref, judged))
        assert _calls(ok) == before
        # an endpoint that stays down: bounded retries (1 + max_retries calls), then the rule fallback
        dead = RewardConfig(judge=JudgeConfig(down.url, "judge", max_retries=2, backoff_s=0.01))
        fallback = asyncio.run(score_episode(_result(GOOD, answer="41 million"), ref, dead))
        assert fallback.outcome == 0.0 and fallback.details["outcome_source"] == "rule (judge failed)"
        assert "503" in fallback.details["judge_error"] and _calls(down) == 3


def _calls(server) -> int:
    return server._server.config.app.state.calls


def test_reward_config_from_dict():
    config = RewardConfig.from_dict({"outcome": 0.5, "judge": {"base_url": "http://x", "model": "m"}})
    assert config.outcome == 0.5 and config.judge.model == "m" and config.judge.max_retries == 3
