"""The MCP server, driven by the official SDK's own client, against the real search server and the
CPU stand-in policy on loopback: over stdio (a subprocess, as desktop assistants launch it) and over
streamable HTTP; then what a hostile client tries (issue 21): ids that would reach other endpoints,
unbounded arguments, calls that never end, paths of the server's machine, HTTP without the token."""
from __future__ import annotations

import base64
import io
import json
import re
import sys
import threading
import time

import anyio
import httpx
import pytest
from PIL import Image

from testkit.loopback import LoopbackServer, recording_search_server

pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from search_engine.client import InvalidIdError, SearchClient  # noqa: E402
from vrag_rl.serving.mcp_server import create_mcp_server, http_app, main, scrub_paths  # noqa: E402
from vrag_rl.serving.policy_server.protocol import Generation  # noqa: E402

QUESTION = "How much power does the Kestrel Ridge solar plant produce?"
# ids that would name another endpoint or file if they reached a URL unchecked
HOSTILE_IDS = ["../stats?x=", "../openapi.json?", "..", "a/../../stats", "solar_energy_brief_3/../../documents",
               "%2e%2e%2fstats", "x?y=1", "x#frag", "a\\..\\stats", "/etc/passwd", "solar_energy_brief_3 ",
               "..%2F..%2Fstats", "a..b", "", "a" * 201, "\u2025stats", "x\x00y"]
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~%-])/(?:[^\s/'\"<>|]+/)+[^\s/'\"<>|]*")


@pytest.fixture(scope="module")
def rule_policy():
    from vrag_rl.serving.policy_server.app import create_app
    from vrag_rl.serving.policy_server.rule_based import RuleBasedBackend

    server = LoopbackServer(create_app(RuleBasedBackend(), "rule-based")).start()
    yield server.url + "/v1"
    server.stop()


@pytest.fixture(scope="module")
def recorded_search(text_index):
    server = recording_search_server(text_index, with_query=True)
    yield server
    server.stop()


class _SlowSearcher:
    """A policy that never answers: every turn searches again, after `delay` seconds; counts its calls."""

    def __init__(self, delay: float = 0.25):
        self.delay = delay
        self.calls = 0
        self._lock = threading.Lock()

    def generate(self, messages, params) -> Generation:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        return Generation(text="<think>keep looking</think><search>solar plant capacity</search>",
                          prompt_tokens=10, completion_tokens=8)


@pytest.fixture()
def slow_policy():
    from vrag_rl.serving.policy_server.app import create_app

    backend = _SlowSearcher()
    server = LoopbackServer(create_app(backend, "slow")).start()
    server.backend = backend
    yield server
    server.stop()


def _structured(result) -> object:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content["result"] if isinstance(content, dict) and set(content) == {"result"} else content
    return json.loads(result.content[0].text)


def _text_of(result) -> str:
    """Everything a reply carries as text (content and structured content)."""
    parts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    if result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


def _assert_no_server_paths(result, *roots: str) -> None:
    text = _text_of(result)
    for root in roots:
        assert str(root) not in text, text[:500]
    assert not ABSOLUTE_PATH.search(text), ABSOLUTE_PATH.search(text)
    assert '"image_path"' not in text and '"source_path"' not in text


async def _exercise(client: Client, *roots: str) -> dict:
    names = {tool.name for tool in (await client.list_tools()).tools}
    assert names >= {"search_pages", "get_page_image", "list_documents", "ask"}
    search = await client.call_tool("search_pages", {"query": QUESTION, "top_k": 3})
    _assert_no_server_paths(search, *roots)
    hits = _structured(search)
    assert hits[0]["page_id"] == "solar_energy_brief_3" and len(hits) == 3
    documents = await client.call_tool("list_documents", {})
    _assert_no_server_paths(documents, *roots)
    assert {d["doc_id"] for d in _structured(documents)} >= {"solar_energy_brief", "acme_annual_report_2023"}

    page = await client.call_tool("get_page_image", {"page_id": hits[0]["page_id"], "max_side": 800})
    assert not page.is_error and page.content[0].type == "image" and page.content[0].mime_type == "image/jpeg"
    full = Image.open(io.BytesIO(base64.b64decode(page.content[0].data)))
    assert max(full.size) == 800
    crop = await client.call_tool("get_page_image", {"page_id": hits[0]["page_id"], "box": [100, 200, 500, 400]})
    assert Image.open(io.BytesIO(base64.b64decode(crop.content[0].data))).size == (400, 200)

    bad = await client.call_tool("get_page_image", {"page_id": "no_such_page_1"})
    assert bad.is_error and "404" in bad.content[0].text
    _assert_no_server_paths(bad, *roots)
    empty = await client.call_tool("get_page_image", {"page_id": hits[0]["page_id"], "box": [5, 5, 5, 9]})
    assert empty.is_error and "empty" in empty.content[0].text

    asked = await client.call_tool("ask", {"question": QUESTION})
    _assert_no_server_paths(asked, *roots)
    answer = _structured(asked)
    assert answer["status"] == "answered" and answer["answer"] == "410 MW"
    assert answer["evidence"][0]["page_id"] == "solar_energy_brief_3" and answer["evidence"][0]["crops"]
    assert set(answer["evidence"][0]) == {"page_id", "crops"}
    return answer


def test_stdio_transport(text_search_server, rule_policy, text_index):
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "vrag_rl.serving.mcp_server", "--search-url", text_search_server.url, "--policy-url", rule_policy])

    async def run():
        async with Client(params, read_timeout_seconds=120) as client:
            await _exercise(client, text_index)

    anyio.run(run)


