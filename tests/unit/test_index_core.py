"""The index's core mechanics with hand-computed expectations: reciprocal-rank fusion, MaxSim on
negative similarities (numpy and torch paths), atomic writes, and the search client's retries and
API key against real loopback servers. Each test is built to fail on a one-line mutant (issue 11's
spot check: RRF constant 0, the -inf init dropped, files written in place)."""
from __future__ import annotations

import asyncio
import inspect
import io
import json
import os
import threading

import httpx
import numpy as np
import pytest
from fastapi import FastAPI, Header, Response
from PIL import Image

from search_engine.client import SearchClient, SearchError
from search_engine.fusion import RRF_K, ranks_from_scores, reciprocal_rank_fusion
from search_engine.index.atomic import atomic_file, atomic_save_npy, atomic_write_bytes, atomic_write_json
from search_engine.index.maxsim import MaxSimScorer
from testkit.loopback import LoopbackServer

# ------------------------------------------------------------------------------------------------ fusion


def test_rrf_by_hand():
    fused = reciprocal_rank_fusion({"visual": np.array([2, 0, 1]), "bm25": np.array([1, 2])}, num_pages=4)
    assert RRF_K == 60
    expected = [1 / 62, 1 / 63 + 1 / 61, 1 / 61 + 1 / 62, 0.0]  # page 0: visual rank 2; page 1: 3 and 1; ...
    assert fused.tolist() == pytest.approx(expected, rel=1e-12)
    assert ranks_from_scores(fused, fused > 0, 10).tolist() == [2, 1, 0]


def test_rrf_weights_and_constant():
    fused = reciprocal_rank_fusion({"a": np.array([0, 1]), "b": np.array([1, 0])}, 2, k=1, weights={"b": 3.0})
    assert fused.tolist() == pytest.approx([1 / 2 + 3 / 3, 1 / 3 + 3 / 2])
    # k matters: with k=0 the top rank would weigh 1/1 = 1.0
    assert reciprocal_rank_fusion({"a": np.array([0])}, 1, k=0).tolist() == [1.0]


def test_ranks_from_scores_masks_ties_and_depth():
    scores = np.array([0.5, 0.9, 0.5, -np.inf, 0.7, 0.9])
    valid = np.array([True, True, True, True, True, False])
    assert ranks_from_scores(scores, valid, 10).tolist() == [1, 4, 0, 2]  # ties keep index order, -inf dropped
    assert ranks_from_scores(scores, valid, 2).tolist() == [1, 4]


def test_rrf_ties_are_broken_by_how_far_ahead_each_ranking_puts_a_page():
    from search_engine.fusion import fused_order, score_tiebreak

    # pages 0 and 1 swap ranks 1 and 2 between two rankings: RRF ties them exactly
    rankings = {"dense": np.array([0, 1, 2]), "bm25": np.array([1, 0, 2])}
    raw = {"dense": np.array([0.80, 0.79, 0.10]),  # page 0 barely ahead in dense
           "bm25": np.array([4.0, 9.0, 1.0])}      # page 1 far ahead in BM25
    fused = reciprocal_rank_fusion(rankings, 3)
    assert fused[0] == pytest.approx(fused[1])
    assert ranks_from_scores(fused, fused > 0, 3).tolist()[0] == 0  # a plain sort: the first page in the index
    second = score_tiebreak(rankings, raw, 3)
    assert second.tolist() == pytest.approx([1.0 + 4 / 9, 0.79 / 0.80 + 1.0, 0.1 / 0.8 + 1 / 9])
    assert fused_order(fused, second, fused > 0, 3).tolist() == [1, 0, 2]
    # only ties are broken: a page ahead by RRF stays ahead whatever its scores
    rankings = {"dense": np.array([0, 1]), "bm25": np.array([0, 1])}
    fused = reciprocal_rank_fusion(rankings, 2)
    second = score_tiebreak(rankings, {"dense": np.array([0.5, 0.49]), "bm25": np.array([1.0, 0.99])}, 2)
    assert fused_order(fused, np.array([0.0, 5.0]), fused > 0, 2).tolist() == [0, 1]
    assert fused_order(fused, second, np.array([False, True]), 2).tolist() == [1]


