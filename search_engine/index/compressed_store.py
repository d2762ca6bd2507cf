"""Compressed multi-vector store: per token a uint16 centroid id + a few residual bytes, read by page.

Why: the fp16 store is ~256 bytes per token (18 GiB at 100k ColQwen2 pages); this one is
2 + `codec.residual_bytes` bytes (34 for `sq2`/`pq32`: ~7.5× smaller). It serves the fast path's
later stages (see `fast_maxsim.py`): centroid ids alone for a cheap centroid-interaction score of a
few hundred candidates, then decoded tokens (centroid + residual, `ResidualCodec.decode`) for the
final MaxSim of the best few dozen.

Layout: a list of *parts*, each two `.npy` files written once and atomically (write-then-rename):
`<name>.codes.npy` (uint16, one per token) and `<name>.res.npy` (uint8, tokens × residual bytes).
In an index sidecar a part is one document segment, so adding a document writes one part and
touches nothing else; in the benchmark corpus a part is a block of pages, so a killed build
resumes at the first missing part. Reads use `os.pread` (page cache, not the process's RSS), like
`token_store.py`.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from search_engine.index.atomic import atomic_save_npy
from search_engine.index.residual_codec import ResidualCodec
from search_engine.index.token_store import Gathered, TokenStore, _runs

CODES_SUFFIX = ".codes.npy"
RES_SUFFIX = ".res.npy"


def part_paths(directory: Path, name: str) -> tuple[Path, Path]:
    return Path(directory) / f"{name}{CODES_SUFFIX}", Path(directory) / f"{name}{RES_SUFFIX}"


def write_part(directory: Path, name: str, codec: ResidualCodec, vectors: np.ndarray,
               codes: np.ndarray | None = None) -> tuple[Path, Path]:
    """Encode one part's tokens and write its two files (residuals first, codes last: the codes file
    is the part's commit mark). Returns the two paths."""
    codes_path, res_path = part_paths(directory, name)
    rows = codec.encode(vectors, codes)
    atomic_save_npy(res_path, np.ascontiguousarray(rows[:, 2:]))
    atomic_save_npy(codes_path, np.ascontiguousarray(rows[:, :2]).view(np.uint16).reshape(-1))
    return codes_path, res_path


def part_complete(directory: Path, name: str) -> bool:
    codes_path, res_path = part_paths(directory, name)
    return codes_path.exists() and res_path.exists()


