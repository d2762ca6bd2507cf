#!/usr/bin/env python
"""Benchmark late-interaction search at scale: one table, every method side by side.

Corpus: the synthetic pages of `scripts/make_bench_corpus.py` (distinct recombinations of real
ColQwen2 token spans + noise, fp16 on disk) and its cached exact ground truth (one streaming exact
pass). Each method runs in its own subprocess so its peak RSS is its own. Columns: p50/p95 latency
of one query at a time, queries/s, peak RSS, bytes on disk, build time and recall@10 against
exact MaxSim.

Methods: `colpali` (colpali-engine's `score_multi_vector`, brute force; 10k only), `exact` (our
in-RAM exact scorer; only where fp32 tokens fit in RAM), `exact-stream` (the streaming exact pass
that made the ground truth: time per query from its cache), `fast:NPROBE:CANDIDATES` (centroid
candidates + exact rerank from the on-disk store), `cfast:CODEC:NPROBE:CANDIDATES:RERANK[:EXACT]` (the
compressed store: centroid candidates, centroid interaction, RERANK pages decoded and scored, and with
EXACT > 0 the best EXACT rescored from the fp16 store; CODEC e.g. pq32, sq2), `qdrant[:GROUPS:PREFETCH]`
(the Qdrant backend in qdrant-client's local mode: pooled prefetch of PREFETCH pages, then MaxSim;
GROUPS=0: one-stage MaxSim scan), `qdrant-edge:GROUPS:PREFETCH[:QUANT]` (the same collection schema and
query in Qdrant's Rust engine in-process, `qdrant-edge-py`; QUANT none/scalar/binary; put the package
on PYTHONPATH, e.g. `pip install --target /work/venvs/qedge qdrant-edge-py`).

Query sets (`--query-set`, made by `make_bench_corpus.py --query-sets ...`): standard (20 tokens of one
page + small noise), noisy, multipage (tokens of three pages), half-unmatched (half the tokens random).

    python scripts/make_bench_corpus.py --pages 10000 --out data/bench/synth_10k --queries 200
    python scripts/bench_search.py --corpus data/bench/synth_10k --corpus data/bench/synth_100k

The old replicated set (39 real pages + small noise: near-duplicates everywhere) stays available as
a stress case: `make_bench_corpus.py --kind replicated --noise 0.05 --out data/bench/replicated_10k ...`
then `--corpus data/bench/replicated_10k`.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

# One BLAS/OpenMP thread by default (see make_bench_corpus.py); VRAG_BENCH_THREADS=2 on an idle machine.
THREADS = os.environ.get("VRAG_BENCH_THREADS", "1")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, THREADS)

import numpy as np  # noqa: E402
import typer  # noqa: E402

from search_engine.infra.cli_exit import exit_status  # noqa: E402
from search_engine.infra.cli_lists import command_spreading  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

DEFAULT_METHODS = ["colpali", "exact", "exact-stream", "fast:4:128", "fast:8:256", "fast:16:512", "qdrant"]


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def load_queries(corpus: Path, max_queries: int | None, query_set: str = "standard"):
    prefix = "queries" if query_set == "standard" else f"queries-{query_set}"
    files = sorted(corpus.glob(f"{prefix}_*.npz"))
    if not files:
        raise SystemExit(f"no cached {query_set} queries/ground truth in {corpus}; run scripts/make_bench_corpus.py "
                         f"--query-sets {query_set} first")
    data = np.load(files[0])
    n = len(data["queries"]) if max_queries is None else min(max_queries, len(data["queries"]))
    return data["queries"][:n], data["exact_rows"][:n], data["exact_scores"][:n], float(data["exact_seconds"]), \
        len(data["queries"])


def recall_at(rows: list[np.ndarray], exact_rows: np.ndarray, k: int = 10) -> float:
    return float(np.mean([len(set(r[:k].tolist()) & set(e[:k].tolist())) / k for r, e in zip(rows, exact_rows)]))


def latency_stats(times: list[float], cpu_times: list[float] | None = None) -> dict:
    """Wall-clock p50/p95 and queries/s; with `cpu_times`, also the CPU-time p50 of one query.

    The machine's 2 cores are shared with other jobs: wall time then includes waiting for a core,
    while the process CPU time of a query is what it costs on a free core (reported beside it).
    """
    ms = sorted(t * 1000 for t in times)
    out = {"p50_ms": statistics.median(ms), "p95_ms": ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))],
           "qps": len(ms) / (sum(ms) / 1000)}
    if cpu_times:
        out["cpu_p50_ms"] = statistics.median(t * 1000 for t in cpu_times)
    return out


class Timer:
    """Collects wall and process-CPU time of each timed block."""

    def __init__(self):
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __enter__(self):
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall.append(time.perf_counter() - self._w)
        self.cpu.append(time.process_time() - self._c)

    def stats(self) -> dict:
        return latency_stats(self.wall, self.cpu)


def fast_index_for(store, corpus: Path, log=print):
    """The corpus's fast index, built once and cached under <corpus>/fast/ (build time recorded)."""
    from search_engine.index.fast_maxsim import FastMaxSim

    directory = corpus / "fast"
    if (directory / "fast_meta.json").exists():
        return FastMaxSim.load(directory, store), json.loads((directory / "fast_meta.json").read_text())
    for compressed in sorted(corpus.glob("fast-*/fast_meta.json")):  # same first stage: reuse its codebook + lists
        from search_engine.index.centroids import Codebook, InvertedFile

        meta = json.loads(compressed.read_text())
        fast = FastMaxSim(store, Codebook.load(compressed.parent), InvertedFile.load(compressed.parent))
        return fast, {**meta, "note": f"first stage of {compressed.parent.name}"}
    started = time.perf_counter()
    fast = FastMaxSim.build(store, log=log)
    seconds = time.perf_counter() - started
    fast.save(directory, extra={"build_seconds": seconds})
    return FastMaxSim.load(directory, store), json.loads((directory / "fast_meta.json").read_text())


