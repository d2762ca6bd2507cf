"""Build and open a compressed fast index over any token source, part by part, resumable.

Steps (each one's output is committed before the next starts, so a killed build resumes where it
stopped instead of starting over):

1. codec: k-means codebook + residual quantiser trained on a token sample → `codec.json` (+ tables);
2. parts: the source's pages in blocks of `part_pages`, each encoded to its own pair of files
   (`compressed_store.write_part`); blocks already written are skipped;
3. inverted file from the parts' centroid ids, then `fast_meta.json` (listing the parts) last.

A directory with `fast_meta.json` is complete; `open_compressed` opens it as a `FastMaxSim` whose
store is the compressed one (the fp16 source is not needed to search; pass it as `exact_store` to
rescore the last few pages exactly).

Adding pages later: `extend_compressed` encodes only the new pages into new parts with the existing
codec and rebuilds the inverted file from the stored ids (seconds per million tokens). Re-training
the codec is an explicit `build_compressed(..., retrain=True)` into a fresh directory.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from search_engine.index.atomic import atomic_write_json
from search_engine.index.centroids import Codebook, InvertedFile, default_num_centroids
from search_engine.index.compressed_store import CompressedTokenStore, part_complete, part_paths, write_part
from search_engine.index.fast_maxsim import FAST_FORMAT, FAST_META, FastMaxSim, FastParams, sample_tokens_of
from search_engine.index.residual_codec import ResidualCodec
from search_engine.index.token_store import TokenStore

PARTS_DIR = "parts"


def train_codec(source: TokenStore, spec: str, num_centroids: int | None = None, sample_tokens: int = 262_144,
                seed: int = 0) -> ResidualCodec:
    """Codebook on a sample of whole pages, residual quantiser on the same sample."""
    sample = np.asarray(sample_tokens_of(source, sample_tokens, seed), np.float32)
    codebook = Codebook.train(sample, num_centroids or default_num_centroids(source.num_tokens), seed=seed)
    return ResidualCodec.train(codebook, sample, spec, seed=seed)


def _blocks(num_pages: int, first: int, part_pages: int) -> list[tuple[int, int]]:
    return [(a, min(a + part_pages, num_pages)) for a in range(first, num_pages, part_pages)]


def _encode_parts(source: TokenStore, directory: Path, codec: ResidualCodec, blocks: list[tuple[int, int]],
                  say: Callable[[str], None], started: float, workers: int = 1) -> list[dict]:
    """Encode and write every block not written yet; `workers` blocks at a time.

    Threads, not processes: the work is torch GEMMs, faiss PQ encoding and numpy, which release the
    GIL (two threads encode 2.0x as fast as one on this 2-core machine, measured), and threads share
    the source and codec without pickling them or forking a process whose OpenMP runtime is live."""
    parts_dir = directory / PARTS_DIR
    parts_dir.mkdir(parents=True, exist_ok=True)
    todo = [(first, last) for first, last in blocks if not part_complete(parts_dir, part_name(first, last))]
    step = max(1, len(todo) // 10)

    def encode(block: tuple[int, int]) -> None:
        write_part(parts_dir, part_name(*block), codec, source.read_range(*block))

    with ThreadPoolExecutor(max(1, workers)) as pool:
        for i, _ in enumerate(pool.map(encode, todo)):  # in order, so the progress line names a real prefix
            if i % step == 0 or i == len(todo) - 1:
                say(f"encoded pages up to {todo[i][1]:,}/{source.num_pages:,} ({time.perf_counter() - started:.0f}s)")
    return [{"name": part_name(first, last), "counts": source.counts[first:last].tolist()} for first, last in blocks]


def part_name(first: int, last: int) -> str:
    """The file-name stem of the part holding pages [first, last) (the streaming generator names its parts so too)."""
    return f"p{first:010d}-{last:010d}"


def finish_compressed(directory: Path, codec: ResidualCodec, parts: list[dict], params: FastParams | None,
                      extra: dict) -> None:
    """Inverted file from the written parts' centroid ids, then `fast_meta.json` (the completion mark).

    Public so a source that writes its parts itself (the streaming benchmark generator, which never
    keeps an fp16 copy) finishes the index exactly as `build_compressed` does. `params` None: the
    defaults for the codec's codebook (`FastParams.for_codebook`)."""
    params = params or FastParams.for_codebook(codec.codebook.num_centroids)
    store = _store(directory, codec, parts)
    ivf = InvertedFile.build_blocks(store.part_codes(), codec.codebook.num_centroids)
    ivf.save(directory)
    atomic_write_json(directory / FAST_META, {
        "format": FAST_FORMAT, "num_pages": store.num_pages, "num_tokens": store.num_tokens,
        "num_centroids": codec.codebook.num_centroids, "nprobe": params.nprobe, "candidates": params.candidates,
        "rerank": params.rerank, "codec": codec.spec, "parts": parts, **extra})


