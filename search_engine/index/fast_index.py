"""The fast visual index of an index directory: a sidecar next to the manifest, kept crash-safe.

Layout: `fast/visual/CURRENT` (JSON naming the live generation) and `fast/visual/gen-<n>/` (the
`FastMaxSim` files: codebook, per-token codes, inverted file, tombstones, and the list of segment
files it covers, in row order). The page vectors themselves are not copied: the rerank reads the
index's own per-document fp16 segments (`SegmentTokenStore`).

Crash safety: a new generation is written completely, then `CURRENT` is replaced atomically, then
older generations are deleted. A reader (or a crash) sees the old generation or the new one, never
a half-written one; leftovers of a killed update are removed by the next one.

Incremental: documents added since the sidecar's generation are coded with the existing codebook
(no re-training) and the inverted file is rebuilt from the codes (sort-based, ~1 s per million
tokens); documents removed are dropped from the row list. `refresh_fast_index` does that and
persists it (called by ingestion when a sidecar exists); `FastVisualIndex.open` does the same in
memory when it finds the sidecar stale, so search results are always those of the manifest.
An index without a sidecar still opens (exact search); `vrag-search build-fast-index` adds one.

Compressed sidecar (`build_fast_index(..., codec="pq32")`): the rerank then reads a compressed copy of
every page (centroid id + residual bytes, ~7.5× smaller than fp16; see `compressed_store.py`) kept as
one part per document segment under `fast/visual/codecs/<codec id>/parts/`, so adding a document
encodes that document only. The fp16 segments are read for the last `exact_rerank` pages per query
only (0: never). Training a new codec (new centroids) is the explicit `build_fast_index` step and is
resumable: `fast/visual/BUILDING` names the codec being built; a killed build re-run with the same
codec spec keeps the trained codec and the parts already written, and only publishing the new
generation switches readers over. Codec directories no published generation uses are removed after
the switch.
"""
from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from search_engine.index.atomic import atomic_write_json
from search_engine.index.centroids import Codebook, InvertedFile
from search_engine.index.compressed_store import (
    CODES_SUFFIX,
    RES_SUFFIX,
    CompressedTokenStore,
    part_complete,
    part_paths,
    write_part,
)
from search_engine.index.fast_maxsim import FastMaxSim, FastParams
from search_engine.index.manifest import Manifest
from search_engine.index.residual_codec import ResidualCodec
from search_engine.index.token_store import SegmentTokenStore

log = logging.getLogger(__name__)

FAST_DIR = Path("fast") / "visual"
CURRENT = "CURRENT"
BUILDING = "BUILDING"
CODECS = "codecs"
DEFAULT_EXACT_RERANK = 32  # compressed sidecars: pages per query rescored from the fp16 segments (docs/scale.md)


@dataclass
class SegmentInfo:
    file: str  # relative to the index root
    page_ids: list[str]
    counts: list[int]


def manifest_segments(manifest: Manifest) -> list[SegmentInfo]:
    """The visual segments of the manifest, in document order (the row order of a fresh sidecar)."""
    out = []
    for entry in manifest.documents.values():
        seg = entry.segments.get("visual")
        if seg is None:
            raise RuntimeError(f"document {entry.doc_id} has no visual segment")
        out.append(SegmentInfo(seg["file"], list(entry.page_ids), [int(c) for c in seg["counts"]]))
    return out


def _store(index_dir: Path, segments: Sequence[SegmentInfo], dim: int) -> SegmentTokenStore:
    return SegmentTokenStore([index_dir / s.file for s in segments], [s.counts for s in segments], dim)


def fast_dir(index_dir: Path) -> Path:
    return Path(index_dir) / FAST_DIR


def current_generation(index_dir: Path) -> Path | None:
    pointer = fast_dir(index_dir) / CURRENT
    if not pointer.exists():
        return None
    gen = fast_dir(index_dir) / json.loads(pointer.read_text())["generation"]
    return gen if gen.exists() else None


def has_fast_index(index_dir: Path) -> bool:
    return current_generation(index_dir) is not None


def _part_name(segment_file: str) -> str:
    """A segment's compressed part name: its path inside the index, flattened."""
    return segment_file.removesuffix(".npy").replace("/", "__")


def _codec_dir(index_dir: Path, codec_id: str) -> Path:
    return fast_dir(index_dir) / CODECS / codec_id


