#!/usr/bin/env python
"""Build a realistic synthetic late-interaction corpus from the real ColQwen2 page embeddings.

Why not replicate the 39 real pages with noise (the old benchmark): at 100k pages every page then
has ~2,500 near-duplicates, the exact top-10 is decided by noise and no approximate method can
match it. Here every page is distinct: a random recombination of contiguous token spans (3-6
spans) taken from several real pages, in random order, plus Gaussian noise, re-normalised — the
token statistics (dimension, norms, the redundancy of background patches, cross-page similarity)
stay those of real ColQwen2 pages. Queries take 20 tokens of a target page plus more noise.

The corpus streams to disk as a `FlatTokenStore` (fp16, ~19 GB at 100k pages) chunk by chunk and
is resumable (re-running continues after the last committed chunk). The exact ground truth of
the query set is computed by one streaming exact MaxSim pass and cached next to it.

    python scripts/make_bench_corpus.py --pages 100000 --out data/bench/synth_100k --queries 200
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# One BLAS/OpenMP thread by default: on a shared 2-core machine, spinning thread pools of several
# processes slow everything ~10x (measured). VRAG_BENCH_THREADS=2 on an idle machine.
THREADS = os.environ.get("VRAG_BENCH_THREADS", "1")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, THREADS)

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from search_engine.index.maxsim import exact_topk_streaming  # noqa: E402
from search_engine.index.token_store import FlatTokenStore, TokenStoreWriter  # noqa: E402

DEFAULT_NPZ = REPO.parent / "shared" / "data" / "vrag_example_corpus" / "colqwen2_v1.0_page_embeddings.npz"


def load_base(npz: Path) -> list[np.ndarray]:
    data = np.load(npz)
    return [data[k].astype(np.float32) for k in sorted(data.files)]


def synth_pages(base: list[np.ndarray], num_pages: int, rng: np.random.Generator, noise: float,
                min_spans: int = 3, max_spans: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """`num_pages` distinct pages: (fp16 tokens, counts). Deterministic given the generator state."""
    flat = np.concatenate(base)
    starts = np.concatenate([[0], np.cumsum([b.shape[0] for b in base])[:-1]])
    lengths = np.asarray([b.shape[0] for b in base])
    index_parts, counts = [], []
    for _ in range(num_pages):
        total = int(rng.integers(700, 781))
        spans = int(rng.integers(min_spans, max_spans + 1))
        cuts = np.sort(rng.choice(np.arange(1, total), spans - 1, replace=False))
        span_lengths = np.diff(np.concatenate([[0], cuts, [total]]))
        sources = rng.choice(len(base), spans, replace=True)
        for src, n in zip(sources, span_lengths):
            n = int(min(n, lengths[src]))
            off = int(rng.integers(0, lengths[src] - n + 1))
            index_parts.append(np.arange(starts[src] + off, starts[src] + off + n))
        counts.append(sum(min(int(n), int(lengths[s])) for s, n in zip(sources, span_lengths)))
    idx = np.concatenate(index_parts)
    vecs = flat[idx]
    vecs += rng.standard_normal(vecs.shape, dtype=np.float32) * noise
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs.astype(np.float16), np.asarray(counts, np.int64)


def replicated_pages(base: list[np.ndarray], first: int, num_pages: int, rng: np.random.Generator, noise: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The old stress set: page i is real page i mod 39 plus noise (near-duplicates everywhere)."""
    pages = [base[(first + i) % len(base)] for i in range(num_pages)]
    vecs = np.concatenate(pages) + rng.standard_normal((sum(len(p) for p in pages), base[0].shape[1]),
                                                       dtype=np.float32) * noise
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs.astype(np.float16), np.asarray([len(p) for p in pages], np.int64)


QUERY_SETS = ("standard", "noisy", "multipage", "half-unmatched")