# ------------------------------------------------------------------------------------------------ MaxSim

# Two pages whose every similarity with the query is negative: a MaxSim that starts its running max
# at 0 instead of -inf (or pads pages with zeros) returns 0 here instead of the true negative sums.
PAGE_A = np.array([[-1.0, 0.0], [-2.0, -1.0]], np.float32)
PAGE_B = np.array([[0.0, -3.0], [-1.0, -1.0], [-0.5, -2.0]], np.float32)
QUERY = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
# by hand: page A: token (1,0) best -1 (from [-1,0]); token (0,1) best 0 (from [-1,0]) -> -1
#          page B: token (1,0) best 0 (from [0,-3]); token (0,1) best -1 (from [-1,-1]) -> -1
# second query (-1, -1): A: max(1, 3) = 3; B: max(3, 2, 2.5) = 3
QUERY2 = np.array([[-1.0, -1.0], [0.0, -1.0]], np.float32)
# second query token (0,-1): A: max(0, 1) = 1; B: max(3, 1, 2) = 3  => A = 4, B = 6
NEGATIVE = np.array([[2.0, 2.0]], np.float32)  # A: max(-2, -6) = -2; B: max(-6, -4, -5) = -4


def _scorer(**kwargs) -> MaxSimScorer:
    return MaxSimScorer(np.concatenate([PAGE_A, PAGE_B]), [2, 3], **kwargs)


@pytest.mark.parametrize("chunk_tokens", [1, 2, 5, 262_144])
def test_maxsim_numpy_by_hand(chunk_tokens):
    scores = _scorer(chunk_tokens=chunk_tokens).score([QUERY, QUERY2, NEGATIVE])
    np.testing.assert_allclose(scores, [[-1.0, -1.0], [4.0, 6.0], [-2.0, -4.0]], atol=1e-6)


@pytest.mark.parametrize("gpu_block_bytes", [1, 100, 1 << 30])
def test_maxsim_torch_path_on_cpu_by_hand(gpu_block_bytes):
    """The GPU code path (a padded gather of each page's tokens, masked with -inf, reduced with amax), run
    on CPU; a tiny block budget slices every page on its own, a middle one slices pages of unequal length
    together (the padding must never win a max), a large one scores all pages in one slice."""
    pytest.importorskip("torch")
    if "backend" not in inspect.signature(MaxSimScorer).parameters:
        pytest.skip("this MaxSimScorer has no backend= switch to run the torch path on CPU")
    scorer = _scorer(gpu_block_bytes=gpu_block_bytes, backend="torch")
    scores = scorer.score([QUERY, QUERY2, NEGATIVE])
    np.testing.assert_allclose(scores, [[-1.0, -1.0], [4.0, 6.0], [-2.0, -4.0]], atol=1e-3)
    rng = np.random.default_rng(0)
    pages = [rng.normal(size=(n, 8)).astype(np.float16) for n in (3, 1, 7, 2)]
    queries = [rng.normal(size=(n, 8)).astype(np.float32) - 2.0 for n in (4, 1)]
    flat, counts = np.concatenate(pages), [len(p) for p in pages]
    np.testing.assert_allclose(MaxSimScorer(flat, counts, backend="torch", gpu_block_bytes=gpu_block_bytes)
                               .score(queries),
                               MaxSimScorer(flat, counts).score(queries), rtol=1e-3, atol=1e-3)
    # a short page scored in the same slice as a long one: its padding must not read the long page's tokens
    long_then_short = np.array([[1, 0], [0, 1], [0, 1], [-1, 0]], np.float16)
    scores = MaxSimScorer(long_then_short, [3, 1], backend="torch", gpu_block_bytes=1 << 30).score(
        [np.array([[1.0, 0.0]], np.float32)])
    np.testing.assert_allclose(scores, [[1.0, -1.0]], atol=1e-6)


# ------------------------------------------------------------------------------------------------ atomic writes


