"""The search and policy servers under input that used to crash them (issue 11), over loopback sockets.

Each case was a 500 (or an unbounded allocation) before: NaN/Infinity in a JSON body, lone surrogates,
non-ASCII API keys, huge bodies, and OpenAPI documents that disagreed with behaviour.
"""
from __future__ import annotations

import httpx
import pytest

from search_engine.api import create_app as create_search_app
from testkit.loopback import LoopbackServer
from vrag_rl.serving.policy_server.app import create_app as create_policy_app
from vrag_rl.serving.policy_server.scripted import ScriptedBackend

JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def small_search(sample_engine):
    server = LoopbackServer(create_search_app(engine=sample_engine, max_body_bytes=4096)).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def echo_policy():
    backend = ScriptedBackend(default=["<answer>{question}</answer>"])
    server = LoopbackServer(create_policy_app(backend, "echo", max_body_bytes=64 * 1024)).start()
    yield server
    server.stop()


@pytest.mark.parametrize("raw", [
    b'{"queries": ["revenue"], "top_k": NaN}',
    b'{"queries": ["revenue"], "top_k": Infinity}',
    b'{"queries": [NaN]}',
    b'{"queries": ["revenue"], "doc_ids": [-Infinity]}',
    b'{"queries": ["revenue"], "channels": [NaN], "extra": NaN}',
])
def test_non_finite_numbers_get_422_not_500(small_search, raw):
    response = httpx.post(f"{small_search.url}/search", content=raw, headers=JSON)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and all({"loc", "msg", "type"} <= set(d) for d in detail)


@pytest.mark.parametrize("query", ["\ud800", "ok \udfff", "\udbff\udc00x\ud800"])
def test_lone_surrogate_query_is_rejected_at_validation(small_search, query):
    body = '{"queries": [' + _json_escape(query) + "]}"
    response = httpx.post(f"{small_search.url}/search", content=body.encode("ascii"), headers=JSON)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][:2] == ["body", "queries"]


def _json_escape(text: str) -> str:
    """A JSON string literal with every non-ASCII code unit as \\uXXXX (how a lone surrogate travels)."""
    return '"' + "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else f"\\u{ord(c):04x}" for c in text) + '"'


def test_get_search_422_detail_is_the_documented_list(small_search):
    for params in ({"queries": "   "}, {"queries": "ok", "top_k": 0}, {}):
        response = httpx.get(f"{small_search.url}/search", params=params)
        assert response.status_code == 422
        assert isinstance(response.json()["detail"], list), response.text


def test_page_ids_that_fit_the_documented_pattern_are_404_not_422(small_search):
    schema = httpx.get(f"{small_search.url}/openapi.json").json()
    param = schema["paths"]["/pages/{page_id}"]["get"]["parameters"][0]
    import re

    assert re.fullmatch(param["schema"]["pattern"], "a..b")
    assert httpx.get(f"{small_search.url}/pages/a..b").status_code == 404
    assert httpx.get(f"{small_search.url}/pages/a..b/image").status_code == 404
    assert "404" in schema["paths"]["/pages/{page_id}/image"]["get"]["responses"]
    assert "404" in schema["paths"]["/search"]["post"]["responses"]
    assert "413" in schema["paths"]["/search"]["post"]["responses"]


def test_request_body_over_the_limit_is_413(small_search):
    big = {"queries": ["revenue"] * 60, "doc_ids": ["d" * 150] * 30}
    response = httpx.post(f"{small_search.url}/search", json=big)
    assert response.status_code == 413 and "4096" in response.json()["detail"]

    def chunks():  # no Content-Length: the limit counts what arrives
        yield b'{"queries": ["revenue"], "doc_ids": ['
        for _ in range(500):
            yield b'"abcdefghij",'
        yield b'"x"]}'

    response = httpx.post(f"{small_search.url}/search", content=chunks(), headers=JSON)
    assert response.status_code == 413
    assert httpx.post(f"{small_search.url}/search", json={"queries": ["revenue"]}).status_code == 200


def _send_raw_key(url: str, key: bytes) -> int:
    """httpx refuses non-ASCII str headers; clients (and attackers) can still send raw bytes."""
    response = httpx.post(f"{url}/search", json={"queries": ["revenue"]}, headers=[(b"X-API-Key", key)])
    return response.status_code


