"""Residual codecs beyond sq/pq8 and the streaming benchmark generator (no fp16 store, exact top-k on the fly).

The generator is the benchmark's ground truth at 100k+ pages, so it is checked against brute-force MaxSim
over the regenerated pages, and its resume (a build killed between parts) must give byte-identical parts
and the same top-k as an uninterrupted build, without re-encoding the parts already written.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from search_engine.index.compressed_index import open_compressed

REPO = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("make_bench_corpus", REPO / "scripts" / "make_bench_corpus.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_bench_corpus"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen():
    return _generator()


@pytest.fixture()
def base_npz(tmp_path):
    """A stand-in for the real ColQwen2 pages: 4 'pages' of clustered unit vectors."""
    rng = np.random.default_rng(3)
    centers = rng.standard_normal((40, 128)).astype(np.float32)
    pages = {}
    for i in range(4):
        x = centers[rng.integers(0, 40, 800)] + 0.3 * rng.standard_normal((800, 128)).astype(np.float32)
        pages[f"p{i}"] = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    path = tmp_path / "base.npz"
    np.savez(path, **pages)
    return path


KINDS = ("standard", "multipage", "half-unmatched")
PAGE_TOKENS = (60, 80)  # short pages: the test's generator runs ~10x less than the benchmark's


def _build(gen, out, npz, **kw):
    return gen.build_streaming(out, pages=300, npz=npz, noise=0.03, seed=0, codec_spec="sq2", num_queries=3,
                               query_tokens=8, query_noise=0.05, kinds=KINDS, part_pages=100, num_centroids=64,
                               page_tokens=PAGE_TOKENS, **kw)


def _brute_force_topk(gen, npz, queries: np.ndarray, pages: int = 300, k: int = 10) -> np.ndarray:
    base = gen.load_base(npz)
    of = gen.PagesOf(base, 0, 0.03, pages, PAGE_TOKENS)
    scores = np.stack([[float((q @ of.page(p).T).max(1).sum()) for p in range(pages)] for q in queries])
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def test_streamed_ground_truth_is_exact_and_the_index_searches(gen, base_npz, tmp_path):
    index_dir = _build(gen, tmp_path / "s", base_npz)
    for kind in KINDS:
        data = np.load(gen.query_set_path(tmp_path / "s", kind, 3, 1))
        np.testing.assert_array_equal(data["exact_rows"][:, :10], _brute_force_topk(gen, base_npz, data["queries"]))
    assert not (tmp_path / "s" / "meta.json").exists()  # no fp16 store was written
    fast = open_compressed(index_dir)
    assert fast.num_pages == 300
    data = np.load(gen.query_set_path(tmp_path / "s", "standard", 3, 1))
    _, rows = fast.search(list(data["queries"]), top_k=10, nprobe=64, candidates=300, rerank=300)
    assert all(r[0] == t for r, t in zip(rows, data["targets"]))  # every target page found first


def test_a_killed_streaming_build_resumes_without_re_encoding(gen, base_npz, tmp_path, monkeypatch):
    import search_engine.index.compressed_store as cs

    reference = _build(gen, tmp_path / "ref", base_npz)
    real_write, written = cs.write_part, []

    def dying_write(directory, name, *args, **kwargs):
        if len(written) == 2:
            raise KeyboardInterrupt("killed")
        written.append(name)
        return real_write(directory, name, *args, **kwargs)

    monkeypatch.setattr(cs, "write_part", dying_write)
    with pytest.raises(KeyboardInterrupt):
        _build(gen, tmp_path / "run", base_npz)
    state = np.load(tmp_path / "run" / gen.STREAM_STATE)
    assert int(state["pages_done"]) == 200 and not (tmp_path / "run" / "fast-sq2" / "fast_meta.json").exists()
    parts = tmp_path / "run" / "fast-sq2" / "parts"
    mtimes = {p.name: p.stat().st_mtime_ns for p in parts.iterdir()}
    monkeypatch.setattr(cs, "write_part", real_write)
    prefix = _build(gen, tmp_path / "run", base_npz, finish_prefix=True)  # an index of the 200 pages written
    assert open_compressed(prefix).num_pages == 200
    data = np.load(gen.query_set_path(tmp_path / "run", "standard", 3, 1))
    np.testing.assert_array_equal(data["exact_rows"][:, :10], _brute_force_topk(gen, base_npz, data["queries"], 200))
    resumed = _build(gen, tmp_path / "run", base_npz)
    assert {p.name: p.stat().st_mtime_ns for p in parts.iterdir() if p.name in mtimes} == mtimes
    for name in sorted(p.name for p in (reference / "parts").iterdir()):
        assert (reference / "parts" / name).read_bytes() == (resumed / "parts" / name).read_bytes()
    for kind in KINDS:
        a = np.load(gen.query_set_path(tmp_path / "ref", kind, 3, 1))
        b = np.load(gen.query_set_path(tmp_path / "run", kind, 3, 1))
        np.testing.assert_array_equal(a["exact_rows"], b["exact_rows"])


def test_two_workers_write_the_same_corpus_and_milestones_are_finished_prefixes(gen, base_npz, tmp_path):
    reference = _build(gen, tmp_path / "ref", base_npz)
    parallel = _build(gen, tmp_path / "par", base_npz, workers=2, milestones=(100, 200), query_pages=100)
    for name in sorted(p.name for p in (reference / "parts").iterdir()):
        assert (reference / "parts" / name).read_bytes() == (parallel / "parts" / name).read_bytes()
    for kind in KINDS:
        data = np.load(gen.query_set_path(tmp_path / "par", kind, 3, 1))
        assert (data["targets"] < 100).all()  # drawn from the first milestone: every prefix holds them
        np.testing.assert_array_equal(data["exact_rows"][:, :10], _brute_force_topk(gen, base_npz, data["queries"]))
        for pages in (100, 200):
            prefix = tmp_path / "par" / f"prefix-{pages}"
            sub = np.load(gen.query_set_path(prefix, kind, 3, 1))
            np.testing.assert_array_equal(sub["exact_rows"][:, :10],
                                          _brute_force_topk(gen, base_npz, sub["queries"], pages))
    prefix = tmp_path / "par" / "prefix-200" / "fast-sq2"
    index = open_compressed(prefix)
    assert index.num_pages == 200
    part = "p0000000100-0000000200.codes.npy"
    assert (prefix / "parts" / part).stat().st_ino == (parallel / "parts" / part).stat().st_ino  # linked, not copied
    data = np.load(gen.query_set_path(prefix.parent, "standard", 3, 1))
    _, rows = index.search(list(data["queries"]), top_k=10, nprobe=64, candidates=200, rerank=200)
    assert all(r[0] == t for r, t in zip(rows, data["targets"]))


def test_a_milestone_killed_before_its_index_is_finished_on_resume(gen, base_npz, tmp_path, monkeypatch):
    import search_engine.index.compressed_index as ci

    real_finish = ci.finish_compressed

    def dying_finish(directory, *args, **kwargs):
        if "prefix-" in str(directory):
            raise KeyboardInterrupt("killed")
        return real_finish(directory, *args, **kwargs)

    monkeypatch.setattr(ci, "finish_compressed", dying_finish)
    with pytest.raises(KeyboardInterrupt):
        _build(gen, tmp_path / "s", base_npz, milestones=(100,))
    assert not (tmp_path / "s" / "prefix-100" / "fast-sq2" / "fast_meta.json").exists()
    monkeypatch.setattr(ci, "finish_compressed", real_finish)
    _build(gen, tmp_path / "s", base_npz, milestones=(100,))
    assert open_compressed(tmp_path / "s" / "prefix-100" / "fast-sq2").num_pages == 100


def test_a_milestone_exports_as_the_fp16_corpus_of_the_same_pages(gen, base_npz, tmp_path):
    _build(gen, tmp_path / "s", base_npz, milestones=(200,))
    store = gen.export_fp16_corpus(tmp_path / "s", 200, tmp_path / "fp16")
    of = gen.PagesOf(gen.load_base(base_npz), 0, 0.03, 300, PAGE_TOKENS)
    assert store.num_pages == 200
    for row in (0, 99, 100, 199):
        np.testing.assert_array_equal(store.gather([row]).vectors, of.page(row).astype(np.float16))
    for kind in KINDS:  # the milestone's ground truth came along
        copied = np.load(gen.query_set_path(tmp_path / "fp16", kind, 3, 1))
        assert int(copied["corpus_pages"]) == 200
        np.testing.assert_array_equal(copied["exact_rows"][:, :10],
                                      _brute_force_topk(gen, base_npz, copied["queries"], 200))


def test_milestones_must_fall_on_part_boundaries(gen, base_npz, tmp_path):
    with pytest.raises(ValueError, match="milestones"):
        _build(gen, tmp_path / "s", base_npz, milestones=(150,))


def test_streaming_refuses_other_parameters_in_the_same_directory(gen, base_npz, tmp_path):
    _build(gen, tmp_path / "s", base_npz)
    meta = json.loads((tmp_path / "s" / gen.STREAM_META).read_text())
    assert meta["codec"] == "sq2" and meta["pages"] == 300
    with pytest.raises(SystemExit):
        gen.build_streaming(tmp_path / "s", pages=400, npz=base_npz, noise=0.03, seed=0, codec_spec="sq2",
                            num_queries=3, query_tokens=8, query_noise=0.05, kinds=KINDS, part_pages=100,
                            num_centroids=64, page_tokens=PAGE_TOKENS)


# ---- pq with more bits per code, OPQ rotation -----------------------------------------------------------
DIM = 32  # small tokens keep the 2^10-centroid and OPQ trainings to seconds
@pytest.fixture(scope="module")
def tokens():
    rng = np.random.default_rng(5)
    centers = rng.standard_normal((32, DIM)).astype(np.float32)
    x = centers[rng.integers(0, 32, 6000)] + 0.25 * rng.standard_normal((6000, DIM)).astype(np.float32)
    x *= np.linspace(0.5, 1.5, DIM, dtype=np.float32)  # unequal variance per dimension: what OPQ rebalances
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def codebook(tokens):
    from search_engine.index.centroids import Codebook

    return Codebook.train(tokens[:4000], 32)


@pytest.fixture(scope="module")
def trained(tokens, codebook):
    """Codecs trained once per module on the first 4,000 tokens (OPQ training is the slow part)."""
    from search_engine.index.residual_codec import ResidualCodec

    cache: dict = {}

    def get(spec: str):
        if spec not in cache:
            cache[spec] = ResidualCodec.train(codebook, tokens[:4000], spec)
        return cache[spec]

    return get


def _cos(codec, x):
    return float(np.einsum("ij,ij->i", x, codec.decode(codec.encode(x))).mean())


def test_codec_specs_parse_with_their_sizes():
    from search_engine.index.residual_codec import codec_bits, parse_codec

    assert parse_codec("pq32") == ("pq", 32) and codec_bits("pq32") == 8  # the old specs read as before
    assert parse_codec("pq32x10") == ("pq", 32) and codec_bits("pq32x10") == 10
    assert parse_codec("opq16") == ("opq", 16) and codec_bits("opq16x9") == 9
    for bad in ("sq2x4", "pq32x7", "pq32x13", "opq", "rq32"):
        with pytest.raises(ValueError):
            parse_codec(bad)


@pytest.mark.parametrize("spec,row_bytes", [("pq8x10", 12), ("pq8x9", 11), ("opq8", 10)])
def test_more_bits_and_rotation_round_trip_and_reload(tokens, codebook, trained, tmp_path, spec, row_bytes):
    from search_engine.index.residual_codec import ResidualCodec

    codec = trained(spec)
    assert codec.row_bytes == row_bytes
    held_out = tokens[4000:5000]
    rows = codec.encode(held_out)
    assert rows.shape == (1000, row_bytes)
    codec.save(tmp_path / spec)
    again = ResidualCodec.load(tmp_path / spec)
    np.testing.assert_allclose(again.decode(rows), codec.decode(rows), atol=1e-6)  # the tables round-trip
    centroid_only = float(np.einsum("ij,ij->i", held_out, codebook.centroids[codebook.assign(held_out)]).mean())
    assert _cos(codec, held_out) > centroid_only


def test_ten_bit_codes_beat_eight_bit_codes_and_opq_is_no_worse(tokens, trained):
    held_out = tokens[4000:6000]
    pq8, pq10, opq8 = (_cos(trained(spec), held_out) for spec in ("pq8", "pq8x10", "opq8"))
    assert pq10 > pq8 and opq8 >= pq8 - 1e-3


_TRAIN_BEFORE_AND_AFTER_PYMUPDF = """
import numpy as np
import faiss  # noqa: F401  (faiss first: PyMuPDF's later import takes over SWIG's std::vector<float> type)
from search_engine.index.centroids import Codebook
from search_engine.index.residual_codec import ResidualCodec

