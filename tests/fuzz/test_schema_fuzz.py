"""schemathesis against both servers' OpenAPI documents over loopback (issue 11's "the schema is a contract").

Every operation gets positive cases (schema-valid: must be served, 2xx/404) and negative cases
(schema-invalid: must be refused with 4xx), with every schemathesis check: no 5xx, documented
status codes and content types, response bodies matching their schemas, valid data accepted,
invalid data rejected. Seeded and bounded so CI stays fast; raise VRAG_FUZZ_EXAMPLES for a long run.
"""
from __future__ import annotations

import os

import pytest

from search_engine.api import create_app as create_search_app
from testkit.loopback import LoopbackServer
from testkit.schema_fuzz import fuzz_schema
from vrag_rl.serving.policy_server.app import create_app as create_policy_app
from vrag_rl.serving.policy_server.scripted import ScriptedBackend

SCALE = float(os.environ.get("VRAG_FUZZ_SCALE", "1"))


def _examples(default: int) -> int:
    return max(1, int(default * SCALE))


def test_search_api_matches_its_schema(text_index):
    from search_engine.engine import SearchEngine

    server = LoopbackServer(create_search_app(engine=SearchEngine.load(text_index), max_body_bytes=256 * 1024)).start()
    try:
        report = fuzz_schema(server.url, _examples(8), seed=11)
    finally:
        server.stop()
    print("search API:", report.summary())
    assert not report.failures, "\n\n".join(report.failures)
    assert not any(status >= 500 for status in report.by_status)
    assert report.by_status[200] > 0 and report.by_status[422] > 0  # both kinds of case reached the server


def test_search_api_with_key_matches_its_schema(text_index):
    """With an API key: cases sent with the right key behave as above; the 401 is documented."""
    from search_engine.engine import SearchEngine

    server = LoopbackServer(create_search_app(engine=SearchEngine.load(text_index), api_key="k€y")).start()
    try:
        report = fuzz_schema(server.url, _examples(2), seed=12, headers={"X-API-Key": "k€y".encode().decode("latin-1")})
        strangers = fuzz_schema(server.url, _examples(1), seed=13)
    finally:
        server.stop()
    print("search API with key:", report.summary(), "| without:", strangers.summary())
    assert not report.failures and not strangers.failures, "\n\n".join(report.failures + strangers.failures)
    assert report.by_status[200] > 0 and strangers.by_status[401] > 0


@pytest.mark.parametrize("api_key", [None, "sk-tést"])
def test_policy_api_matches_its_schema(api_key):
    backend = ScriptedBackend(scripts={"stop": ["<search>a</search> STOP b"]},
                              default=["<think>t</think><answer>{question}</answer>"])
    server = LoopbackServer(create_policy_app(backend, "scripted", api_key=api_key,
                                              max_body_bytes=1 << 20)).start()
    headers = {"Authorization": "Bearer " + api_key.encode().decode("latin-1")} if api_key else None
    try:
        report = fuzz_schema(server.url, _examples(40 if api_key is None else 10), seed=21, headers=headers)
    finally:
        server.stop()
    print("policy API:", report.summary())
    assert not report.failures, "\n\n".join(report.failures)
    assert report.by_status[200] > 0 and report.by_status[422] > 0


@pytest.mark.parametrize("server_kind", ["search", "policy"])
def test_schemathesis_cli_every_phase_and_check(server_kind, text_index, tmp_path):
    """The `st run` command itself, every check (`--checks all`) and every phase that needs no examples in
    the schema: coverage (boundary values and undocumented methods: the 405's Allow header), fuzzing and
    stateful (links between operations). Issue 21's bar: 0 failures against both servers."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    st = shutil.which("st") or str(Path(sys.executable).with_name("st"))
    if not Path(st).exists():
        pytest.skip("the schemathesis CLI (st) is not installed")
    if server_kind == "search":
        from search_engine.engine import SearchEngine

        app = create_search_app(engine=SearchEngine.load(text_index))
    else:
        backend = ScriptedBackend(scripts={}, default=["<think>t</think><answer>{question}</answer>"])
        app = create_policy_app(backend, "scripted", max_body_bytes=1 << 20)
    server = LoopbackServer(app).start()
    try:
        run = subprocess.run([st, "run", server.url + "/openapi.json", "--checks", "all", "--phases",
                              "coverage,fuzzing,stateful", "--max-examples", str(_examples(5)), "--seed", "3",
                              "--workers", "1", "--no-color"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=900)
    finally:
        server.stop()
    summary = run.stdout[-3000:]
    print(server_kind, summary[-600:])
    assert run.returncode == 0 and "No issues found" in run.stdout, summary + run.stderr[-2000:]