def compressed_index_for(store, corpus: Path, codec: str, log=print):
    """The corpus's compressed fast index (`<corpus>/fast-<codec>/`), built once, resumable."""
    from search_engine.index.compressed_index import build_compressed

    directory = corpus / f"fast-{codec}"
    build_compressed(store, directory, spec=codec, log=lambda m: print(m, file=sys.stderr, flush=True),
                     extra={"load_avg_1m_at_build": os.getloadavg()[0]})
    return directory


def timed_searches(fast, queries, kw: dict) -> tuple[Timer, list]:
    """One warm-up query, then every query alone, timed: the timer and each query's page ids."""
    fast.search([queries[0]], **kw)
    timer, rows = Timer(), []
    for q in queries:
        with timer:
            _, r = fast.search([q], **kw)
        rows.append(r[0])
    return timer, rows


def dir_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


# ---- one method in this process (called as a worker) ------------------------------------------------
def is_streamed(corpus: Path) -> bool:
    """A corpus made by `make_bench_corpus.py --stream`: compressed parts only, no fp16 store."""
    return (corpus / "stream.json").exists() and not (corpus / "meta.json").exists()


def corpus_pages(corpus: Path) -> int:
    if is_streamed(corpus):  # the finished index's size (a finished prefix may be smaller than planned)
        metas = sorted(corpus.glob("fast-*/fast_meta.json"))
        return int(json.loads(metas[0].read_text())["num_pages"]) if metas else 0
    return int(json.loads((corpus / "meta.json").read_text())["num_pages"])


