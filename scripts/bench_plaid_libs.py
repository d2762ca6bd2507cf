#!/usr/bin/env python
"""fast-plaid and xtr-warp-rs on the benchmark corpus, for the side-by-side table of `bench_search.py`.

Both pin torch 2.11 (the project runs 2.13), so this script runs in its own virtual environment and
imports nothing of the project — it reads the corpus files directly (`tokens.f16`, `offsets.npy`, the
cached query sets with their exact top-10):

    python3 -m venv /work/venvs/fastplaid && /work/venvs/fastplaid/bin/pip install fast-plaid xtr-warp-rs typer
    /work/venvs/fastplaid/bin/python scripts/bench_plaid_libs.py --corpus data/bench/synth_10k \\
        --method fast-plaid xtr-warp --query-set standard noisy --json rows_libs.json

Rows have the fields of `bench_search.py`'s rows, so `bench_search.py --json ... --plot-only` tabulates
them together. Indexes are built once into `<corpus>/lib-<method>/` (build time recorded there).

On a CPU, plan for hours beyond ~1k pages: fast-plaid 1.7 packs the tokens as float16 and assigns them to its
centroids with a float16 matmul, which torch runs on a CPU without a BLAS kernel (~0.6 GFLOP/s a core here
against ~50 for float32), so 10k pages (7.4 M tokens × 16,384 centroids) is ~3×10^13 FLOP, ~7 hours on 2 cores.
`VRAG_BENCH_THREADS=2` gives both libraries both cores (default 1, like the project's per-query timings).
"""
from __future__ import annotations

import importlib.util
import json
import os
import resource
import statistics
import time
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Annotated

THREADS = os.environ.get("VRAG_BENCH_THREADS", "1")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, THREADS)

import numpy as np  # noqa: E402
import typer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _cli_lists() -> ModuleType:
    """search_engine/infra/cli_lists.py, loaded by its path: this script's virtual environment has no project.

    That module imports only typer and the standard library (tests/unit/test_cli_framework.py checks), so it
    loads alone; a path rather than `import search_engine...`, which would run the package's __init__ and
    need a sys.path edit.
    """
    spec = importlib.util.spec_from_file_location("vrag_cli_lists", REPO / "search_engine" / "infra" / "cli_lists.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_corpus(corpus: Path):
    meta = json.loads((corpus / "meta.json").read_text())
    offsets = np.load(corpus / "offsets.npy")[: int(meta["num_pages"]) + 1]
    tokens = np.memmap(corpus / "tokens.f16", np.float16, "r", shape=(int(offsets[-1]), int(meta["dim"])))
    return tokens, offsets


def load_queries(corpus: Path, query_set: str, limit: int | None):
    prefix = "queries" if query_set == "standard" else f"queries-{query_set}"
    files = sorted(corpus.glob(f"{prefix}_*.npz"))
    if not files:
        raise SystemExit(f"no {query_set} queries in {corpus}")
    data = np.load(files[0])
    n = len(data["queries"]) if limit is None else min(limit, len(data["queries"]))
    return data["queries"][:n], data["exact_rows"][:n]


def dir_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


def page_tensors(tokens, offsets, torch):
    return [torch.from_numpy(np.asarray(tokens[a:b], np.float32)) for a, b in zip(offsets[:-1], offsets[1:])]


def build(method: str, corpus: Path, tokens, offsets, kmeans_docs: int | None = None,
          device: str = "cpu") -> tuple[object, dict]:
    import torch

    directory = corpus / f"lib-{method}"
    state = directory / "bench_build.json"
    if method == "fast-plaid":
        from fast_plaid import search

        index = search.FastPlaid(index=str(directory / "index"), device=device)
        if not state.exists():
            started = time.perf_counter()
            index.create(documents_embeddings=page_tensors(tokens, offsets, torch), n_samples_kmeans=kmeans_docs)
            state.write_text(json.dumps({"build_seconds": time.perf_counter() - started, "kmeans_docs": kmeans_docs}))
        return index, json.loads(state.read_text())
    from xtr_warp import XTRWarp

    index = XTRWarp(index=str(directory / "index"))
    if not state.exists():
        started = time.perf_counter()
        index.create(page_tensors(tokens, offsets, torch), device=device, show_progress=False,
                     n_samples_kmeans=kmeans_docs)
        state.write_text(json.dumps({"build_seconds": time.perf_counter() - started, "kmeans_docs": kmeans_docs}))
    index.load(device=device)
    return index, json.loads(state.read_text())


def run(method: str, corpus: Path, query_set: str, limit: int | None, kmeans_docs: int | None = None,
        device: str = "cpu") -> dict:
    import torch

    torch.set_num_threads(int(THREADS))
    tokens, offsets = load_corpus(corpus)
    queries, exact_rows = load_queries(corpus, query_set, limit)
    index, state = build(method, corpus, tokens, offsets, kmeans_docs, device)

    def one(q):
        qt = torch.from_numpy(np.ascontiguousarray(q, np.float32)).unsqueeze(0)
        if method == "fast-plaid":
            hits = index.search(queries_embeddings=qt, top_k=10, show_progress=False)[0]
        else:
            hits = index.search(qt, top_k=10, show_progress=False)[0]
        if device.startswith("cuda"):
            torch.cuda.synchronize()  # the wall time of a query includes its kernels
        return hits

    one(queries[0])
    wall, cpu, rows = [], [], []
    for q in queries:
        w, c = time.perf_counter(), time.process_time()
        hits = one(q)
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
        rows.append([int(h[0]) for h in hits])
    recall = float(np.mean([len(set(r[:10]) & set(e[:10].tolist())) / 10 for r, e in zip(rows, exact_rows)]))
    ms = sorted(t * 1000 for t in wall)
    disk = dir_bytes(corpus / f"lib-{method}")
    pages = len(offsets) - 1
    return {"method": method, "pages": pages, "queries": len(queries), "query_set": query_set,
            "p50_ms": statistics.median(ms), "p95_ms": ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))],
            "qps": len(ms) / (sum(ms) / 1000), "cpu_p50_ms": statistics.median(t * 1000 for t in cpu),
            "recall@10": recall, "build_s": state["build_seconds"], "disk_gib": disk / 2**30,
            "bytes_per_page": disk / pages, "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "load_avg_1m": os.getloadavg()[0], "note": f"{method} defaults, {device}, {THREADS} CPU thread(s)"
            + (f", k-means on {state['kmeans_docs']} pages" if state.get("kmeans_docs") else "")}


