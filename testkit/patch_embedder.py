"""A tiny deterministic multi-vector image embedder for search-backend tests (no model weights).

Why not the tiny random ColQwen2: backend tests compare exact, fast and Qdrant search on the same
vectors and need pages whose tokens differ from page to page and queries that target a page; a
random transformer maps every small image to near-identical tokens. Here each 8×8 patch of a page
image becomes one 128-d token through a fixed random projection (like a ViT patch embedding with
frozen random weights), and a text query hashes each word to a token. It implements the project's
`Embedder` protocol, so the real `Ingestor` and `SearchEngine` run unchanged around it.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw

from search_engine.embedders.base import EmbedderSpec

DIM = 128


class PatchEmbedder:
    spec = EmbedderSpec(kind="test-patch", model="testkit-patch-embedder", modality="image", multi_vector=True,
                        dim=DIM)

    def __init__(self, seed: int = 0, size: tuple[int, int] = (64, 48)):
        rng = np.random.default_rng(seed)
        self.size = size
        self.projection = rng.standard_normal((8 * 8 * 3 + 2, DIM)).astype(np.float32)

    def embed_images(self, images: Sequence[Image.Image]) -> list[np.ndarray]:
        out = []
        for image in images:
            pixels = np.asarray(image.convert("RGB").resize(self.size), np.float32) / 255.0 - 0.5
            h, w = pixels.shape[0] // 8, pixels.shape[1] // 8
            patches = pixels[: h * 8, : w * 8].reshape(h, 8, w, 8, 3).transpose(0, 2, 1, 3, 4).reshape(h * w, -1)
            yy, xx = np.meshgrid(np.arange(h) / h, np.arange(w) / w, indexing="ij")
            tokens = np.concatenate([patches, yy.reshape(-1, 1), xx.reshape(-1, 1)], axis=1) @ self.projection
            out.append((tokens / np.linalg.norm(tokens, axis=1, keepdims=True)).astype(np.float32))
        return out

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        out = []
        for query in queries:
            words = query.lower().split() or [""]
            vecs = []
            for word in words:
                seed = int.from_bytes(hashlib.sha1(word.encode()).digest()[:8], "little")
                v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
                vecs.append(v / np.linalg.norm(v))
            out.append(np.stack(vecs))
        return out

    def embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        raise NotImplementedError("image embedder")


def draw_page(seed: int, size: tuple[int, int] = (64, 48)) -> Image.Image:
    """A distinct synthetic page: coloured blocks at seeded positions."""
    rng = np.random.default_rng(seed)
    image = Image.new("RGB", size, tuple(int(c) for c in rng.integers(0, 256, 3)))
    draw = ImageDraw.Draw(image)
    for _ in range(6):
        x0, y0 = int(rng.integers(0, size[0] - 8)), int(rng.integers(0, size[1] - 8))
        x1, y1 = x0 + int(rng.integers(8, 32)), y0 + int(rng.integers(8, 24))
        draw.rectangle([x0, y0, x1, y1], fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
    return image
