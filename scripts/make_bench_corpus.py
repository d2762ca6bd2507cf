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

import json
import os
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated

# One BLAS/OpenMP thread by default: on a shared 2-core machine, spinning thread pools of several
# processes slow everything ~10x (measured). VRAG_BENCH_THREADS=2 on an idle machine.
THREADS = os.environ.get("VRAG_BENCH_THREADS", "1")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, THREADS)

import numpy as np  # noqa: E402
import typer  # noqa: E402

from search_engine.index.maxsim import exact_topk_streaming  # noqa: E402
from search_engine.index.token_store import FlatTokenStore, TokenStoreWriter  # noqa: E402
from search_engine.infra.cli_exit import exit_status  # noqa: E402
from search_engine.infra.cli_lists import command_spreading  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

DEFAULT_NPZ = REPO.parent / "shared" / "data" / "vrag_example_corpus" / "colqwen2_v1.0_page_embeddings.npz"


def load_base(npz: Path) -> list[np.ndarray]:
    data = np.load(npz)
    return [data[k].astype(np.float32) for k in sorted(data.files)]


def synth_pages(base: list[np.ndarray], num_pages: int, rng: np.random.Generator, noise: float,
                min_spans: int = 3, max_spans: int = 6, page_tokens: tuple[int, int] = (700, 780)
                ) -> tuple[np.ndarray, np.ndarray]:
    """`num_pages` distinct pages: (fp16 tokens, counts). Deterministic given the generator state."""
    flat = np.concatenate(base)
    starts = np.concatenate([[0], np.cumsum([b.shape[0] for b in base])[:-1]])
    lengths = np.asarray([b.shape[0] for b in base])
    index_parts, counts = [], []
    for _ in range(num_pages):
        total = int(rng.integers(page_tokens[0], page_tokens[1] + 1))
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


class QuerySetName(str, Enum):
    """The query sets (the choices of --query-sets); their order seeds each set's generator (QUERY_SETS.index)."""

    standard = "standard"
    noisy = "noisy"
    multipage = "multipage"
    half_unmatched = "half-unmatched"


QUERY_SETS = tuple(name.value for name in QuerySetName)  # ("standard", "noisy", "multipage", "half-unmatched")


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


# ---- streaming mode: compressed parts + exact top-k on the fly, no fp16 store -----------------------------
GEN_BLOCK = 100  # pages per generator seed in streaming mode: a query's page is regenerated from its block alone
STREAM_META = "stream.json"
STREAM_STATE = "stream_state.npz"


def stream_block(base: list[np.ndarray], seed: int, first: int, noise: float, num_pages: int,
                 page_tokens: tuple[int, int] = (700, 780)) -> tuple[np.ndarray, np.ndarray]:
    """Pages [first, first + GEN_BLOCK) ∩ [0, num_pages) of a streamed corpus as (fp32 tokens, counts).

    Each block has its own seed, so any page can be rebuilt without generating the pages before it
    (the query pre-pass needs only its targets' blocks) and a resumed run regenerates nothing twice."""
    if first % GEN_BLOCK:
        raise ValueError(f"block start {first} is not a multiple of {GEN_BLOCK}")
    vecs, counts = synth_pages(base, min(GEN_BLOCK, num_pages - first), np.random.default_rng([seed, 7, first]), noise,
                               page_tokens=page_tokens)
    return vecs.astype(np.float32), counts


class PagesOf:
    """Random access to a streamed corpus's pages by regenerating their blocks (cached per block)."""

    def __init__(self, base: list[np.ndarray], seed: int, noise: float, num_pages: int,
                 page_tokens: tuple[int, int] = (700, 780)):
        self.base, self.seed, self.noise, self.num_pages = base, seed, noise, num_pages
        self.page_tokens = page_tokens
        self._blocks: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def page(self, row: int) -> np.ndarray:
        first = row - row % GEN_BLOCK
        if first not in self._blocks:
            self._blocks[first] = stream_block(self.base, self.seed, first, self.noise, self.num_pages,
                                               self.page_tokens)
        vecs, counts = self._blocks[first]
        starts = np.concatenate([[0], np.cumsum(counts)])
        local = row - first
        return vecs[starts[local] : starts[local + 1]]


