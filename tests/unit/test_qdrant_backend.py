"""The Qdrant backend (qdrant-client's in-process local mode, no server) against exact MaxSim.

Qdrant's MaxSim comparator is exact late interaction, so on the same vectors it must return the
same top pages (scores to float precision) as the project's exact scorer; `sync` must mirror the
manifest through adds and removes, and survive being re-run (it is the resume path).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("qdrant_client")

from search_engine.backends.qdrant import QdrantBackend, point_id  # noqa: E402
from search_engine.engine import SearchEngine  # noqa: E402
from search_engine.index.manifest import Manifest  # noqa: E402
from search_engine.ingest import Ingestor  # noqa: E402
from search_engine.settings import EngineSettings  # noqa: E402
from testkit.patch_embedder import PatchEmbedder, draw_page  # noqa: E402


def _ingest(index, folder, seeds):
    folder.mkdir(parents=True, exist_ok=True)
    for s in seeds:
        draw_page(s).save(folder / f"page{s:04d}.png")
    Ingestor(index, visual_model=None, text_model=None, visual_embedder=PatchEmbedder(), progress=False,
             ocr=False).add(folder)


def _queries(index, n, seed=0):
    manifest = Manifest.load(index)
    rng = np.random.default_rng(seed)
    entries = list(manifest.documents.values())
    out = []
    for i in rng.choice(len(entries), n, replace=False):
        vec = np.load(index / entries[i].segments["visual"]["file"]).astype(np.float32)
        out.append(vec[rng.choice(len(vec), 6, replace=False)] + 0.01)
    return out


def test_qdrant_returns_the_exact_top_pages_and_follows_the_manifest(tmp_path):
    index = tmp_path / "index"
    _ingest(index, tmp_path / "a", range(30))
    kw = {"visual_embedder": PatchEmbedder(), "use_bm25": False}
    qdrant_opts = {"location": str(tmp_path / "qdrant"), "collection": "pages", "batch_size": 7}
    exact = SearchEngine(index, visual_backend="exact", **kw)
    engine = SearchEngine(index, visual_backend="qdrant", qdrant=qdrant_opts, **kw)
    assert engine.stats()["visual_backend"] == "qdrant"
    backend = engine._state.channels["visual"]
    assert backend.client.count("pages").count == 30  # upserted in batches of 7

    queries = _queries(index, 6)
    for q in queries:
        a = exact.search_by_vectors([q], top_k=10)[0]
        b = engine.search_by_vectors([q], top_k=10)[0]
        assert [h.page_id for h in a] == [h.page_id for h in b]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], rtol=1e-4, atol=1e-4)
    # the doc filter is applied by Qdrant (payload filter) before ranking
    wanted = ["page0003", "page0017"]
    hits = engine.search_by_vectors([queries[0]], top_k=5, doc_ids=wanted)[0]
    assert {h.doc_id for h in hits} == set(wanted)

    # add and remove documents; the running engine's reload re-syncs the collection (same local client)
    _ingest(index, tmp_path / "b", range(30, 40))
    Ingestor(index, visual_model=None, text_model=None, visual_embedder=PatchEmbedder(), progress=False,
             ocr=False).remove(["page0000", "page0001"])
    assert engine.reload() is True
    assert engine._state.channels["visual"] is backend
    assert engine.stats()["pages"] == 38
    assert backend.stored_page_ids() == set(Manifest.load(index).pages)
    assert backend.sync(index, Manifest.load(index)) == {"upserted": 0, "deleted": 0}
    exact.reload(force=True)
    for q in _queries(index, 4, seed=1):
        assert [h.page_id for h in exact.search_by_vectors([q], top_k=10)[0]] == \
            [h.page_id for h in engine.search_by_vectors([q], top_k=10)[0]]
    # a fresh engine over the same local path re-syncs nothing: the collection already mirrors the index
    backend.close()
    engine = SearchEngine(index, visual_backend="qdrant", qdrant=qdrant_opts, **kw)
    assert engine._state.channels["visual"].sync(index, Manifest.load(index)) == {"upserted": 0, "deleted": 0}
    engine._state.channels["visual"].close()


def test_qdrant_writes_are_retried_then_reported(tmp_path):
    class FlakyClient:
        """A client whose first upserts fail like a dropped connection."""

        def __init__(self, failures):
            from qdrant_client import QdrantClient

            self.inner = QdrantClient(location=":memory:")
            self.failures = failures

        def upsert(self, *args, **kwargs):
            if self.failures > 0:
                self.failures -= 1
                raise ConnectionError("connection reset by peer")
            return self.inner.upsert(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    vec = np.ones((3, 128), np.float32) / np.sqrt(128)
    backend = QdrantBackend(["d_1"], client=FlakyClient(failures=2), collection="c", retries=3)
    backend.ensure_collection(128)
    backend.upsert_pages([("d_1", "d", vec)])
    assert backend.stored_page_ids() == {"d_1"}
    failing = QdrantBackend(["d_1"], client=FlakyClient(failures=5), collection="c", retries=2)
    failing.ensure_collection(128)
    with pytest.raises(RuntimeError, match="upsert failed after 2 attempts"):
        failing.upsert_pages([("d_1", "d", vec)])


def test_pooling_averages_contiguous_token_groups():
    from search_engine.backends.qdrant import page_number, pool_tokens

    tokens = np.arange(12, dtype=np.float32).reshape(6, 2)
    np.testing.assert_allclose(pool_tokens(tokens, 3), [[1, 2], [5, 6], [9, 10]])
    np.testing.assert_allclose(pool_tokens(tokens, 1), [tokens.mean(0)])
    assert pool_tokens(tokens, 50).shape == (6, 2)  # never more groups than tokens
    assert page_number("report_2024_7") == 7 and page_number("cover") is None


def _clustered_pages(n, seed=0, dim=32):
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((12, dim)).astype(np.float32)
    pages = []
    for _ in range(n):
        t = topics[rng.choice(12, 2, replace=False)]
        tokens = np.repeat(t, 10, axis=0) + 0.6 * rng.standard_normal((20, dim)).astype(np.float32)
        pages.append(tokens / np.linalg.norm(tokens, axis=1, keepdims=True))
    return pages


@pytest.mark.parametrize("quantization", ["none", "scalar", "binary"])
def test_two_stage_prefetch_then_maxsim_rerank(quantization):
    """Pooled prefetch (a few pages) then MaxSim on the full tokens: the scores returned are exact MaxSim,
    only pages outside the prefetch can be missed, and a starved prefetch finds fewer of the exact top-10."""
    from qdrant_client import QdrantClient

    from search_engine.index.maxsim import MaxSimScorer

    pages = _clustered_pages(150)
    ids = [f"doc{i // 3}_{i % 3 + 1}" for i in range(150)]
    exact = MaxSimScorer(np.concatenate(pages), [len(p) for p in pages])
    rng = np.random.default_rng(3)
    queries = [pages[i][rng.choice(20, 5, replace=False)] for i in rng.choice(150, 12, replace=False)]
    reference = exact.score(queries)

    def recall(prefetch):
        client = QdrantClient(location=":memory:")
        backend = QdrantBackend(ids, client=client, collection="c", depth=10, pool_groups=4,
                                prefetch_limit=prefetch, quantization=quantization, on_disk=True, hnsw_m=8)
        backend.ensure_collection(32)
        backend.upsert_pages([(pid, pid.split("_")[0], v) for pid, v in zip(ids, pages)])
        config = client.get_collection("c").config.params.vectors
        assert set(config) == {"visual", "pooled"}
        point = client.retrieve("c", [point_id(ids[4])], with_payload=True, with_vectors=["pooled"])[0]
        assert point.payload == {"page_id": "doc1_2", "doc_id": "doc1", "page": 2}
        assert len(point.vector["pooled"]) == 4
        scores = backend.score(queries)
        hits = []
        for qi in range(len(queries)):
            ranked = np.flatnonzero(np.isfinite(scores[qi]))
            assert len(ranked) <= 10
            np.testing.assert_allclose(scores[qi, ranked], reference[qi, ranked], rtol=1e-4, atol=1e-4)
            top = set(np.argsort(-reference[qi])[:10].tolist())
            hits.append(len(top & set(ranked.tolist())) / 10)
        return float(np.mean(hits))

    assert recall(150) == 1.0  # the prefetch holds every page: exact
    assert recall(60) >= 0.8
    assert recall(10) < recall(150)


def test_bad_qdrant_options_are_refused():
    with pytest.raises(ValueError, match="quantization"):
        QdrantBackend(["a_1"], quantization="pq")
    with pytest.raises(ValueError, match="prefetch_limit"):
        QdrantBackend(["a_1"], prefetch_limit=0)


def test_cluster_settings_come_from_the_environment(tmp_path, monkeypatch):
    index = tmp_path / "index"
    _ingest(index, tmp_path / "a", range(4))
    for var, value in (("VRAG_QDRANT_URL", ":memory:"), ("VRAG_QDRANT_POOL_GROUPS", "8"),
                       ("VRAG_QDRANT_PREFETCH", "50"), ("VRAG_QDRANT_QUANTIZATION", "scalar"),
                       ("VRAG_QDRANT_ON_DISK", "1")):
        monkeypatch.setenv(var, value)
    engine = SearchEngine(index, settings=EngineSettings.from_env(), visual_backend="qdrant",
                          visual_embedder=PatchEmbedder(), use_bm25=False)
    backend = engine._state.channels["visual"]
    settings = (backend.pool_groups, backend.prefetch_limit, backend.quantization, backend.on_disk)
    assert settings == (8, 50, "scalar", True)
    vectors = backend.client.get_collection(backend.collection).config.params.vectors
    assert vectors["visual"].on_disk is True and vectors["pooled"].quantization_config is not None
    point = backend.client.scroll(backend.collection, limit=1, with_payload=True)[0][0]
    assert point.payload["source"].endswith(".png") and point.payload["page"] == 1
    backend.close()
