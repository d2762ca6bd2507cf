#!/usr/bin/env python
"""Benchmark exact late-interaction search: our MaxSim scorer vs colpali-engine's score_multi_vector.

Data: the real ColQwen2 page embeddings in ../shared (39 pages), replicated with small noise to
N pages; queries are 20-token subsets of random pages plus noise (no real query embeddings exist).
Prints latency per query, pages/s and whether both rank the same top-1.

    python scripts/bench_search.py --pages 10000 --queries 20 [--device cuda] [--skip-colpali]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_NPZ = Path(__file__).resolve().parents[2] / "shared" / "data" / "vrag_example_corpus" / \
    "colqwen2_v1.0_page_embeddings.npz"


def build_corpus(npz: Path, pages: int, seed: int = 0) -> list[np.ndarray]:
    data = np.load(npz)
    base = [data[k].astype(np.float32) for k in sorted(data.files)]
    rng = np.random.default_rng(seed)
    corpus = []
    for i in range(pages):
        page = base[i % len(base)] + rng.normal(0, 0.05, base[i % len(base)].shape).astype(np.float32)
        corpus.append((page / np.linalg.norm(page, axis=1, keepdims=True)).astype(np.float16))
    return corpus


def make_queries(corpus: list[np.ndarray], n: int, tokens: int = 20, seed: int = 1):
    rng = np.random.default_rng(seed)
    targets = rng.choice(len(corpus), n, replace=False)
    queries = []
    for t in targets:
        page = corpus[t].astype(np.float32)
        q = page[rng.choice(page.shape[0], tokens, replace=False)] + rng.normal(0, 0.05, (tokens, page.shape[1]))
        queries.append((q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32))
    return queries, targets


def timed(fn, repeats: int):
    times = []
    out = None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--npz", type=Path, default=DEFAULT_NPZ)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=16)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--skip-colpali", action="store_true")
    parser.add_argument("--colpali-queries", type=int, default=4, help="colpali-engine is slow on CPU: fewer")
    args = parser.parse_args()
    if not args.npz.exists():
        print(f"embeddings not found at {args.npz}", file=sys.stderr)
        return 2
    import torch

    from search_engine.index.maxsim import MaxSimScorer

    print(f"building {args.pages} pages ...", flush=True)
    corpus = build_corpus(args.npz, args.pages)
    queries, targets = make_queries(corpus, args.queries)
    tokens = sum(p.shape[0] for p in corpus)
    print(f"{args.pages} pages, {tokens:,} page vectors ({tokens * 128 * 2 / 2**30:.2f} GiB fp16), "
          f"{args.queries} queries x 20 tokens, device={args.device}, torch threads={torch.get_num_threads()}")

    start = time.perf_counter()
    scorer = MaxSimScorer(np.concatenate(corpus), [p.shape[0] for p in corpus], device=args.device)
    print(f"index load: {time.perf_counter() - start:.2f}s")
    scorer.score(queries[:1])  # warm-up

    _, single = timed(lambda: [scorer.score([q]) for q in queries], 1)
    per_query = single[0] / len(queries)
    ours, batch = timed(lambda: scorer.score(queries), 3)
    per_query_batched = min(batch) / len(queries)
    top1 = (ours.argmax(axis=1) == targets).mean()
    print(f"ours   one query at a time: {per_query * 1000:8.1f} ms/query  {args.pages / per_query:12,.0f} pages/s")
    print(f"ours   batch of {len(queries):3d}:          {per_query_batched * 1000:8.1f} ms/query  "
          f"{args.pages / per_query_batched:12,.0f} pages/s   top-1 = target: {top1:.0%}")

    if not args.skip_colpali:
        from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

        qs = [torch.from_numpy(q).to(torch.float16 if args.device != "cpu" else torch.float32)
              for q in queries[: args.colpali_queries]]
        dtype = torch.float16 if args.device != "cpu" else torch.float32
        ps = [torch.from_numpy(p).to(dtype) for p in corpus]
        scores, times = timed(lambda: BaseVisualRetrieverProcessor.score_multi_vector(qs, ps, device=args.device), 1)
        per_query_colpali = times[0] / len(qs)
        agree = (scores.numpy().argmax(axis=1) == ours[: len(qs)].argmax(axis=1)).mean()
        print(f"colpali-engine score_multi_vector: {per_query_colpali * 1000:8.1f} ms/query  "
              f"{args.pages / per_query_colpali:12,.0f} pages/s   same top-1 as ours: {agree:.0%}")
        print(f"speed-up: {per_query_colpali / per_query:.1f}x (one query), "
              f"{per_query_colpali / per_query_batched:.1f}x (batched)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
