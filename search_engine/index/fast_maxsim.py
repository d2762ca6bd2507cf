"""Fast late-interaction search: centroid candidates, then exact MaxSim over the candidates only.

Pipeline per query (see `centroids.py` for the first stage and why it is built that way):

1. score the query tokens against all centroids (one small GEMM);
2. each query token probes its `nprobe` best centroids; pages get an approximate MaxSim from the
   inverted lists (missing tokens imputed) — touches a few hundred thousand list entries, not the
   tens of millions of page tokens;
3. the `candidates` best pages are read from the on-disk fp16 store and scored exactly.

Over a compressed store (`compressed_store.py`: centroid id + residual bytes per token, ~7.5× smaller
than fp16) step 3 becomes two steps, as in PLAID: (3a) centroid interaction — each candidate's
tokens are replaced by their centroids, whose scores against the query are already known from
step 1, so a candidate costs a gather and a max, no decoding; (3b) the `rerank` best of those are
decoded (centroid + residual) and scored by MaxSim. If the exact fp16 store is kept as well
(`exact_store`), the `exact_rerank` best are rescored exactly from it (optional: the fp16 store is
then read for a few dozen pages per query only).

Knobs: `nprobe` and `candidates` (more → higher recall, slower). `recall_check` measures recall@k
against exact search on the caller's own queries so a user can pick them. Step 3 is exact, so any
page that reaches it gets its true score; only pages the first stage misses can be lost.

Removed pages are tombstoned (never returned) until `compact()` rebuilds the inverted file.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from search_engine.index.atomic import atomic_save_npy, atomic_write_json
from search_engine.index.centroids import Codebook, InvertedFile, default_num_centroids
from search_engine.index.compressed_store import CompressedTokenStore
from search_engine.index.maxsim import exact_topk_streaming, maxsim_pages
from search_engine.index.token_store import TokenStore

if TYPE_CHECKING:
    import torch

FAST_META = "fast_meta.json"
FAST_FORMAT = 1


@dataclass
class FastParams:
    """Recall/speed knobs. The defaults reach recall@10 ≥ 0.99 of exact on the benchmark corpus up to
    ~100k pages with an 8k-centroid codebook; with the default codebook of a 100k-page corpus (32k
    centroids) each probe covers less, and nprobe 32 / candidates 256 are needed for ≥ 0.95 on every
    query set (measured in docs/scale.md §7) — `for_codebook` picks those when an index is built
    without explicit knobs."""

    nprobe: int = 16
    candidates: int = 128
    rerank: int = 128  # compressed store only: pages decoded and scored after the centroid interaction
    exact_rerank: int = 0  # with an exact fp16 store beside the compressed one: pages rescored exactly

    def __post_init__(self) -> None:
        if self.nprobe < 1 or self.candidates < 1 or self.rerank < 1 or self.exact_rerank < 0:
            raise ValueError("nprobe, candidates and rerank must be ≥ 1, exact_rerank ≥ 0")

    @classmethod
    def for_codebook(cls, num_centroids: int) -> FastParams:
        """The default knobs for a codebook of this size.

        Why they depend on it: a probe covers one centroid's pages, so with a finer codebook (the
        default grows with the corpus: 16k centroids from ~11k pages of ~740 tokens, 32k from ~45k) the
        same nprobe sees a smaller share of the corpus. Above `LARGE_CODEBOOK` centroids nprobe 32 /
        candidates 256 keep the recall the 16 / 128 defaults have on smaller codebooks, at about the same
        CPU per query on the compressed path (docs/scale.md §8.5: 100k pages, 32k centroids).
        """
        if num_centroids > LARGE_CODEBOOK:
            return cls(nprobe=32, candidates=256)
        return cls()

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> FastParams:
        """The knobs an index stored in its `fast_meta.json`; a knob it does not name keeps its default here
        (indexes written before that knob existed)."""
        return cls(**{f.name: meta[f.name] for f in fields(cls) if f.name in meta})


LARGE_CODEBOOK = 8192  # centroids; see FastParams.for_codebook


class FastMaxSim:
    """Approximate-then-exact MaxSim over a `TokenStore` (see the module docstring)."""

    def __init__(self, store: TokenStore, codebook: Codebook, ivf: InvertedFile, codes: np.ndarray | None = None,
                 params: FastParams | None = None, device: str = "cpu", exact_store: TokenStore | None = None):
        self.store = store
        self.exact_store = exact_store
        if exact_store is not None and not np.array_equal(exact_store.counts, store.counts):
            raise ValueError("the exact store does not hold the same pages as the compressed store")
        self.codebook = codebook
        self.ivf = ivf
        self.codes = codes
        self.params = params or FastParams.for_codebook(codebook.num_centroids)
        self.device = device
        self.deleted = np.zeros(store.num_pages, bool)
        self._centroids_t = np.ascontiguousarray(codebook.centroids.T)
        self._centroids_torch: torch.Tensor | None = None

    @property
    def num_pages(self) -> int:
        return self.store.num_pages

    # ---- building ---------------------------------------------------------------------------------
    @classmethod
    def build(cls, store: TokenStore, num_centroids: int | None = None, sample_tokens: int = 262_144,
              seed: int = 0, params: FastParams | None = None, device: str = "cpu",
              log: Callable[[str], None] | None = None, codebook: Codebook | None = None) -> FastMaxSim:
        """Train the codebook on a token sample, code every token (streaming), build the inverted file."""
        say = log or (lambda msg: None)
        started = time.perf_counter()
        if codebook is None:
            codebook = Codebook.train(sample_tokens_of(store, sample_tokens, seed),
                                      num_centroids or default_num_centroids(store.num_tokens), seed=seed)
            say(f"codebook: {codebook.num_centroids} centroids in {time.perf_counter() - started:.1f}s")
        codes = np.empty(store.num_tokens, np.uint16)
        ranges = [(first, last) for first, last in _page_ranges(store.counts, 1 << 20)]
        offsets = np.concatenate([[0], np.cumsum(store.counts)])
        done = 0

        def report(first: int, last: int, part: np.ndarray) -> None:
            nonlocal done
            codes[offsets[first] : offsets[last]] = part
            before, done = done, done + (last - first)
            if before == 0 or (done * 10 // store.num_pages) != (before * 10 // store.num_pages):
                say(f"coded {done:,}/{store.num_pages:,} pages ({time.perf_counter() - started:.0f}s)")

        for first, last in ranges:
            report(first, last, codebook.assign(store.read_range(first, last)))
        ivf = InvertedFile.build(codes, store.counts, codebook.num_centroids)
        say(f"inverted file: {ivf.pages.shape[0]:,} entries ({time.perf_counter() - started:.1f}s total)")
        return cls(store, codebook, ivf, codes=codes, params=params, device=device)

    def save(self, directory: str | Path, extra: dict | None = None) -> None:
        """Write the index files, then `fast_meta.json` last (atomically): a reader never sees a partial index."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.codebook.save(directory)
        self.ivf.save(directory)
        if self.codes is not None:
            atomic_save_npy(directory / "codes.npy", self.codes)
        atomic_save_npy(directory / "deleted.npy", self.deleted)
        atomic_write_json(directory / FAST_META, {
            "format": FAST_FORMAT, "num_pages": self.num_pages, "num_tokens": self.store.num_tokens,
            "num_centroids": self.codebook.num_centroids, "nprobe": self.params.nprobe,
            "candidates": self.params.candidates, **(extra or {}),
        })

    @classmethod
    def load(cls, directory: str | Path, store: TokenStore, params: FastParams | None = None,
             device: str = "cpu") -> FastMaxSim:
        directory = Path(directory)
        meta = json.loads((directory / FAST_META).read_text())
        if meta.get("format", 0) > FAST_FORMAT:
            raise RuntimeError(f"{directory} was written by a newer version")
        if meta["num_pages"] != store.num_pages or meta["num_tokens"] != store.num_tokens:
            raise RuntimeError(f"fast index at {directory} covers {meta['num_pages']} pages / {meta['num_tokens']} "
                               f"tokens, the store has {store.num_pages} / {store.num_tokens}: rebuild it")
        codes_path = directory / "codes.npy"
        codes = np.load(codes_path, mmap_mode="r") if codes_path.exists() else None
        params = params or FastParams.from_meta(meta)
        index = cls(store, Codebook.load(directory), InvertedFile.load(directory), codes=codes, params=params,
                    device=device)
        deleted_path = directory / "deleted.npy"
        if deleted_path.exists():
            index.deleted = np.array(np.load(deleted_path), bool)
        return index

    def nbytes_on_disk(self) -> int:
        """Bytes of the first stage (codebook, codes, inverted file); the fp16 store is extra."""
        total = self.codebook.centroids.nbytes + self.codebook.coarse.nbytes + self.ivf.offsets.nbytes
        total += self.ivf.pages.nbytes + (self.codes.nbytes if self.codes is not None else 0)
        return int(total)

    # ---- maintenance ------------------------------------------------------------------------------
    def remove(self, page_rows: Sequence[int]) -> None:
        """Tombstone pages: never returned again, still in the lists until `compact`."""
        self.deleted[np.asarray(page_rows, np.int64)] = True

    # ---- search -------------------------------------------------------------------------------------
    @property
    def compressed(self) -> bool:
        return isinstance(self.store, CompressedTokenStore)

    def compressed_store(self) -> CompressedTokenStore:
        """The store as a compressed one: the centroid-id and decoding paths read what only it holds."""
        if not isinstance(self.store, CompressedTokenStore):
            raise TypeError(f"this path needs a compressed token store, not {type(self.store).__name__}")
        return self.store

    def centroid_scores(self, query: np.ndarray) -> np.ndarray:
        """(query tokens, K) similarities of the query tokens to every centroid (torch's GEMM: ~3× numpy's
        here for this skinny shape)."""
        import torch

        centroids = self._centroids_torch
        if centroids is None:
            centroids = self._centroids_torch = torch.from_numpy(self._centroids_t)
        return (torch.from_numpy(np.ascontiguousarray(query, np.float32)) @ centroids).numpy()

    def candidates(self, query: np.ndarray, nprobe: int | None = None, candidates: int | None = None,
                   allowed: np.ndarray | None = None, sims: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
        """(page rows, approximate scores) of the best `candidates` pages for one (tokens, dim) query."""
        nprobe = min(nprobe or self.params.nprobe, self.codebook.num_centroids)
        want = candidates or self.params.candidates
        q = np.asarray(query, np.float32)
        sims = self.centroid_scores(q) if sims is None else sims  # (query tokens, K)
        probe = np.argpartition(-sims, nprobe - 1, axis=1)[:, :nprobe] if nprobe < sims.shape[1] else \
            np.broadcast_to(np.arange(sims.shape[1]), sims.shape)
        probe_sims = np.take_along_axis(sims, probe, 1)
        order = np.argsort(probe_sims, axis=1)  # ascending: the best centroid's write lands last
        probe = np.take_along_axis(probe, order, 1)
        probe_sims = np.take_along_axis(probe_sims, order, 1)
        approx = np.zeros(self.num_pages, np.float32)
        scratch = np.empty(self.num_pages, np.float32)
        for i in range(q.shape[0]):
            floor = probe_sims[i, 0]  # imputed similarity for a page holding none of the probed centroids
            scratch.fill(floor)
            for cell, value in zip(probe[i].tolist(), probe_sims[i].tolist()):
                scratch[self.ivf.pages[self.ivf.offsets[cell] : self.ivf.offsets[cell + 1]]] = value
            approx += scratch
        mask = ~self.deleted if allowed is None else (allowed & ~self.deleted)
        approx[~mask] = -np.inf
        n = int(min(want, mask.sum()))
        if n == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        rows = np.argpartition(-approx, n - 1)[:n] if n < approx.shape[0] else np.arange(approx.shape[0])
        rows = rows[np.isfinite(approx[rows])]
        return np.sort(rows), approx[np.sort(rows)]

    def rerank(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """MaxSim of one query against the given pages (sorted rows, read from the store): exact over an
        fp16 store, over the decoded tokens of a compressed one."""
        if self.compressed:
            return self._rerank_decoded(np.asarray(query, np.float32), rows)
        gathered = self.store.gather(rows)
        return maxsim_pages(query, gathered.vectors, gathered.counts, device=self.device)

    def _rerank_decoded(self, q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """MaxSim over decoded tokens; similarities divided by the decoded norms (= re-normalised tokens)."""
        import torch

        store = self.compressed_store()
        codes, res, counts = store.gather_rows(rows)
        if codes.size == 0:
            return np.zeros(0, np.float32)
        x = torch.from_numpy(store.codec.decode_unnormalized(codes, res))
        sims = torch.from_numpy(q) @ x.T  # (query tokens, tokens)
        sims /= torch.linalg.vector_norm(x, dim=1).clamp_min_(1e-12)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        return np.maximum.reduceat(sims.numpy(), starts, axis=1).sum(axis=0)

    def centroid_interaction(self, sims: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """PLAID's centroid interaction: MaxSim with every token replaced by its centroid (sorted rows).

        Needs only the pages' centroid ids (2 bytes a token) and the query's centroid scores.
        """
        codes, counts = self.compressed_store().gather_codes(rows)
        if codes.size == 0:
            return np.zeros(0, np.float32)
        token_sims = np.take(sims, codes.astype(np.int64), axis=1)  # (query tokens, tokens), contiguous rows
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        return np.maximum.reduceat(token_sims, starts, axis=1).sum(axis=0)

    def score_candidates(self, query: np.ndarray, nprobe: int | None = None, candidates: int | None = None,
                         allowed: np.ndarray | None = None, top_k: int = 10, rerank: int | None = None,
                         exact_rerank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(sorted page rows, scores) of the pages that reach the last stage for one query.

        Every stage keeps at least `top_k` pages. Scores are exact MaxSim over an fp16 store (or for the
        `exact_rerank` best when an exact store is attached), else MaxSim of the decoded tokens.
        """
        q = np.asarray(query, np.float32)
        sims = self.centroid_scores(q)
        rows, _ = self.candidates(q, nprobe, max(candidates or self.params.candidates, top_k), allowed, sims=sims)
        if not self.compressed:
            return rows, self.rerank(q, rows)
        keep = max(rerank or self.params.rerank, top_k)
        if rows.size > keep:
            approx = self.centroid_interaction(sims, rows)
            rows = np.sort(rows[np.argpartition(-approx, keep - 1)[:keep]])
        scores = self.rerank(q, rows)
        n_exact = self.params.exact_rerank if exact_rerank is None else exact_rerank
        if self.exact_store is not None and n_exact > 0:
            n_exact = max(n_exact, top_k)
            best = np.sort(np.argsort(-scores, kind="stable")[:n_exact])
            rows = rows[best]
            gathered = self.exact_store.gather(rows)
            scores = maxsim_pages(q, gathered.vectors, gathered.counts, device=self.device)
        return rows, scores

    def search(self, queries: Sequence[np.ndarray], top_k: int = 10, nprobe: int | None = None,
               candidates: int | None = None, allowed: np.ndarray | None = None, rerank: int | None = None,
               exact_rerank: int | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per query: (scores, page rows) of the best `top_k` pages, best first."""
        all_scores, all_rows = [], []
        for query in queries:
            rows, scores = self.score_candidates(query, nprobe, candidates, allowed, top_k, rerank, exact_rerank)
            order = np.argsort(-scores, kind="stable")[:top_k]
            all_scores.append(scores[order])
            all_rows.append(rows[order])
        return all_scores, all_rows

    def recall_check(self, queries: Sequence[np.ndarray], k: int = 10, nprobe: int | None = None,
                     candidates: int | None = None, exact_rows: np.ndarray | None = None) -> dict:
        """Recall@k of this fast path against exact MaxSim on `queries` (exact computed if not given)."""
        if exact_rows is None:
            if self.compressed and self.exact_store is None:
                raise ValueError("recall_check over a compressed store needs exact_rows or an exact store")
            _, exact_rows = exact_topk_streaming(self.exact_store or self.store, list(queries), k=k)
            if self.deleted.any():
                raise ValueError("recall_check over a store with tombstones needs exact_rows from the live pages")
        started = time.perf_counter()
        _, rows = self.search(queries, top_k=k, nprobe=nprobe, candidates=candidates)
        elapsed = time.perf_counter() - started
        hits = [len(set(r.tolist()) & set(e[:k].tolist())) / min(k, len(e)) for r, e in zip(rows, exact_rows)]
        return {"recall_at_k": float(np.mean(hits)), "k": k, "queries": len(queries),
                "nprobe": nprobe or self.params.nprobe, "candidates": candidates or self.params.candidates,
                "ms_per_query": 1000 * elapsed / max(len(queries), 1)}


def sample_tokens_of(store: TokenStore, sample_tokens: int, seed: int = 0) -> np.ndarray:
    """About `sample_tokens` tokens from random whole pages (k-means training sample)."""
    rng = np.random.default_rng(seed)
    if store.num_tokens <= sample_tokens:
        return store.gather(np.arange(store.num_pages)).vectors
    mean_count = store.num_tokens / store.num_pages
    pages = np.sort(rng.choice(store.num_pages, min(store.num_pages, int(sample_tokens / mean_count) + 1),
                               replace=False))
    return store.gather(pages).vectors


def _page_ranges(counts: np.ndarray, chunk_tokens: int):
    """Page-aligned [first, last) ranges of about chunk_tokens tokens."""
    cum = np.cumsum(counts)
    first = 0
    while first < len(counts):
        base = cum[first - 1] if first else 0
        last = max(int(np.searchsorted(cum, base + chunk_tokens, side="right")), first + 1)
        yield first, last
        first = last