def test_streamable_http_transport(recorded_search, rule_policy, text_index):
    """Over HTTP too, and against a search server that does expose its paths (a loopback bind): the MCP
    replies still carry none."""
    server = create_mcp_server(recorded_search.url, rule_policy)
    http = LoopbackServer(server.streamable_http_app(), health_path="/mcp").start()

    async def run():
        async with Client(http.url + "/mcp", read_timeout_seconds=120) as client:
            await _exercise(client, text_index)

    try:
        anyio.run(run)
    finally:
        http.stop()


def test_ask_without_a_policy_says_how_to_configure(text_search_server):
    server = create_mcp_server(text_search_server.url)

    async def run():
        async with Client(server) as client:
            result = await client.call_tool("ask", {"question": QUESTION})
            assert result.is_error and "--policy-url" in result.content[0].text
            hits = _structured(await client.call_tool("search_pages", {"query": "solar capacity", "top_k": 1}))
            assert hits[0]["doc_id"] == "solar_energy_brief"

    anyio.run(run)


# ------------------------------------------------------------------------------------------ hostile clients


def test_no_id_reaches_another_endpoint(recorded_search):
    """Traversal and query injection through every MCP tool that takes an id: each is refused with a
    clear error, and the search server is asked for nothing but /search, /documents and page images."""
    server = create_mcp_server(recorded_search.url)
    recorder = recorded_search.recorder
    recorder.paths.clear()

    async def run():
        async with Client(server) as client:
            for bad in HOSTILE_IDS:
                page = await client.call_tool("get_page_image", {"page_id": bad})
                assert page.is_error, bad
                text = page.content[0].text
                assert "valid id" in text or "pattern" in text or "at least 1 character" in text \
                    or "at most 200 characters" in text, (bad, text)
                search = await client.call_tool("search_pages", {"query": "solar", "doc_ids": [bad]})
                assert search.is_error, bad
            # the same ids as queries are just text: searched for, never part of a URL
            for bad in HOSTILE_IDS[:6]:
                assert not (await client.call_tool("search_pages", {"query": bad, "top_k": 2})).is_error
            ok = await client.call_tool("get_page_image", {"page_id": "solar_energy_brief_3", "max_side": 64})
            assert not ok.is_error

    anyio.run(run)
    allowed = re.compile(r"^/(search|documents|pages/[A-Za-z0-9][A-Za-z0-9._-]*/image(\?max_side=\d+)?)$")
    assert recorder.paths, "the search server saw no request at all"
    assert all(allowed.match(p) for p in recorder.paths), sorted(set(recorder.paths))
    assert "/pages/solar_energy_brief_3/image" in recorder.paths


def test_search_client_refuses_ids_before_any_request(recorded_search):
    """The client methods that build a URL from an id (page_image, page_layout) check it against the id grammar
    and escapes it: no request leaves for a hostile id (so the agents, the demo and scripts are safe too)."""
    recorder = recorded_search.recorder

    async def run():
        client = SearchClient(recorded_search.url, max_retries=0)
        try:
            recorder.paths.clear()
            for bad in HOSTILE_IDS + [None, 7]:
                with pytest.raises(InvalidIdError, match="not a valid id"):
                    await client.page_image(bad)  # type: ignore[arg-type]
                with pytest.raises(InvalidIdError, match="not a valid id"):
                    await client.page_layout(bad)  # type: ignore[arg-type]
            assert recorder.paths == []
            assert (await client.page_image("solar_energy_brief_3", max_side=32))[:2] == b"\xff\xd8"
        finally:
            await client.aclose()

    anyio.run(run)
    assert recorder.paths == ["/pages/solar_energy_brief_3/image?max_side=32"]


