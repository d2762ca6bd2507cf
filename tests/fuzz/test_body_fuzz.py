"""Hypothesis-generated JSON bodies (and raw bytes) posted to both servers over loopback.

schemathesis generates from the schema; this generates what a broken or hostile client sends
regardless of it: NaN / ±Infinity literals, lone surrogates, huge integers, deep nesting, wrong
types in every field, near-valid requests with one field replaced, bytes that are not JSON. The
rule (issue 11): never a 5xx, always a JSON body, a documented status, and a 200 that parses as
the documented response model.
"""
from __future__ import annotations

import json
import math
import os

import httpx
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from search_engine.api import create_app as create_search_app
from search_engine.api_models import SearchResponse
from testkit.loopback import LoopbackServer
from vrag_rl.serving.policy_server.app import create_app as create_policy_app
from vrag_rl.serving.policy_server.protocol import ChatCompletionResponse
from vrag_rl.serving.policy_server.scripted import ScriptedBackend

SEARCH_STATUSES = {200, 400, 404, 413, 422}
POLICY_STATUSES = {200, 400, 413, 422}

# Text with everything JSON can carry, lone surrogates included (hypothesis excludes category Cs by default).
text = st.text(st.characters(codec=None, categories=None), max_size=40) | st.sampled_from(
    ["\ud800", "a\udfffb", "\x00", "", " ", "\u2028", "revenue 2023", "Question: what?", "x" * 3000])
numbers = st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=True, allow_infinity=True) \
    | st.sampled_from([0, 1, -1, 1.0, 5.0, 0.5, True, False, None])
json_values = st.recursive(numbers | text | st.none(),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
                           max_leaves=12)


def _dumps(value) -> bytes:
    """JSON as a sloppy client writes it: NaN/Infinity literals allowed, surrogates as \\u escapes."""
    return json.dumps(value, allow_nan=True, ensure_ascii=True).encode("ascii")


def _near_valid(base: dict, fields: list[str]):
    """A valid request with one field replaced or removed, or an unknown field added."""
    return st.one_of(
        st.tuples(st.sampled_from(fields), json_values).map(lambda kv: {**base, kv[0]: kv[1]}),
        st.sampled_from(fields).map(lambda k: {f: v for f, v in base.items() if f != k}),
        st.tuples(text, json_values).map(lambda kv: {**base, kv[0]: kv[1]}),
    )


search_bodies = st.one_of(
    json_values.map(_dumps),
    _near_valid({"queries": ["revenue 2023"], "top_k": 3, "doc_ids": None, "channels": ["text", "bm25"]},
                ["queries", "top_k", "doc_ids", "channels"]).map(_dumps),
    st.lists(text, min_size=1, max_size=5).map(lambda qs: _dumps({"queries": qs, "top_k": 2})),
    st.binary(max_size=200),
    st.integers(min_value=1, max_value=3000).map(lambda n: b"[" * n + b"]" * n),  # deep nesting
)
message = {"role": "user", "content": "Question: what is 7?"}
policy_bodies = st.one_of(
    json_values.map(_dumps),
    _near_valid({"messages": [message], "max_tokens": 32, "temperature": 0.5, "stop": ["</answer>"]},
                ["messages", "max_tokens", "temperature", "stop", "n", "stream", "seed", "top_k", "model"]).map(_dumps),
    st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool"]),
                                    "content": text | st.lists(st.fixed_dictionaries(
                                        {"type": st.sampled_from(["text", "image_url"]), "text": text,
                                         "image_url": st.fixed_dictionaries({"url": text})}), max_size=2)}),
             min_size=1, max_size=3).map(lambda ms: _dumps({"messages": ms, "stream": False})),
    st.binary(max_size=200),
    st.integers(min_value=1, max_value=3000).map(lambda n: b'{"messages":' + b"[" * n + b"]" * n + b"}"),
)

SCALE = float(os.environ.get("VRAG_FUZZ_SCALE", "1"))  # VRAG_FUZZ_SCALE=10: a long run
FUZZ = settings(max_examples=max(1, int(120 * SCALE)), deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def servers(text_index):
    from search_engine.engine import SearchEngine

    search = LoopbackServer(create_search_app(engine=SearchEngine.load(text_index), api_key=None)).start()
    policy = LoopbackServer(create_policy_app(ScriptedBackend(default=["<answer>{question}</answer>"]),
                                              "scripted")).start()
    yield search, policy
    search.stop()
    policy.stop()


def _check(response: httpx.Response, allowed: set[int]) -> dict:
    assert response.status_code in allowed, (response.status_code, response.text[:500])
    body = response.json()  # every answer is JSON, even for bytes that are not
    assert isinstance(body, dict) and "detail" in body or response.status_code == 200
    return body


def test_search_survives_generated_bodies(servers):
    search, _ = servers
    statuses = []
    with httpx.Client(timeout=60) as client:

        @seed(1101)
        @FUZZ
        @given(search_bodies)
        def run(raw):
            response = client.post(f"{search.url}/search", content=raw, headers={"Content-Type": "application/json"})
            body = _check(response, SEARCH_STATUSES)
            statuses.append(response.status_code)
            if response.status_code == 200:
                parsed = SearchResponse.model_validate(body)
                assert all(math.isfinite(h.score) for hits in parsed.results for h in hits)

        run()
    print(f"search: {len(statuses)} bodies, statuses {sorted(set(statuses))}")
    assert 200 in statuses and 422 in statuses


def test_policy_survives_generated_bodies(servers):
    _, policy = servers
    statuses = []
    with httpx.Client(timeout=60) as client:

        @seed(1102)
        @FUZZ
        @given(policy_bodies)
        def run(raw):
            response = client.post(f"{policy.url}/v1/chat/completions", content=raw,
                                   headers={"Content-Type": "application/json"})
            body = _check(response, POLICY_STATUSES)
            statuses.append(response.status_code)
            if response.status_code == 200:
                ChatCompletionResponse.model_validate(body)

        run()
    print(f"policy: {len(statuses)} bodies, statuses {sorted(set(statuses))}")
    assert 200 in statuses and 422 in statuses