def test_atomic_file_keeps_the_old_content_until_the_block_ends(tmp_path):
    target = tmp_path / "data.bin"
    target.write_bytes(b"old content")
    with atomic_file(target) as fh:
        fh.write(b"new ")
        fh.flush()
        assert target.read_bytes() == b"old content"  # a reader during the write sees the old file, whole
        fh.write(b"content, longer")
    assert target.read_bytes() == b"new content, longer"
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]  # no temp file left


def test_crash_mid_write_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "manifest.json"
    atomic_write_json(target, {"version": 1})
    with pytest.raises(RuntimeError, match="killed"):
        with atomic_file(target) as fh:
            fh.write(b'{"vers')
            raise RuntimeError("killed mid-write")
    assert target.read_text(encoding="utf-8").replace(" ", "").replace("\n", "") == '{"version":1}'
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_concurrent_reader_never_sees_a_partial_file(tmp_path):
    target = tmp_path / "page.npy"
    small, large = np.zeros(10, np.float32), np.ones(400_000, np.float32)
    atomic_save_npy(target, small)
    seen: set[int] = set()
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                seen.add(int(np.load(target).size))
            except (ValueError, EOFError, OSError) as exc:  # a partial .npy fails to load
                seen.add(-1)
                raise AssertionError(f"partial file seen: {exc}") from exc

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(20):
            atomic_save_npy(target, large if i % 2 == 0 else small)
    finally:
        stop.set()
        thread.join()
    assert seen <= {10, 400_000} and -1 not in seen


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_files_respect_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "x", b"1")
    finally:
        os.umask(old)
    assert (tmp_path / "x").stat().st_mode & 0o777 == mode


# ------------------------------------------------------------------------------------------------ client


def _flaky_app(fail_times: int, key: str | None = None) -> tuple[FastAPI, dict]:
    """A search-shaped server that fails `fail_times` times with 503, then answers; counts attempts."""
    state = {"attempts": 0, "keys": []}
    app = FastAPI()

    @app.get("/health")
    async def health():
        return {"status": "ok", "pages": 0}

    @app.post("/search")
    async def search(x_api_key: str | None = Header(None)):
        state["attempts"] += 1
        state["keys"].append(x_api_key)
        if key is not None and x_api_key != key:
            return Response('{"detail": "missing or wrong API key"}', status_code=401, media_type="application/json")
        if state["attempts"] <= fail_times:
            return Response('{"detail": "warming up"}', status_code=503, media_type="application/json")
        hit = {"rank": 1, "page_id": "d_1", "doc_id": "d", "page_number": 1, "score": 0.5,
               "image_url": "/pages/d_1/image", "image_path": "", "metadata": {}}
        return {"results": [[hit]], "took_ms": 1.0}

    return app, state


def test_client_retries_5xx_then_succeeds_and_sends_the_key():
    app, state = _flaky_app(fail_times=2, key="s3cret")
    with _started(app) as server:
        async def go():
            client = SearchClient(server.url + "/", api_key="s3cret", max_retries=3, backoff=0.01)
            try:
                return await client.search(["q"])
            finally:
                await client.aclose()

        results = asyncio.run(go())
    assert state["attempts"] == 3 and state["keys"] == ["s3cret"] * 3
    assert results[0][0].page_id == "d_1" and results[0][0].image_url == server.url + "/pages/d_1/image"


def test_client_gives_up_after_retries_and_never_retries_4xx():
    app, state = _flaky_app(fail_times=100)
    with _started(app) as server:
        async def go(client):
            try:
                return await client.search(["q"])
            finally:
                await client.aclose()

        with pytest.raises(SearchError, match="unavailable after 3 attempts.*503"):
            asyncio.run(go(SearchClient(server.url, max_retries=2, backoff=0.01)))
        assert state["attempts"] == 3
    app, state = _flaky_app(fail_times=0, key="right")
    with _started(app) as server:
        with pytest.raises(SearchError, match="refused the request \\(401\\)"):
            asyncio.run(go(SearchClient(server.url, api_key="wrong", max_retries=3, backoff=0.01)))
        assert state["attempts"] == 1


