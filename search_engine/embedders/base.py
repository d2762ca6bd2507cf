"""The one interface every embedder implements, so the index never knows which model it holds.

A multi-vector embedder (ColQwen2, ColPali) returns, per item, a (tokens, dim) float32 array
scored by late interaction (MaxSim); a single-vector embedder (MiniLM, GVE, Qwen3-VL-Embedding)
returns a (1, dim) array, for which MaxSim reduces to a dot product. Keeping both as 2-D arrays
lets one store and one scorer serve every model.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from PIL import Image


@dataclass(frozen=True)
class EmbedderSpec:
    """What the index records about an embedder so the server can reload the same one."""

    kind: str  # registry name, e.g. "colqwen2", "minilm", "gve", "qwen3-vl-embedding"
    model: str  # hub id or local path
    modality: str  # "image" (embeds page images) or "text" (embeds page text)
    multi_vector: bool
    dim: int


@runtime_checkable
class Embedder(Protocol):
    spec: EmbedderSpec

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        """One float32 array of shape (tokens, dim) per query, L2-normalised rows."""

    def embed_images(self, images: Sequence[Image.Image]) -> list[np.ndarray]:
        """One float32 array per image (image-modality embedders only)."""

    def embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One float32 array per document text (text-modality embedders only)."""