def run_streamed(method: str, corpus: Path, queries: np.ndarray, exact_rows: np.ndarray, query_set: str) -> dict:
    """cfast without an exact rescore on a streamed corpus (the only method that needs no fp16 store)."""
    from search_engine.index.compressed_index import open_compressed

    fields = method.split(":")
    if fields[0] != "cfast" or (len(fields) > 5 and int(fields[5]) > 0):
        raise SystemExit(f"{corpus} is streamed (no fp16 store): only cfast:CODEC:N:C:R methods run on it")
    codec, nprobe, candidates, rerank = fields[1], int(fields[2]), int(fields[3]), int(fields[4])
    directory = corpus / f"fast-{codec}"
    started = time.perf_counter()
    fast = open_compressed(directory)
    open_s = time.perf_counter() - started
    meta = json.loads((directory / "fast_meta.json").read_text())
    kw = {"top_k": 10, "nprobe": nprobe, "candidates": candidates, "rerank": rerank, "exact_rerank": 0}
    timer, rows = timed_searches(fast, queries, kw)
    compressed = dir_bytes(directory)
    return {"method": method, "pages": meta["num_pages"], "queries": len(queries), "query_set": query_set,
            **timer.stats(), "recall@10": recall_at(rows, exact_rows),
            "build_s": meta.get("build_cpu_seconds", float("nan")), "build_is_cpu": True,
            "disk_gib": compressed / 2**30, "bytes_per_page": compressed / meta["num_pages"],
            "note": f"streamed corpus; {meta['num_centroids']} centroids; {codec} "
                    f"{compressed / meta['num_tokens']:.1f} B/token all included; opens in {open_s:.1f}s; "
                    "build_s = generator CPU (generation + exact top-k + encoding)"}


