"""Fast late-interaction search: on-disk token store, centroid candidates + exact rerank, sidecar upkeep.

The exact MaxSim scorer (`MaxSimScorer`, itself checked against colpali-engine in test_maxsim.py)
is the reference everywhere: the fast path must reach its top-10 within the stated recall at its
default setting, and every index change (add, remove, a killed ingestion) must leave a fast index
whose answers are those of exact search over the manifest's pages.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from search_engine.engine import SearchEngine
from search_engine.index.centroids import Codebook
from search_engine.index.fast_index import (
    build_fast_index,
    current_generation,
    has_fast_index,
    manifest_segments,
    refresh_fast_index,
)
from search_engine.index.fast_maxsim import FastMaxSim, FastParams
from search_engine.index.manifest import Manifest
from search_engine.index.maxsim import MaxSimScorer, exact_topk_streaming, maxsim_pages
from search_engine.index.token_store import FlatTokenStore, TokenStoreWriter
from search_engine.ingest import Ingestor
from testkit.patch_embedder import PatchEmbedder, draw_page

REPO = Path(__file__).resolve().parents[2]


def synthetic_corpus(num_pages: int, seed: int = 0, dim: int = 128, base_tokens: int = 3000):
    """Distinct pages recombining spans of a shared pool of clustered tokens (like the benchmark corpus)."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((base_tokens // 10, dim)).astype(np.float32)
    base = centers[rng.integers(0, len(centers), base_tokens)] + 0.4 * rng.standard_normal((base_tokens, dim))
    base = (base / np.linalg.norm(base, axis=1, keepdims=True)).astype(np.float32)
    pages = []
    for _ in range(num_pages):
        parts = []
        for _ in range(int(rng.integers(2, 5))):
            n = int(rng.integers(10, 40))
            off = int(rng.integers(0, base_tokens - n))
            parts.append(base[off : off + n])
        page = np.concatenate(parts) + 0.03 * rng.standard_normal((sum(len(p) for p in parts), dim))
        pages.append((page / np.linalg.norm(page, axis=1, keepdims=True)).astype(np.float16))
    return pages


def queries_from(pages, n: int, seed: int = 1, tokens: int = 12):
    rng = np.random.default_rng(seed)
    out = []
    for t in rng.choice(len(pages), n, replace=False):
        page = pages[t].astype(np.float32)
        q = page[rng.choice(len(page), min(tokens, len(page)), replace=False)]
        q = q + 0.05 * rng.standard_normal(q.shape)
        out.append((q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32))
    return out


@pytest.fixture(scope="module")
def flat_store(tmp_path_factory):
    pages = synthetic_corpus(800)
    directory = tmp_path_factory.mktemp("store")
    writer = TokenStoreWriter(directory, dim=128)
    for s in range(0, len(pages), 100):
        chunk = pages[s : s + 100]
        writer.append(np.concatenate(chunk), [len(p) for p in chunk])
        writer.commit()
    writer.close()
    return FlatTokenStore(directory), pages


def test_token_store_reads_pages_back_in_any_order(flat_store):
    store, pages = flat_store
    assert store.num_pages == 800 and store.num_tokens == sum(len(p) for p in pages)
    rows = [5, 3, 4, 799, 3]
    got = store.gather(rows)
    np.testing.assert_array_equal(got.counts, [len(pages[r]) for r in rows])
    np.testing.assert_array_equal(got.vectors, np.concatenate([pages[r] for r in rows]))
    chunks = list(store.iter_chunks(chunk_tokens=5000))
    assert chunks[0][0] == 0 and chunks[-1][1] == 800
    np.testing.assert_array_equal(np.concatenate([c[2] for c in chunks]), np.concatenate(pages))


