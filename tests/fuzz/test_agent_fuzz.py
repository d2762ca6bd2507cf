"""The real agent against a hostile OpenAI-compatible endpoint, over loopback (issue 11).

`testkit.malformed_openai` serves every malformed-response kind an endpoint has produced (bad
bodies, wrong shapes, hostile reply text, a redirect loop, a malformed `/v1/models`) and seeded
random mixes; `testkit.agent_fuzz` drives `vrag_rl.VRAG` through every public API against it and
the real search server on the sample corpus. The rule: no exception escapes the public API
(except the documented `EpisodeFailedError` of `generator=False`), every episode ends within
`max_turns + 1` model calls with a status and a reason, batches keep every result, and the
endpoint sees exactly one request per model turn (no retries of a 200, no redirect storm).
"""
from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.agent_fuzz import (
    APIS,
    BATCH_APIS,
    FuzzCase,
    build_plan,
    run_case,
    summarise,
)
from testkit.loopback import LoopbackServer
from testkit.malformed_openai import (
    MALFORMED_KINDS,
    MODELS_MALFORMED,
    create_app,
    episode_tag,
)
from vrag_rl import VRAG
from vrag_rl.agent.result import EPISODE_STATUSES
from vrag_rl.vrag.actions import MAX_REPLY_CHARS, parse_reply
from vrag_rl.vrag.agent import EpisodeFailedError

MAX_TURNS = 3


@pytest.fixture(scope="module")
def endpoint():
    app = create_app()
    server = LoopbackServer(app).start()
    server.state = app.state.fuzz
    yield server
    server.stop()


def _run(cases: list[FuzzCase], endpoint, search_server):
    outcomes = []
    started = time.perf_counter()
    for case in cases:
        outcomes.extend(run_case(case, endpoint.url, search_server.url, endpoint.state, max_turns=MAX_TURNS,
                                 policy_retries=1))
    summary = summarise(outcomes, endpoint.state, time.perf_counter() - started, api_calls=len(cases))
    print(f"\n{summary.episodes} episodes, {summary.api_calls} API calls, {summary.requests} requests so far, "
          f"{summary.elapsed_s:.1f} s")
    return outcomes


def _assert_rule(outcomes) -> None:
    crashed = [(o.api, o.spec, o.crash) for o in outcomes if o.crash]
    assert not crashed, crashed
    broken = [(o.api, o.spec, o.violations) for o in outcomes if o.violations]
    assert not broken, broken
    for o in outcomes:
        if o.status is not None:
            assert o.status in EPISODE_STATUSES
        assert 1 <= o.requests <= MAX_TURNS + 1, (o.spec, o.requests)
        if o.turns is not None:  # every model call is exactly one HTTP request: no retried 200, no redirects
            assert o.requests == o.turns <= MAX_TURNS + 1, (o.spec, o.requests, o.turns)
        if o.status == "failed":
            assert o.error, o


@pytest.mark.parametrize("form", ["k", "a"])
def test_every_malformed_kind_through_the_public_apis(form, endpoint, remote_search):
    """Each kind at every turn (k) and after a successful search turn (a); the APIs taken in turn."""
    cases = build_plan(seed=11, mix_cases=0, forms=(form,))
    cases = [c for c in cases if c.kind != MODELS_MALFORMED]
    assert {c.kind for c in cases} == set(MALFORMED_KINDS) and {c.api for c in cases} == set(APIS)
    outcomes = _run(cases, endpoint, remote_search)
    _assert_rule(outcomes)
    assert len(outcomes) == sum(len(c.questions) for c in cases)
    by_kind = {o.kind: o for o in outcomes if o.error}
    # the reasons name the problem (an endpoint's garbage is reported, never taken as a reply)
    expected = {"json_null": "JSON NoneType", "json_list": "JSON list", "json_string": "JSON str",
                "empty_body": "empty", "no_content_204": "empty", "non_utf8": "not UTF-8", "html": "not JSON",
                "sse": "not JSON", "invalid_json": "not JSON", "deeply_nested": "nested too deeply",
                "choices_dict": "no `choices`", "choices_empty": "no `choices`", "message_null": "`message`",
                "choices_null_item": "not an object", "choice_without_message": "`message`",
                "content_int": "content is a int", "content_dict": "content is a dict",
                "content_list": "content is a list", "redirect_loop": "answered 307",
                "oversized_body": "larger than 8388608 bytes", "broken_body": "broke off its response"}
    for kind, reason in expected.items():
        if kind in by_kind:
            assert reason in by_kind[kind].error, (kind, by_kind[kind].error)
    assert len(set(expected) & set(by_kind)) >= len(expected) - 2  # generator=True APIs report no error text