def run_method(method: str, corpus: Path, max_queries: int | None, query_set: str = "standard") -> dict:
    from search_engine.index.token_store import FlatTokenStore

    queries, exact_rows, _, exact_seconds, gt_queries = load_queries(corpus, max_queries, query_set)
    if is_streamed(corpus):
        return run_streamed(method, corpus, queries, exact_rows, query_set)
    store = FlatTokenStore(corpus)
    result = {"method": method, "pages": store.num_pages, "queries": len(queries), "query_set": query_set}
    if method == "exact-stream":
        result.update({"p50_ms": 1000 * exact_seconds / gt_queries, "p95_ms": None,
                       "qps": gt_queries / exact_seconds, "recall@10": 1.0, "disk_gib": store.nbytes_on_disk() / 2**30,
                       "build_s": 0.0, "note": f"one batched streaming pass over {gt_queries} queries"})
        return result
    if method == "exact":
        from search_engine.index.maxsim import MaxSimScorer

        fp32_gib = store.num_tokens * store.dim * 4 / 2**30
        started = time.perf_counter()
        scorer = MaxSimScorer(store.memmap(), store.counts, cpu_fp32_budget_gib=12.0)
        build = time.perf_counter() - started
        scorer.score([queries[0]])
        timer, rows = Timer(), []
        for q in queries:
            with timer:
                s = scorer.score([q])[0]
            rows.append(np.argsort(-s)[:10])
        result.update(timer.stats(), **{"recall@10": recall_at(rows, exact_rows), "build_s": build,
                                               "disk_gib": store.nbytes_on_disk() / 2**30,
                                               "note": f"all tokens in RAM ({fp32_gib:.1f} GiB fp32)"})
    elif method == "colpali":
        import torch
        from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

        started = time.perf_counter()
        mm = store.memmap()
        ps = [torch.from_numpy(np.asarray(mm[a:b], np.float32)) for a, b in zip(store.offsets[:-1], store.offsets[1:])]
        build = time.perf_counter() - started
        timer, rows = Timer(), []
        for q in queries:
            with timer:
                s = BaseVisualRetrieverProcessor.score_multi_vector([torch.from_numpy(q)], ps, device="cpu")[0].numpy()
            rows.append(np.argsort(-s)[:10])
        result.update(timer.stats(), **{"recall@10": recall_at(rows, exact_rows), "build_s": build,
                                               "disk_gib": store.nbytes_on_disk() / 2**30,
                                               "note": "brute force, pages padded per block"})
    elif method.startswith("cfast"):
        from search_engine.index.compressed_index import open_compressed

        fields = method.split(":")
        codec, nprobe, candidates, rerank = fields[1], int(fields[2]), int(fields[3]), int(fields[4])
        exact = int(fields[5]) if len(fields) > 5 else 0
        directory = compressed_index_for(store, corpus, codec)
        started = time.perf_counter()
        fast = open_compressed(directory, exact_store=store if exact else None)
        open_s = time.perf_counter() - started
        meta = json.loads((directory / "fast_meta.json").read_text())
        kw = {"top_k": 10, "nprobe": nprobe, "candidates": candidates, "rerank": rerank, "exact_rerank": exact}
        timer, rows = timed_searches(fast, queries, kw)
        compressed = dir_bytes(directory)
        result.update(timer.stats(), **{
            "recall@10": recall_at(rows, exact_rows), "build_s": meta.get("build_seconds", float("nan")),
            "disk_gib": (compressed + (store.nbytes_on_disk() if exact else 0)) / 2**30,
            "bytes_per_page": (compressed + (store.nbytes_on_disk() if exact else 0)) / store.num_pages,
            "note": f"{meta['num_centroids']} centroids; {codec} {compressed / store.num_tokens:.1f} B/token; opens in "
                    f"{open_s:.1f}s" + ("; + fp16 store for the exact rescore" if exact else "")})
    elif method.startswith("fast"):
        _, nprobe, candidates = method.split(":")
        started = time.perf_counter()
        fast, meta = fast_index_for(store, corpus)
        open_s = time.perf_counter() - started
        fast.search([queries[0]], top_k=10, nprobe=int(nprobe), candidates=int(candidates))
        timer, rows = Timer(), []
        for q in queries:
            with timer:
                _, r = fast.search([q], top_k=10, nprobe=int(nprobe), candidates=int(candidates))
            rows.append(r[0])
        result.update(timer.stats(), **{
            "recall@10": recall_at(rows, exact_rows), "build_s": meta.get("build_seconds", float("nan")),
            "disk_gib": (store.nbytes_on_disk() + fast.nbytes_on_disk()) / 2**30,
            "bytes_per_page": (store.nbytes_on_disk() + fast.nbytes_on_disk()) / store.num_pages,
            "note": f"{meta['num_centroids']} centroids; opens in {open_s:.1f}s; "
                    f"first stage {fast.nbytes_on_disk() / 2**20:.0f} MiB + fp16 store"})
    elif method.startswith("qdrant-edge"):
        result.update(run_qdrant_edge(method, store, queries, exact_rows))
    elif method.startswith("qdrant"):
        from search_engine.backends.qdrant import QdrantBackend

        fields = method.split(":")
        groups, prefetch = (int(fields[1]), int(fields[2])) if len(fields) > 2 else (32, 400)
        page_ids = [f"bench_{i + 1}" for i in range(store.num_pages)]
        backend = QdrantBackend(page_ids, location=":memory:", collection="bench", batch_size=256, depth=10,
                                pool_groups=groups, prefetch_limit=prefetch)
        backend.ensure_collection(store.dim)
        started = time.perf_counter()
        mm = store.memmap()
        for s in range(0, store.num_pages, 256):
            backend.upsert_pages([(page_ids[i], "bench", mm[store.offsets[i] : store.offsets[i + 1]])
                                  for i in range(s, min(s + 256, store.num_pages))])
        build = time.perf_counter() - started
        timer, rows = Timer(), []
        for q in queries:
            with timer:
                s = backend.score([q])[0]
            rows.append(np.argsort(-s)[:10])
        result.update(timer.stats(), **{"recall@10": recall_at(rows, exact_rows), "build_s": build,
                                               "disk_gib": None,
                                               "note": f"qdrant-client local mode (in-process, brute force); pooled "
                                                       f"{groups} groups, prefetch {prefetch}"})
    else:
        raise SystemExit(f"unknown method {method}")
    return result


