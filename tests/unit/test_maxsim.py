"""The fast MaxSim scorer must give colpali-engine's scores exactly, on ragged pages."""
import numpy as np
import pytest
import torch
from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

from search_engine.index.maxsim import MaxSimScorer


def _normalised(rng, n, dim=128):
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("chunk_tokens", [50, 262_144])
def test_maxsim_equals_colpali_score_multi_vector(chunk_tokens):
    rng = np.random.default_rng(0)
    pages = [_normalised(rng, n).astype(np.float16) for n in rng.integers(5, 120, size=37)]
    queries = [_normalised(rng, n) for n in (3, 11, 20)]
    scorer = MaxSimScorer(np.concatenate(pages), [p.shape[0] for p in pages], chunk_tokens=chunk_tokens)
    ours = scorer.score(queries)
    # one page per call: colpali pads pages to a common length with zero vectors, which turns a
    # query token's best *negative* similarity into 0 — exact MaxSim must not do that
    reference = np.concatenate([
        BaseVisualRetrieverProcessor.score_multi_vector(
            [torch.from_numpy(q) for q in queries], [torch.from_numpy(p.astype(np.float32))], device="cpu"
        ).numpy()
        for p in pages
    ], axis=1)
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-3)
    assert (ours.argmax(axis=1) == reference.argmax(axis=1)).all()


def test_maxsim_rejects_inconsistent_counts():
    with pytest.raises(ValueError):
        MaxSimScorer(np.zeros((10, 4), np.float16), [3, 3])
    with pytest.raises(ValueError):
        MaxSimScorer(np.zeros((3, 4), np.float16), [3, 0])
