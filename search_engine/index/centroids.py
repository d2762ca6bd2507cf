"""Per-token centroid codes and an inverted file (centroid → pages): the compact first stage.

Why this shape (PLAID, arXiv 2205.09707; XTR, arXiv 2304.01982): every page token is replaced by
the id of its nearest centroid (a uint16, 2 bytes instead of 256 for fp16 128-d), and each centroid
lists the pages that hold a token in it. A query token then looks at its `nprobe` best centroids
only, and a page's approximate MaxSim is, per query token, the best centroid score among the
probed centroids the page holds — or, when it holds none, the score of the weakest probed centroid
(XTR's "missing similarity imputation": the true similarity is at most about that). The few
hundred best pages by this estimate are rescored exactly (see `fast_maxsim.py`).

Codebook: spherical k-means with faiss (vectors are unit-norm; `faiss_tables.spherical_kmeans`). Assigning tens of
millions of tokens to ~32k centroids by brute force costs ~10^14 FLOP — hours on 2 CPU cores — so
the codebook is two-level: a coarse k-means of ~sqrt(K) centroids, and inside each coarse cell its
own fine k-means, sized by the cell's share of the sample. A token is coded by its best coarse cell,
then its best fine centroid there (~2·sqrt(K) dot products instead of K). The fine centroids form
one flat table, so queries score all K of them exactly (cheap: a query has ~20 tokens).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from search_engine.index.atomic import atomic_save_npy, atomic_write_json
from search_engine.index.faiss_tables import spherical_kmeans

MAX_CENTROIDS = 65_535  # codes are uint16


def default_num_centroids(num_tokens: int) -> int:
    """A power of two near 4·sqrt(tokens) (PLAID uses 16·sqrt on GPUs), between 256 and 32,768."""
    target = 4 * math.sqrt(max(num_tokens, 1))
    return int(min(32_768, max(256, 2 ** round(math.log2(target)))))


@dataclass
class Codebook:
    """Two-level k-means codebook; `centroids` is the flat table of fine centroids."""

    coarse: np.ndarray  # (K1, dim) float32
    centroids: np.ndarray  # (K, dim) float32, grouped by coarse cell
    fine_offsets: np.ndarray  # (K1 + 1,) int64: coarse cell c owns centroids[fine_offsets[c]:fine_offsets[c+1]]

    @property
    def num_centroids(self) -> int:
        return int(self.centroids.shape[0])

    @classmethod
    def train(cls, sample: np.ndarray, num_centroids: int, niter: int = 10, seed: int = 0) -> Codebook:
        """k-means on a token sample (a few hundred thousand tokens is plenty)."""
        import faiss

        sample = np.ascontiguousarray(sample, np.float32)
        threads = faiss.omp_get_max_threads()
        # One OpenMP thread: faiss-cpu bundles its own libgomp, and once torch's OpenMP runtime has
        # run in the process a multi-threaded faiss k-means can spin forever (seen here). Training
        # is a one-off of a few seconds on a 262k-token sample; coding all tokens uses BLAS threads.
        faiss.omp_set_num_threads(1)
        try:
            return cls._train(sample, num_centroids, niter, seed)
        finally:
            faiss.omp_set_num_threads(threads)

    @classmethod
    def _train(cls, sample: np.ndarray, num_centroids: int, niter: int, seed: int) -> Codebook:
        n = sample.shape[0]
        num_centroids = int(min(num_centroids, MAX_CENTROIDS, max(1, n // 4)))
        k1 = int(max(1, min(round(math.sqrt(num_centroids)), n // 8 or 1)))
        coarse = spherical_kmeans(sample, k1, niter=niter, seed=seed)
        cell = np.argmax(sample @ coarse.T, axis=1)
        sizes = np.bincount(cell, minlength=k1)
        fine, offsets = [], [0]
        for c in range(k1):
            members = sample[cell == c]
            k2 = int(max(1, min(round(num_centroids * sizes[c] / n), members.shape[0] // 2 or 1)))
            if members.shape[0] == 0:
                part = coarse[c : c + 1]
            elif k2 == 1:
                mean = members.mean(axis=0, keepdims=True)
                part = mean / max(np.linalg.norm(mean), 1e-12)
            else:
                part = spherical_kmeans(members, k2, niter=niter, seed=seed + c + 1,
                                        min_points_per_centroid=1, max_points_per_centroid=1 << 20)
            fine.append(np.asarray(part, np.float32))
            offsets.append(offsets[-1] + part.shape[0])
        return cls(coarse=coarse, centroids=np.concatenate(fine), fine_offsets=np.asarray(offsets, np.int64))

    def assign(self, vectors: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
        """uint16 centroid id of every vector: best coarse cell, then best fine centroid in it.

        torch for the products: many small fp16→fp32 GEMMs (one per coarse cell) run ~10× faster
        than with numpy's BLAS on these 2 cores (see `maxsim_pages`).
        """
        import torch

        out = np.empty(vectors.shape[0], np.uint16)
        coarse_t = torch.from_numpy(np.ascontiguousarray(self.coarse.T))
        fine_t = [torch.from_numpy(np.ascontiguousarray(self.centroids[f0:f1].T))
                  for f0, f1 in zip(self.fine_offsets[:-1].tolist(), self.fine_offsets[1:].tolist())]
        for s in range(0, vectors.shape[0], chunk):
            x = torch.from_numpy(np.array(vectors[s : s + chunk])).float()  # a writable copy of the chunk
            cell = torch.argmax(x @ coarse_t, dim=1)
            order = torch.argsort(cell, stable=True)
            bounds = torch.searchsorted(cell[order], torch.arange(self.coarse.shape[0] + 1)).tolist()
            codes = torch.empty(x.shape[0], dtype=torch.int64)
            for c in range(self.coarse.shape[0]):
                if bounds[c] == bounds[c + 1]:
                    continue
                rows = order[bounds[c] : bounds[c + 1]]
                codes[rows] = int(self.fine_offsets[c]) + torch.argmax(x[rows] @ fine_t[c], dim=1)
            out[s : s + chunk] = codes.numpy()
        return out

    def save(self, directory: Path) -> None:
        atomic_save_npy(directory / "coarse.npy", self.coarse)
        atomic_save_npy(directory / "centroids.npy", self.centroids)
        atomic_save_npy(directory / "fine_offsets.npy", self.fine_offsets)

    @classmethod
    def load(cls, directory: Path) -> Codebook:
        return cls(coarse=np.load(directory / "coarse.npy"), centroids=np.load(directory / "centroids.npy"),
                   fine_offsets=np.load(directory / "fine_offsets.npy"))


class InvertedFile:
    """Centroid → sorted unique page rows holding a token of that centroid (CSR arrays)."""

    def __init__(self, offsets: np.ndarray, pages: np.ndarray):
        self.offsets = offsets
        self.pages = pages

    @classmethod
    def build(cls, codes: np.ndarray, counts: np.ndarray, num_centroids: int) -> InvertedFile:
        num_pages = counts.shape[0]
        page_of_token = np.repeat(np.arange(num_pages, dtype=np.int64), counts)
        key = codes.astype(np.int64) * num_pages + page_of_token
        key.sort()  # then drop repeats: np.unique's hash path costs ~10x this sort here (3 s vs 0.3 s per 3.7 M keys)
        key = key[np.concatenate([[True], key[1:] != key[:-1]])] if key.size else key
        cells = key // num_pages
        pages = (key % num_pages).astype(np.int32)
        offsets = np.searchsorted(cells, np.arange(num_centroids + 1)).astype(np.int64)
        return cls(offsets, pages)

    @classmethod
    def build_blocks(cls, blocks: Iterable[tuple[np.ndarray, np.ndarray]], num_centroids: int) -> InvertedFile:
        """The same inverted file as `build` over the concatenation of `blocks` ((codes, counts) of
        consecutive page ranges, in page order), one block in memory at a time.

        Why: `build` sorts one int64 key per token; at a million pages (~740 M tokens) its scratch
        arrays alone are ~24 GB. Every page of a block comes after every page of the blocks before it,
        so each centroid's list is the concatenation of its per-block lists: peak memory is the
        result (one int32 per (centroid, page) pair) plus one block's scratch."""
        pieces: list[InvertedFile] = []
        sizes = np.zeros(num_centroids, np.int64)
        first = 0
        for codes, counts in blocks:
            piece = cls.build(np.asarray(codes), np.asarray(counts, np.int64), num_centroids)
            piece.pages += np.int32(first)
            pieces.append(piece)
            sizes += np.diff(piece.offsets)
            first += len(counts)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        pages = np.empty(int(offsets[-1]), np.int32)
        cursor = offsets[:-1].copy()
        while pieces:
            piece = pieces.pop(0)
            lengths = np.diff(piece.offsets)
            # each cell's entries of this block go right after the entries the blocks before it put there
            pages[np.repeat(cursor - piece.offsets[:-1], lengths) + np.arange(piece.pages.size)] = piece.pages
            cursor += lengths
        return cls(offsets, pages)

    def lists(self, cells: np.ndarray) -> list[np.ndarray]:
        return [self.pages[self.offsets[c] : self.offsets[c + 1]] for c in cells.tolist()]

    def save(self, directory: Path) -> None:
        atomic_save_npy(directory / "ivf_offsets.npy", self.offsets)
        atomic_save_npy(directory / "ivf_pages.npy", self.pages)

    @classmethod
    def load(cls, directory: Path, mmap: bool = True) -> InvertedFile:
        mode: Literal["r"] | None = "r" if mmap else None
        return cls(np.load(directory / "ivf_offsets.npy"), np.load(directory / "ivf_pages.npy", mmap_mode=mode))


def write_json(directory: Path, name: str, payload: dict) -> None:
    atomic_write_json(directory / name, payload)


def read_json(directory: Path, name: str) -> dict:
    return json.loads((directory / name).read_text())