class StreamingTopK:
    """Exact MaxSim top-k of fixed queries over pages seen block by block (the ground truth without a
    second pass over a stored corpus). State = (scores, rows), saved with each committed part."""

    def __init__(self, queries: np.ndarray, k: int, scores: np.ndarray | None = None, rows: np.ndarray | None = None):
        self.nq, self.qlen = queries.shape[0], queries.shape[1]
        self.qt = np.ascontiguousarray(queries.reshape(-1, queries.shape[2]).T, np.float32)
        self.k = k
        self.scores = np.full((self.nq, 0), -np.inf, np.float32) if scores is None else scores
        self.rows = np.zeros((self.nq, 0), np.int64) if rows is None else rows

    def update(self, first_row: int, vecs: np.ndarray, counts: np.ndarray, max_pages: int = 32) -> None:
        """Score pages `first_row ...` (tokens `vecs`, `counts` per page) and merge them into the top-k.

        Pages are padded to the longest by repeating their last token (the max is unchanged), so the
        per-page max is one batched GEMM + `amax` in torch: 2x faster than a flat GEMM + numpy
        `maximum.reduceat` (measured), and this pass is most of the generator's CPU."""
        import torch

        qt = torch.from_numpy(self.qt)
        starts = np.concatenate([[0], np.cumsum(counts)])
        for page in range(0, len(counts), max_pages):  # ≤ max_pages pages at a time: similarity block ≤ ~100 MB
            last = min(page + max_pages, len(counts))
            cnt = np.asarray(counts[page:last], np.int64)
            width = int(cnt.max())
            index = starts[page:last, None] + np.minimum(np.arange(width)[None, :], cnt[:, None] - 1)
            block = torch.from_numpy(np.ascontiguousarray(vecs[index], np.float32))  # (pages, width, dim)
            token_best = torch.matmul(block, qt).amax(1).numpy()  # (pages, query tokens)
            scores = token_best.reshape(last - page, self.nq, self.qlen).sum(2).T  # (queries, pages)
            rows = np.broadcast_to(np.arange(first_row + page, first_row + last), scores.shape)
            all_scores = np.concatenate([self.scores, scores], 1)
            all_rows = np.concatenate([self.rows, rows], 1)
            self._keep_best(all_scores, all_rows)

    def merge(self, later: StreamingTopK) -> None:
        """Take in the top-k of pages that come after every page seen so far (ties keep the earlier page)."""
        self._keep_best(np.concatenate([self.scores, later.scores], 1), np.concatenate([self.rows, later.rows], 1))

    def _keep_best(self, all_scores: np.ndarray, all_rows: np.ndarray) -> None:
        keep = np.argsort(-all_scores, axis=1, kind="stable")[:, : self.k]
        self.scores = np.take_along_axis(all_scores, keep, 1)
        self.rows = np.take_along_axis(all_rows, keep, 1)


def part_topk(queries: np.ndarray, k: int, base: list[np.ndarray], seed: int, noise: float, pages: int,
              page_tokens: tuple[int, int], first: int, last: int
              ) -> tuple[np.ndarray, np.ndarray, StreamingTopK, float]:
    """Pages [first, last) regenerated block by block: (tokens, counts, their exact top-k, CPU seconds of
    the top-k in this thread)."""
    topk = StreamingTopK(queries, k)
    vecs, cnts, exact_cpu = [], [], 0.0
    for block in range(first, last, GEN_BLOCK):
        v, c = stream_block(base, seed, block, noise, pages, page_tokens)
        t0 = time.thread_time()
        topk.update(block, v, c)
        exact_cpu += time.thread_time() - t0
        vecs.append(v)
        cnts.append(c)
    return np.concatenate(vecs), np.concatenate(cnts), topk, exact_cpu


