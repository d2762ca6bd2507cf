"""Qdrant as the visual backend: a multivector collection with the MaxSim comparator.

Why Qdrant: when one machine is not enough, Qdrant shards a collection across nodes and
replicates shards, and its multivector + MaxSim support is exactly late interaction. The index
directory stays the source of truth (manifest, page images, fp16 segments); the collection is a
serving replica that `sync` brings in line with the manifest — pages missing from the collection
are upserted in batches with retries, pages no longer in the manifest are deleted. Point ids are
UUIDv5 of the page id, so a re-sync after a crash is idempotent.

`location`: `":memory:"`, a local path (qdrant-client's in-process local mode: no server, used in
tests), or a server/cluster URL (`http://qdrant:6333`). `docs/qdrant-compose.yml` runs a cluster.
"""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

VECTOR_NAME = "visual"
NAMESPACE = uuid.UUID("6f1c1c52-6a44-4c5e-9f57-1f3c0b1e7a13")


def point_id(page_id: str) -> str:
    return str(uuid.uuid5(NAMESPACE, page_id))


class QdrantBackend:
    """`VisualBackend` over a Qdrant collection (see the module docstring)."""

    def __init__(self, page_ids: list[str], location: str = ":memory:", collection: str = "vrag_pages",
                 api_key: str | None = None, batch_size: int = 64, retries: int = 4, depth: int = 200,
                 shard_number: int | None = None, replication_factor: int | None = None, timeout: float = 60.0,
                 client=None):
        from qdrant_client import QdrantClient

        if client is not None:
            self.client = client
        elif location == ":memory:":
            self.client = QdrantClient(location=":memory:")
        elif location.startswith(("http://", "https://")):
            self.client = QdrantClient(url=location, api_key=api_key, timeout=int(timeout))
        else:
            self.client = QdrantClient(path=location)
        self.remote = client is None and location.startswith(("http://", "https://"))
        self.collection = collection
        self.batch_size, self.retries, self.depth = batch_size, retries, depth
        self.shard_number, self.replication_factor = shard_number, replication_factor
        self.rebind(page_ids)

    def rebind(self, page_ids: list[str]) -> None:
        """Adopt the engine's (new) page order after a reload."""
        self.page_ids = page_ids
        self.num_pages = len(page_ids)
        self._column = {pid: i for i, pid in enumerate(page_ids)}

    # ---- writing -----------------------------------------------------------------------------------
    def _retry(self, what: str, fn):
        delay = 0.5
        for attempt in range(1, self.retries + 1):
            try:
                return fn()
            except Exception as exc:  # network errors, 5xx, timeouts: retry, then surface
                if attempt == self.retries:
                    raise RuntimeError(f"qdrant {what} failed after {attempt} attempts: {exc}") from exc
                log.warning("qdrant %s failed (%s); retry %d/%d in %.1fs", what, exc, attempt, self.retries, delay)
                time.sleep(delay)
                delay *= 2

    def ensure_collection(self, dim: int) -> None:
        from qdrant_client import models

        if self._retry("collection check", lambda: self.client.collection_exists(self.collection)):
            return
        params = models.VectorParams(size=dim, distance=models.Distance.DOT,
                                     multivector_config=models.MultiVectorConfig(
                                         comparator=models.MultiVectorComparator.MAX_SIM))
        self._retry("create collection", lambda: self.client.create_collection(
            self.collection, vectors_config={VECTOR_NAME: params}, shard_number=self.shard_number,
            replication_factor=self.replication_factor))
        if self.remote:  # local mode has no payload indexes (filters still work, by scanning)
            self._retry("payload index", lambda: self.client.create_payload_index(
                self.collection, "doc_id", models.PayloadSchemaType.KEYWORD))

    def stored_page_ids(self) -> set[str]:
        found, offset = set(), None
        while True:
            points, offset = self._retry("scroll", lambda start=offset: self.client.scroll(
                self.collection, limit=1024, offset=start, with_payload=["page_id"], with_vectors=False))
            found.update(p.payload["page_id"] for p in points)
            if offset is None:
                return found

    def upsert_pages(self, pages: Sequence[tuple[str, str, np.ndarray]]) -> None:
        """Upsert (page_id, doc_id, fp16/fp32 token matrix) in batches, each with retries."""
        from qdrant_client import models

        for s in range(0, len(pages), self.batch_size):
            batch = [models.PointStruct(id=point_id(pid), vector={VECTOR_NAME: np.asarray(v, np.float32).tolist()},
                                        payload={"page_id": pid, "doc_id": doc})
                     for pid, doc, v in pages[s : s + self.batch_size]]
            self._retry("upsert", lambda b=batch: self.client.upsert(self.collection, b, wait=True))

    def delete_pages(self, page_ids: Sequence[str]) -> None:
        from qdrant_client import models

        ids = [point_id(p) for p in page_ids]
        for s in range(0, len(ids), 1024):
            self._retry("delete", lambda chunk=ids[s : s + 1024]: self.client.delete(
                self.collection, points_selector=models.PointIdsList(points=chunk), wait=True))

    def sync(self, index_dir: Path, manifest) -> dict[str, int]:
        """Make the collection hold exactly the manifest's pages (idempotent, resumable)."""
        spec = manifest.spec("visual")
        if spec is None or not spec.multi_vector:
            raise ValueError("the qdrant backend needs a multi-vector visual channel (ColQwen2/ColPali)")
        self.ensure_collection(spec.dim)
        stored = self.stored_page_ids()
        wanted = set(manifest.pages)
        stale = sorted(stored - wanted)
        if stale:
            self.delete_pages(stale)
        added = 0
        for entry in manifest.documents.values():
            missing = [i for i, pid in enumerate(entry.page_ids) if pid not in stored]
            if not missing:
                continue
            seg = entry.segments["visual"]
            vectors = np.load(Path(index_dir) / seg["file"], mmap_mode="r")
            starts = np.concatenate([[0], np.cumsum(seg["counts"])])
            self.upsert_pages([(entry.page_ids[i], entry.doc_id, vectors[starts[i] : starts[i + 1]]) for i in missing])
            added += len(missing)
        if added or stale:
            log.info("qdrant %s: %d pages upserted, %d deleted", self.collection, added, len(stale))
        return {"upserted": added, "deleted": len(stale)}

    # ---- searching --------------------------------------------------------------------------------
    def score(self, queries: Sequence[np.ndarray], allowed: np.ndarray | None = None) -> np.ndarray:
        from qdrant_client import models

        query_filter = None
        if allowed is not None and not allowed.all():
            # the engine's filter is by document; send it as a payload filter on doc ids
            docs = sorted({self.page_ids[i].rsplit("_", 1)[0] for i in np.flatnonzero(allowed)})
            query_filter = models.Filter(must=[models.FieldCondition(key="doc_id", match=models.MatchAny(any=docs))])
        out = np.full((len(queries), self.num_pages), -np.inf, np.float32)
        requests = [models.QueryRequest(query=np.asarray(q, np.float32).tolist(), using=VECTOR_NAME,
                                        limit=min(self.depth, max(self.num_pages, 1)), filter=query_filter,
                                        with_payload=["page_id"]) for q in queries]
        responses = self._retry("query", lambda: self.client.query_batch_points(self.collection, requests=requests))
        for qi, response in enumerate(responses):
            for point in response.points:
                col = self._column.get(point.payload["page_id"])
                if col is not None and (allowed is None or allowed[col]):
                    out[qi, col] = point.score
        return out

    def close(self) -> None:
        self.client.close()