def run_qdrant_edge(method: str, store, queries, exact_rows) -> dict:
    """The Qdrant backend's schema and two-stage query in Qdrant's Rust engine (qdrant-edge-py), in-process."""
    import shutil
    import tempfile

    import qdrant_edge as qe

    from search_engine.backends.qdrant import POOLED_NAME, VECTOR_NAME, pool_tokens

    fields = method.split(":")
    groups, prefetch = int(fields[1]), int(fields[2])
    quant = fields[3] if len(fields) > 3 else "none"
    quant_config = {"none": None, "scalar": qe.ScalarQuantizationConfig(qe.ScalarType.Int8, always_ram=True),
                    "binary": qe.BinaryQuantizationConfig(always_ram=True)}[quant]
    maxsim = qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim)
    vectors = {VECTOR_NAME: qe.EdgeVectorParams(size=store.dim, distance=qe.Distance.Dot, multivector_config=maxsim,
                                                hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100,
                                                                               full_scan_threshold=10),
                                                quantization_config=quant_config,
                                                datatype=qe.VectorStorageDatatype.Float16)}
    if groups:
        vectors[POOLED_NAME] = qe.EdgeVectorParams(size=store.dim, distance=qe.Distance.Dot, multivector_config=maxsim,
                                                   hnsw_config=qe.HnswIndexConfig(m=16, ef_construct=100,
                                                                                  full_scan_threshold=10),
                                                   quantization_config=quant_config)
    path = Path(tempfile.mkdtemp(prefix="qedge-", dir=os.environ.get("VRAG_BENCH_TMP")))
    try:
        shard = qe.EdgeShard.create(str(path), qe.EdgeConfig(vectors=vectors))
        started = time.perf_counter()
        mm = store.memmap()
        for s in range(0, store.num_pages, 128):
            points = []
            for i in range(s, min(s + 128, store.num_pages)):
                tokens = np.asarray(mm[store.offsets[i] : store.offsets[i + 1]], np.float32)
                vec = {VECTOR_NAME: tokens.tolist()}
                if groups:
                    vec[POOLED_NAME] = pool_tokens(tokens, groups).tolist()
                points.append(qe.Point(i + 1, vec, {"page_id": f"bench_{i + 1}"}))
            shard.update(qe.UpdateOperation.upsert_points(points))
        shard.flush()
        shard.optimize()  # builds the HNSW index of the pooled vectors
        build = time.perf_counter() - started
        params = qe.SearchParams(quantization=qe.QuantizationSearchParams(rescore=True, oversampling=2.0)) \
            if quant != "none" else None
        timer, rows = Timer(), []
        for q in queries:
            ql = np.asarray(q, np.float32).tolist()
            pre = [qe.Prefetch(limit=prefetch, query=qe.Query.Nearest(ql, using=POOLED_NAME), params=params)] \
                if groups else None
            with timer:
                hits = shard.query(qe.QueryRequest(limit=10, query=qe.Query.Nearest(ql, using=VECTOR_NAME),
                                                   prefetches=pre, params=params, with_payload=False))
            rows.append(np.asarray([int(h.id) - 1 for h in hits]))
        disk = dir_bytes(path)
        shard.close()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return {**timer.stats(), "recall@10": recall_at(rows, exact_rows), "build_s": build, "disk_gib": disk / 2**30,
            "note": f"qdrant-edge-py (Rust engine, in-process); pooled {groups} groups in HNSW, prefetch {prefetch}, "
                    f"quantization {quant}; fp16 token storage"}