@pytest.mark.parametrize("tool, arguments, fragment", [
    ("ask", {"question": QUESTION, "max_turns": 10**9}, "less than or equal to 4"),
    ("ask", {"question": QUESTION, "max_turns": 0}, "greater than or equal to 1"),
    ("ask", {"question": "x" * 4001}, "at most 4000 characters"),
    ("ask", {"question": ""}, "at least 1 character"),
    ("search_pages", {"query": "solar", "top_k": 10**6}, "less than or equal to 50"),
    ("search_pages", {"query": "x" * 2001}, "at most 2000 characters"),
    ("search_pages", {"query": "solar", "doc_ids": ["solar_energy_brief"] * 101}, "at most 100 items"),
    ("get_page_image", {"page_id": "solar_energy_brief_3", "max_side": 10**6}, "less than or equal to 4096"),
    ("get_page_image", {"page_id": "solar_energy_brief_3", "box": [1, 2, 3]}, "at least 4 items"),
    ("get_page_image", {"page_id": "solar_energy_brief_3", "box": [1, 2, 3, 4, 5]}, "at most 4 items"),
])
def test_every_argument_is_bounded(text_search_server, slow_policy, tool, arguments, fragment):
    """Out-of-bounds arguments are refused before any work, with the bound in the message; `ask` cannot
    run more turns than the server's --max-turns."""
    server = create_mcp_server(text_search_server.url, slow_policy.url + "/v1", max_turns=4)

    async def run():
        async with Client(server) as client:
            result = await client.call_tool(tool, arguments)
            assert result.is_error and fragment in result.content[0].text, result.content[0].text

    anyio.run(run)
    assert slow_policy.backend.calls == 0


def test_tool_schemas_publish_the_bounds(text_search_server):
    server = create_mcp_server(text_search_server.url, max_turns=4)

    async def run():
        async with Client(server) as client:
            return {t.name: t.input_schema["properties"] for t in (await client.list_tools()).tools}

    schemas = anyio.run(run)
    ask_turns = schemas["ask"]["max_turns"]
    assert {"type": "integer", "minimum": 1, "maximum": 4}.items() <= ask_turns["anyOf"][0].items()
    assert schemas["ask"]["question"]["maxLength"] == 4000
    assert schemas["search_pages"]["top_k"]["maximum"] == 50 and schemas["search_pages"]["query"]["maxLength"] == 2000
    assert schemas["get_page_image"]["page_id"]["pattern"].startswith("^[A-Za-z0-9]")
    assert schemas["get_page_image"]["max_side"]["maximum"] == 4096


def test_bounds_are_checked_for_direct_callers_too(text_search_server):
    """CorpusTools is usable without the MCP layer (its schema checks): it enforces the same bounds."""
    tools = create_mcp_server(text_search_server.url, "http://127.0.0.1:9/v1", max_turns=4).corpus_tools

    async def run():
        for call, fragment in [(tools.ask(QUESTION, 10**9), "between 1 and 4"),
                               (tools.search_pages("solar", top_k=0), "between 1 and 50"),
                               (tools.search_pages("solar", doc_ids=["../stats?"]), "not a valid id"),
                               (tools.get_page_image("../stats?x="), "not a valid id"),
                               (tools.get_page_image("solar_energy_brief_3", box=[0, 0, float("nan"), 5]),
                                "finite")]:
            with pytest.raises(ValueError, match=re.escape(fragment)):
                await call
        await tools.aclose()

    anyio.run(run)


def _calls_settle(backend: _SlowSearcher, quiet: float = 1.5) -> tuple[int, int]:
    before = backend.calls
    time.sleep(quiet)
    return before, backend.calls


