"""The Qdrant backend (qdrant-client's in-process local mode, no server) against exact MaxSim.

Qdrant's MaxSim comparator is exact late interaction, so on the same vectors it must return the
same top pages (scores to float precision) as the project's exact scorer; `sync` must mirror the
manifest through adds and removes, and survive being re-run (it is the resume path).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("qdrant_client")

from search_engine.backends.qdrant import QdrantBackend  # noqa: E402
from search_engine.engine import SearchEngine  # noqa: E402
from search_engine.index.manifest import Manifest  # noqa: E402
from search_engine.ingest import Ingestor  # noqa: E402
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