def test_seeded_random_mixes_through_every_api(endpoint, remote_search):
    cases = [c for c in build_plan(seed=2026, mix_cases=32) if c.kind == "mix"]
    outcomes = _run(cases, endpoint, remote_search)
    _assert_rule(outcomes)
    statuses = {o.status for o in outcomes}
    assert {"answered", "failed"} <= statuses  # the mix really produces both ends
    assert len(outcomes) == 32 + 4 * 3 * 2  # 32 calls, 8 of them batches of 4
    assert {o.api for o in outcomes} == set(APIS)


def test_malformed_model_list_falls_back_and_answers(endpoint, remote_search):
    """No model name given and `/v1/models` answers garbage: the default name is used, the episode answers."""
    cases = [c for c in build_plan(seed=7, mix_cases=0) if c.kind == MODELS_MALFORMED]
    before = endpoint.state.model_requests[f"k.{MODELS_MALFORMED}"]
    outcomes = _run(cases, endpoint, remote_search)
    _assert_rule(outcomes)
    assert endpoint.state.model_requests[f"k.{MODELS_MALFORMED}"] - before >= len(cases)
    assert all(o.status in (None, "answered") for o in outcomes)
    assert sum(o.status == "answered" for o in outcomes) >= len(outcomes) - 1


def test_hostile_reply_text_is_an_invalid_action_with_a_reason(endpoint, remote_search):
    """Replies the endpoint delivers intact but whose text is hostile: the model is told why, each turn."""
    reasons = {"answer_with_tags": "contains action tags", "nul_answer": "empty <answer>",
               "huge_search_128k": "no <search>, <bbox> or <answer>", "deep_search_json": "longer than 500",
               "deep_bbox_json": "four numbers", "huge_int_bbox": "finite", "huge_int_search": "longer than 500"}
    for kind, reason in reasons.items():
        started = time.perf_counter()
        with VRAG(base_url=f"{endpoint.url}/fz/k.{kind}/v1", search_url=remote_search.url, model="m",
                  max_turns=MAX_TURNS, max_invalid_actions=1) as agent:
            result = agent.run(f"[fuzz text-{kind}] q")
        elapsed = time.perf_counter() - started
        assert result.status == "failed" and result.answer is None, kind
        assert [r.action for r in result.turn_records] == ["invalid", "invalid"], kind
        assert all(reason in r.reason for r in result.turn_records), (kind, result.turn_records[0].reason)
        assert "2 unusable replies in a row" in result.error
        assert elapsed < 60, (kind, elapsed)  # a hang guard only; parse speed is checked on CPU time below


def test_lone_surrogate_reply_does_not_break_the_next_request(endpoint, remote_search):
    tag = "[fuzz surrogate]"
    result = VRAG(base_url=endpoint.url + "/fz/k.lone_surrogate/v1", search_url=remote_search.url,
                  model="m", max_turns=2).run(f"{tag} q")
    assert endpoint.state.episode_requests("k.lone_surrogate", tag) == 3  # every later request was encoded
    assert result.turns == 3 and result.status == "failed"
    assert result.turn_records[0].action == "search"
    assert "\ud800" not in result.turn_records[0].reply and "\ufffd" not in result.turn_records[0].reply


def test_redirect_loop_costs_one_request_per_turn(endpoint, remote_search):
    tag = "[fuzz redirect]"
    result = VRAG(base_url=endpoint.url + "/fz/k.redirect_loop/v1", search_url=remote_search.url,
                  model="m", policy_retries=3).run(f"{tag} q")
    assert result.status == "failed" and "307" in result.error
    assert endpoint.state.episode_requests("k.redirect_loop", tag) == 1  # was 85 with redirects followed


def test_batches_keep_every_result_and_generator_false_raises(endpoint, remote_search):
    questions = ["[fuzz batch-0] q", "", "[fuzz batch-2] q", "   "]
    agent = VRAG(base_url=endpoint.url + "/fz/a.json_null/v1", search_url=remote_search.url, model="m")
    try:
        results = agent.run_batch(questions, concurrency=2)
        again = asyncio.run(agent.arun_batch(questions, concurrency=2))
    finally:
        agent.close()
    for batch in (results, again):
        assert [r.status for r in batch] == ["failed"] * 4
        assert "JSON NoneType" in batch[0].error and "empty" in batch[1].error
        assert [r.question for r in batch] == questions
    upstream = VRAG(base_url=endpoint.url + "/fz/k.html/v1", search_url=remote_search.url, model="m",
                    generator=False)
    with upstream, pytest.raises(EpisodeFailedError) as caught:
        upstream.run("[fuzz genfalse] q")
    assert caught.value.result.status == "failed" and "not JSON" in str(caught.value)