def _npy_data_offset(path: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = reader(fh)
        if fortran:
            raise RuntimeError(f"{path}: Fortran-ordered array")
        return shape, np.dtype(dtype), fh.tell()


def _pread_exact(path: str, offset: int, out: np.ndarray) -> None:
    view = memoryview(out.reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # numpy's stubs give ndarray __buffer__ only for Python >= 3.12
    fd = os.open(path, os.O_RDONLY)
    try:
        got = 0
        while got < view.nbytes:
            n = os.preadv(fd, [view[got:]], offset + got)
            if n <= 0:
                raise RuntimeError(f"{path}: short read; compressed part damaged")
            got += n
    finally:
        os.close(fd)


@dataclass
class _Part:
    codes_path: str
    codes_offset: int
    res_path: str
    res_offset: int


class CompressedTokenStore(TokenStore):
    """Read-only view of compressed parts as one store (same read interface as the fp16 stores).

    `gather` returns decoded tokens (an approximation of the originals), so anything written for a
    `TokenStore` runs on it; the fast path reads `gather_codes` / `gather_rows` directly instead.
    """

    def __init__(self, codec: ResidualCodec, parts: Sequence[tuple[Path, Path]],
                 counts_per_part: Sequence[Sequence[int]]):
        self.codec = codec
        self.dim = codec.dim
        self._parts: list[_Part] = []
        page_part, page_local = [], []
        for pi, ((codes_path, res_path), counts) in enumerate(zip(parts, counts_per_part)):
            cshape, cdtype, coff = _npy_data_offset(codes_path)
            rshape, rdtype, roff = _npy_data_offset(res_path)
            total = int(sum(counts))
            if cdtype != np.uint16 or cshape != (total,):
                raise RuntimeError(f"{codes_path}: {cdtype} {cshape}, expected uint16 ({total},)")
            if rdtype != np.uint8 or rshape != (total, codec.residual_bytes):
                raise RuntimeError(f"{res_path}: {rdtype} {rshape}, expected uint8 ({total}, {codec.residual_bytes})"
                                   " (written with another codec?)")
            self._parts.append(_Part(str(codes_path), coff, str(res_path), roff))
            local = np.concatenate([[0], np.cumsum(counts)[:-1]]) if len(counts) else np.zeros(0)
            page_part.extend([pi] * len(counts))
            page_local.extend(np.asarray(local, np.int64).tolist())
        self.counts = np.asarray([c for cs in counts_per_part for c in cs], np.int64)
        self._page_part = np.asarray(page_part, np.int64)
        self._page_local = np.asarray(page_local, np.int64)

    def nbytes_on_disk(self) -> int:
        return self.num_tokens * self.codec.row_bytes

    def _read(self, rows: np.ndarray, residuals: bool) -> tuple[np.ndarray, np.ndarray]:
        """(codes, residual rows or an empty array) of sorted unique page rows, run by run."""
        counts = self.counts[rows]
        total = int(counts.sum())
        codes = np.empty(total, np.uint16)
        res = np.empty((total if residuals else 0, self.codec.residual_bytes), np.uint8)
        pos = 0
        for first, last in _runs(rows):
            page = first
            while page < last:  # split the run at part boundaries
                pi = int(self._page_part[page])
                end = int(np.searchsorted(self._page_part, pi, side="right"))
                end = min(end, last)
                part = self._parts[pi]
                t0 = int(self._page_local[page])
                n = int(self.counts[page:end].sum())
                _pread_exact(part.codes_path, part.codes_offset + 2 * t0, codes[pos : pos + n])
                if residuals:
                    rb = self.codec.residual_bytes
                    _pread_exact(part.res_path, part.res_offset + rb * t0, res[pos : pos + n])
                pos += n
                page = end
        return codes, res

    def _check(self, rows) -> np.ndarray:
        rows = np.asarray(rows, np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= self.num_pages):
            raise IndexError("page row out of range")
        if rows.size > 1 and (np.diff(rows) <= 0).any():
            raise ValueError("rows must be sorted and unique")
        return rows

    def gather_codes(self, rows: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(centroid ids of every token, tokens per page) of sorted unique page rows."""
        rows = self._check(rows)
        codes, _ = self._read(rows, residuals=False)
        return codes, self.counts[rows]

    def gather_rows(self, rows: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(centroid ids, residual bytes, tokens per page) of sorted unique page rows."""
        rows = self._check(rows)
        codes, res = self._read(rows, residuals=True)
        return codes, res, self.counts[rows]

    def decode_rows(self, rows: Sequence[int] | np.ndarray, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(decoded float32 tokens, counts) of sorted unique page rows."""
        codes, res, counts = self.gather_rows(rows)
        out = self.codec.decode_unnormalized(codes, res)
        if normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out, counts

    def part_codes(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(centroid ids, tokens per page) of each part in page order, one part in memory at a time
        (the inverted file of a large store is built from these; see `InvertedFile.build_blocks`)."""
        pages_per_part = np.bincount(self._page_part, minlength=len(self._parts))
        first = 0
        for part, n_pages in zip(self._parts, pages_per_part.tolist()):
            yield np.load(part.codes_path), self.counts[first : first + n_pages]
            first += n_pages

    def gather(self, page_rows: Sequence[int] | np.ndarray, dtype=np.float16) -> Gathered:
        rows = np.asarray(page_rows, np.int64)
        uniq, inverse = np.unique(rows, return_inverse=True)
        decoded, counts = self.decode_rows(uniq)
        vectors = decoded
        if not np.array_equal(uniq, rows):
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            vectors = np.concatenate([vectors[starts[w] : starts[w] + counts[w]] for w in inverse]) \
                if rows.size else vectors
            counts = self.counts[rows]
        return Gathered(vectors.astype(dtype, copy=False), np.asarray(counts, np.int64))

    def read_range(self, first_page: int, last_page: int) -> np.ndarray:
        return self.gather(np.arange(first_page, last_page)).vectors
