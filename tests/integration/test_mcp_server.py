"""The MCP server, driven by the official SDK's own client, against the real search server and the
CPU stand-in policy on loopback: over stdio (a subprocess, as desktop assistants launch it) and over
streamable HTTP."""
from __future__ import annotations

import base64
import io
import json
import sys

import anyio
import pytest
from PIL import Image

from testkit.loopback import LoopbackServer

pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from vrag_rl.mcp_server import create_mcp_server  # noqa: E402

QUESTION = "How much power does the Kestrel Ridge solar plant produce?"


@pytest.fixture(scope="module")
def rule_policy():
    from vrag_rl.policy_server.app import create_app
    from vrag_rl.policy_server.rule_based import RuleBasedBackend

    server = LoopbackServer(create_app(RuleBasedBackend(), "rule-based")).start()
    yield server.url + "/v1"
    server.stop()


def _structured(result) -> object:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content["result"] if isinstance(content, dict) and set(content) == {"result"} else content
    return json.loads(result.content[0].text)


async def _exercise(client: Client) -> dict:
    names = {tool.name for tool in (await client.list_tools()).tools}
    assert names >= {"search_pages", "get_page_image", "list_documents", "ask"}
    hits = _structured(await client.call_tool("search_pages", {"query": QUESTION, "top_k": 3}))
    assert hits[0]["page_id"] == "solar_energy_brief_3" and len(hits) == 3
    docs = _structured(await client.call_tool("list_documents", {}))
    assert {d["doc_id"] for d in docs} >= {"solar_energy_brief", "acme_annual_report_2023"}

    page = await client.call_tool("get_page_image", {"page_id": hits[0]["page_id"], "max_side": 800})
    assert not page.is_error and page.content[0].type == "image" and page.content[0].mime_type == "image/jpeg"
    full = Image.open(io.BytesIO(base64.b64decode(page.content[0].data)))
    assert max(full.size) == 800
    crop = await client.call_tool("get_page_image", {"page_id": hits[0]["page_id"], "box": [100, 200, 500, 400]})
    assert Image.open(io.BytesIO(base64.b64decode(crop.content[0].data))).size == (400, 200)

    bad = await client.call_tool("get_page_image", {"page_id": "no_such_page_1"})
    assert bad.is_error and "404" in bad.content[0].text
    empty = await client.call_tool("get_page_image", {"page_id": hits[0]["page_id"], "box": [5, 5, 5, 9]})
    assert empty.is_error and "empty" in empty.content[0].text

    answer = _structured(await client.call_tool("ask", {"question": QUESTION}))
    assert answer["status"] == "answered" and answer["answer"] == "410 MW"
    assert answer["evidence"][0]["page_id"] == "solar_energy_brief_3" and answer["evidence"][0]["crops"]
    return answer


def test_stdio_transport(text_search_server, rule_policy):
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "vrag_rl.mcp_server", "--search-url", text_search_server.url, "--policy-url", rule_policy])

    async def main():
        async with Client(params, read_timeout_seconds=120) as client:
            await _exercise(client)

    anyio.run(main)


def test_streamable_http_transport(text_search_server, rule_policy):
    server = create_mcp_server(text_search_server.url, rule_policy)
    http = LoopbackServer(server.streamable_http_app(), health_path="/mcp").start()

    async def main():
        async with Client(http.url + "/mcp", read_timeout_seconds=120) as client:
            await _exercise(client)

    try:
        anyio.run(main)
    finally:
        http.stop()


def test_ask_without_a_policy_says_how_to_configure(text_search_server):
    server = create_mcp_server(text_search_server.url)

    async def main():
        async with Client(server) as client:
            result = await client.call_tool("ask", {"question": QUESTION})
            assert result.is_error and "--policy-url" in result.content[0].text
            hits = _structured(await client.call_tool("search_pages", {"query": "solar capacity", "top_k": 1}))
            assert hits[0]["doc_id"] == "solar_energy_brief"

    anyio.run(main)