def test_case_questions_are_keyed_by_tag():
    assert episode_tag("Question: [fuzz 1-2] What?") == "[fuzz 1-2]"
    assert all(len(c.questions) == (4 if c.api in BATCH_APIS else 1) for c in build_plan(seed=1, mix_cases=8))


# ---- the parser alone, with generated text ---------------------------------------------------------------
_TAGGY = st.lists(st.sampled_from(list("<>/[]{}|,.-0123456789 \n\x00\u00e9\ud800") + [
    "<think>", "</think>", "<search>", "</search>", "<bbox>", "</bbox>", "<answer>", "</answer>", "<SEARCH >", "[1e400",
    "1" * 400, "[[[[", "\"a\"", "NaN", "{\"bbox\": "]), max_size=80).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TAGGY)
def test_parse_reply_never_raises(text):
    parsed = parse_reply(text)
    assert parsed.kind in ("search", "crop", "answer", "invalid")
    if parsed.kind == "invalid":
        assert parsed.reason
    if parsed.kind == "answer":
        assert parsed.answer and "\x00" not in parsed.answer and "<search>" not in parsed.answer.lower()


@pytest.mark.parametrize("unit", ["<search>", "<answer><search>x</search>", "<bbox>[", "<think>" * 2 + "</answer>",
                                  "<search>x</search>", "<answer>"])
def test_parsing_128kb_replies_is_fast_and_capped(unit):
    text = unit * (128 * 1024 // len(unit))
    started = time.thread_time()  # CPU time of this thread: a loaded machine does not make it fail
    parsed = parse_reply(text)
    assert time.thread_time() - started < 1.0  # ~0.04 s; the quadratic parser took 12.6 s of CPU here
    assert f"reply cut at {MAX_REPLY_CHARS} characters" in parsed.warnings


# ---- VimRAG through the same engine: generated tool-call replies ------------------------------------------
def _tool(name: str, **arguments) -> str:
    import json

    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


_NODE = st.sampled_from(["root", "s1", "s2", "answer", "nowhere", "", "Picture 1"])
_VIM_PART = st.one_of(
    st.builds(lambda i, p: _tool("add_search_node", id=i, query="Kestrel Ridge solar plant power", parent_ids=[p]),
              _NODE, _NODE),
    st.builds(lambda label, pr, n: _tool("summarize_and_memorize", summary="s", node_id=n, memorize=[
        {"information_id": label, "is_useful": True, "priority_score": pr}]),
              st.sampled_from(["Picture 1", "picture_2", "Video 1", "P9", ""]), st.integers(-1, 7),
              st.sampled_from([None, "s1", "s2"])),
    st.builds(lambda a, p: _tool("add_answer_node", answer=a, parent_ids=[p]), st.sampled_from(["410 MW", "", "x"]),
              _NODE),
    st.sampled_from(["<think>hm</think>", "no tool at all", "<tool_call>{'name': 'add_search_node'",
                     "<tool_call>[1, 2]</tool_call>", "<tool_call>{\"name\": \"rm -rf\"}</tool_call>",
                     "{\"name\": \"add_answer_node\", \"arguments\": {\"answer\": \"7\"}}", "</think>\x00\ud800"]))
_VIM_REPLIES = st.lists(st.lists(_VIM_PART, min_size=1, max_size=3).map("".join), min_size=1, max_size=5)


class _ListPolicy:
    def __init__(self, replies):
        self.replies, self.calls = list(replies), 0

    async def complete(self, messages, sampling):
        from vrag_rl.agent.policy import PolicyReply

        self.calls += 1
        return PolicyReply(text=self.replies[min(self.calls, len(self.replies)) - 1])

    async def aclose(self):
        return None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_VIM_REPLIES)
def test_vimrag_episodes_end_with_a_status_whatever_the_model_writes(text_search_server, replies):
    """The engine's rule holds for the memory-graph agent too: a status and a reason, within the step limit."""
    from vimrag.agent import VimRAG

    policy = _ListPolicy(replies)
    with VimRAG(policy=policy, search_url=text_search_server.url, max_turns=MAX_TURNS, search_top_k=1,
                max_invalid_actions=1, observation_max_pixels=64 * 28 * 28) as agent:
        result = agent.run("How much power does the Kestrel Ridge plant make?")
    assert result.status in EPISODE_STATUSES and 1 <= policy.calls == result.turns <= MAX_TURNS + 1
    assert result.events[-1].type == "finish" and result.events[-1].status == result.status
    assert (result.status == "failed") == bool(result.error) and (result.answer is None) != result.answered
    assert len(result.turn_records) == result.turns and all(r.action for r in result.turn_records)
