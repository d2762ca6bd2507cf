#!/usr/bin/env python
"""Time the exact MaxSim scorer (`search_engine.index.maxsim.MaxSimScorer`) on a GPU against its numpy path,
and check that both give the same ranking.

The search server scores a visual index with this class: numpy on a CPU, torch in float16 on any other
device (`--device cuda` of `vrag-search serve`). The GPU path is only exercised on a machine that has one, so
this script is the check to run there: it builds a random multi-vector index (unit vectors, ColQwen-like
shapes), scores the same queries both ways, prints the agreement (top-10 overlap, largest score difference)
and the latency per batch, and writes the numbers as JSON. With `--device cpu` the torch path runs in float32 on
the CPU against numpy (the test suite does this). It imports only numpy and torch, so it runs on a
bare CUDA image with the repository on PYTHONPATH.

    python scripts/bench_maxsim_device.py --pages 20000 --tokens 768 --out maxsim.json   # on a GPU machine
    python scripts/bench_maxsim_device.py --pages 500 --tokens 64 --device cpu         # the same code on a CPU
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from search_engine.index.maxsim import MaxSimScorer  # noqa: E402


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--tokens", type=int, default=768, help="vectors per page (ColQwen2: ~700-800)")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--query-tokens", type=int, default=20)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cpu-pages", type=int, default=2_000,
                        help="pages the numpy path scores for the agreement check and its timing (it is slow)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("FAIL: --device cuda but torch sees no GPU", file=sys.stderr)
        return 1
    rng = np.random.default_rng(0)
    counts = rng.integers(args.tokens // 2, args.tokens + 1, size=args.pages)
    vectors = _unit(rng, int(counts.sum()), args.dim).astype(np.float16)
    queries = [_unit(rng, args.query_tokens, args.dim) for _ in range(max(args.batch))]
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    report: dict = {"pages": args.pages, "vectors": int(counts.sum()), "dim": args.dim, "device": args.device,
                    "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                    "torch": torch.__version__, "cpu_count": os.cpu_count(), "machine": platform.machine(),
                    "index_gib_fp16": round(vectors.nbytes / 2**30, 2)}
    started = time.perf_counter()
    gpu = MaxSimScorer(vectors, counts, device=args.device, backend="torch")
    sync()
    report["load_seconds"] = round(time.perf_counter() - started, 2)

    # agreement: the first cpu_pages pages scored by numpy (float32) and by the device path (float16)
    n = min(args.cpu_pages, args.pages)
    head = int(counts[:n].sum())
    cpu = MaxSimScorer(vectors[:head], counts[:n], device="cpu")
    small = MaxSimScorer(vectors[:head], counts[:n], device=args.device, backend="torch")
    reference, device_scores = cpu.score(queries), small.score(queries)
    overlap = [len(set(np.argsort(-r)[:10]) & set(np.argsort(-d)[:10])) / 10 for r, d in zip(reference,
                                                                                            device_scores)]
    report["agreement"] = {"pages": n, "top10_overlap_mean": round(float(np.mean(overlap)), 4),
                           "max_abs_score_diff": round(float(np.abs(reference - device_scores).max()), 5),
                           "score_scale": round(float(np.abs(reference).max()), 3)}
    report["latency_ms"] = {}
    for batch in args.batch:
        chosen = queries[:batch]
        device_times = _timed(lambda chosen=chosen: gpu.score(chosen), args.repeats, sync)
        cpu_times = _timed(lambda chosen=chosen: cpu.score(chosen), args.repeats, lambda: None)
        report["latency_ms"][f"batch{batch}"] = {
            f"{args.device}_{args.pages}_pages_p50": round(1000 * statistics.median(device_times), 2),
            f"numpy_{n}_pages_p50": round(1000 * statistics.median(cpu_times), 2),
            "numpy_per_1000_pages": round(1000 * statistics.median(cpu_times) * 1000 / n, 2),
            f"{args.device}_per_1000_pages": round(1000 * statistics.median(device_times) * 1000 / args.pages, 3)}
    ok = report["agreement"]["top10_overlap_mean"] >= 0.99
    report["verdict"] = "PASS" if ok else "FAIL"
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    print(f"{report['verdict']}: {args.device} MaxSim agrees with numpy on {n} pages "
          f"(top-10 overlap {report['agreement']['top10_overlap_mean']})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
