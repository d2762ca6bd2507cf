"""Token compression for the fast path: centroid id + a few bits of residual per token.

Why (PLAID / ColBERTv2, arXiv 2205.09707, 2112.01488): a ColQwen2 token is 128 fp16 values (256 bytes);
at 100k pages that is ~18 GiB. Every token already has a nearest centroid (its code in the inverted
file), so only the residual `x - centroid[code]` needs storing, and it quantises well because it is
small and centred. Two residual quantisers, measured side by side by `scripts/bench_search.py`:

* `sq<b>` — ColBERTv2's scheme: each residual dimension is cut into 2^b buckets at quantiles of the
  training residuals (per dimension here: cheap and a little tighter than ColBERTv2's global cut) and
  decoded to the bucket's mean value. Written by hand: faiss's scalar quantisers stop at 4 bits and
  have no 1- or 2-bit mode.
* `pq<m>` — product quantisation of the residual with faiss (`faiss.ProductQuantizer`, m sub-vectors
  of 8 bits): m bytes per token, usually lower error than `sq` at the same size.
* `pq<m>x<b>` — the same with 2^b centroids per sub-vector (b = 9..12): m·b/8 bytes, more fidelity per
  byte than more sub-vectors (faiss packs the b-bit codes); encoding cost grows with 2^b.
* `opq<m>[x<b>]` — an OPQ rotation (`faiss.OPQMatrix`, trained on the residuals) before the PQ: balances
  the variance across sub-vectors at no storage cost (a dim × dim matrix in the codec).

A token is stored as `uint16 centroid id` + `bytes_per_token` residual bytes (one uint8 row). Decoding
rebuilds `centroid + residual` and re-normalises it (the originals are unit vectors, as ColBERTv2 does).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from search_engine.index.atomic import atomic_save_npy, atomic_write_json
from search_engine.index.centroids import Codebook
from search_engine.index.faiss_tables import linear_transform_matrix, pq_from_table, pq_table

CODEC_META = "codec.json"


def parse_codec(spec: str) -> tuple[str, int]:
    """'sq2' → ('sq', 2); 'pq32' → ('pq', 32); 'opq32x10' → ('opq', 32). Raises ValueError on anything else
    (the bits per sub-quantiser of pq/opq: `codec_bits`)."""
    return _parse(spec)[:2]


def codec_bits(spec: str) -> int:
    """Bits per code of a pq/opq codec (8 unless written `x<b>`); sq: bits per dimension."""
    return _parse(spec)[2]


def _parse(spec: str) -> tuple[str, int, int]:
    match = re.fullmatch(r"(sq|pq|opq)(\d+)(?:x(\d+))?", spec or "")
    if not match:
        raise ValueError(f"unknown residual codec {spec!r}: use sq1, sq2, sq4, pq<m>, pq<m>x<bits> or opq<m>[x<bits>] "
                         "(e.g. pq32, pq32x10, opq32)")
    kind, value = match.group(1), int(match.group(2))
    if kind == "sq":
        if match.group(3) is not None or value not in (1, 2, 4, 8):
            raise ValueError("sq codecs take 1, 2, 4 or 8 bits per dimension")
        return kind, value, value
    bits = int(match.group(3) or 8)
    if value < 1:
        raise ValueError("pq needs at least one sub-quantiser")
    if not 8 <= bits <= 12:
        raise ValueError("pq codes take 8 to 12 bits (2^bits centroids per sub-vector)")
    return kind, value, bits


def _table(value: np.ndarray | None, name: str, spec: str) -> np.ndarray:
    """A quantiser table the codec's kind needs (sq: cutoffs and weights; pq: pq_centroids), or a clear error."""
    if value is None:
        raise ValueError(f"codec {spec!r} has no {name} table")
    return value