def stream_queries(pages_of: PagesOf, num_queries: int, tokens: int, noise: float, seed: int, kinds: tuple[str, ...],
                   query_pages: int | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The query sets of `make_queries`, drawn from regenerated pages instead of a stored corpus; their
    pages from the first `query_pages` pages (default all), so that every prefix of at least that many
    pages holds every query's planted pages."""

    class _Gatherable:  # the slice of the TokenStore interface make_queries reads
        num_pages, dim = min(query_pages or pages_of.num_pages, pages_of.num_pages), 128

        @staticmethod
        def gather(rows):
            mats = [pages_of.page(int(r)) for r in rows]
            counts = np.asarray([m.shape[0] for m in mats], np.int64)
            from search_engine.index.token_store import Gathered

            return Gathered(np.concatenate(mats), counts)

    return {kind: make_queries(_Gatherable(), num_queries, tokens, noise, seed, kind) for kind in kinds}


def build_streaming(out: Path, pages: int, npz: Path, noise: float, seed: int, codec_spec: str, num_queries: int,
                    query_tokens: int, query_noise: float, kinds: tuple[str, ...], part_pages: int = 5000,
                    num_centroids: int | None = None, k: int = 100, page_tokens: tuple[int, int] = (700, 780),
                    finish_prefix: bool = False, workers: int = 1, milestones: tuple[int, ...] = (),
                    query_pages: int | None = None) -> Path:
    """Generate `pages` pages straight into a compressed index `out/fast-<codec>/` (no fp16 copy), keeping
    the exact top-k of every query set on the fly; resumable after each part. Returns the index directory.

    Order of commits: stream.json (parameters) → queries → codec (trained on a sample of regenerated
    blocks) → per part: its two files, then stream_state.npz (pages done, top-k, counts: the part's commit
    mark for the generator) → inverted file + fast_meta.json → the query-set files bench_search reads.

    `workers` parts are generated, scored and encoded at a time (threads: the work releases the GIL);
    parts are committed in page order, so the state file always describes a prefix. A part a worker
    wrote ahead of a kill is found complete on resume: it is regenerated for its top-k, not re-encoded.

    `milestones`: page counts (multiples of `part_pages`) at which a finished smaller corpus is also
    written, `out/prefix-<N>/` (hard links to the parts, its own inverted file and ground truth): one
    run gives the 10k / 100k / 300k / 1M points of a scaling curve over the same queries (draw them from
    the smallest milestone with `query_pages`, so every prefix holds every planted page).

    `finish_prefix`: stop generating and finish an index of the pages committed so far (a smaller corpus
    whose exact top-k is already known; queries whose target page is not generated yet are then ordinary
    queries without a planted answer). Running again without it continues the corpus and re-finishes it."""
    from concurrent.futures import ThreadPoolExecutor

    from search_engine.index.atomic import atomic_save_npz, atomic_write_json
    from search_engine.index.centroids import Codebook, default_num_centroids
    from search_engine.index.compressed_index import PARTS_DIR, part_name
    from search_engine.index.compressed_store import part_complete, write_part
    from search_engine.index.residual_codec import ResidualCodec

    if part_pages % GEN_BLOCK:
        raise ValueError(f"part_pages must be a multiple of {GEN_BLOCK}")
    if bad := [m for m in milestones if m % part_pages or not 0 < m < pages]:
        raise ValueError(f"milestones {bad} must be multiples of part_pages ({part_pages}) below {pages}")
    out.mkdir(parents=True, exist_ok=True)
    params = {"kind": "stream", "pages": pages, "noise": noise, "seed": seed, "codec": codec_spec,
              "queries": num_queries, "query_tokens": query_tokens, "query_noise": query_noise,
              "query_sets": list(kinds), "part_pages": part_pages, "gen_block": GEN_BLOCK, "source": str(npz)}
    if page_tokens != (700, 780):  # defaults are not written, so older stream.json files still match
        params["page_tokens"] = list(page_tokens)
    if query_pages is not None and query_pages < pages:
        params["query_pages"] = query_pages
    meta_path = out / STREAM_META
    if meta_path.exists():
        old = json.loads(meta_path.read_text())
        if {k: v for k, v in old.items() if k != "started"} != params:
            raise SystemExit(f"{out} holds a streamed corpus with other parameters: {old}")
    else:
        atomic_write_json(meta_path, {**params, "started": time.time()})
    base = load_base(npz)
    pages_of = PagesOf(base, seed, noise, pages, page_tokens)
    started = time.perf_counter()
    cpu_started = time.process_time()
    qpath = out / "stream_queries.npz"
    if qpath.exists():
        data = np.load(qpath)
        made = {kind: (data[f"{kind}_queries"], data[f"{kind}_targets"]) for kind in kinds}
    else:
        made = stream_queries(pages_of, num_queries, query_tokens, query_noise, seed + 1, kinds, query_pages)
        atomic_save_npz(qpath, **{f"{kind}_{name}": arr for kind, (q, t) in made.items()
                                  for name, arr in (("queries", q), ("targets", t))})
    print(f"queries ready ({time.perf_counter() - started:.0f}s)", flush=True)
    index_dir = out / f"fast-{codec_spec}"
    if ResidualCodec.exists(index_dir):
        codec = ResidualCodec.load(index_dir)
    else:
        rng = np.random.default_rng([seed, 11])
        nblocks = (pages + GEN_BLOCK - 1) // GEN_BLOCK
        blocks = rng.choice(nblocks, min(nblocks, 4), replace=False)
        sample = np.concatenate([stream_block(base, seed, int(b) * GEN_BLOCK, noise, pages, page_tokens)[0]
                                 for b in blocks])
        sample = sample[rng.permutation(sample.shape[0])[:262_144]]
        est_tokens = int(pages * sum(page_tokens) / 2)
        codebook = Codebook.train(sample, num_centroids or default_num_centroids(est_tokens), seed=seed)
        codec = ResidualCodec.train(codebook, sample, codec_spec, seed=seed)
        codec.save(index_dir)
        print(f"codec {codec_spec}: {codebook.num_centroids} centroids ({time.perf_counter() - started:.0f}s)",
              flush=True)
    queries = np.concatenate([made[kind][0] for kind in kinds])
    state_path = out / STREAM_STATE
    if state_path.exists():
        st = np.load(state_path)
        done, counts = int(st["pages_done"]), list(st["counts"].tolist())
        topk = StreamingTopK(queries, k, st["scores"], st["rows"])
        cpu_before = float(st["cpu_seconds"])
    else:
        done, counts, topk, cpu_before = 0, [], StreamingTopK(queries, k), 0.0
    parts_dir = index_dir / PARTS_DIR
    parts_dir.mkdir(parents=True, exist_ok=True)
    exact_cpu = 0.0
    for m in milestones:  # a milestone whose ground truth was written but whose index was not (killed)
        if m <= done and query_set_path(out / f"prefix-{m}", kinds[0], num_queries, seed + 1).exists():
            _finish_milestone(out, index_dir, codec, part_pages, m, np.asarray(counts, np.int64), cpu_before,
                              pages)

    def make_part(block: tuple[int, int]) -> tuple[np.ndarray, StreamingTopK, float]:
        first, last = block
        vecs, cnts, part_top, part_exact_cpu = part_topk(queries, k, base, seed, noise, pages, page_tokens,
                                                         first, last)
        if not part_complete(parts_dir, part_name(first, last)):
            write_part(parts_dir, part_name(first, last), codec, vecs)
        return cnts, part_top, part_exact_cpu

    todo = [] if finish_prefix else [(a, min(a + part_pages, pages)) for a in range(done, pages, part_pages)]
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for (_, last), (cnts, part_top, part_exact_cpu) in zip(todo, pool.map(make_part, todo)):
            topk.merge(part_top)
            exact_cpu += part_exact_cpu
            counts.extend(cnts.tolist())
            done = last
            atomic_save_npz(state_path, pages_done=np.int64(done), counts=np.asarray(counts, np.int64),
                            scores=topk.scores, rows=topk.rows,
                            cpu_seconds=np.float64(cpu_before + time.process_time() - cpu_started))
            print(f"  {done:,}/{pages:,} pages ({time.perf_counter() - started:.0f}s wall, "
                  f"{time.process_time() - cpu_started:.0f}s CPU of which exact top-k {exact_cpu:.0f}s, "
                  f"load {os.getloadavg()[0]:.1f})", flush=True)
            if done in milestones:  # the workers go on with the next parts meanwhile
                (out / f"prefix-{done}").mkdir(exist_ok=True)  # its ground truth first, then its index
                _write_query_sets(out / f"prefix-{done}", kinds, made, topk.scores, topk.rows, num_queries, seed, done)
                _finish_milestone(out, index_dir, codec, part_pages, done, np.asarray(counts, np.int64),
                                  cpu_before + time.process_time() - cpu_started, pages)
    _finish_index(index_dir, codec, done, part_pages, np.asarray(counts, np.int64),
                  float(np.load(state_path)["cpu_seconds"]), pages)
    _write_query_sets(out, kinds, made, topk.scores, topk.rows, num_queries, seed, done)
    print(f"streamed {done:,} pages, {len(counts) and int(np.sum(counts)):,} tokens in "
          f"{time.perf_counter() - started:.0f}s wall")
    return index_dir


def _link_prefix(out: Path, index_dir: Path, prefix: Path, part_pages: int, done: int) -> None:
    """`prefix/` as a streamed corpus of the first `done` pages: stream.json and the codec copied, the
    parts hard-linked (no bytes copied; parts are written once and never changed in place)."""
    import shutil

    from search_engine.index.compressed_index import PARTS_DIR, part_name

    target = prefix / index_dir.name
    (target / PARTS_DIR).mkdir(parents=True, exist_ok=True)
    shutil.copy2(out / STREAM_META, prefix / STREAM_META)
    for f in index_dir.iterdir():  # the codec's tables and codec.json (not the whole index's ivf/meta)
        if f.is_file() and not f.name.startswith(("ivf_", "fast_meta")) and not (target / f.name).exists():
            shutil.copy2(f, target / f.name)
    for a in range(0, done, part_pages):
        for f in (index_dir / PARTS_DIR).glob(f"{part_name(a, min(a + part_pages, done))}.*.npy"):
            if not (target / PARTS_DIR / f.name).exists():
                os.link(f, target / PARTS_DIR / f.name)


def _finish_index(index_dir: Path, codec, done: int, part_pages: int, counts_arr: np.ndarray, cpu_seconds: float,
                  planned: int) -> None:
    """Inverted file + fast_meta.json of the first `done` pages (nothing when already finished)."""
    from search_engine.index.compressed_index import finish_compressed, part_name

    parts = [{"name": part_name(a, min(a + part_pages, done)),
              "counts": counts_arr[a : min(a + part_pages, done)].tolist()} for a in range(0, done, part_pages)]
    meta_file = index_dir / "fast_meta.json"
    if meta_file.exists() and json.loads(meta_file.read_text())["num_pages"] == done:
        return
    t0 = time.perf_counter()
    finish_compressed(index_dir, codec, parts, None, {
        "build_cpu_seconds": cpu_seconds, "streamed": True, "planned_pages": planned,
        "load_avg_1m_at_build": os.getloadavg()[0]})
    print(f"{index_dir.parent.name}: inverted file of {done:,} pages in {time.perf_counter() - t0:.0f}s wall",
          flush=True)


def _write_query_sets(out: Path, kinds: tuple[str, ...], made: dict, scores: np.ndarray, rows: np.ndarray,
                      num_queries: int, seed: int, done: int) -> None:
    """The query-set files bench_search reads, with their exact top-k over the first `done` pages."""
    from search_engine.index.atomic import atomic_save_npz

    nq = num_queries
    for i, kind in enumerate(kinds):
        part = slice(i * nq, (i + 1) * nq)
        qs, targets = made[kind]
        atomic_save_npz(query_set_path(out, kind, nq, seed + 1), queries=qs, targets=targets,
                        exact_scores=scores[part], exact_rows=rows[part], exact_seconds=np.float64("nan"),
                        kind=np.str_(kind), corpus_pages=np.int64(done))
        print(f"{out.name} {kind}: target page ranked first for {np.mean(rows[part][:, 0] == targets):.1%} of "
              f"queries ({np.mean(targets < done):.0%} of the targets generated)", flush=True)


def _finish_milestone(out: Path, index_dir: Path, codec, part_pages: int, done: int, counts_arr: np.ndarray,
                      cpu_seconds: float, planned: int) -> None:
    """`out/prefix-<done>/` as a finished corpus, after its ground truth was written there: links and
    its own inverted file (a kill in between is finished on resume)."""
    prefix = out / f"prefix-{done}"
    _link_prefix(out, index_dir, prefix, part_pages, done)
    _finish_index(prefix / index_dir.name, codec, done, part_pages, counts_arr[:done], cpu_seconds, planned)


def export_fp16_corpus(stream_dir: Path, pages: int, dest: Path) -> FlatTokenStore:
    """The first `pages` pages of a streamed corpus as an fp16 token store: an ordinary corpus (with the
    query sets of its milestone `prefix-<pages>/`, or of the whole stream when it has exactly that many
    pages) on which fp16 methods, other libraries (`bench_plaid_libs.py`) and index builds from tokens
    on disk (`bench_build.py`) run over exactly the pages the compressed index holds. Resumable."""
    import shutil

    meta = json.loads((stream_dir / STREAM_META).read_text())
    if pages % GEN_BLOCK or pages > meta["pages"]:
        raise SystemExit(f"--pages must be a multiple of {GEN_BLOCK} and at most the stream's {meta['pages']:,}")
    base = load_base(Path(meta["source"]))
    page_tokens = tuple(meta.get("page_tokens", (700, 780)))
    writer = TokenStoreWriter(dest, dim=base[0].shape[1], extra_meta={
        "source": meta["source"], "noise": meta["noise"], "seed": meta["seed"], "kind": "stream-export",
        "stream": str(stream_dir)})
    started = time.perf_counter()
    while writer.num_pages < pages:
        first = writer.num_pages
        vecs, counts = stream_block(base, meta["seed"], first, meta["noise"], meta["pages"], page_tokens)
        n = min(GEN_BLOCK, pages - first)
        writer.append(vecs[: int(counts[:n].sum())].astype(np.float16), counts[:n])
        writer.commit(target_pages=pages)
        if writer.num_pages % 10_000 == 0:
            print(f"  {writer.num_pages:,}/{pages:,} pages ({time.perf_counter() - started:.0f}s)", flush=True)
    writer.close()
    sets = stream_dir / f"prefix-{pages}"
    if not sets.is_dir():
        sets = stream_dir
    for f in sets.glob("queries*_s*.npz"):
        if int(np.load(f)["corpus_pages"]) == pages:
            shutil.copy2(f, dest / f.name)
    return FlatTokenStore(dest)


class Kind(str, Enum):
    """The choices of --kind."""

    spans = "spans"
    replicated = "replicated"


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


# `--query-sets standard noisy` as argparse's nargs="+" read it, and `--query-sets standard --query-sets noisy`
@app.command(cls=command_spreading("--query-sets", "--milestones"), help=(__doc__ or "").splitlines()[0])
def make(
    pages: Annotated[int, typer.Option()],
    out: Annotated[Path, typer.Option()],
    npz: Path = DEFAULT_NPZ,
    noise: Annotated[float, typer.Option(help="per-dimension page noise (sigma)")] = 0.03,
    queries: int = 200,
    query_tokens: int = 20,
    query_noise: float = 0.05,
    seed: int = 0,
    query_sets: Annotated[list[QuerySetName] | None, typer.Option(
        show_default="standard", help="query sets to make (each --queries queries, one exact pass for all)")] = None,
    kind: Annotated[Kind, typer.Option(
        help="spans: distinct recombined pages (default); replicated: the old stress set")] = Kind.spans,
    stream: Annotated[bool, typer.Option(
        "--stream", help="never write the fp16 store: generate pages straight into a compressed index "
                         "(<out>/fast-<codec>/) and keep the exact top-k of the query sets on the fly")] = False,
    codec: Annotated[str, typer.Option(help="--stream: the residual codec (see residual_codec.py)")] = "pq32",
    part_pages: Annotated[int, typer.Option(help="--stream: pages per compressed part")] = 5000,
    centroids: Annotated[int | None, typer.Option(help="--stream: codebook size (default from size)")] = None,
    finish_prefix: Annotated[bool, typer.Option(
        "--finish-prefix", help="--stream: finish an index of the pages committed so far (run again to continue)")
    ] = False,
    workers: Annotated[int, typer.Option(
        help="--stream: parts generated and encoded at a time (threads; one per free core)")] = 1,
    milestones: Annotated[list[int] | None, typer.Option(
        help="--stream: also finish corpora of these first page counts as <out>/prefix-<N>/")] = None,
    query_pages: Annotated[int | None, typer.Option(
        help="--stream: draw the queries' pages from the first N pages (default: all)")] = None,
    export_fp16: Annotated[Path | None, typer.Option(
        help="write the first --pages pages of the streamed corpus at --out as an fp16 corpus here")] = None,
) -> None:
    """Generate the corpus (or the streamed compressed index) and the ground truth of its query sets."""
    import torch

    torch.set_num_threads(int(THREADS))
    sets = tuple(q.value for q in query_sets) if query_sets else ("standard",)
    if not npz.exists():
        print(f"embeddings not found at {npz}", file=sys.stderr)
        raise typer.Exit(2)
    if export_fp16 is not None:
        store = export_fp16_corpus(out, pages, export_fp16)
        print(f"{store.num_pages:,} pages, {store.num_tokens:,} tokens, {store.nbytes_on_disk() / 2**30:.2f} GiB")
        return
    if stream:
        build_streaming(out, pages, npz, noise, seed, codec, queries, query_tokens, query_noise, sets, part_pages,
                        centroids, finish_prefix=finish_prefix, workers=workers,
                        milestones=tuple(milestones or ()), query_pages=query_pages)
        return
    store = build(out, pages, npz, noise, seed, kind=kind.value)
    print(f"{store.num_pages:,} pages, {store.num_tokens:,} tokens, {store.nbytes_on_disk() / 2**30:.2f} GiB")
    if queries:
        ground_truth(store, out, queries, query_tokens, query_noise, seed + 1, kinds=sets)
    meta = json.loads((out / "meta.json").read_text())
    print(json.dumps({k: meta[k] for k in ("num_pages", "noise", "seed")}))


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="make_bench_corpus.py")


if __name__ == "__main__":
    sys.exit(main())