def test_non_ascii_api_keys(sample_engine):
    server = LoopbackServer(create_search_app(engine=sample_engine, api_key="s3cret")).start()
    try:
        assert _send_raw_key(server.url, "sécret".encode()) == 401
        assert _send_raw_key(server.url, "sécret".encode("latin-1")) == 401
        assert _send_raw_key(server.url, b"s3cret") == 200
    finally:
        server.stop()
    server = LoopbackServer(create_search_app(engine=sample_engine, api_key="clé-ключ")).start()
    try:
        assert _send_raw_key(server.url, "clé-ключ".encode()) == 200  # the right key, sent as UTF-8
        assert _send_raw_key(server.url, b"cle") == 401
        response = httpx.post(f"{server.url}/search", json={"queries": ["x"]}, headers={"X-API-Key": "wrong"})
        assert response.status_code == 401 and "API key" in response.json()["detail"]
    finally:
        server.stop()


def test_search_schema_states_its_limits(small_search):
    schema = httpx.get(f"{small_search.url}/openapi.json").json()
    request = schema["components"]["schemas"]["SearchRequest"]["properties"]
    assert request["queries"]["items"]["minLength"] == 1 and request["queries"]["items"]["maxLength"] == 2000
    assert request["queries"]["maxItems"] == 64 and request["top_k"]["maximum"] == 50
    assert "pattern" in request["doc_ids"]["anyOf"][0]["items"]


# ------------------------------------------------------------------------------------------------ policy


def chat(server, content, **extra) -> httpx.Response:
    fields = "".join(f', "{k}": {v}' for k, v in extra.items())
    body = '{"messages": [{"role": "user", "content": ' + _json_escape(content) + "}]" + fields + "}"
    return httpx.post(f"{server.url}/v1/chat/completions", content=body.encode("ascii"), headers=JSON)


def test_echoed_lone_surrogate_is_a_422_without_exception_text(echo_policy):
    response = chat(echo_policy, "Question: what is \ud800?")
    assert response.status_code == 422, response.text
    assert "lone surrogate" in response.text and "Traceback" not in response.text
    assert chat(echo_policy, "Question: what is 7?").json()["choices"][0]["message"]["content"] == \
        "<answer>what is 7?</answer>"


@pytest.mark.parametrize("extra", [{"n": "1.5"}, {"max_tokens": "5.5"}, {"max_tokens": '"5"'}, {"stream": '"true"'},
                                   {"seed": "true"},
                                   {"temperature": "NaN"}, {"top_p": "Infinity"},
                                   {"stop": "[" + ",".join(['"s"'] * 17) + "]"}])
def test_policy_strict_types_and_non_finite_numbers(echo_policy, extra):
    response = chat(echo_policy, "Question: x", **extra)
    assert response.status_code == 422, response.text
    assert isinstance(response.json()["detail"], list)


def test_policy_integral_floats_are_integers(echo_policy):
    """JSON Schema's `integer` includes 5.0, so the server that publishes it serves it (issue 21)."""
    response = chat(echo_policy, "Question: x", n="1.0", max_tokens="5.0", seed="7.0")
    assert response.status_code == 200, response.text


def test_policy_body_and_text_limits(echo_policy):
    response = chat(echo_policy, "Question: " + "x" * 70_000)
    assert response.status_code == 413
    from vrag_rl.serving.policy_server.protocol import (
        MAX_TOTAL_TEXT_CHARS,
        ChatCompletionRequest,
    )

    messages = [{"role": "user", "content": "y" * (MAX_TOTAL_TEXT_CHARS // 4 + 1)}] * 4
    with pytest.raises(ValueError, match="characters of text"):
        ChatCompletionRequest.model_validate({"messages": messages})


def test_policy_schema_documents_streaming_and_limits(echo_policy):
    schema = httpx.get(f"{echo_policy.url}/openapi.json").json()
    post = schema["paths"]["/v1/chat/completions"]["post"]
    assert set(post["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert {"400", "413", "422"} <= set(post["responses"])
    props = schema["components"]["schemas"]["ChatCompletionRequest"]["properties"]
    assert props["stop"]["anyOf"][1]["maxItems"] == 16
    assert schema["components"]["schemas"]["ImageURL"]["properties"]["url"]["maxLength"] == 20 * 2**20
    stream = httpx.post(f"{echo_policy.url}/v1/chat/completions",
                        json={"messages": [{"role": "user", "content": "Question: q"}], "stream": True})
    assert stream.headers["content-type"].startswith("text/event-stream")