def _store(directory: Path, codec: ResidualCodec, parts: list[dict]) -> CompressedTokenStore:
    return CompressedTokenStore(codec, [part_paths(directory / PARTS_DIR, p["name"]) for p in parts],
                                [p["counts"] for p in parts])


def build_compressed(source: TokenStore, directory: str | Path, spec: str = "sq2", num_centroids: int | None = None,
                     part_pages: int = 5000, params: FastParams | None = None, seed: int = 0,
                     log: Callable[[str], None] | None = None, extra: dict | None = None, workers: int = 1) -> Path:
    """Build (or resume building) a compressed fast index of `source` in `directory`, encoding
    `workers` parts at a time (one per core is right on an otherwise idle machine)."""
    say = log or (lambda msg: None)
    directory = Path(directory)
    started = time.perf_counter()
    if (directory / FAST_META).exists():
        built = json.loads((directory / FAST_META).read_text()).get("codec")
        if built != spec:
            raise ValueError(f"{directory} holds a {built} codec, not {spec}: use another directory")
        return directory
    if ResidualCodec.exists(directory):
        codec = ResidualCodec.load(directory)
        if codec.spec != spec:
            raise ValueError(f"{directory} holds a {codec.spec} codec, not {spec}: use another directory")
        say(f"resuming: codec {codec.spec} with {codec.codebook.num_centroids} centroids already trained")
    else:
        codec = train_codec(source, spec, num_centroids, seed=seed)
        codec.save(directory)
        say(f"codec {spec}: {codec.codebook.num_centroids} centroids in {time.perf_counter() - started:.1f}s")
    parts = _encode_parts(source, directory, codec, _blocks(source.num_pages, 0, part_pages), say, started,
                          workers)
    finish_compressed(directory, codec, parts, params, {"build_seconds": time.perf_counter() - started,
                                                             **(extra or {})})
    say(f"compressed index: {source.num_pages:,} pages in {time.perf_counter() - started:.0f}s")
    return directory


def extend_compressed(source: TokenStore, directory: str | Path, part_pages: int = 5000,
                      log: Callable[[str], None] | None = None, workers: int = 1) -> int:
    """Encode the pages `source` has beyond the index (appended pages) with the existing codec; returns
    how many were added. The inverted file is rebuilt from the stored ids; nothing else is re-encoded."""
    say = log or (lambda msg: None)
    directory = Path(directory)
    meta = json.loads((directory / FAST_META).read_text())
    if source.num_pages < meta["num_pages"]:
        raise ValueError("the source has fewer pages than the index: removing pages is done with tombstones")
    if not np.array_equal(source.counts[: meta["num_pages"]], np.asarray(
            [c for p in meta["parts"] for c in p["counts"]], np.int64)):
        raise ValueError("the source's first pages are not the indexed ones: rebuild the index")
    added = source.num_pages - meta["num_pages"]
    if added == 0:
        return 0
    started = time.perf_counter()
    codec = ResidualCodec.load(directory)
    parts = meta["parts"] + _encode_parts(source, directory, codec, _blocks(source.num_pages, meta["num_pages"],
                                                                              part_pages), say, started, workers)
    params = FastParams.from_meta(meta)
    keep = {k: v for k, v in meta.items() if k not in ("parts", "num_pages", "num_tokens", "num_centroids",
                                                          "nprobe", "candidates", "rerank", "codec", "format")}
    finish_compressed(directory, codec, parts, params, keep)
    return added


def open_compressed(directory: str | Path, params: FastParams | None = None, exact_store: TokenStore | None = None,
                    device: str = "cpu") -> FastMaxSim:
    """A complete compressed index as a FastMaxSim (see the module docstring)."""
    directory = Path(directory)
    meta_path = directory / FAST_META
    if not meta_path.exists():
        raise FileNotFoundError(f"no complete compressed index at {directory} (build not finished?)")
    meta = json.loads(meta_path.read_text())
    if meta.get("format", 0) > FAST_FORMAT:
        raise RuntimeError(f"{directory} was written by a newer version")
    if "parts" not in meta:
        raise RuntimeError(f"{directory} is an uncompressed fast index; open it with FastMaxSim.load")
    codec = ResidualCodec.load(directory)
    store = _store(directory, codec, meta["parts"])
    params = params or FastParams.from_meta(meta)
    index = FastMaxSim(store, codec.codebook, InvertedFile.load(directory), params=params, device=device,
                       exact_store=exact_store)
    deleted = directory / "deleted.npy"
    if deleted.exists():
        index.deleted = np.array(np.load(deleted), bool)
    return index