def test_a_call_past_the_time_limit_is_stopped(text_search_server, slow_policy):
    """A policy that never answers and the largest allowed max_turns: the call ends at the time limit with
    a clear error, and the episode stops (no policy call after it)."""
    server = create_mcp_server(text_search_server.url, slow_policy.url + "/v1", max_turns=50, call_timeout=1.5)

    async def run():
        async with Client(server) as client:
            started = time.monotonic()
            result = await client.call_tool("ask", {"question": QUESTION, "max_turns": 50})
            elapsed = time.monotonic() - started
            assert result.is_error and "took longer than the server's limit of 1.5 s" in result.content[0].text
            assert elapsed < 10, elapsed
            return await client.call_tool("list_documents", {})  # the session is still usable

    after = anyio.run(run)
    assert not after.is_error
    assert slow_policy.backend.calls >= 2  # it did run for a while
    before, later = _calls_settle(slow_policy.backend)
    assert later == before, f"the policy was called {later - before} more time(s) after the limit"


def test_cancelling_a_call_stops_the_episode(text_search_server, slow_policy):
    """The client gives up on `ask` (the SDK sends notifications/cancelled): the episode stops."""
    server = create_mcp_server(text_search_server.url, slow_policy.url + "/v1", max_turns=50)

    async def run():
        async with Client(server) as client:
            with anyio.move_on_after(1.5) as scope:
                await client.call_tool("ask", {"question": QUESTION, "max_turns": 50})
            assert scope.cancelled_caught, "ask finished although its policy never answers"
            await anyio.sleep(0.5)  # the cancellation reaches the server
            return await client.call_tool("list_documents", {})

    after = anyio.run(run)
    assert not after.is_error
    assert slow_policy.backend.calls >= 2
    before, later = _calls_settle(slow_policy.backend)
    assert later == before, f"the policy was called {later - before} more time(s) after the cancellation"


def test_http_transport_requires_the_token(text_search_server):
    """`--auth-token`: 401 without it or with a wrong one (raw HTTP, before any MCP parsing); the SDK
    client sending it as a bearer token (or X-API-Key) works."""
    token = "s3cret-tökén"
    server = create_mcp_server(text_search_server.url)
    http = LoopbackServer(http_app(server, auth_token=token), health_path="/mcp").start()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "probe", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    wire_token = token.encode()  # the UTF-8 bytes, as a header carries them

    async def with_token(header: dict):
        transport = streamable_http_client(http.url + "/mcp", http_client=create_mcp_http_client(headers=header))
        async with Client(transport, read_timeout_seconds=60) as client:
            return _structured(await client.call_tool("list_documents", {}))

    try:
        for sent in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": b"Basic " + wire_token},
                     {"X-API-Key": "wrong"}, {"Authorization": "Bearer"}, {"Authorization": "Bearer s3cret-t"}]:
            response = httpx.post(http.url + "/mcp", json=init, headers={**headers, **sent})
            assert response.status_code == 401, (sent, response.status_code)
            assert response.headers["www-authenticate"] == "Bearer" and "token" in response.json()["detail"]
        assert httpx.post(http.url + "/mcp", json=init,
                          headers={**headers, "Authorization": b"Bearer " + wire_token}).status_code == 200
        for header in ({"Authorization": b"Bearer " + wire_token}, {"X-API-Key": wire_token}):
            docs = anyio.run(with_token, header)
            assert {d["doc_id"] for d in docs} >= {"solar_energy_brief"}
    finally:
        http.stop()


@pytest.mark.parametrize("argv, fragment", [
    (["--transport", "http", "--host", "0.0.0.0"], "--auth-token"),
    (["--transport", "http", "--host", "192.168.1.5"], "--insecure"),
    (["--max-turns", "1000000000"], "--max-turns must be between 1 and 50"),
    (["--call-timeout", "0"], "--call-timeout must be positive"),
])
def test_cli_refuses_unsafe_settings(argv, fragment, capsys, monkeypatch):
    monkeypatch.delenv("VRAG_MCP_AUTH_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2 and fragment in capsys.readouterr().err


def test_scrub_paths():
    reply = {"answer": "see /srv/corpus/pages/a_1.jpg and C:\\data\\b_2.png, not http://h:8/pages/a_1/image or 10/20",
             "evidence": [{"page_id": "a_1", "image_path": "/srv/corpus/pages/a_1.jpg", "crops": [[1, 2, 3, 4]]}],
             "error": "cannot open '/tmp/x/y.png'"}
    assert scrub_paths(reply) == {
        "answer": "see a_1.jpg and b_2.png, not http://h:8/pages/a_1/image or 10/20",
        "evidence": [{"page_id": "a_1", "crops": [[1, 2, 3, 4]]}], "error": "cannot open 'y.png'"}