def make_queries(store: FlatTokenStore, num_queries: int, tokens: int, noise: float, seed: int,
                 kind: str = "standard"):
    """`num_queries` queries of one kind and their target pages (the page most of the tokens come from).

    * standard: `tokens` tokens of the target page plus `noise` (the easy set).
    * noisy: the same with 2.5x the noise (tokens far from any stored token).
    * multipage: tokens drawn from three pages (half, quarter, quarter): no single page explains the
      query, so the top-10 mixes pages that match part of it.
    * half-unmatched: half the tokens from the target page, half random unit vectors that match nothing
      (they add a near-constant, uninformative term to every page's score and probe unrelated centroids).
    """
    if kind not in QUERY_SETS:
        raise ValueError(f"unknown query set {kind!r}; known: {', '.join(QUERY_SETS)}")
    rng = np.random.default_rng([seed, QUERY_SETS.index(kind)])
    targets = rng.choice(store.num_pages, num_queries, replace=False)
    sources = [[t] for t in targets.tolist()]
    if kind == "multipage":
        sources = [[t, *rng.choice(store.num_pages, 2, replace=False).tolist()] for t in targets.tolist()]
    wanted = np.unique(np.concatenate([np.asarray(s, np.int64) for s in sources]))
    gathered = store.gather(wanted)
    page_of = {int(row): gathered.vectors[s : s + n].astype(np.float32)
               for row, s, n in zip(wanted, gathered.starts, gathered.counts)}
    sigma = noise * (2.5 if kind == "noisy" else 1.0)
    queries = []
    for src in sources:
        if kind == "multipage":
            shares = [tokens - 2 * (tokens // 4), tokens // 4, tokens // 4]
        elif kind == "half-unmatched":
            shares = [tokens - tokens // 2]
        else:
            shares = [tokens]
        parts = []
        for page_row, share in zip(src, shares):
            page = page_of[page_row]
            parts.append(page[rng.choice(page.shape[0], min(share, page.shape[0]), replace=False)])
        q = np.concatenate(parts)
        q = q + rng.standard_normal(q.shape).astype(np.float32) * sigma
        if kind == "half-unmatched":
            q = np.concatenate([q, rng.standard_normal((tokens // 2, store.dim)).astype(np.float32)])
            q = q[rng.permutation(q.shape[0])]
        queries.append((q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32))
    return np.stack(queries), targets


def build(out: Path, pages: int, npz: Path, noise: float, seed: int, chunk: int = 1000, kind: str = "spans"
          ) -> FlatTokenStore:
    base = load_base(npz)
    writer = TokenStoreWriter(out, dim=base[0].shape[1],
                              extra_meta={"source": str(npz), "noise": noise, "seed": seed, "kind": kind})
    if writer.meta.get("kind", kind).replace("synthetic-", "") != kind:
        raise SystemExit(f"{out} holds a {writer.meta['kind']} corpus, not {kind}")
    started = time.perf_counter()
    while writer.num_pages < pages:
        first = writer.num_pages
        n = min(chunk, pages - first)
        rng = np.random.default_rng([seed, first])  # per-chunk seed: resumable and deterministic
        if kind == "replicated":
            vecs, counts = replicated_pages(base, first, n, rng, noise)
        else:
            vecs, counts = synth_pages(base, n, rng, noise)
        writer.append(vecs, counts)
        writer.commit(target_pages=pages)
        if (first // chunk) % 10 == 0:
            print(f"  {writer.num_pages:,}/{pages:,} pages ({time.perf_counter() - started:.0f}s)", flush=True)
    writer.close()
    return FlatTokenStore(out)


def query_set_path(out: Path, kind: str, num_queries: int, seed: int) -> Path:
    """Where a query set and its exact top-k are cached (the standard set keeps its old name)."""
    prefix = "queries" if kind == "standard" else f"queries-{kind}"
    return out / f"{prefix}_{num_queries}_s{seed}.npz"


def ground_truth(store: FlatTokenStore, out: Path, num_queries: int, tokens: int, noise: float, seed: int,
                 k: int = 100, kinds: tuple[str, ...] = ("standard",)) -> list[Path]:
    """Query sets + their exact top-k, cached per set (only missing sets are computed, in one exact pass)."""
    paths = {kind: query_set_path(out, kind, num_queries, seed) for kind in kinds}
    missing = [kind for kind in kinds if not paths[kind].exists()]
    if not missing:
        return list(paths.values())
    made = {kind: make_queries(store, num_queries, tokens, noise, seed, kind) for kind in missing}
    queries = [q for kind in missing for q in made[kind][0]]
    started = time.perf_counter()
    total = store.num_pages

    def progress(done: int) -> None:
        if done == total or done % 10_000 < 1000:
            print(f"  exact pass {done:,}/{total:,} pages ({time.perf_counter() - started:.0f}s)", flush=True)

    scores, rows = exact_topk_streaming(store, queries, k=k, chunk_tokens=1 << 19, progress=progress)
    seconds = time.perf_counter() - started
    for i, kind in enumerate(missing):
        part = slice(i * num_queries, (i + 1) * num_queries)
        qs, targets = made[kind]
        tmp = paths[kind].with_suffix(".tmp.npz")
        np.savez(tmp, queries=qs, targets=targets, exact_scores=scores[part], exact_rows=rows[part],
                 exact_seconds=np.float64(seconds * num_queries / len(queries)), kind=np.str_(kind))
        tmp.replace(paths[kind])
        print(f"{kind}: exact ground truth; target page ranked first for "
              f"{np.mean(rows[part][:, 0] == targets):.1%} of queries")
    print(f"exact pass: {seconds:.0f}s for {len(queries)} queries")
    return list(paths.values())


def main() -> int:
    import torch

    torch.set_num_threads(int(THREADS))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--npz", type=Path, default=DEFAULT_NPZ)
    parser.add_argument("--noise", type=float, default=0.03, help="per-dimension page noise (sigma)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--query-tokens", type=int, default=20)
    parser.add_argument("--query-noise", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--query-sets", nargs="+", default=["standard"], choices=QUERY_SETS,
                        help="query sets to make (each --queries queries, one exact pass for all)")
    parser.add_argument("--kind", choices=["spans", "replicated"], default="spans",
                        help="spans: distinct recombined pages (default); replicated: the old stress set")
    args = parser.parse_args()
    if not args.npz.exists():
        print(f"embeddings not found at {args.npz}", file=sys.stderr)
        return 2
    store = build(args.out, args.pages, args.npz, args.noise, args.seed, kind=args.kind)
    print(f"{store.num_pages:,} pages, {store.num_tokens:,} tokens, {store.nbytes_on_disk() / 2**30:.2f} GiB")
    if args.queries:
        ground_truth(store, args.out, args.queries, args.query_tokens, args.query_noise, args.seed + 1,
                     kinds=tuple(args.query_sets))
    meta = json.loads((args.out / "meta.json").read_text())
    print(json.dumps({k: meta[k] for k in ("num_pages", "noise", "seed")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
