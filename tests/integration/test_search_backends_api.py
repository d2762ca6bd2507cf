"""The HTTP server answers identically whichever visual backend serves the index (exact, fast, qdrant).

Same index, three engines, three servers on loopback; every endpoint an agent or upstream client
uses must give the same body (scores equal to float precision: the backends compute the same MaxSim
with different kernels; `took_ms` and the stats' backend name naturally differ).
"""
from __future__ import annotations

import httpx
import numpy as np
import pytest

from search_engine.api import create_app
from search_engine.engine import SearchEngine
from search_engine.index.fast_index import build_fast_index
from search_engine.ingest import Ingestor
from testkit.loopback import LoopbackServer
from testkit.patch_embedder import PatchEmbedder, draw_page

pytest.importorskip("qdrant_client")

BACKENDS = ("exact", "fast", "qdrant")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    root = tmp_path_factory.mktemp("backends")
    folder = root / "pages"
    folder.mkdir()
    for s in range(40):
        draw_page(s).save(folder / f"page{s:04d}.png")
    index = root / "index"
    Ingestor(index, visual_model=None, text_model=None, visual_embedder=PatchEmbedder(), progress=False,
             ocr=False).add(folder)
    build_fast_index(index)
    started = {}
    for name in BACKENDS:
        engine = SearchEngine(index, visual_embedder=PatchEmbedder(), visual_backend=name, use_bm25=False,
                              qdrant={"location": ":memory:", "collection": "pages"})
        started[name] = LoopbackServer(create_app(engine=engine)).start()
    yield started
    for server in started.values():
        server.stop()


def _round_scores(value):
    if isinstance(value, dict):
        return {k: (round(v, 4) if k == "score" else _round_scores(v)) for k, v in value.items() if k != "took_ms"}
    if isinstance(value, list):
        return [_round_scores(v) for v in value]
    return value


def test_every_endpoint_answers_the_same_over_each_backend(servers):
    requests = [
        ("POST", "/search", {"json": {"queries": ["red table", "blue chart 2023", "x"], "top_k": 7}}),
        ("POST", "/search", {"json": {"queries": ["red table"], "top_k": 5, "doc_ids": ["page0003", "page0011"]}}),
        ("POST", "/search", {"json": {"queries": ["red table"], "top_k": 3, "channels": ["visual"]}}),
        ("POST", "/search", {"json": {"queries": ["red"], "top_k": 3, "doc_ids": ["no_such_doc"]}}),
        ("POST", "/search", {"json": {"queries": [], "top_k": 3}}),
        ("GET", "/search", {"params": {"queries": ["green block", "title"], "top_k": 4}}),
        ("GET", "/pages/page0007_1", {}),
        ("GET", "/documents", {}),
        ("GET", "/health", {}),
    ]
    bodies = {name: [] for name in BACKENDS}
    for name, server in servers.items():
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for method, path, kwargs in requests:
                response = client.request(method, path, **kwargs)
                bodies[name].append((response.status_code, _round_scores(response.json())))
    assert bodies["fast"] == bodies["exact"]
    assert bodies["qdrant"] == bodies["exact"]
    first = bodies["exact"][0][1]["results"]
    assert len(first) == 3 and all(len(r) == 7 for r in first)
    assert bodies["exact"][1][1]["results"][0] and {h["doc_id"] for h in bodies["exact"][1][1]["results"][0]} <= \
        {"page0003", "page0011"}
    assert bodies["exact"][4][0] == 422
    scores = [h["score"] for h in first[0]]
    assert scores == sorted(scores, reverse=True) and np.isfinite(scores).all()


def test_stats_name_the_backend(servers):
    for name, server in servers.items():
        assert httpx.get(f"{server.url}/stats").json()["visual_backend"] == name
