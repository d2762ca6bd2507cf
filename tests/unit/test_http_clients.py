"""The two HTTP clients' transport (`search_engine.infra.http_session`): retries, Retry-After, size caps,
proxies from the environment, and a client used from two event loops — against real loopback servers."""
from __future__ import annotations

import asyncio

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from search_engine.client import SearchClient, SearchError
from search_engine.infra.http_session import env_proxy, retry_delay
from testkit.loopback import serve
from vrag_rl.agent.policies.openai_http import OpenAIPolicy
from vrag_rl.agent.policy import PolicyError, SamplingParams

OK = {"choices": [{"message": {"role": "assistant", "content": "<answer>7.4</answer>"}, "finish_reason": "stop"}]}


def _flaky_app() -> FastAPI:
    """`/s/<a>,<b>,.../v1/chat/completions` answers those statuses in turn (then 200); `/calls` counts."""
    app = FastAPI()
    app.state.calls = {}

    @app.get("/health")
    async def health():
        return {"ok": True}

    @app.post("/s/{plan}/v1/chat/completions")
    async def chat(plan: str, request: Request):
        await request.body()
        n = app.state.calls.get(plan, 0)
        app.state.calls[plan] = n + 1
        codes = [int(c) for c in plan.split(",")]
        code = codes[n] if n < len(codes) else 200
        if code == 200:
            return OK
        headers = {"Retry-After": "0"} if code == 429 else {}
        return JSONResponse({"detail": f"status {code}"}, status_code=code, headers=headers)

    @app.get("/big")
    async def big():
        return Response(b"x" * 5000, media_type="application/octet-stream")

    return app


@pytest.fixture(scope="module")
def flaky():
    app = _flaky_app()
    with serve(app) as server:
        server.calls = app.state.calls
        yield server


def _complete(url: str, **kwargs) -> str:
    async def main():
        policy = OpenAIPolicy(url, model="m", backoff_s=0.01, **kwargs)
        try:
            return (await policy.complete([{"role": "user", "content": "q"}], SamplingParams())).text
        finally:
            await policy.aclose()

    return asyncio.run(main())


def test_policy_retries_what_may_pass_and_nothing_else(flaky):
    assert _complete(flaky.url + "/s/503,502/v1") == "<answer>7.4</answer>"
    assert _complete(flaky.url + "/s/429,408,500/v1") == "<answer>7.4</answer>"  # Retry-After: 0 is obeyed
    assert flaky.calls["503,502"] == 3 and flaky.calls["429,408,500"] == 4

    with pytest.raises(PolicyError) as caught:  # a 4xx is the request's fault: one attempt, not retryable
        _complete(flaky.url + "/s/400/v1")
    assert caught.value.status == 400 and not caught.value.retryable and "status 400" in str(caught.value)
    assert flaky.calls["400"] == 1

    with pytest.raises(PolicyError) as caught:  # retries run out: the last error, marked retryable
        _complete(flaky.url + "/s/503,503,503/v1", max_retries=2)
    assert caught.value.status == 503 and caught.value.retryable and flaky.calls["503,503,503"] == 3


def test_unreachable_policy_is_retryable_and_named():
    with pytest.raises(PolicyError) as caught:
        _complete("http://127.0.0.1:9/v1", max_retries=1)
    assert caught.value.retryable and caught.value.status is None and "unreachable" in str(caught.value)


def test_negative_retries_are_refused():
    with pytest.raises(ValueError):
        OpenAIPolicy("http://127.0.0.1:9/v1", max_retries=-1)


def test_search_body_over_the_cap_is_refused(flaky):
    async def big():
        client = SearchClient(flaky.url, max_response_bytes=1000, max_retries=0)
        try:
            return await client._request("GET", "/big")
        finally:
            await client.aclose()

    with pytest.raises(SearchError, match="larger than 1000 bytes"):
        asyncio.run(big())


def test_one_search_client_serves_two_event_loops(text_search_server):
    client = SearchClient(text_search_server.url)
    first = asyncio.run(client.search(["revenue"], top_k=2))
    second = asyncio.run(client.search(["revenue"], top_k=2))  # a new loop: a new pool, same answer
    assert [h.page_id for h in first[0]] == [h.page_id for h in second[0]] and len(first[0]) == 2
    asyncio.run(client.aclose())


def test_proxy_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert env_proxy("http://search.example:8002") == "http://proxy.example:3128"
    assert env_proxy("http://internal.example:8002") is None
    monkeypatch.delenv("HTTP_PROXY")
    assert env_proxy("http://search.example:8002") is None


def test_retry_delay_backs_off_and_obeys_short_retry_after():
    assert retry_delay(0, 0.5, "2") == 2.0
    assert 0.75 * 4 <= retry_delay(3, 0.5, "3600") <= 4.0  # an hour is not obeyed: backoff instead
    assert 0.75 * 8 <= retry_delay(10, 0.5) <= 8.0  # capped
    assert 0.75 <= retry_delay(1, 0.5, "soon") <= 1.0  # not a number of seconds: backoff
