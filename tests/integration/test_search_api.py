"""The search server on a real loopback socket, queried over HTTP like the agent and upstream do."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from PIL import Image

from search_engine.api import create_app
from testkit.loopback import LoopbackServer, free_port

REPO = Path(__file__).resolve().parents[2]


def test_post_search_finds_the_answer_page(search_server, sample_corpus):
    qa = next(q for q in sample_corpus.qa if q.answer == "RouteFinder")
    response = httpx.post(f"{search_server.url}/search",
                          json={"queries": [qa.query, "Kestrel Ridge"], "top_k": 3, "channels": ["text", "bm25"]})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == 2 and len(results[0]) == 3
    assert results[0][0]["page_id"] == "metro_travel_survey_2024_2"
    assert results[1][0]["doc_id"] == "solar_energy_brief"
    hit = results[0][0]
    assert hit["image_url"] == "/pages/metro_travel_survey_2024_2/image" and hit["rank"] == 1
    assert hit["metadata"]["source_path"] == "metro_travel_survey_2024.pdf"  # no server path by default
    assert hit["image_path"] == ""


def test_upstream_get_search_shape(search_server):
    response = httpx.get(f"{search_server.url}/search", params={"queries": ["revenue 2023", "bicycle"], "top_k": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body) == 2 and [h["idx"] for h in body[0]] == [0, 1]
    assert all(h["image_file"] == f"/pages/{h['page_id']}/image" for hits in body for h in hits)


def test_paths_are_exposed_only_when_allowed(sample_engine):
    """--expose-paths: absolute paths for clients on the server's machine (upstream's trainer opens image_file)."""
    server = LoopbackServer(create_app(engine=sample_engine, expose_paths=True)).start()
    try:
        hits = httpx.get(f"{server.url}/search", params={"queries": ["revenue 2023"], "top_k": 2}).json()[0]
        assert all(Path(h["image_file"]).is_absolute() and Path(h["image_file"]).is_file() for h in hits)
        post = httpx.post(f"{server.url}/search", json={"queries": ["revenue 2023"]}).json()["results"][0]
        assert Path(post[0]["image_path"]).is_file() and Path(post[0]["metadata"]["source_path"]).is_file()
        assert Path(httpx.get(f"{server.url}/stats").json()["index_dir"]) == sample_engine.index_dir
    finally:
        server.stop()


def test_page_image_and_metadata(search_server, sample_engine):
    record = sample_engine.page("acme_annual_report_2023_2")
    response = httpx.get(f"{search_server.url}/pages/acme_annual_report_2023_2/image")
    assert response.status_code == 200 and response.headers["content-type"] == "image/jpeg"
    assert Image.open(io.BytesIO(response.content)).size == (record.width, record.height)
    small = httpx.get(f"{search_server.url}/pages/acme_annual_report_2023_2/image", params={"max_side": 200})
    assert max(Image.open(io.BytesIO(small.content)).size) == 200
    info = httpx.get(f"{search_server.url}/pages/acme_annual_report_2023_2").json()
    assert info["page_number"] == 2 and "341" in info["text"]
    docs = httpx.get(f"{search_server.url}/documents").json()
    assert {d["doc_id"] for d in docs} == {"acme_annual_report_2023", "metro_travel_survey_2024",
                                           "solar_energy_brief", "board_memo_scan"}


@pytest.mark.parametrize("raw_path", [
    "/pages/..%2F..%2F..%2Fetc%2Fpasswd/image",
    "/pages/%2E%2E%2Fmanifest.json/image",
    "/pages/../../etc/passwd/image",
    "/pages/..%252Fmanifest.json/image",
    "/pages/manifest.json/image",
    "/pages/acme_annual_report_2023_2%00.jpg/image",
    "/pages/.lock/image",
])
def test_path_traversal_ids_are_refused(search_server, raw_path):
    with httpx.Client() as client:
        request = client.build_request("GET", search_server.url + "/")
        request.url = request.url.copy_with(raw_path=raw_path.encode())
        response = client.send(request)
    assert response.status_code in (404, 422), (raw_path, response.status_code)
    assert b"root:" not in response.content and b"embedders" not in response.content


@pytest.mark.parametrize("body, fragment", [
    ({"queries": []}, "at least 1"),
    ({"queries": ["a"] * 65}, "at most 64"),
    ({"queries": ["   "]}, "should match pattern"),
    ({"queries": [""]}, "at least 1 character"),
    ({"queries": ["x" * 2001]}, "at most 2000 characters"),
    ({"queries": ["ok"], "top_k": False}, "valid integer"),
    ({"queries": ["ok"], "top_k": 1.5}, "valid integer"),
    ({"queries": ["ok"], "top_k": "3"}, "valid integer"),
    ({"queries": ["ok"], "top_k": 0}, "greater than or equal to 1"),
    ({"queries": ["ok"], "top_k": 51}, "less than or equal to 50"),
    ({"queries": ["ok"], "doc_ids": ["../etc"]}, "should match pattern"),
    ({"queries": "not a list"}, "list"),
])
def test_bad_requests_get_clear_4xx(search_server, body, fragment):
    response = httpx.post(f"{search_server.url}/search", json=body)
    assert response.status_code == 422
    assert fragment in response.text


def test_schema_and_behaviour_agree(text_search_server):
    """Issue 21: `top_k: 3.0` is an integer to JSON Schema, so it is served; a 405's Allow lists every
    method the path serves (OPTIONS /search said POST only, though GET is served too)."""
    url = text_search_server.url
    response = httpx.post(f"{url}/search", json={"queries": ["solar capacity"], "top_k": 3.0})
    assert response.status_code == 200 and len(response.json()["results"][0]) == 3
    assert httpx.get(f"{url}/search", params={"queries": "solar", "top_k": "2.0"}).status_code == 200
    for method, path, allowed in [("OPTIONS", "/search", {"GET", "POST"}), ("DELETE", "/search", {"GET", "POST"}),
                                  ("PUT", "/pages/solar_energy_brief_3/image", {"GET"}), ("GET", "/reload", {"POST"})]:
        response = httpx.request(method, url + path)
        assert response.status_code == 405, (method, path)
        assert {m.strip() for m in response.headers["allow"].split(",")} == allowed, (method, path)


def test_unknown_ids(search_server):
    assert httpx.get(f"{search_server.url}/pages/nope_1/image").status_code == 404
    response = httpx.post(f"{search_server.url}/search", json={"queries": ["x"], "doc_ids": ["nope"]})
    assert response.status_code == 404 and "nope" in response.text


def test_health_stats_openapi(search_server):
    assert httpx.get(f"{search_server.url}/health").json() == {"status": "ok", "pages": 12, "degraded_pages": 0}
    stats = httpx.get(f"{search_server.url}/stats").json()
    assert stats["documents"] == 4 and "visual" in stats["embedders"]
    schema = httpx.get(f"{search_server.url}/openapi.json").json()
    assert "/search" in schema["paths"] and "/pages/{page_id}/image" in schema["paths"]
    assert httpx.post(f"{search_server.url}/reload").json() == {"changed": False, "pages": 12}


def test_api_key_is_enforced(sample_engine):
    server = LoopbackServer(create_app(engine=sample_engine, api_key="s3cret")).start()
    try:
        body = {"queries": ["revenue"]}
        assert httpx.post(f"{server.url}/search", json=body).status_code == 401
        assert httpx.post(f"{server.url}/search", json=body, headers={"X-API-Key": "wrong"}).status_code == 401
        assert httpx.post(f"{server.url}/search", json=body, headers={"X-API-Key": "s3cret"}).status_code == 200
        assert httpx.post(f"{server.url}/search", json=body,
                          headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert httpx.get(f"{server.url}/pages/board_memo_scan_1/image").status_code == 401
        assert httpx.get(f"{server.url}/health").status_code == 200  # probes need no key
    finally:
        server.stop()


def test_llama_index_retriever(sample_engine, search_server):
    from llama_index.core.schema import ImageNode

    from search_engine.llama_index_retriever import VragPageRetriever

    for retriever in (VragPageRetriever(engine=sample_engine, top_k=3),
                      VragPageRetriever(search_url=search_server.url, top_k=3)):
        nodes = retriever.retrieve("How many employees did Acme Robotics have at the end of 2023?")
        assert len(nodes) == 3 and all(isinstance(n.node, ImageNode) for n in nodes)
        if retriever._engine is not None:
            assert Path(nodes[0].node.image_path).is_file() and nodes[0].score is not None
        else:  # the server hides its paths: the node carries the image URL, which serves the page
            assert nodes[0].node.image_url.startswith(search_server.url)
            assert httpx.get(nodes[0].node.image_url).headers["content-type"] == "image/jpeg"
        assert "acme_annual_report_2023_4" in [n.node.metadata["page_id"] for n in nodes]


def test_cli_ingest_and_serve(tmp_path, sample_corpus):
    """The console commands a user runs: `vrag-search ingest` then `vrag-search serve`."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    index = tmp_path / "index"
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"not a pdf")
    solar = next(f for f in sample_corpus.files if f.name == "solar_energy_brief.pdf")
    ingest = subprocess.run([sys.executable, "-m", "search_engine", "ingest", str(solar), str(bad), "--index",
                             str(index), "--dpi", "50", "--quiet"], capture_output=True, text=True, env=env,
                            timeout=300, cwd=REPO)
    assert ingest.returncode == 1, ingest.stderr  # one file failed: reported, the rest ingested
    assert "1 added" in ingest.stdout and "bad.pdf" in ingest.stderr
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "search_engine", "serve", "--index", str(index), "--port",
                               str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            pytest.fail("server did not start")
        hits = httpx.post(f"http://127.0.0.1:{port}/search", json={"queries": ["Kestrel Ridge capacity"]}).json()
        assert hits["results"][0][0]["page_id"] == "solar_energy_brief_3"
    finally:
        server.terminate()
        server.wait(timeout=30)
    missing = subprocess.run([sys.executable, "-m", "search_engine", "serve", "--index", str(tmp_path / "none")],
                             capture_output=True, text=True, cwd=REPO, timeout=60)
    assert missing.returncode == 2 and "no index" in missing.stderr