rng = np.random.default_rng(3)
x = rng.standard_normal((3000, 32)).astype(np.float32)
x /= np.linalg.norm(x, axis=1, keepdims=True)

def train():
    book = Codebook.train(x, 32)
    codecs = [ResidualCodec.train(book, x, spec) for spec in ("pq8", "opq8", "pq8x10")]
    return book, codecs, [c.encode(x[:200]) for c in codecs]

book_a, codecs_a, rows_a = train()
import pymupdf  # noqa: F401
assert type(faiss.ProductQuantizer(8, 2, 8).centroids).__module__.startswith("pymupdf"), "the clash is gone?"
book_b, codecs_b, rows_b = train()
np.testing.assert_array_equal(book_a.centroids, book_b.centroids)
for a, b, ra, rb in zip(codecs_a, codecs_b, rows_a, rows_b):
    np.testing.assert_array_equal(a.pq_centroids, b.pq_centroids)
    np.testing.assert_array_equal(ra, rb)
    np.testing.assert_allclose(a.decode(ra), b.decode(rb))
print("ok")
"""


def test_codebooks_and_codecs_train_and_encode_after_pymupdf_takes_over_swig_vectors():
    """faiss then PyMuPDF in one process (a server that searches, then ingests a PDF): same tables, same codes."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _TRAIN_BEFORE_AND_AFTER_PYMUPDF], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_attribute_misses_charges_every_miss_and_a_full_candidate_stage_loses_none(gen, base_npz, tmp_path):
    """scripts/attribute_misses.py as a user runs it: hits + misses add up to k per query; with every page a
    candidate and decoded, no miss can be the candidate stage's."""
    import subprocess

    _build(gen, tmp_path / "s", base_npz)
    runs = {}
    for name, knobs in (("all", ["--nprobe", "64", "--candidates", "300", "--rerank", "300"]),
                        ("narrow", ["--nprobe", "1", "--candidates", "10", "--rerank", "10"])):
        done = subprocess.run([sys.executable, str(REPO / "scripts" / "attribute_misses.py"), "--corpus",
                               str(tmp_path / "s"), "--codec", "sq2", *knobs, "--query-set", "standard",
                               "--query-set", "half-unmatched"], capture_output=True, text=True, timeout=300, cwd="/")
        assert done.returncode == 0, done.stderr[-3000:]
        runs[name] = [json.loads(line) for line in done.stdout.splitlines()]
    for rows in runs.values():
        assert [r["query_set"] for r in rows] == ["standard", "half-unmatched"]
        for r in rows:
            assert r["misses_codec"] + r["misses_candidates"] == round((1 - r["recall@10"]) * 10 * r["queries"])
            assert r["decoded_error_std"] >= 0 and r["exact_gap_rank10_11_median"] >= 0
    assert all(r["misses_candidates"] == 0 for r in runs["all"])
    assert sum(r["misses_candidates"] for r in runs["narrow"]) > 0  # 10 of 300 pages: the first stage loses some
