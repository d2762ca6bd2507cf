#!/usr/bin/env python
"""Time the exact MaxSim scorer (`search_engine.index.maxsim.MaxSimScorer`) on a GPU against its numpy path,
and check that both give the same ranking.

The search server scores a visual index with this class: numpy on a CPU, torch in float16 on any other
device (`--device cuda` of `vrag-search serve`). The GPU path is only exercised on a machine that has one, so
this script is the check to run there: it builds a random multi-vector index (unit vectors, ColQwen-like
shapes), scores the same queries both ways, prints the agreement (top-10 overlap, largest score difference)
and the latency per batch, and writes the numbers as JSON. It needs only numpy, torch and typer: outside the
project's .venv (a bare CUDA image), run it from the repository root with `PYTHONPATH=.`. With `--device cpu`
the torch path runs in float32 on the CPU against numpy (the test suite does this).

    PYTHONPATH=. python scripts/bench_maxsim_device.py --pages 20000 --tokens 768 --out maxsim.json  # a GPU
    python scripts/bench_maxsim_device.py --pages 500 --tokens 64 --device cpu         # the same code on a CPU
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from search_engine.index.maxsim import MaxSimScorer
from search_engine.infra.cli_exit import exit_status

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


def _unit(rng: np.random.Generator, rows: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((rows, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _timed(fn, repeats: int, sync) -> list[float]:
    """Wall seconds of each call after one warm-up (synchronised with the device)."""
    fn()
    sync()
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - started)
    return out


@app.command(help=(__doc__ or "").splitlines()[0])
def run(
    pages: Annotated[int, typer.Option(help="pages of the random index")] = 20_000,
    tokens: Annotated[int, typer.Option(help="vectors per page at most (ColQwen2: ~700-800)")] = 768,
    dim: Annotated[int, typer.Option(help="vector width")] = 128,
    query_tokens: Annotated[int, typer.Option(help="vectors per query")] = 20,
    batches: Annotated[tuple[int, int], typer.Option(help="two batch sizes to time")] = (1, 16),
    repeats: Annotated[int, typer.Option(help="timed calls per batch, after one warm-up")] = 5,
    device: Annotated[str, typer.Option(help="cuda, cuda:1, cpu (the torch path in float32)")] = "cuda",
    cpu_pages: Annotated[int, typer.Option(
        help="pages the numpy path scores for the agreement check and its timing (it is slow)")] = 2_000,
    out: Annotated[Path | None, typer.Option(help="JSON report")] = None,
) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        print("FAIL: --device cuda but torch sees no GPU", file=sys.stderr)
        raise typer.Exit(1)
    rng = np.random.default_rng(0)
    counts = rng.integers(tokens // 2, tokens + 1, size=pages)
    vectors = _unit(rng, int(counts.sum()), dim).astype(np.float16)
    queries = [_unit(rng, query_tokens, dim) for _ in range(max(batches))]
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    report: dict = {"pages": pages, "vectors": int(counts.sum()), "dim": dim, "device": device,
                    "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                    "torch": torch.__version__, "cpu_count": os.cpu_count(), "machine": platform.machine(),
                    "index_gib_fp16": round(vectors.nbytes / 2**30, 2)}
    started = time.perf_counter()
    gpu = MaxSimScorer(vectors, counts, device=device, backend="torch")
    sync()
    report["load_seconds"] = round(time.perf_counter() - started, 2)

    # agreement: the first cpu_pages pages scored by numpy (float32) and by the device path (float16)
    n = min(cpu_pages, pages)
    head = int(counts[:n].sum())
    cpu = MaxSimScorer(vectors[:head], counts[:n], device="cpu")
    # each page is scored on its own: the device scorer's first n columns are those pages' scores
    reference, device_scores = cpu.score(queries), gpu.score(queries)[:, :n]
    overlap = [len(set(np.argsort(-r)[:10]) & set(np.argsort(-d)[:10])) / 10 for r, d in zip(reference,
                                                                                            device_scores)]
    report["agreement"] = {"pages": n, "top10_overlap_mean": round(float(np.mean(overlap)), 4),
                           "max_abs_score_diff": round(float(np.abs(reference - device_scores).max()), 5),
                           "score_scale": round(float(np.abs(reference).max()), 3)}
    report["latency_ms"] = {}
    for batch in batches:
        chosen = queries[:batch]
        device_times = _timed(lambda chosen=chosen: gpu.score(chosen), repeats, sync)
        cpu_times = _timed(lambda chosen=chosen: cpu.score(chosen), repeats, lambda: None)
        report["latency_ms"][f"batch{batch}"] = {
            f"{device}_{pages}_pages_p50": round(1000 * statistics.median(device_times), 2),
            f"numpy_{n}_pages_p50": round(1000 * statistics.median(cpu_times), 2),
            "numpy_per_1000_pages": round(1000 * statistics.median(cpu_times) * 1000 / n, 2),
            f"{device}_per_1000_pages": round(1000 * statistics.median(device_times) * 1000 / pages, 3)}
    ok = report["agreement"]["top10_overlap_mean"] >= 0.99
    report["verdict"] = "PASS" if ok else "FAIL"
    print(json.dumps(report, indent=1))
    if out:
        out.write_text(json.dumps(report, indent=1))
    print(f"{report['verdict']}: {device} MaxSim agrees with numpy on {n} pages "
          f"(top-10 overlap {report['agreement']['top10_overlap_mean']})")
    if not ok:
        raise typer.Exit(1)


def main(argv: list[str] | None = None) -> int:
    return exit_status(app, argv, prog_name="bench_maxsim_device.py")


if __name__ == "__main__":
    sys.exit(main())