def test_token_store_writer_drops_uncommitted_pages_after_a_crash(tmp_path):
    pages = synthetic_corpus(30, seed=3)
    writer = TokenStoreWriter(tmp_path, dim=128)
    writer.append(np.concatenate(pages[:10]), [len(p) for p in pages[:10]])
    writer.commit()
    writer.append(np.concatenate(pages[10:20]), [len(p) for p in pages[10:20]])  # never committed: "crash"
    writer._fh.flush()
    assert FlatTokenStore(tmp_path).num_pages == 10  # readers only see committed pages
    resumed = TokenStoreWriter(tmp_path, dim=128)  # truncates the uncommitted tail
    assert resumed.num_pages == 10
    resumed.append(np.concatenate(pages[10:]), [len(p) for p in pages[10:]])
    resumed.commit()
    resumed.close()
    store = FlatTokenStore(tmp_path)
    np.testing.assert_array_equal(store.gather(np.arange(30)).vectors, np.concatenate(pages))
    with pytest.raises(ValueError, match="dim"):
        TokenStoreWriter(tmp_path, dim=64)


def test_streaming_exact_topk_equals_the_in_ram_exact_scorer(flat_store):
    store, pages = flat_store
    queries = queries_from(pages, 6)
    reference = MaxSimScorer(np.concatenate(pages), [len(p) for p in pages]).score(queries)
    scores, rows = exact_topk_streaming(store, queries, k=10, chunk_tokens=7000)
    for qi in range(len(queries)):
        np.testing.assert_allclose(scores[qi], np.sort(reference[qi])[::-1][:10], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(reference[qi, rows[qi]], scores[qi], rtol=1e-5, atol=1e-5)


def test_torch_scoring_path_matches_numpy_exact_on_cpu(flat_store):
    """The GPU scoring code (torch) run on CPU gives the numpy exact scores to 1e-4."""
    store, pages = flat_store
    queries = queries_from(pages, 4)
    reference = MaxSimScorer(np.concatenate(pages), [len(p) for p in pages]).score(queries)
    rows = np.arange(0, 800, 7)
    gathered = store.gather(rows)
    for qi, q in enumerate(queries):
        np.testing.assert_allclose(maxsim_pages(q, gathered.vectors, gathered.counts, chunk_tokens=333),
                                   reference[qi, rows], rtol=1e-4, atol=1e-4)
    few = pages[:120]
    torch_scorer = MaxSimScorer(np.concatenate(few), [len(p) for p in few], backend="torch", chunk_tokens=2000)
    np.testing.assert_allclose(torch_scorer.score(queries), reference[:, :120], rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def fast_index(flat_store):
    store, _ = flat_store
    return FastMaxSim.build(store, seed=0)


def test_fast_top10_matches_exact_at_the_default_setting(flat_store, fast_index):
    store, pages = flat_store
    queries = queries_from(pages, 40, seed=7)
    _, exact_rows = exact_topk_streaming(store, queries, k=10)
    report = fast_index.recall_check(queries, k=10, exact_rows=exact_rows)
    assert report["nprobe"] == FastParams().nprobe and report["candidates"] == FastParams().candidates
    assert report["recall_at_k"] >= 0.99, report
    # the knob matters: a starved first stage loses pages the exact rerank can then not recover
    starved = fast_index.recall_check(queries, k=10, nprobe=1, candidates=10, exact_rows=exact_rows)
    assert starved["recall_at_k"] < report["recall_at_k"]
    # whatever reaches the rerank gets its exact score
    scores, rows = fast_index.search(queries[:3], top_k=5)
    reference = MaxSimScorer(np.concatenate(pages), [len(p) for p in pages]).score(queries[:3])
    for qi in range(3):
        np.testing.assert_allclose(scores[qi], reference[qi, rows[qi]], rtol=1e-4, atol=1e-4)


def test_fast_index_round_trips_and_tombstones(tmp_path, flat_store, fast_index):
    store, pages = flat_store
    fast_index.save(tmp_path / "fast")
    loaded = FastMaxSim.load(tmp_path / "fast", store)
    q = queries_from(pages, 1, seed=11)
    first = fast_index.search(q, top_k=5)[1][0]
    np.testing.assert_array_equal(loaded.search(q, top_k=5)[1][0], first)
    loaded.remove([int(first[0])])
    assert int(first[0]) not in loaded.search(q, top_k=5)[1][0].tolist()
    allowed = np.zeros(store.num_pages, bool)
    allowed[:100] = True
    assert (loaded.search(q, top_k=5, allowed=allowed)[1][0] < 100).all()
    with pytest.raises(RuntimeError, match="rebuild"):
        FastMaxSim.load(tmp_path / "fast", FlatTokenStore(_smaller_store(tmp_path, pages)))


def test_default_knobs_follow_the_codebook_size_and_are_kept_with_the_index(tmp_path, flat_store, fast_index):
    """A finer codebook (the default for ~30k pages and more) gets nprobe 32 / candidates 256; explicit knobs win."""
    store, _ = flat_store
    assert FastParams.for_codebook(8192) == FastParams()
    assert (FastParams.for_codebook(8193).nprobe, FastParams.for_codebook(32768).candidates) == (32, 256)
    assert fast_index.params == FastParams.for_codebook(fast_index.codebook.num_centroids)
    rng = np.random.default_rng(0)
    fine = rng.standard_normal((9000, 128)).astype(np.float32)
    book = Codebook(coarse=fine[:1], centroids=fine, fine_offsets=np.array([0, 9000], np.int64))
    large = FastMaxSim(store, book, fast_index.ivf)
    assert (large.params.nprobe, large.params.candidates) == (32, 256)
    large.save(tmp_path / "large")
    meta = json.loads((tmp_path / "large" / "fast_meta.json").read_text())
    assert (meta["nprobe"], meta["candidates"]) == (32, 256)
    assert FastMaxSim.load(tmp_path / "large", store).params.nprobe == 32
    # knobs a meta does not name (an older index) keep their defaults; other keys are not knobs
    assert FastParams.from_meta({"nprobe": 8, "num_pages": 3}) == FastParams(nprobe=8)
    assert FastParams.from_meta(meta).candidates == 256
    chosen = FastMaxSim(store, book, fast_index.ivf, params=FastParams(nprobe=8, candidates=64))
    assert (chosen.params.nprobe, chosen.params.candidates) == (8, 64)


def _smaller_store(tmp_path, pages) -> Path:
    writer = TokenStoreWriter(tmp_path / "small", dim=128)
    writer.append(np.concatenate(pages[:5]), [len(p) for p in pages[:5]])
    writer.commit()
    writer.close()
    return tmp_path / "small"


def test_codebook_assigns_tokens_to_near_centroids(flat_store):
    store, pages = flat_store
    sample = np.concatenate(pages[:200]).astype(np.float32)
    book = Codebook.train(sample, 512)
    codes = book.assign(sample)
    chosen = np.einsum("ij,ij->i", sample, book.centroids[codes])
    best = (sample @ book.centroids.T).max(axis=1)
    # two-level coding is near-optimal: the chosen centroid is almost as close as the best one
    assert np.mean(chosen >= best - 0.05) > 0.95


# ---- the sidecar of a real index: ingestion, incremental upkeep, kill and resume -------------------------
def _pages_folder(root: Path, name: str, seeds) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for s in seeds:
        draw_page(s).save(folder / f"page{s:04d}.png")
    return folder


def _ingestor(index: Path, **kwargs) -> Ingestor:
    return Ingestor(index, visual_model=None, text_model=None, visual_embedder=PatchEmbedder(), progress=False,
                    ocr=False, **kwargs)


def _engines(index: Path):
    kw = {"visual_embedder": PatchEmbedder(), "use_bm25": False}
    return SearchEngine(index, visual_backend="exact", **kw), SearchEngine(index, visual_backend="fast", **kw)


def _same_answers(exact: SearchEngine, fast: SearchEngine, queries, top_k: int = 10) -> None:
    for q in queries:
        a = [(h.page_id, round(h.score, 3)) for h in exact.search_by_vectors([q], top_k=top_k)[0]]
        b = [(h.page_id, round(h.score, 3)) for h in fast.search_by_vectors([q], top_k=top_k)[0]]
        assert a == b


def _page_queries(index: Path, n: int, seed: int = 0):
    manifest = Manifest.load(index)
    rng = np.random.default_rng(seed)
    segs = manifest_segments(manifest)
    out = []
    for si in rng.choice(len(segs), n):
        vec = np.load(index / segs[si].file).astype(np.float32)
        out.append(vec[rng.choice(len(vec), 8, replace=False)])
    return out


def test_incremental_add_and_remove_keep_the_fast_index_exact(tmp_path):
    index = tmp_path / "index"
    _ingestor(index).add(_pages_folder(tmp_path, "a", range(40)))
    assert not has_fast_index(index)
    assert SearchEngine(index, visual_embedder=PatchEmbedder(), use_bm25=False).stats()["visual_backend"] == "exact"
    build_fast_index(index)
    assert SearchEngine(index, visual_embedder=PatchEmbedder(), use_bm25=False).visual_backend_name == "fast"
    gen1 = current_generation(index)

    _ingestor(index).add(_pages_folder(tmp_path, "b", range(40, 70)))  # the ingest hook refreshes the sidecar
    gen2 = current_generation(index)
    assert gen2 != gen1 and not gen1.exists()
    meta = json.loads((gen2 / "fast_meta.json").read_text())
    assert meta["num_pages"] == 70
    exact, fast = _engines(index)
    _same_answers(exact, fast, _page_queries(index, 8))

    removed = [d for d in Manifest.load(index).documents if d.startswith("page004")]
    assert _ingestor(index).remove(removed) == removed
    exact, fast = _engines(index)
    assert fast.stats()["pages"] == 60
    _same_answers(exact, fast, _page_queries(index, 8, seed=1))
    assert not any(h.doc_id in removed for q in _page_queries(index, 8, seed=2)
                   for h in fast.search_by_vectors([q], top_k=20)[0])


KILL_SCRIPT = """
import os, signal, sys
sys.path.insert(0, sys.argv[3])
from search_engine.ingest import Ingestor
from testkit.patch_embedder import PatchEmbedder
done = []
def on_progress(event):
    if event["stage"] == "done":
        done.append(event["doc_id"])
        if len(done) == 3:
            os.kill(os.getpid(), signal.SIGKILL)  # three documents committed, the fast index not yet refreshed
Ingestor(sys.argv[1], visual_model=None, text_model=None, visual_embedder=PatchEmbedder(), progress=False,
         ocr=False, progress_callback=on_progress).add([sys.argv[2]])
"""


def test_killed_ingestion_leaves_a_consistent_fast_index(tmp_path):
    index = tmp_path / "index"
    _ingestor(index).add(_pages_folder(tmp_path, "a", range(30)))
    build_fast_index(index)
    more = _pages_folder(tmp_path, "b", range(30, 45))
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(index), str(more), str(REPO)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr
    manifest = Manifest.load(index)
    assert len(manifest.documents) >= 33  # committed documents are in the manifest
    # the sidecar on disk predates them; the engine brings it up to date in memory, answers stay exact
    assert json.loads((current_generation(index) / "fast_meta.json").read_text())["num_pages"] < len(manifest.pages)
    exact, fast = _engines(index)
    assert fast.stats()["pages"] == len(manifest.pages)
    _same_answers(exact, fast, _page_queries(index, 6))
    # resuming the ingestion persists an up-to-date generation
    _ingestor(index).add(more)
    assert refresh_fast_index(index) is True
    meta = json.loads((current_generation(index) / "fast_meta.json").read_text())
    assert meta["num_pages"] == 45
    exact, fast = _engines(index)
    _same_answers(exact, fast, _page_queries(index, 6, seed=3))


def test_fast_backend_needs_a_sidecar_and_unknown_backends_are_refused(tmp_path):
    index = tmp_path / "index"
    _ingestor(index).add(_pages_folder(tmp_path, "a", range(5)))
    with pytest.raises(FileNotFoundError, match="build-fast-index"):
        SearchEngine(index, visual_embedder=PatchEmbedder(), visual_backend="fast")
    with pytest.raises(ValueError, match="unknown visual backend"):
        SearchEngine(index, visual_embedder=PatchEmbedder(), visual_backend="nope")


def test_cli_builds_the_fast_index_of_an_existing_index_and_reports_recall(tmp_path):
    """The migration path: an index made without a fast index gets one with one command."""
    index = tmp_path / "index"
    _ingestor(index).add(_pages_folder(tmp_path, "a", range(25)))
    proc = subprocess.run([sys.executable, "-m", "search_engine", "build-fast-index", "--index", str(index),
                           "--check", "5"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["queries"] == 5 and report["recall_at_k"] == 1.0  # 25 pages < 128 candidates: all rescored
    assert has_fast_index(index)
    bad = subprocess.run([sys.executable, "-m", "search_engine", "build-fast-index", "--index", str(tmp_path / "x")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "error" in bad.stderr


# ---- the compressed token store ----------------------------------------------------------------------
def _codec(pages, spec: str):
    from search_engine.index.residual_codec import ResidualCodec

    sample = np.concatenate(pages[:300]).astype(np.float32)
    return ResidualCodec.train(Codebook.train(sample, 256), sample, spec)


@pytest.mark.parametrize("spec,min_cos", [("sq1", 0.87), ("sq2", 0.93), ("pq16", 0.91), ("pq32", 0.96)])
def test_residual_codecs_round_trip_close_to_the_originals(flat_store, spec, min_cos):
    _, pages = flat_store
    codec = _codec(pages, spec)
    x = np.concatenate(pages[500:520]).astype(np.float32)
    rows = codec.encode(x)
    assert rows.dtype == np.uint8 and rows.shape == (len(x), codec.row_bytes)
    np.testing.assert_array_equal(rows[:, :2].copy().view(np.uint16).ravel(), codec.codebook.assign(x))
    decoded = codec.decode(rows)
    cos = np.einsum("ij,ij->i", x, decoded)
    centroid_only = np.einsum("ij,ij->i", x, codec.codebook.centroids[codec.codebook.assign(x)])
    assert cos.mean() >= min_cos and cos.mean() > centroid_only.mean()  # the residual bytes carry information
    np.testing.assert_allclose(np.linalg.norm(decoded, axis=1), 1.0, atol=1e-5)


def test_more_residual_bits_mean_smaller_errors(flat_store):
    _, pages = flat_store
    x = np.concatenate(pages[600:610]).astype(np.float32)
    errors = [np.linalg.norm(x - _codec(pages, s).decode(_codec(pages, s).encode(x)), axis=1).mean()
              for s in ("sq1", "sq2", "sq4")]
    assert errors[0] > errors[1] > errors[2]


def test_unknown_codecs_are_refused():
    from search_engine.index.residual_codec import parse_codec

    for bad in ("sq3", "pq0", "zstd", ""):
        with pytest.raises(ValueError):
            parse_codec(bad)


def _source(tmp_path, pages, name="src"):
    writer = TokenStoreWriter(tmp_path / name, dim=128)
    writer.append(np.concatenate(pages), [len(p) for p in pages])
    writer.commit()
    writer.close()
    return FlatTokenStore(tmp_path / name)


def test_compressed_search_recall_and_the_exact_rescore(tmp_path, flat_store):
    from search_engine.index.compressed_index import build_compressed, open_compressed

    store, pages = flat_store
    directory = build_compressed(store, tmp_path / "c", spec="pq32", part_pages=150)
    fast = open_compressed(directory, exact_store=store)
    assert fast.store.nbytes_on_disk() < store.nbytes_on_disk() / 6
    queries = queries_from(pages, 30, seed=5)
    _, exact_rows = exact_topk_streaming(store, queries, k=10)
    compressed_only = fast.recall_check(queries, exact_rows=exact_rows)["recall_at_k"]
    _, rows = fast.search(queries, top_k=10, exact_rerank=16)
    rescored = np.mean([len(set(r) & set(e)) / 10 for r, e in zip(rows, exact_rows)])
    assert compressed_only >= 0.9 and rescored >= 0.99, (compressed_only, rescored)
    # the exact rescore returns exact scores
    scores, rows = fast.search(queries[:2], top_k=5, exact_rerank=16)
    reference = MaxSimScorer(np.concatenate(pages), [len(p) for p in pages]).score(queries[:2])
    for qi in range(2):
        np.testing.assert_allclose(scores[qi], reference[qi, rows[qi]], rtol=1e-4, atol=1e-4)
    # the decoded store serves any TokenStore reader
    got = fast.store.gather([7, 3, 7])
    np.testing.assert_array_equal(got.counts, [len(pages[7]), len(pages[3]), len(pages[7])])
    assert np.einsum("ij,ij->i", got.vectors.astype(np.float32),
                     np.concatenate([pages[7], pages[3], pages[7]]).astype(np.float32)).mean() > 0.95


def test_parallel_build_writes_the_same_parts_and_inverted_file(tmp_path, flat_store):
    from search_engine.index.centroids import InvertedFile
    from search_engine.index.compressed_index import build_compressed, open_compressed

    store, _ = flat_store
    one = build_compressed(store, tmp_path / "one", spec="sq2", part_pages=70)
    two = build_compressed(store, tmp_path / "two", spec="sq2", part_pages=70, workers=2)
    names = sorted(p.name for p in (one / "parts").iterdir())
    assert len(names) > 4 and names == sorted(p.name for p in (two / "parts").iterdir())
    for name in names:
        assert (one / "parts" / name).read_bytes() == (two / "parts" / name).read_bytes()
    # the inverted file built part by part is the one built from all codes at once
    index = open_compressed(two)
    codes = np.concatenate([c for c, _ in index.store.part_codes()])
    whole = InvertedFile.build(codes, index.store.counts, index.codebook.num_centroids)
    np.testing.assert_array_equal(index.ivf.offsets, whole.offsets)
    np.testing.assert_array_equal(index.ivf.pages, whole.pages)


def test_the_inverted_file_of_blocks_equals_the_whole_one():
    from search_engine.index.centroids import InvertedFile

    rng = np.random.default_rng(4)
    counts = rng.integers(1, 30, 500)
    codes = rng.integers(0, 97, int(counts.sum())).astype(np.uint16)
    whole = InvertedFile.build(codes, counts, 100)  # centroids 97..99 hold nothing: empty lists
    cuts = [0, 1, 120, 121, 300, 500]
    token_cuts = np.concatenate([[0], np.cumsum(counts)])[cuts]
    blocks = [(codes[token_cuts[i] : token_cuts[i + 1]], counts[cuts[i] : cuts[i + 1]]) for i in range(len(cuts) - 1)]
    parts = InvertedFile.build_blocks(blocks, 100)
    np.testing.assert_array_equal(parts.offsets, whole.offsets)
    np.testing.assert_array_equal(parts.pages, whole.pages)


class _DiesAfter:
    """A token source whose reads fail after `n` blocks: a build killed midway."""

    def __init__(self, store, n):
        self.store, self.left = store, n
        self.dim, self.counts = store.dim, store.counts
        self.num_pages, self.num_tokens = store.num_pages, store.num_tokens

    def gather(self, rows, dtype=np.float16):
        return self.store.gather(rows, dtype)

    def read_range(self, first, last):
        if self.left == 0:
            raise KeyboardInterrupt("killed")
        self.left -= 1
        return self.store.read_range(first, last)


def test_compressed_build_resumes_and_extends_without_re_encoding(tmp_path, flat_store):
    from search_engine.index.compressed_index import build_compressed, extend_compressed, open_compressed

    _, pages = flat_store
    first = _source(tmp_path, pages[:400])
    with pytest.raises(KeyboardInterrupt):
        build_compressed(_DiesAfter(first, 2), tmp_path / "c", spec="sq2", part_pages=100)
    with pytest.raises(FileNotFoundError, match="not finished"):
        open_compressed(tmp_path / "c")
    written = sorted((tmp_path / "c" / "parts").glob("*.codes.npy"))
    assert len(written) == 2
    stamps = {p: p.stat().st_mtime_ns for p in written}
    log = []
    build_compressed(first, tmp_path / "c", spec="sq2", part_pages=100, log=log.append)
    assert any("resuming" in m for m in log)
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # parts already written were kept
    resumed = open_compressed(tmp_path / "c")
    fresh = open_compressed(build_compressed(first, tmp_path / "fresh", spec="sq2", part_pages=100))
    q = queries_from(pages[:400], 5, seed=9)
    for a, b in zip(resumed.search(q)[1], fresh.search(q)[1]):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="codec"):
        build_compressed(first, tmp_path / "c", spec="pq16")
    # appended pages: only the new pages are encoded, searches see them
    writer = TokenStoreWriter(tmp_path / "src", dim=128)
    writer.append(np.concatenate(pages[400:]), [len(p) for p in pages[400:]])
    writer.commit()
    writer.close()
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "c" / "parts").glob("*.npy")}
    assert extend_compressed(FlatTokenStore(tmp_path / "src"), tmp_path / "c", part_pages=100) == 400
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())
    extended = open_compressed(tmp_path / "c")
    assert extended.num_pages == 800
    target = queries_from(pages, 1, seed=4)
    _, exact_rows = exact_topk_streaming(FlatTokenStore(tmp_path / "src"), target, k=1)
    assert extended.search(target, top_k=3)[1][0][0] == exact_rows[0][0]


def test_compressed_sidecar_of_an_index_is_incremental_and_resumable(tmp_path):
    import search_engine.index.fast_index as fi

    index = tmp_path / "index"
    _ingestor(index).add(_pages_folder(tmp_path, "a", range(30)))
    # a codec build killed after training: the re-run keeps the trained codec
    real = fi._compressed_store
    fi._compressed_store = lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt("killed"))
    try:
        with pytest.raises(KeyboardInterrupt):
            build_fast_index(index, codec="pq16")
    finally:
        fi._compressed_store = real
    assert not has_fast_index(index)
    building = json.loads((fi.fast_dir(index) / fi.BUILDING).read_text())
    log = []
    gen = build_fast_index(index, codec="pq16", say=log.append)
    assert any("resuming" in m for m in log) and not (fi.fast_dir(index) / fi.BUILDING).exists()
    meta = json.loads((gen / "fast_meta.json").read_text())
    assert meta["codec_id"] == building["codec_id"] and meta["codec"] == "pq16"
    parts = fi._codec_dir(index, meta["codec_id"]) / "parts"
    stamps = {p: p.stat().st_mtime_ns for p in parts.glob("*.npy")}
    assert len(stamps) == 2 * len(Manifest.load(index).documents)
    exact, fast = _engines(index)
    _same_answers(exact, fast, _page_queries(index, 6))  # 30 pages: every page reaches the exact rescore

    _ingestor(index).add(_pages_folder(tmp_path, "b", range(30, 40)))  # ingestion refreshes the sidecar
    after = {p: p.stat().st_mtime_ns for p in parts.glob("*.npy")}
    assert all(after[p] == t for p, t in stamps.items())  # old documents were not re-encoded
    assert len(after) == 2 * len(Manifest.load(index).documents)
    exact, fast = _engines(index)
    _same_answers(exact, fast, _page_queries(index, 6, seed=1))
    removed = [d for d in Manifest.load(index).documents if d.startswith("page003")]
    _ingestor(index).remove(removed)
    assert len(list(parts.glob("*.npy"))) == 2 * len(Manifest.load(index).documents)  # their parts are gone
    exact, fast = _engines(index)
    _same_answers(exact, fast, _page_queries(index, 6, seed=2))
    # a new codec is a new build; the old codec directory goes once the new generation is live
    build_fast_index(index, codec="sq2")
    assert not parts.exists()
