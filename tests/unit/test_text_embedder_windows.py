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


def test_batches_by_word_pieces_are_sorted_bounded_and_lose_no_text():
    from search_engine.embedders.text import token_batches

    lengths = [3, 128, 7, 7, 60, 1, 128, 40, 2, 90] * 7
    batches = token_batches(lengths, budget=256, max_count=16)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))  # each text once
    for batch in batches:
        assert len(batch) <= 16
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= 256  # padded size in budget
    longest = [max(lengths[i] for i in batch) for batch in batches]
    assert longest == sorted(longest)  # texts of one length go together
    assert token_batches([], budget=256) == []


def test_batched_vectors_are_each_texts_own_vector(embedder):
    """Texts of very different lengths in one call get the vectors each gets alone: the padding of a batch
    never reaches a text's vector, and the vectors come back in the texts' order."""
    texts = ["revenue", "", "net income rose 12 % in 2015 " * 20, "中文 文本", "the table of contents"] * 5
    together = embedder.embed_queries(texts)
    for text, vector in zip(texts, together):
        assert np.allclose(vector, embedder.embed_queries([text])[0], atol=1e-5)