def run_worker(method: str, corpus: Path, max_queries: int | None, timeout: float, query_set: str = "standard",
               latency_only: bool = False) -> dict:
    cmd = [sys.executable, __file__, "--worker", method, "--corpus", str(corpus), "--query-set", query_set]
    if latency_only:
        cmd.append("--latency-only")
    if max_queries:
        cmd += ["--queries", str(max_queries)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"method": method, "error": f"timed out after {timeout:.0f}s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"method": method, "error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(lines[-1])


def fmt(value, spec: str) -> str:
    return "-" if value is None or (isinstance(value, float) and np.isnan(value)) else format(value, spec)


def print_table(rows: list[dict]) -> None:
    header = ("| pages | query set | method | p50 ms | p95 ms | CPU ms/query (p50) | queries/s | peak RSS GiB | "
              "disk GiB | build s | recall@10 | load | note |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for r in rows:
        if "error" in r:
            print(f"| {r.get('pages', '')} | {r.get('query_set', '')} | {r['method']} | {r['error']} |||||||||| ")
            continue
        print(f"| {r['pages']:,} | {r.get('query_set', 'standard')} | {r['method']} | {fmt(r['p50_ms'], '.1f')} | "
              f"{fmt(r.get('p95_ms'), '.1f')} | "
              f"{fmt(r.get('cpu_p50_ms'), '.1f')} | "
              f"{fmt(r['qps'], '.2f')} | {fmt(r.get('peak_rss_gib'), '.2f')} | {fmt(r.get('disk_gib'), '.2f')} | "
              f"{fmt(r.get('build_s'), '.0f')} | {fmt(r['recall@10'], '.3f')} | {fmt(r.get('load_avg_1m'), '.0f')} | "
              f"{r.get('note', '')} |")


def plot_scale(rows: list[dict], out: Path, methods: list[str] | None = None) -> None:
    """Latency (CPU p50), recall@10, bytes per page and build time against corpus size: one colour per
    method, one line style per query set (recall panel; the other panels show the standard set)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    good = [r for r in rows if "error" not in r and r.get("p50_ms") is not None and r.get("pages")]
    if methods:
        good = [r for r in good if r["method"] in methods]
    names = list(dict.fromkeys(r["method"] for r in good))
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(names)}
    styles = {"standard": "-", "noisy": ":", "multipage": "-.", "half-unmatched": "--"}
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.6))
    panels = [("cpu_p50_ms", "CPU ms per query (p50, standard)", True), ("recall@10", "recall@10 vs exact", False),
              ("bytes_per_page", "bytes per page on disk (what search reads)", True),
              ("build_s", "index build s (wall, loaded machine)", True)]
    for ax, (key, label, log) in zip(axes, panels):
        for method in names:
            for query_set, style in styles.items():
                if key != "recall@10" and query_set != "standard":
                    continue
                pts = sorted((r["pages"], r[key]) for r in good if r["method"] == method
                             and r.get("query_set", "standard") == query_set and r.get(key) is not None)
                if pts:
                    ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", color=colours[method],
                            linestyle=style, label=method if query_set == "standard" else None)
        ax.set_xscale("log")
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("pages")
        ax.set_title(label, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, loc="best")
    axes[1].plot([], [], color="grey", linestyle="-", label="standard")
    for query_set, style in list(styles.items())[1:]:
        axes[1].plot([], [], color="grey", linestyle=style, label=query_set)
    handles, labels = axes[1].get_legend_handles_labels()
    axes[1].legend(handles[-4:], labels[-4:], fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


# `--methods a b c` as argparse's nargs="+" read it (docs/benchmarks.md, docs/scale.md), and `--methods a --methods b`
@app.command(cls=command_spreading("--methods", "--plot-methods", "--query-set"),
             help=(__doc__ or "").splitlines()[0])
def bench(
    corpus: Annotated[list[Path] | None, typer.Option(
        metavar="DIR", help="corpus dir(s) from make_bench_corpus.py (repeat the option for several)")] = None,
    methods: Annotated[list[str] | None, typer.Option(
        metavar="METHOD...", show_default=" ".join(DEFAULT_METHODS))] = None,
    queries: Annotated[int | None, typer.Option(help="at most this many queries per method")] = None,
    slow_queries: Annotated[int, typer.Option(help="queries for colpali/qdrant (slow)")] = 5,
    max_exact_pages: Annotated[int, typer.Option(help="in-RAM exact only up to this size")] = 20_000,
    max_colpali_pages: int = 10_000,
    max_qdrant_pages: Annotated[int, typer.Option(help="local mode holds everything in RAM")] = 2_000,
    timeout: float = 3600,
    json_path: Annotated[Path | None, typer.Option("--json", help="also write the rows as JSON")] = None,
    append_json: Annotated[bool, typer.Option(
        "--append-json", help="add the rows to an existing --json file")] = False,
    plot: Annotated[Path | None, typer.Option(
        help="plot every row of --json against corpus size into this PNG")] = None,
    plot_only: Annotated[bool, typer.Option("--plot-only", help="only redraw --plot from --json (no runs)")] = False,
    plot_methods: Annotated[list[str] | None, typer.Option(
        metavar="METHOD...", help="only these methods in the plot")] = None,
    query_set: Annotated[list[str] | None, typer.Option(
        metavar="SET...", show_default="standard",
        help="query sets to run (standard noisy multipage half-unmatched)")] = None,
    latency_only: Annotated[bool, typer.Option(
        "--latency-only", help="the cached ground truth is of a smaller prefix of the corpus (it grew since): "
                               "report latency, memory, disk, no recall")] = False,
    worker: Annotated[str | None, typer.Option(hidden=True)] = None,  # one method in a child process (run_worker)
) -> None:
    """Run every method on every corpus and query set (each in a child process), print the table."""
    corpora = corpus or []
    query_sets = query_set or ["standard"]
    if worker:
        import torch

        torch.set_num_threads(int(THREADS))
        result = run_method(worker, corpora[0], queries, query_sets[0])
        if latency_only:
            result["recall@10"] = None
            result["note"] = result.get("note", "") + "; latency only (ground truth is of a smaller prefix)"
        result["peak_rss_gib"] = peak_rss_gib()
        result["load_avg_1m"] = os.getloadavg()[0]  # the 2 cores are shared: context for the latencies
        print(json.dumps(result))
        return
    if plot_only:
        if json_path is None or plot is None:
            raise typer.BadParameter("--plot-only needs --json (the rows) and --plot (the PNG)")
        rows = json.loads(json_path.read_text())
        print_table(rows)
        plot_scale(rows, plot, plot_methods)
        return
    if not corpora:
        raise typer.BadParameter("--corpus is required")
    rows = []
    for one_corpus in corpora:
        pages = corpus_pages(one_corpus)
        for method, one_set in [(m, qs) for m in methods or DEFAULT_METHODS for qs in query_sets]:
            limit = queries
            if method == "exact" and pages > max_exact_pages:
                rows.append({"method": method, "pages": pages, "error": "does not fit in RAM (fp32 tokens)"})
                continue
            if method == "colpali" and pages > max_colpali_pages:
                continue
            if method.split(":")[0] == "qdrant" and pages > max_qdrant_pages:
                continue
            if method.split(":")[0] in ("colpali", "qdrant"):
                limit = slow_queries
            print(f"[{pages:,} pages] {method} on {one_set} ...", file=sys.stderr, flush=True)
            row = run_worker(method, one_corpus, limit, timeout, one_set, latency_only)
            row.setdefault("pages", pages)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print_table(rows)
    if json_path:
        if append_json and json_path.exists():
            rows = json.loads(json_path.read_text()) + rows
        json_path.write_text(json.dumps(rows, indent=1))
    if plot:
        plot_scale(rows, plot, plot_methods)


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="bench_search.py")


if __name__ == "__main__":
    sys.exit(main())