def _publish(index_dir: Path, fast: FastMaxSim, segments: Sequence[SegmentInfo], codec_id: str | None = None,
             exact_rerank: int = 0) -> Path:
    root = fast_dir(index_dir)
    root.mkdir(parents=True, exist_ok=True)
    existing = [int(p.name.split("-")[1]) for p in root.glob("gen-*") if p.name.split("-")[1].isdigit()]
    gen = root / f"gen-{max(existing, default=0) + 1:06d}"
    extra: dict[str, Any] = {"segments": [s.__dict__ for s in segments]}
    if codec_id is not None:
        extra.update(codec_id=codec_id, codec=fast.compressed_store().codec.spec, exact_rerank=exact_rerank)
    fast.save(gen, extra=extra)
    atomic_write_json(root / CURRENT, {"generation": gen.name})
    for old in root.glob("gen-*"):
        if old != gen:
            shutil.rmtree(old, ignore_errors=True)  # mapped files stay readable by open readers
    building = json.loads((root / BUILDING).read_text()) if (root / BUILDING).exists() else {}
    for codec in (root / CODECS).glob("*") if (root / CODECS).exists() else []:
        if codec.name not in (codec_id, building.get("codec_id")):
            shutil.rmtree(codec, ignore_errors=True)  # an older codec: no published generation uses it
    if codec_id is not None:  # parts of documents no longer in the index
        keep = {_part_name(s.file) for s in segments}
        for path in (_codec_dir(index_dir, codec_id) / "parts").glob("*.npy"):
            if path.name.removesuffix(CODES_SUFFIX).removesuffix(RES_SUFFIX) not in keep:
                path.unlink(missing_ok=True)
    return gen