@dataclass
class ResidualCodec:
    """Codebook (centroids) + residual quantiser; encodes fp tokens to uint8 rows and back."""

    codebook: Codebook
    spec: str
    cutoffs: np.ndarray | None = None  # sq: (dim, 2^b - 1) bucket boundaries
    weights: np.ndarray | None = None  # sq: (dim, 2^b) decoded value of each bucket
    pq_centroids: np.ndarray | None = None  # pq/opq: (m, 2^bits, dim/m)
    rotation: np.ndarray | None = None  # opq: (dim, dim) orthonormal; codes are of `residual @ rotation.T`
    _lut: np.ndarray | None = field(default=None, repr=False)
    _lut_offsets: np.ndarray | None = field(default=None, repr=False)
    _pq: Any = field(default=None, repr=False)  # faiss.ProductQuantizer (faiss has no type information)

    @property
    def dim(self) -> int:
        return int(self.codebook.centroids.shape[1])

    @property
    def kind(self) -> str:
        return parse_codec(self.spec)[0]

    @property
    def residual_bytes(self) -> int:
        kind, value, bits = _parse(self.spec)
        return self.dim * value // 8 if kind == "sq" else (value * bits + 7) // 8

    @property
    def row_bytes(self) -> int:
        """Bytes per stored token: 2 (centroid id) + residual bytes."""
        return 2 + self.residual_bytes

    # ---- training ---------------------------------------------------------------------------------
    @classmethod
    def train(cls, codebook: Codebook, sample: np.ndarray, spec: str = "sq2", seed: int = 0) -> ResidualCodec:
        """Fit the residual quantiser on a token sample (the k-means sample is fine)."""
        kind, value, bits = _parse(spec)
        dim = codebook.centroids.shape[1]
        if kind == "sq" and (dim * value) % 8:
            raise ValueError(f"dim {dim} × {value} bits is not a whole number of bytes")
        if kind != "sq" and dim % value:
            raise ValueError(f"pq{value}: dim {dim} is not divisible by {value}")
        sample = np.asarray(sample, np.float32)
        residuals = sample - codebook.centroids[codebook.assign(sample)]
        if kind == "sq":
            levels = 1 << value
            cut_q = np.arange(1, levels) / levels
            mid_q = (np.arange(levels) + 0.5) / levels
            cutoffs = np.quantile(residuals, cut_q, axis=0).T.astype(np.float32)  # (dim, levels-1)
            weights = np.quantile(residuals, mid_q, axis=0).T.astype(np.float32)  # (dim, levels)
            return cls(codebook, spec, cutoffs=cutoffs, weights=weights)
        import faiss

        pq = faiss.ProductQuantizer(dim, value, bits)
        pq.cp.seed = seed
        rotation = None
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)  # see Codebook.train: faiss's OpenMP beside torch's can spin
        try:
            if kind == "opq":
                opq = faiss.OPQMatrix(dim, value)
                opq.niter = 20
                opq.train(np.ascontiguousarray(residuals))
                rotation = linear_transform_matrix(opq, dim)
                residuals = np.ascontiguousarray(residuals @ rotation.T)
            pq.train(np.ascontiguousarray(residuals))
        finally:
            faiss.omp_set_num_threads(threads)
        table = pq_table(pq)
        return cls(codebook, spec, pq_centroids=table, rotation=rotation)

    # ---- coding -----------------------------------------------------------------------------------
    def encode(self, vectors: np.ndarray, codes: np.ndarray | None = None, chunk: int = 1 << 16) -> np.ndarray:
        """(tokens, row_bytes) uint8 rows: little-endian uint16 centroid id, then the residual bytes."""
        vectors = np.asarray(vectors)
        if codes is None:
            codes = self.codebook.assign(vectors)
        out = np.empty((vectors.shape[0], self.row_bytes), np.uint8)
        out[:, :2] = np.asarray(codes, np.uint16).reshape(-1, 1).view(np.uint8)
        for s in range(0, vectors.shape[0], chunk):
            x = np.asarray(vectors[s : s + chunk], np.float32)
            res = x - self.codebook.centroids[codes[s : s + chunk]]
            out[s : s + chunk, 2:] = self._encode_residuals(res)
        return out

    def _encode_residuals(self, res: np.ndarray) -> np.ndarray:
        kind, value = parse_codec(self.spec)
        if kind != "sq":
            if self.rotation is not None:
                res = res @ self.rotation.T
            return self._faiss_pq().compute_codes(np.ascontiguousarray(res, np.float32))
        buckets = np.zeros(res.shape, np.uint8)
        cutoffs = _table(self.cutoffs, "cutoffs", self.spec)
        for level in range(cutoffs.shape[1]):
            buckets += res > cutoffs[None, :, level]
        per_byte = 8 // value
        grouped = buckets.reshape(res.shape[0], -1, per_byte)
        packed = np.zeros(grouped.shape[:2], np.uint8)
        for i in range(per_byte):  # first dimension in the high bits
            packed |= grouped[:, :, i] << np.uint8(value * (per_byte - 1 - i))
        return packed

    def _faiss_pq(self):
        """The faiss ProductQuantizer holding our sub-centroids (encoding runs in faiss)."""
        return pq_from_table(_table(self.pq_centroids, "pq_centroids", self.spec), codec_bits(self.spec))

    def _lookup_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions·256, record) table: the residual values one byte decodes to at each byte position
        (sq: 8/b dimensions, pq: one sub-vector). Decoding is then one `np.take` of records, ~3× faster
        here than a torch embedding lookup (pq decodes with faiss, which is as fast). Returns the table and
        each byte position's offset into it."""
        if self._lut is None or self._lut_offsets is None:
            kind, value = parse_codec(self.spec)
            if kind == "pq":
                table = _table(self.pq_centroids, "pq_centroids", self.spec)  # (m, 256, sub)
            else:
                per_byte = 8 // value
                byte = np.arange(256)
                levels = np.stack([(byte >> (value * (per_byte - 1 - i))) & ((1 << value) - 1)
                                   for i in range(per_byte)], 1)  # (256, per_byte)
                weights = _table(self.weights, "weights", self.spec)
                w = weights.reshape(-1, per_byte, weights.shape[1])  # (positions, per_byte, levels)
                table = np.stack([w[:, i, :][:, levels[:, i]] for i in range(per_byte)], -1)
            table = np.ascontiguousarray(table.reshape(-1, table.shape[-1]), np.float32)
            offsets = np.arange(table.shape[0] // 256, dtype=np.intp) * 256
            # numpy gathers native 8/16-byte items fast (generic void records ~20x slower): view each record as
            # complex128 pairs of floats when it is a multiple of 16 bytes, else keep float32 rows
            width = table.shape[1] * 4
            lut = table.view(np.complex128) if width % 16 == 0 else table
            if lut.shape[1] == 1:
                lut = lut.reshape(-1)  # one native item per record: the fastest gather
            self._lut, self._lut_offsets = lut, offsets
        return self._lut, self._lut_offsets

    def decode_residuals(self, residual_bytes: np.ndarray) -> np.ndarray:
        """float32 (tokens, dim) residuals of stored residual bytes (pq: faiss's decoder, measured faster)."""
        if self.kind != "sq":
            if self._pq is None:
                self._pq = self._faiss_pq()
            decoded = self._pq.decode(np.ascontiguousarray(residual_bytes))
            return decoded @ self.rotation if self.rotation is not None else decoded
        table, offsets = self._lookup_table()
        index = np.asarray(residual_bytes).astype(np.intp)
        index += offsets
        out = np.take(table, index) if table.ndim == 1 else np.take(table, index, axis=0)
        return out.view(np.float32).reshape(index.shape[0], self.dim)

    def decode_unnormalized(self, codes: np.ndarray, residual_bytes: np.ndarray) -> np.ndarray:
        """float32 (tokens, dim) `centroid + residual` (not re-normalised: scorers divide their
        similarities by the norms instead, 128/query-tokens times fewer divisions)."""
        out = self.decode_residuals(residual_bytes)
        out += np.take(self.codebook.centroids, np.asarray(codes, np.int64), axis=0)
        return out

    def decode(self, rows: np.ndarray, normalize: bool = True) -> np.ndarray:
        """float32 (tokens, dim) tokens of stored uint8 rows (see `encode`), re-normalised by default."""
        rows = np.ascontiguousarray(rows)
        codes = rows[:, :2].copy().view(np.uint16).reshape(-1)
        out = self.decode_unnormalized(codes, rows[:, 2:])
        if normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    # ---- persistence ------------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Codebook + quantiser tables, `codec.json` written last."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.codebook.save(directory)
        if self.cutoffs is not None:
            atomic_save_npy(directory / "sq_cutoffs.npy", self.cutoffs)
            atomic_save_npy(directory / "sq_weights.npy", _table(self.weights, "weights", self.spec))
        if self.pq_centroids is not None:
            atomic_save_npy(directory / "pq_centroids.npy", self.pq_centroids)
        if self.rotation is not None:
            atomic_save_npy(directory / "opq_rotation.npy", self.rotation)
        atomic_write_json(directory / CODEC_META, {"spec": self.spec, "dim": self.dim,
                                                   "row_bytes": self.row_bytes})

    @classmethod
    def load(cls, directory: Path) -> ResidualCodec:
        directory = Path(directory)
        meta = json.loads((directory / CODEC_META).read_text())
        kind, _ = parse_codec(meta["spec"])
        codebook = Codebook.load(directory)
        if kind == "sq":
            return cls(codebook, meta["spec"], cutoffs=np.load(directory / "sq_cutoffs.npy"),
                       weights=np.load(directory / "sq_weights.npy"))
        rotation = np.load(directory / "opq_rotation.npy") if kind == "opq" else None
        return cls(codebook, meta["spec"], pq_centroids=np.load(directory / "pq_centroids.npy"), rotation=rotation)

    @staticmethod
    def exists(directory: Path) -> bool:
        return (Path(directory) / CODEC_META).exists()
