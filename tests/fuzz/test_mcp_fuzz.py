"""schemathesis-generated arguments for every MCP tool, sent through the official SDK client (issue 21).

The MCP server has no OpenAPI document, but each tool publishes a JSON schema of its arguments. Each
tool becomes one operation of a small OpenAPI document whose request body is that schema, so
schemathesis generates positive (schema-valid) and negative (schema-invalid) arguments exactly as
it does for the HTTP servers; the arguments are then sent with `mcp.Client.call_tool`. Rules:

* never a crash (the SDK reports one as the bare "Error executing tool <name>");
* schema-valid arguments are never refused by argument validation (schema and behaviour agree);
  they may still fail on the corpus (an unknown page id is a 404 from the search server);
* schema-invalid arguments are always refused;
* no reply carries an absolute path of the server's machine, though the search server behind it
  exposes them (a loopback bind);
* the search server is asked for /search, /documents and valid page images only, whatever the ids.

Negative cases that are not JSON objects (bytes, strings) cannot be tool arguments at all and are
skipped. Seeded and bounded; VRAG_FUZZ_SCALE raises the budget.
"""
from __future__ import annotations

import json
import os
import re

import anyio
import pytest

pytest.importorskip("mcp")
import schemathesis  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from mcp import Client  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

from testkit.loopback import LoopbackServer, recording_search_server  # noqa: E402
from vrag_rl.serving.mcp_server import create_mcp_server  # noqa: E402
from vrag_rl.serving.policy_server.app import create_app as create_policy_app  # noqa: E402
from vrag_rl.serving.policy_server.scripted import ScriptedBackend  # noqa: E402

SCALE = float(os.environ.get("VRAG_FUZZ_SCALE", "1"))
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~%-])/(?:[^\s/'\"<>|]+/)+[^\s/'\"<>|]*")
ALLOWED_SEARCH_PATHS = re.compile(r"^/(search|documents|pages/[A-Za-z0-9][A-Za-z0-9._-]*/image)$")


def tools_as_openapi(tools) -> dict:
    """One POST operation per tool, its request body the tool's input schema."""
    paths = {}
    for tool in tools:
        paths[f"/{tool.name}"] = {"post": {
            "operationId": tool.name,
            "requestBody": {"required": True, "content": {"application/json": {"schema": tool.input_schema}}},
            "responses": {"200": {"description": "the tool's result"}}}}
    return {"openapi": "3.1.0", "info": {"title": "MCP tools", "version": "1"}, "paths": paths}


def generate_arguments(tools, examples: int, seed: int) -> list[tuple[str, str, object]]:
    """(tool, mode, arguments) for every tool, `examples` positive and as many negative."""
    schema = schemathesis.openapi.from_dict(tools_as_openapi(tools))
    cases: list[tuple[str, str, object]] = []

    def collector(operation, mode: GenerationMode):
        @given(operation.as_strategy(generation_mode=mode))
        @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def collect(case):
            cases.append((operation.path.lstrip("/"), mode.value, case.body))

        return hypothesis_seed(seed)(collect)

    for result in schema.get_all_operations():
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            collector(result.ok(), mode)()
    return cases


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _reply_strings(result):
    for part in result.content:
        if getattr(part, "type", "") == "text":
            if result.structured_content is None:
                yield part.text
    if result.structured_content is not None:
        yield from _strings(result.structured_content)


@pytest.fixture(scope="module")
def recorded_search(text_index):
    server = recording_search_server(text_index, with_query=False)
    yield server
    server.stop()


def test_mcp_tools_match_their_schemas(recorded_search, text_index):
    backend = ScriptedBackend(scripts={}, default=["<think>t</think><answer>{question}</answer>"])
    policy = LoopbackServer(create_policy_app(backend, "scripted")).start()
    server = create_mcp_server(recorded_search.url, policy.url + "/v1", max_turns=3, call_timeout=60)
    recorded_search.recorder.paths.clear()
    failures: list[str] = []
    counts = {"positive": 0, "negative": 0, "skipped": 0, "ok": 0, "tool_error": 0}

    async def run():
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            assert {t.name for t in tools} == {"search_pages", "get_page_image", "list_documents", "ask"}
            cases = generate_arguments(tools, max(2, int(12 * SCALE)), seed=21)
            for name, mode, arguments in cases:
                if not isinstance(arguments, dict):
                    counts["skipped"] += 1
                    continue
                counts[mode] += 1
                shown = json.dumps(arguments, default=repr)[:300]
                result = await client.call_tool(name, arguments)
                text = result.content[0].text if result.is_error and result.content else ""
                counts["tool_error" if result.is_error else "ok"] += 1
                if result.is_error and text == f"Error executing tool {name}":
                    failures.append(f"{name} crashed on {shown}")
                elif mode == "positive" and result.is_error and "validation error" in text:
                    failures.append(f"{name} refused schema-valid arguments {shown}: {text[:300]}")
                elif mode == "negative" and not result.is_error:
                    failures.append(f"{name} accepted schema-invalid arguments {shown}")
                for value in _reply_strings(result):
                    if str(text_index) in value or ABSOLUTE_PATH.search(value):
                        failures.append(f"{name} reply carries a server path: {value[:200]!r} (args {shown})")
                        break

    try:
        anyio.run(run)
    finally:
        policy.stop()
    print("MCP tools:", counts)
    paths = recorded_search.recorder.paths
    failures += [f"search server was asked for {p}" for p in sorted(set(paths)) if not ALLOWED_SEARCH_PATHS.match(p)]
    assert not failures, "\n".join(failures)
    assert counts["positive"] > 0 and counts["negative"] > 0 and counts["ok"] > 0 and counts["tool_error"] > 0
    assert any(p.startswith("/search") for p in paths)
