"""On-disk multi-vector stores: page token vectors as float16 on disk, read by page, never all in RAM.

Why: at 100k ColQwen2 pages the token vectors are ~19 GB as fp16 (~39 GB as the fp32 the exact
scorer keeps in RAM). The fast path only needs the tokens of a few hundred candidate pages per
query, so the stores below read exactly those byte ranges with `os.pread`. Reads go through the
kernel page cache (shared, reclaimable, not counted in the process's RSS) instead of a mapping
whose touched pages would count as resident memory of the searcher.

Two layouts share one read interface (`num_pages`, `counts`, `gather`, `iter_chunks`):

* `FlatTokenStore`: one append-only `tokens.f16` file plus `offsets.npy` (page → first token) and
  `meta.json`. `TokenStoreWriter` appends pages and commits by atomically replacing `offsets.npy`
  then `meta.json`; a reader trusts only the committed page count, so a crash mid-append leaves
  garbage past the committed end that the next writer truncates. Used by the synthetic benchmark
  corpus and distributed ingestion.
* `SegmentTokenStore`: the per-document `segments/visual/*.npy` files an index already has
  (float16, one per document), opened read-only with their `.npy` header offsets — existing indexes
  need no migration of their vectors.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from search_engine.index.atomic import atomic_save_npy, atomic_write_json

TOKENS_FILE = "tokens.f16"
OFFSETS_FILE = "offsets.npy"
META_FILE = "meta.json"


def _runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """Sorted unique rows → maximal runs of consecutive rows [(first, last_exclusive)]."""
    if rows.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    firsts = rows[np.concatenate([[0], breaks])]
    lasts = rows[np.concatenate([breaks - 1, [rows.size - 1]])] + 1
    return list(zip(firsts.tolist(), lasts.tolist()))


@dataclass
class Gathered:
    """Token vectors of some pages, concatenated in the order asked, with per-page counts."""

    vectors: np.ndarray  # (tokens, dim) float32
    counts: np.ndarray  # (pages,) int64

    @property
    def starts(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)


class TokenStore:
    """Read interface shared by the store layouts (see the module docstring)."""

    dim: int
    counts: np.ndarray  # tokens per page

    @property
    def num_pages(self) -> int:
        return int(self.counts.shape[0])

    @property
    def num_tokens(self) -> int:
        return int(self.counts.sum())

    def nbytes_on_disk(self) -> int:
        raise NotImplementedError

    def read_range(self, first_page: int, last_page: int) -> np.ndarray:
        """float16 tokens of pages [first_page, last_page) (contiguous in the store)."""
        raise NotImplementedError

    def read_range_into(self, first_page: int, last_page: int, out: np.ndarray) -> None:
        """Read pages [first_page, last_page) into `out` (fp16, exactly their tokens); default copies."""
        out[...] = self.read_range(first_page, last_page)

    def gather(self, page_rows: Sequence[int] | np.ndarray, dtype=np.float16) -> Gathered:
        """Tokens of the given pages, in the order asked (duplicates allowed), read run by run.

        Sorted unique rows (what the fast path asks for) are read straight into one buffer with
        no intermediate copy. The default dtype stays float16: converting to float32 is left to
        the scorer, which does it chunk by chunk in cache (see fast_maxsim.rerank).
        """
        rows = np.asarray(page_rows, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= self.num_pages):
            raise IndexError("page row out of range")
        uniq = np.unique(rows)
        counts = self.counts[uniq]
        buf = np.empty((int(counts.sum()), self.dim), np.float16)
        pos = 0
        for first, last in _runs(uniq):
            n = int(self.counts[first:last].sum())
            self.read_range_into(first, last, buf[pos : pos + n])
            pos += n
        if not np.array_equal(uniq, rows):
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            where = np.searchsorted(uniq, rows)
            buf = np.concatenate([buf[starts[w] : starts[w] + counts[w]] for w in where]) if rows.size else buf
            counts = self.counts[rows]
        vectors = buf if dtype == np.float16 else buf.astype(dtype)
        return Gathered(vectors, np.asarray(counts, np.int64))

    def iter_chunks(self, chunk_tokens: int = 1 << 20) -> Iterator[tuple[int, int, np.ndarray]]:
        """(first_page, last_page, fp16 tokens) over the whole store, page-aligned, ~chunk_tokens each."""
        first = 0
        cum = np.cumsum(self.counts)
        while first < self.num_pages:
            base = cum[first - 1] if first else 0
            last = int(np.searchsorted(cum, base + chunk_tokens, side="right"))
            last = max(last, first + 1)
            yield first, last, self.read_range(first, last)
            first = last


class FlatTokenStore(TokenStore):
    """One append-only fp16 file with page offsets (see the module docstring)."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        meta_path = self.directory / META_FILE
        if not meta_path.exists():
            raise FileNotFoundError(f"no token store at {self.directory} ({META_FILE} missing)")
        meta = json.loads(meta_path.read_text())
        self.dim = int(meta["dim"])
        self.meta = meta
        num_pages = int(meta["num_pages"])
        offsets = np.load(self.directory / OFFSETS_FILE)
        if offsets.shape[0] < num_pages + 1:
            raise RuntimeError(f"{self.directory}: offsets shorter than the committed page count; store damaged")
        self.offsets = np.asarray(offsets[: num_pages + 1], np.int64)
        self.counts = np.diff(self.offsets)
        self._path = self.directory / TOKENS_FILE
        size = self._path.stat().st_size
        if size < self.offsets[-1] * self.dim * 2:
            raise RuntimeError(f"{self._path} is shorter than its committed pages; store damaged")
        self._fd = os.open(self._path, os.O_RDONLY)

    def __getstate__(self) -> dict:  # picklable for worker processes: they reopen the files
        return {"directory": str(self.directory)}

    def __setstate__(self, state: dict) -> None:
        FlatTokenStore.__init__(self, state["directory"])

    def close(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            del self._fd  # closed: getattr above sees no descriptor; a read after close fails loudly

    def __del__(self):  # pragma: no cover - best effort
        self.close()

    def nbytes_on_disk(self) -> int:
        return int(self.offsets[-1]) * self.dim * 2 + self.offsets.nbytes

    def read_range(self, first_page: int, last_page: int) -> np.ndarray:
        out = np.empty((int(self.offsets[last_page] - self.offsets[first_page]), self.dim), np.float16)
        self.read_range_into(first_page, last_page, out)
        return out

    def read_range_into(self, first_page: int, last_page: int, out: np.ndarray) -> None:
        t0 = int(self.offsets[first_page])
        view = memoryview(out.reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # numpy's stubs give ndarray __buffer__ only for Python >= 3.12
        nbytes, got = view.nbytes, 0
        while got < nbytes:  # pread may return short reads on large requests
            n = os.preadv(self._fd, [view[got:]], t0 * self.dim * 2 + got)
            if n <= 0:
                raise RuntimeError(f"{self._path}: unexpected end of file")
            got += n

    def memmap(self) -> np.memmap:
        """The committed tokens as a read-only memory map (for whole-store passes)."""
        return np.memmap(self._path, np.float16, "r", shape=(int(self.offsets[-1]), self.dim))


class TokenStoreWriter:
    """Appends pages to a FlatTokenStore; `commit()` makes them visible atomically.

    Reopening after a crash truncates whatever was appended past the last commit, so a resumed
    writer continues from a consistent state.
    """

    def __init__(self, directory: str | Path, dim: int, extra_meta: dict | None = None):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.dim = dim
        meta_path = self.directory / META_FILE
        if meta_path.exists():
            meta = json.loads(meta_path.read_text())
            if int(meta["dim"]) != dim:
                raise ValueError(f"store at {self.directory} has dim {meta['dim']}, not {dim}")
            self.meta = meta
            self._offsets = [int(x) for x in np.load(self.directory / OFFSETS_FILE)[: int(meta["num_pages"]) + 1]]
        else:
            self.meta = {"dim": dim, "dtype": "float16", "num_pages": 0, **(extra_meta or {})}
            self._offsets = [0]
        path = self.directory / TOKENS_FILE
        self._fh = open(path, "r+b" if path.exists() else "w+b")
        self._fh.truncate(self._offsets[-1] * dim * 2)
        self._fh.seek(0, os.SEEK_END)

    @property
    def num_pages(self) -> int:
        return len(self._offsets) - 1

    def append(self, vectors: np.ndarray, counts: Sequence[int]) -> None:
        counts = [int(c) for c in counts]
        if sum(counts) != vectors.shape[0] or vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError("vectors do not match counts / dim")
        if any(c <= 0 for c in counts):
            raise ValueError("every page needs at least one vector")
        self._fh.write(np.ascontiguousarray(vectors, np.float16).tobytes())
        for c in counts:
            self._offsets.append(self._offsets[-1] + c)

    def commit(self, **meta_updates) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        atomic_save_npy(self.directory / OFFSETS_FILE, np.asarray(self._offsets, np.int64))
        self.meta.update(meta_updates)
        self.meta["num_pages"] = self.num_pages
        atomic_write_json(self.directory / META_FILE, self.meta)

    def close(self) -> None:
        self._fh.close()


class SegmentTokenStore(TokenStore):
    """The per-document fp16 `.npy` segments of an index as one read-only store (no copy)."""

    def __init__(self, files: Sequence[str | Path], counts_per_file: Sequence[Sequence[int]], dim: int):
        self.dim = dim
        self._files: list[tuple[str, int]] = []  # (path, data offset)
        page_file, page_local = [], []
        for fi, (path, counts) in enumerate(zip(files, counts_per_file)):
            with open(path, "rb") as fh:
                version = np.lib.format.read_magic(fh)
                reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                    np.lib.format.read_array_header_2_0
                shape, fortran, dtype = reader(fh)
                data_offset = fh.tell()
            if fortran or len(shape) != 2 or shape[1] != dim or shape[0] != sum(counts):
                raise RuntimeError(f"segment {path} has shape {shape}, expected ({sum(counts)}, {dim})")
            if np.dtype(dtype) != np.float16:
                raise RuntimeError(f"segment {path} is {dtype}, expected float16")
            self._files.append((str(path), data_offset))
            local = np.concatenate([[0], np.cumsum(counts)[:-1]]) if len(counts) else np.zeros(0)
            page_file.extend([fi] * len(counts))
            page_local.extend(local.tolist())
        self.counts = np.asarray([c for cs in counts_per_file for c in cs], np.int64)
        self._page_file = np.asarray(page_file, np.int64)
        self._page_local = np.asarray(page_local, np.int64)

    def nbytes_on_disk(self) -> int:
        return self.num_tokens * self.dim * 2

    def read_range(self, first_page: int, last_page: int) -> np.ndarray:
        out = np.empty((int(self.counts[first_page:last_page].sum()), self.dim), np.float16)
        self.read_range_into(first_page, last_page, out)
        return out

    def read_range_into(self, first_page: int, last_page: int, out: np.ndarray) -> None:
        page, pos = first_page, 0
        while page < last_page:
            fi = int(self._page_file[page])
            end = page
            while end < last_page and self._page_file[end] == fi:
                end += 1
            path, data_offset = self._files[fi]
            t0 = int(self._page_local[page])
            n = int(self.counts[page:end].sum())
            view = memoryview(out[pos : pos + n].reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # numpy's stubs give ndarray __buffer__ only for Python >= 3.12
            fd = os.open(path, os.O_RDONLY)
            try:
                got = os.preadv(fd, [view], data_offset + t0 * self.dim * 2)
            finally:
                os.close(fd)
            if got != view.nbytes:
                raise RuntimeError(f"{path}: short read; segment damaged")
            pos += n
            page = end