def test_page_images_from_a_remote_search_server(sample_engine):
    """A client on another machine (the server hides its paths): the bytes come over HTTP, with the key."""
    from search_engine.api import create_app

    record = sample_engine.page("solar_energy_brief_3")
    with _started(create_app(engine=sample_engine, api_key="k")) as server:
        async def go():
            client = SearchClient(server.url, api_key="k", backoff=0.01)
            try:
                hits = await client.search(["Kestrel Ridge solar plant"], top_k=2)
                full = await client.page_image("solar_energy_brief_3")
                small = await client.page_image("solar_energy_brief_3", max_side=100)
                return hits, full, small
            finally:
                await client.aclose()

        hits, full, small = asyncio.run(go())
        assert httpx.get(f"{server.url}/pages/solar_energy_brief_3/image").status_code == 401
    assert hits[0][0].image_path == "" and hits[0][0].image_url.startswith(server.url)
    on_disk = Image.open(sample_engine.index_dir / record.image_path).convert("RGB")
    fetched = Image.open(io.BytesIO(full)).convert("RGB")
    assert fetched.size == (record.width, record.height)
    assert np.array_equal(np.asarray(fetched), np.asarray(on_disk))  # the very file, byte for byte decoded
    assert max(Image.open(io.BytesIO(small)).size) == 100


class _started:
    """Context manager: an app on a loopback port for the duration of a block."""

    def __init__(self, app):
        self.server = LoopbackServer(app)

    def __enter__(self) -> LoopbackServer:
        return self.server.start()

    def __exit__(self, *exc) -> None:
        self.server.stop()


# ------------------------------------------------------------------------------------------------ dense + manifest


def test_dense_channel_scores_by_hand():
    from search_engine.index.dense import DenseChannel

    pages = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, -1.0]], np.float32)
    channel = DenseChannel(pages)
    assert channel.num_pages == 3 and channel.dim == 2
    queries = [np.array([[0.6, 0.8], [9.0, 9.0]], np.float32), np.array([[0.0, 1.0]], np.float32)]
    # only a query's first vector counts (single-vector models); inner products by hand
    np.testing.assert_allclose(channel.score(queries), [[0.6, 1.0, -0.8], [0.0, 0.8, -1.0]], atol=1e-6)
    top = channel.score(queries, top_n=1)
    assert top[0].tolist() == [-np.inf, pytest.approx(1.0), -np.inf] and top[1].tolist()[1] == pytest.approx(0.8)
    empty = DenseChannel(np.zeros((0, 2), np.float32)).score(queries)
    assert empty.shape == (2, 0) and empty.dtype == np.float32
    # float64 input (what numpy gives by default) is converted for faiss, not rejected
    np.testing.assert_allclose(DenseChannel(pages.astype(np.float64)).score(queries), channel.score(queries))


def test_manifest_round_trip_and_damage(tmp_path):
    from search_engine.embedders.base import EmbedderSpec
    from search_engine.index.manifest import FORMAT_VERSION, DocumentEntry, Manifest
    from search_engine.types import PageRecord

    assert not Manifest.exists(tmp_path) and Manifest.load(tmp_path).documents == {}
    manifest = Manifest()
    manifest.set_spec("text", EmbedderSpec("minilm", "m", "text", False, 384))
    pages = [PageRecord(f"d_{n}", "d", n, f"pages/d/abc/{n}.jpg", 10, 20, "/src/d.pdf", f"t{n}", "pdf")
             for n in (1, 2)]
    entry = DocumentEntry("d", "/src/d.pdf", "abc", 2, "pdf", ["d_1", "d_2"], {"text": {"file": "s.npy",
                                                                                      "counts": [1, 1]}})
    manifest.add_document(entry, pages)
    manifest.add_document(DocumentEntry("e", "/src/e.png", "def", 1, "image", ["e_1"]),
                          [PageRecord("e_1", "e", 1, "pages/e/def/1.jpg", 5, 5)])
    manifest.save(tmp_path)
    assert Manifest.exists(tmp_path)
    loaded = Manifest.load(tmp_path)
    assert loaded.to_json() == manifest.to_json() and loaded.updated_at > 0
    assert loaded.spec("text") == EmbedderSpec("minilm", "m", "text", False, 384) and loaded.spec("visual") is None
    assert loaded.doc_for_source("/src/d.pdf").doc_id == "d" and loaded.doc_for_source("/nope") is None
    assert loaded.pages["d_2"].image_path == "pages/d/abc/2.jpg" and loaded.pages["d_2"].text == "t2"
    written = json.loads((tmp_path / "manifest.json").read_text())["version"]
    assert loaded.to_json()["version"] == FORMAT_VERSION and written == FORMAT_VERSION
    del loaded.pages["d_1"]  # an entry whose page record is already gone is still removable
    removed = loaded.remove_document("d")
    assert removed.doc_id == "d" and set(loaded.pages) == {"e_1"} and loaded.remove_document("d") is None
    (tmp_path / "manifest.json").write_text("{broken")
    with pytest.raises(RuntimeError, match="not valid JSON"):
        Manifest.load(tmp_path)
    (tmp_path / "manifest.json").write_text('{"version": 99}')
    with pytest.raises(RuntimeError, match="newer version"):
        Manifest.load(tmp_path)


