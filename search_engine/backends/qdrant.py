"""Qdrant as the visual backend, the way Qdrant recommends for late interaction: pooled prefetch, MaxSim rerank.

Why Qdrant: when one machine is not enough, Qdrant shards a collection across nodes and
replicates shards, and its multivector + MaxSim support is exactly late interaction. The index
directory stays the source of truth (manifest, page images, fp16 segments); the collection is a
serving replica that `sync` brings in line with the manifest — pages missing from the collection
are upserted in batches with retries, pages no longer in the manifest are deleted. Point ids are
UUIDv5 of the page id, so a re-sync after a crash is idempotent.

Two named vectors per page (Qdrant's multi-vector recipe, e.g. its ColPali tutorial): `pooled` — the
page's tokens mean-pooled into `pool_groups` contiguous groups (≈ row pooling of the patch grid; 1 =
one mean vector), a small multivector in an HNSW index — and `visual`, the full token matrix with
HNSW disabled (`m=0`: it is only read to rerank). A query is one Query API call: a prefetch of the
`prefetch_limit` best pages by MaxSim over `pooled` (HNSW), then MaxSim over `visual` for those only.
`pool_groups=0` keeps the single-stage full MaxSim scan (exact; small collections).

Options for a cluster (all applied when the collection is created; see docs/scale.md): `shard_number`,
`replication_factor`, `write_consistency_factor`, `on_disk` (full token matrices on disk, mmap),
`on_disk_payload`, `hnsw_m` / `hnsw_ef_construct` for the pooled index, and `quantization`
("scalar": int8, or "binary", kept in RAM; searches then oversample and rescore with the originals).
Payload: `page_id`, `doc_id`, `page` (page number in its document) and `source` (the document's file
name); `doc_id` gets a keyword payload index on a server, so `doc_ids` filters stay fast.

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
POOLED_NAME = "pooled"
QUANTIZATIONS = ("none", "scalar", "binary")
NAMESPACE = uuid.UUID("6f1c1c52-6a44-4c5e-9f57-1f3c0b1e7a13")


def point_id(page_id: str) -> str:
    return str(uuid.uuid5(NAMESPACE, page_id))


def pool_tokens(vectors: np.ndarray, groups: int) -> np.ndarray:
    """Mean of `groups` contiguous token groups (row pooling when tokens are row-major patches; 1 = mean)."""
    vectors = np.asarray(vectors, np.float32)
    groups = max(1, min(groups, vectors.shape[0]))
    return np.stack([part.mean(axis=0) for part in np.array_split(vectors, groups)])


def page_number(page_id: str) -> int | None:
    """The page number of an id like `doc_12` (None when the id has no numeric suffix)."""
    tail = page_id.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else None


class QdrantBackend:
    """`VisualBackend` over a Qdrant collection (see the module docstring)."""

    def __init__(self, page_ids: list[str], location: str = ":memory:", collection: str = "vrag_pages",
                 api_key: str | None = None, batch_size: int = 64, retries: int = 4, depth: int = 200,
                 shard_number: int | None = None, replication_factor: int | None = None, timeout: float = 60.0,
                 client=None, pool_groups: int = 32, prefetch_limit: int = 400, quantization: str = "none",
                 on_disk: bool | None = None, on_disk_payload: bool | None = None, hnsw_m: int | None = None,
                 hnsw_ef_construct: int | None = None, hnsw_ef: int | None = None,
                 write_consistency_factor: int | None = None, oversampling: float = 2.0):
        from qdrant_client import QdrantClient

        if quantization not in QUANTIZATIONS:
            raise ValueError(f"unknown quantization {quantization!r}; choose one of {', '.join(QUANTIZATIONS)}")
        if pool_groups < 0 or prefetch_limit < 1:
            raise ValueError("pool_groups must be ≥ 0 and prefetch_limit ≥ 1")

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
        self.write_consistency_factor = write_consistency_factor
        self.pool_groups, self.prefetch_limit = pool_groups, prefetch_limit
        self.quantization, self.oversampling = quantization, oversampling
        self.on_disk, self.on_disk_payload = on_disk, on_disk_payload
        self.hnsw_m, self.hnsw_ef_construct, self.hnsw_ef = hnsw_m, hnsw_ef_construct, hnsw_ef
        self.two_stage = pool_groups > 0  # confirmed against the collection's schema by ensure_collection
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

    def _quantization_config(self):
        from qdrant_client import models

        if self.quantization == "scalar":
            return models.ScalarQuantization(scalar=models.ScalarQuantizationConfig(
                type=models.ScalarType.INT8, quantile=0.99, always_ram=True))
        if self.quantization == "binary":
            return models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True))
        return None

    def vectors_config(self, dim: int) -> dict:
        """The collection's named vectors (see the module docstring)."""
        from qdrant_client import models

        maxsim = models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
        quant = self._quantization_config()
        config = {VECTOR_NAME: models.VectorParams(
            size=dim, distance=models.Distance.DOT, multivector_config=maxsim, on_disk=self.on_disk,
            quantization_config=quant, hnsw_config=models.HnswConfigDiff(m=0) if self.two_stage else None)}
        if self.two_stage:
            config[POOLED_NAME] = models.VectorParams(
                size=dim, distance=models.Distance.DOT, multivector_config=maxsim, quantization_config=quant,
                hnsw_config=models.HnswConfigDiff(m=self.hnsw_m, ef_construct=self.hnsw_ef_construct))
        return config

    def ensure_collection(self, dim: int) -> None:
        from qdrant_client import models

        if self._retry("collection check", lambda: self.client.collection_exists(self.collection)):
            info = self._retry("collection info", lambda: self.client.get_collection(self.collection))
            vectors = info.config.params.vectors
            has_pooled = isinstance(vectors, dict) and POOLED_NAME in vectors
            if self.two_stage and not has_pooled:
                log.warning("qdrant collection %s has no %r vector (made by an older version): single-stage "
                            "MaxSim; recreate it for the pooled prefetch", self.collection, POOLED_NAME)
            self.two_stage = self.two_stage and has_pooled
            return
        self._retry("create collection", lambda: self.client.create_collection(
            self.collection, vectors_config=self.vectors_config(dim), shard_number=self.shard_number,
            replication_factor=self.replication_factor, write_consistency_factor=self.write_consistency_factor,
            on_disk_payload=self.on_disk_payload))
        if self.remote:  # local mode has no payload indexes (filters still work, by scanning)
            self._retry("payload index", lambda: self.client.create_payload_index(
                self.collection, "doc_id", models.PayloadSchemaType.KEYWORD))

    def stored_page_ids(self) -> set[str]:
        found: set[str] = set()
        offset = None
        while True:
            points, offset = self._retry("scroll", lambda start=offset: self.client.scroll(
                self.collection, limit=1024, offset=start, with_payload=["page_id"], with_vectors=False))
            found.update(p.payload["page_id"] for p in points)
            if offset is None:
                return found

    def point_vectors(self, vectors: np.ndarray) -> dict:
        """The named vectors of one page: full tokens, and their pooled groups when two-stage."""
        tokens = np.asarray(vectors, np.float32)
        out = {VECTOR_NAME: tokens.tolist()}
        if self.two_stage:
            out[POOLED_NAME] = pool_tokens(tokens, self.pool_groups).tolist()
        return out

    def upsert_pages(self, pages: Sequence[tuple]) -> None:
        """Upsert (page_id, doc_id, fp16/fp32 token matrix[, payload extras]) in batches, each with retries."""
        from qdrant_client import models

        for s in range(0, len(pages), self.batch_size):
            batch = [models.PointStruct(id=point_id(page[0]), vector=self.point_vectors(page[2]),
                                        payload={"page_id": page[0], "doc_id": page[1], "page": page_number(page[0]),
                                                 **(page[3] if len(page) > 3 else {})})
                     for page in pages[s : s + self.batch_size]]
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
            extra = {"source": Path(entry.source_path).name}
            self.upsert_pages([(entry.page_ids[i], entry.doc_id, vectors[starts[i] : starts[i + 1]], extra)
                               for i in missing])
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
        requests = [self.query_request(q, query_filter) for q in queries]
        responses = self._retry("query", lambda: self.client.query_batch_points(self.collection, requests=requests))
        for qi, response in enumerate(responses):
            for point in response.points:
                col = self._column.get(point.payload["page_id"])
                if col is not None and (allowed is None or allowed[col]):
                    out[qi, col] = point.score
        return out

    def search_params(self):
        from qdrant_client import models

        quant = None
        if self.quantization != "none":
            quant = models.QuantizationSearchParams(rescore=True, oversampling=self.oversampling)
        if quant is None and self.hnsw_ef is None:
            return None
        return models.SearchParams(hnsw_ef=self.hnsw_ef, quantization=quant)

    def query_request(self, query: np.ndarray, query_filter=None):
        """One Query API request: pooled HNSW prefetch, then MaxSim over the full token matrices."""
        from qdrant_client import models

        q = np.asarray(query, np.float32).tolist()
        limit = min(self.depth, max(self.num_pages, 1))
        prefetch = None
        if self.two_stage:
            prefetch = models.Prefetch(query=q, using=POOLED_NAME, limit=max(self.prefetch_limit, limit),
                                       filter=query_filter, params=self.search_params())
        return models.QueryRequest(query=q, using=VECTOR_NAME, prefetch=prefetch, limit=limit, filter=query_filter,
                                   with_payload=["page_id"], params=self.search_params())

    def close(self) -> None:
        self.client.close()