def _compressed_store(index_dir: Path, codec_id: str, codec: ResidualCodec, segments: Sequence[SegmentInfo],
                      dim: int, say: Callable[[str], None] | None = None) -> CompressedTokenStore:
    """The segments' compressed parts as one store; parts missing (documents added since) are encoded now."""
    parts_dir = _codec_dir(index_dir, codec_id) / "parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for i, seg in enumerate(segments):
        name = _part_name(seg.file)
        if not part_complete(parts_dir, name):
            write_part(parts_dir, name, codec, np.load(index_dir / seg.file, mmap_mode="r"))
            if say is not None and (i % max(1, len(segments) // 10) == 0 or i == len(segments) - 1):
                say(f"compressed {i + 1:,}/{len(segments):,} documents ({time.perf_counter() - started:.0f}s)")
    return CompressedTokenStore(codec, [part_paths(parts_dir, _part_name(s.file)) for s in segments],
                                [s.counts for s in segments])


def _ivf_of_parts(store: CompressedTokenStore, num_centroids: int) -> InvertedFile:
    return InvertedFile.build_blocks(store.part_codes(), num_centroids)


def build_compressed_fast_index(index_dir: str | Path, codec: str = "pq32", num_centroids: int | None = None,
                                params: FastParams | None = None, exact_rerank: int = DEFAULT_EXACT_RERANK,
                                say: Callable[[str], None] | None = None) -> Path:
    """Train a codec (new centroids), compress every visual page, publish: the explicit, resumable rebuild."""
    from search_engine.index.compressed_index import train_codec

    say = say or (lambda msg: None)
    index_dir = Path(index_dir)
    segments, dim, source = _visual_pages(index_dir)
    root = fast_dir(index_dir)
    building = json.loads((root / BUILDING).read_text()) if (root / BUILDING).exists() else None
    if building and building.get("codec") == codec and ResidualCodec.exists(_codec_dir(index_dir,
                                                                                        building["codec_id"])):
        codec_id = building["codec_id"]
        trained = ResidualCodec.load(_codec_dir(index_dir, codec_id))
        say(f"resuming the {codec} build {codec_id}: codec already trained")
    else:
        started = time.perf_counter()
        codec_id = f"{codec}-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**6:06d}"
        atomic_write_json(root / BUILDING, {"codec_id": codec_id, "codec": codec})
        trained = train_codec(source, codec, num_centroids)
        trained.save(_codec_dir(index_dir, codec_id))
        say(f"codec {codec}: {trained.codebook.num_centroids} centroids in {time.perf_counter() - started:.1f}s")
    store = _compressed_store(index_dir, codec_id, trained, segments, dim, say)
    ivf = _ivf_of_parts(store, trained.codebook.num_centroids)
    fast = FastMaxSim(store, trained.codebook, ivf, params=params)
    gen = _publish(index_dir, fast, segments, codec_id=codec_id, exact_rerank=exact_rerank)
    (root / BUILDING).unlink(missing_ok=True)
    return gen


def build_fast_index(index_dir: str | Path, num_centroids: int | None = None, params: FastParams | None = None,
                     say: Callable[[str], None] | None = None, codec: str | None = None,
                     exact_rerank: int = DEFAULT_EXACT_RERANK) -> Path:
    """Train, code and publish a fast index for every visual page of the index (the migrate step).

    `codec` (e.g. "pq32", "sq2"): also keep a compressed copy of the pages and rerank from it (see the
    module docstring); None: rerank from the fp16 segments.
    """
    if codec is not None:
        return build_compressed_fast_index(index_dir, codec, num_centroids, params, exact_rerank, say)
    index_dir = Path(index_dir)
    segments, _, store = _visual_pages(index_dir)
    fast = FastMaxSim.build(store, num_centroids=num_centroids, params=params, log=say)
    return _publish(index_dir, fast, segments)


def _visual_pages(index_dir: Path) -> tuple[list[SegmentInfo], int, SegmentTokenStore]:
    """The index's visual segments, their dimension and their fp16 token store; a clear error when there is
    nothing to accelerate (no multi-vector visual channel, or no page yet)."""
    manifest = Manifest.load(index_dir)
    spec = manifest.spec("visual")
    if spec is None or not spec.multi_vector:
        raise ValueError(f"{index_dir} has no multi-vector visual channel: nothing to accelerate")
    segments = manifest_segments(manifest)
    store = _store(index_dir, segments, spec.dim)
    if store.num_pages == 0:
        raise ValueError(f"{index_dir} has no pages yet")
    return segments, spec.dim, store


def _generation_segments(gen: Path) -> list[SegmentInfo]:
    return [SegmentInfo(**seg) for seg in json.loads((gen / "fast_meta.json").read_text())["segments"]]


def _open(index_dir: Path, gen: Path, manifest: Manifest, params: FastParams | None, device: str
          ) -> tuple[FastMaxSim, list[SegmentInfo], bool]:
    """The generation as a FastMaxSim over the manifest's segments; brought up to date if stale.

    Returns (index, segments in row order, whether it was stale).
    """
    spec = manifest.spec("visual")
    if spec is None:
        raise ValueError(f"{index_dir} has a fast index but no visual channel in its manifest")
    dim = spec.dim
    old = _generation_segments(gen)
    new = manifest_segments(manifest)
    meta = json.loads((gen / "fast_meta.json").read_text())
    if meta.get("codec_id"):
        return _open_compressed(index_dir, gen, meta, old, new, params, device)
    if [s.file for s in old] == [s.file for s in new]:
        return FastMaxSim.load(gen, _store(index_dir, old, dim), params=params, device=device), old, False
    codes_path = gen / "codes.npy"
    if not codes_path.exists():
        raise RuntimeError("the fast index has no stored codes; rebuild it with `vrag-search build-fast-index`")
    codes = np.load(codes_path, mmap_mode="r")
    old_codes, pos = {}, 0
    for seg in old:  # codes of segments still in the index are reused, the others are coded now
        n = sum(seg.counts)
        old_codes[seg.file] = codes[pos : pos + n]
        pos += n
    codebook = Codebook.load(gen)
    parts = [np.asarray(old_codes[seg.file]) if seg.file in old_codes
             else codebook.assign(np.load(index_dir / seg.file, mmap_mode="r")) for seg in new]
    new_codes = np.concatenate(parts) if parts else np.zeros(0, np.uint16)
    store = _store(index_dir, new, dim)
    ivf = InvertedFile.build(new_codes, store.counts, codebook.num_centroids)
    params = params or FastParams.from_meta(meta)
    return FastMaxSim(store, codebook, ivf, codes=new_codes, params=params, device=device), new, True


def _open_compressed(index_dir: Path, gen: Path, meta: dict, old: list[SegmentInfo], new: list[SegmentInfo],
                     params: FastParams | None, device: str) -> tuple[FastMaxSim, list[SegmentInfo], bool]:
    codec_id = meta["codec_id"]
    codec = ResidualCodec.load(_codec_dir(index_dir, codec_id))
    dim = codec.dim
    params = params or FastParams.from_meta(meta)
    exact = _store(index_dir, new, dim) if params.exact_rerank else None
    if [s.file for s in old] == [s.file for s in new]:
        store = _compressed_store(index_dir, codec_id, codec, new, dim)
        fast = FastMaxSim(store, codec.codebook, InvertedFile.load(gen), params=params, device=device,
                          exact_store=exact)
        deleted = gen / "deleted.npy"
        if deleted.exists():
            fast.deleted = np.array(np.load(deleted), bool)
        return fast, new, False
    store = _compressed_store(index_dir, codec_id, codec, new, dim)  # encodes the new documents only
    ivf = _ivf_of_parts(store, codec.codebook.num_centroids)
    return FastMaxSim(store, codec.codebook, ivf, params=params, device=device, exact_store=exact), new, True


def refresh_fast_index(index_dir: str | Path, manifest: Manifest | None = None) -> bool:
    """Bring an existing sidecar up to date with the manifest and publish it; False if there is none.

    Call with the ingestion lock held (the ingestor does), so two writers never race.
    """
    index_dir = Path(index_dir)
    gen = current_generation(index_dir)
    if gen is None:
        return False
    manifest = manifest or Manifest.load(index_dir)
    started = time.perf_counter()
    fast, segments, stale = _open(index_dir, gen, manifest, None, "cpu")
    if stale:
        meta = json.loads((gen / "fast_meta.json").read_text())
        _publish(index_dir, fast, segments, codec_id=meta.get("codec_id"), exact_rerank=meta.get("exact_rerank", 0))
        log.info("fast index refreshed: %d pages in %.1fs", fast.num_pages, time.perf_counter() - started)
    return True


class FastVisualIndex:
    """Engine-facing view: scores over the engine's page order, tombstones and filters applied."""

    def __init__(self, fast: FastMaxSim, segments: list[SegmentInfo], page_index: dict[str, int], num_pages: int):
        self.fast = fast
        self.segments = segments
        self.num_pages = num_pages
        rows = [pid for seg in segments for pid in seg.page_ids]
        self.column_of_row = np.asarray([page_index.get(pid, -1) for pid in rows], np.int64)
        self.row_of_column = np.full(num_pages, -1, np.int64)
        live = self.column_of_row >= 0
        self.row_of_column[self.column_of_row[live]] = np.flatnonzero(live)
        if (self.row_of_column < 0).any():
            raise RuntimeError("the fast index misses pages of the manifest")
        fast.deleted |= ~live

    @classmethod
    def open(cls, index_dir: Path, manifest: Manifest, page_index: dict[str, int], params: FastParams | None = None,
             device: str = "cpu") -> FastVisualIndex | None:
        gen = current_generation(index_dir)
        if gen is None:
            return None
        fast, segments, stale = _open(index_dir, gen, manifest, params, device)
        if stale:
            log.warning("fast index of %s is stale (written before the last ingestion): updated in memory; "
                        "the next ingestion or `vrag-search build-fast-index` persists it", index_dir)
        return cls(fast, segments, page_index, len(page_index))

    def score(self, queries: Sequence[np.ndarray], allowed: np.ndarray | None = None) -> np.ndarray:
        """(queries, engine pages): exact MaxSim for the candidates, -inf for the rest."""
        allowed_rows = None
        if allowed is not None:
            allowed_rows = np.zeros(self.fast.num_pages, bool)
            allowed_rows[self.row_of_column[allowed]] = True
        out = np.full((len(queries), self.num_pages), -np.inf, np.float32)
        for qi, query in enumerate(queries):
            rows, scores = self.fast.score_candidates(query, allowed=allowed_rows)
            out[qi, self.column_of_row[rows]] = scores
        return out


def recall_report(index_dir: str | Path, num_queries: int = 20, tokens: int = 20, seed: int = 0, k: int = 10,
                  nprobe: int | None = None, candidates: int | None = None) -> dict:
    """Recall@k of the index's fast path against exact MaxSim, on queries drawn from its own pages.

    There are no real queries at hand, so each query is `tokens` tokens of a random page plus a
    little noise (as in the benchmark); the exact top-k comes from one streaming exact pass.
    """
    index_dir = Path(index_dir)
    manifest = Manifest.load(index_dir)
    gen = current_generation(index_dir)
    if gen is None:
        raise FileNotFoundError(f"{index_dir} has no fast index")
    fast, _, _ = _open(index_dir, gen, manifest, None, "cpu")
    rng = np.random.default_rng(seed)
    rows = rng.choice(fast.num_pages, min(num_queries, fast.num_pages), replace=False)
    gathered = (fast.exact_store or fast.store).gather(np.sort(rows))
    queries = []
    for start, count in zip(gathered.starts, gathered.counts):
        page = gathered.vectors[start : start + count].astype(np.float32)
        q = page[rng.choice(count, min(tokens, count), replace=False)]
        q = q + rng.normal(0, 0.05, q.shape).astype(np.float32)
        queries.append(q / np.linalg.norm(q, axis=1, keepdims=True))
    from search_engine.index.maxsim import exact_topk_streaming

    _, exact_rows = exact_topk_streaming(fast.exact_store or _store(index_dir, manifest_segments(manifest),
                                                                    fast.store.dim), queries, k=k)
    return fast.recall_check(queries, k=k, nprobe=nprobe, candidates=candidates, exact_rows=exact_rows)
