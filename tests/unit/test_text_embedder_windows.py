"""The CPU text embedder's windows: MiniLM was trained on 128 word pieces, so a long text is embedded as
windows that each fit that length (none truncated) and whose mean is the text's vector."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def embedder():
    from search_engine.embedders.text import SentenceEmbedder

    return SentenceEmbedder("minilm", device="cpu")


def test_windows_fit_the_length_the_model_was_trained_on(embedder):
    assert embedder.max_length == 128
    words = ("The survey counted commuters by mode of transport in every district of the city, "
             "including bicycles, buses, trams and trains. ") * 30
    windows = embedder._windows(words)
    assert len(windows) > 3
    assert " ".join(windows).split() == words.split()  # nothing lost, nothing repeated
    for window in windows:
        assert len(embedder.tokenizer(window)["input_ids"]) <= embedder.max_length  # none truncated


def test_a_long_text_is_the_mean_of_its_windows(embedder):
    text = " ".join(f"item{i} costs {i} euros." for i in range(200))
    windows = embedder._windows(text)
    vectors = np.concatenate(embedder.embed_texts(windows))
    mean = vectors.mean(axis=0)
    whole = embedder.embed_texts([text])[0][0]
    assert np.allclose(whole, mean / np.linalg.norm(mean), atol=1e-5)