def test_manifest_written_by_older_versions_loads(tmp_path):
    """A manifest without the newer keys (or of format 0) loads with defaults; it is indented for people."""
    from search_engine.index.manifest import Manifest

    (tmp_path / "manifest.json").write_text('{"documents": {}}')
    loaded = Manifest.load(tmp_path)
    assert loaded.version == 1 and loaded.pages == {} and loaded.updated_at == 0.0 and loaded.embedders == {}
    (tmp_path / "manifest.json").write_text('{"version": 0}')
    assert Manifest.load(tmp_path).version == 0
    Manifest().save(tmp_path)
    assert (tmp_path / "manifest.json").read_text(encoding="utf-8").count("\n") >= 4  # one key per line


def test_maxsim_with_one_page_and_with_none():
    one = MaxSimScorer(PAGE_A, [2]).score([QUERY, NEGATIVE])
    np.testing.assert_allclose(one, [[-1.0], [-2.0]], atol=1e-6)
    empty = MaxSimScorer(np.zeros((0, 2), np.float16), []).score([QUERY])
    assert empty.shape == (1, 0) and empty.dtype == np.float32


def test_maxsim_memory_budget_backend_choice_and_errors():
    flat = np.concatenate([PAGE_A, PAGE_B]).astype(np.float16)
    assert _scorer()._vectors.dtype == np.float32  # fits the fp32 budget: converted once, not per query
    tight = MaxSimScorer(flat, [2, 3], cpu_fp32_budget_gib=5 * 2 * 4 / 2**30 - 1e-12)  # 1 byte short of fp32
    assert tight._vectors.dtype == np.float16
    np.testing.assert_allclose(tight.score([QUERY2]), [[4.0, 6.0]], atol=1e-2)
    exact = MaxSimScorer(flat, [2, 3], cpu_fp32_budget_gib=5 * 2 * 4 / 2**30)
    assert exact._vectors.dtype == np.float32
    one_dim = MaxSimScorer(np.ones((4, 1), np.float16), [4], cpu_fp32_budget_gib=4 * 4 / 2**30)
    assert one_dim._vectors.dtype == np.float32
    with pytest.raises(ValueError, match="do not add up"):
        MaxSimScorer(flat, [2, 2])
    with pytest.raises(ValueError, match="at least one vector"):
        MaxSimScorer(flat, [5, 0])
    if "backend" in inspect.signature(MaxSimScorer).parameters:
        assert not MaxSimScorer(flat, [2, 3], backend="auto").use_torch
        assert MaxSimScorer(flat, [2, 3], backend="torch").use_torch
        assert not MaxSimScorer(flat, [2, 3], backend="numpy").use_torch
        with pytest.raises(ValueError, match="backend"):
            MaxSimScorer(flat, [2, 3], backend="cuda")


def test_atomic_npy_refuses_pickles(tmp_path):
    """Index files must never need pickle to load (a crafted index could run code on the server)."""
    with pytest.raises(ValueError):
        atomic_save_npy(tmp_path / "x.npy", np.array([{"a": 1}], dtype=object))
    assert not (tmp_path / "x.npy").exists() and not list(tmp_path.iterdir())
