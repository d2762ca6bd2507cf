"""Upstream compatibility, both directions, over loopback sockets.

* Our client and agent against a GET-only search server in upstream VRAG's shapes
  (`testkit/upstream_search.py`: `GET /search?queries=...` → `[[{"idx", "image_file"}, ...], ...]`).
* Upstream's dialect against our server (`SearchClient(protocol="upstream")` speaks our GET /search).
"""
from __future__ import annotations

import asyncio
import os

import httpx
import pytest

from search_engine.client import SearchClient, SearchError
from search_engine.types import SearchHit
from testkit.loopback import LoopbackServer
from testkit.upstream_search import create_upstream_app, export_page_images

QUESTION = "How much power does the Kestrel Ridge solar plant produce?"


@pytest.fixture(scope="module")
def upstream_server(text_index, tmp_path_factory):
    from search_engine.engine import SearchEngine

    engine = SearchEngine.load(text_index)
    images = export_page_images(engine, tmp_path_factory.mktemp("upstream") / "corpus" / "img")
    server = LoopbackServer(create_upstream_app(engine, images), health_path="/openapi.json").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rule_policy():
    from vrag_rl.serving.policy_server.app import create_app
    from vrag_rl.serving.policy_server.rule_based import RuleBasedBackend

    server = LoopbackServer(create_app(RuleBasedBackend(), "rule-based")).start()
    yield server.url + "/v1"
    server.stop()


def test_the_upstream_server_is_get_only(upstream_server):
    assert httpx.post(upstream_server.url + "/search", json={"queries": ["x"]}).status_code == 405
    body = httpx.get(upstream_server.url + "/search", params=[("queries", QUESTION)]).json()
    assert set(body[0][0]) == {"idx", "image_file"} and body[0][0]["image_file"].startswith("./")


def test_client_detects_upstream_and_reads_its_hits(upstream_server):
    async def go():
        client = SearchClient(upstream_server.url + "/search")  # upstream configs name the endpoint
        try:
            results = await client.search([QUESTION, "installed solar capacity"], top_k=3)
        finally:
            await client.aclose()
        return client, results

    client, results = asyncio.run(go())
    assert client.protocol == "upstream"
    assert [len(hits) for hits in results] == [3, 3]  # upstream always sends 10: the client keeps top_k
    top = results[0][0]
    assert isinstance(top, SearchHit)
    assert (top.rank, top.page_id, top.doc_id, top.page_number) == (1, "solar_energy_brief_3", "solar_energy_brief", 3)
    assert os.path.isabs(top.image_path) and os.path.isfile(top.image_path)  # resolved against our cwd
    assert top.metadata["image_file"].endswith("solar_energy_brief_3.jpg") and top.image_url == ""


def test_client_configured_for_ours_reports_upstream_clearly(upstream_server):
    async def go():
        client = SearchClient(upstream_server.url, protocol="vrag", max_retries=0)
        try:
            await client.search([QUESTION])
        finally:
            await client.aclose()

    with pytest.raises(SearchError, match="405"):
        asyncio.run(go())

    async def filtered():
        client = SearchClient(upstream_server.url, protocol="upstream")
        try:
            await client.search([QUESTION], doc_ids=["solar_energy_brief"])
        finally:
            await client.aclose()

    with pytest.raises(SearchError, match="cannot restrict"):
        asyncio.run(filtered())


def test_the_real_agent_answers_over_an_upstream_search_server(upstream_server, rule_policy):
    from vrag_rl import VRAG

    with VRAG(base_url=rule_policy, search_url=upstream_server.url + "/search") as agent:
        result = agent.run(QUESTION)
        assert result.status == "answered", result.error
        assert result.answer == "410 MW"
        assert result.retrieved_page_ids[0] == "solar_energy_brief_3"
    # upstream's own call style returns the answer string
    assert VRAG(rule_policy, upstream_server.url + "/search", generator=False).run(QUESTION) == "410 MW"


def test_upstream_dialect_against_our_server(text_search_server):
    async def go():
        client = SearchClient(text_search_server.url, protocol="upstream")
        try:
            hits = (await client.search([QUESTION], top_k=2))[0]
            image = await client.page_image(hits[0].page_id)
        finally:
            await client.aclose()
        return hits, image

    hits, image = asyncio.run(go())
    assert hits[0].page_id == "solar_energy_brief_3" and len(hits) == 2
    assert image[:2] == b"\xff\xd8"  # JPEG