class Method(str, Enum):
    fast_plaid = "fast-plaid"
    xtr_warp = "xtr-warp"


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


# `--method fast-plaid xtr-warp` as argparse's nargs="+" read it (docs/scale.md), and `--method a --method b`
@app.command(cls=_cli_lists().command_spreading("--method", "--query-set"), help=(__doc__ or "").splitlines()[0])
def bench(
    corpus: Annotated[Path, typer.Option()],
    method: Annotated[list[Method] | None, typer.Option(show_default="fast-plaid xtr-warp")] = None,
    query_set: Annotated[list[str] | None, typer.Option(metavar="SET...", show_default="standard")] = None,
    queries: int | None = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="append the rows to this JSON list")] = None,
    kmeans_docs: Annotated[int | None, typer.Option(
        help="fast-plaid and xtr-warp: train the k-means on this many pages (both default to ~16·sqrt(120·pages): "
             "the whole corpus at 10k pages, a flat k-means of 32k centroids over 7.4 M tokens, hours on one CPU "
             "core)")] = None,
    device: Annotated[str, typer.Option(help="cpu, or cuda on a GPU machine (both libraries are GPU-first: on a "
                                             "CPU they multiply in float16 without a BLAS kernel)")] = "cpu",
) -> None:
    """Each method on each query set; one JSON row per run on stdout (a failed run is a row with its error)."""
    rows = []
    for one_method in [m.value for m in method] if method else [m.value for m in Method]:
        for one_set in query_set or ["standard"]:
            try:
                row = run(one_method, corpus, one_set, queries, kmeans_docs, device)
            except Exception as exc:  # report the failure as a row, keep going with the other method
                row = {"method": one_method, "pages": None, "query_set": one_set,
                       "error": f"{type(exc).__name__}: {exc}"[:300]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if json_path:
        old = json.loads(json_path.read_text()) if json_path.exists() else []
        json_path.write_text(json.dumps(old + rows, indent=1))


if __name__ == "__main__":
    app(prog_name="bench_plaid_libs.py")
