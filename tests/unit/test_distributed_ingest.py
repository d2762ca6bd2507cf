"""Distributed ingestion: pages embedded by Ray actors give the same index as a local ingestion, and resume.

A real local Ray cluster (2 CPUs) and the deterministic patch embedder from testkit (no weights).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from search_engine.index.manifest import Manifest
from search_engine.ingest import Ingestor
from testkit.patch_embedder import PatchEmbedder, draw_page

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_cluster():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _vectors(index):
    manifest = Manifest.load(index)
    return {doc: np.load(index / entry.segments["visual"]["file"]) for doc, entry in manifest.documents.items()}


@pytest.mark.slow
def test_ray_pool_ingests_like_a_local_run_and_resumes(tmp_path, ray_cluster):
    from search_engine.distributed_ingest import RayEmbedderPool

    folder = tmp_path / "pages"
    folder.mkdir()
    for s in range(12):
        draw_page(s).save(folder / f"p{s:02d}.png")
    local = tmp_path / "local"
    Ingestor(local, visual_model=None, text_model=None, visual_embedder=PatchEmbedder(), progress=False,
             ocr=False).add(folder)

    pool = RayEmbedderPool(PatchEmbedder, num_workers=2)
    assert pool.spec == PatchEmbedder.spec
    distributed = tmp_path / "distributed"
    stop_after = {"n": 0}

    def crash_after_five(event):
        if event["stage"] == "done":
            stop_after["n"] += 1
            if stop_after["n"] == 5:
                raise KeyboardInterrupt  # an interrupted run: five documents committed

    with pytest.raises(KeyboardInterrupt):
        Ingestor(distributed, visual_model=None, text_model=None, visual_embedder=pool, progress=False, ocr=False,
                 progress_callback=crash_after_five).add(folder)
    assert len(Manifest.load(distributed).documents) == 5
    report = Ingestor(distributed, visual_model=None, text_model=None, visual_embedder=pool, progress=False,
                      ocr=False, chunk_pages=4).add(folder)
    assert len(report.unchanged) == 5 and len(report.added) == 7
    ours, reference = _vectors(distributed), _vectors(local)
    assert ours.keys() == reference.keys()
    for doc in reference:
        np.testing.assert_array_equal(ours[doc], reference[doc])
    # a batch larger than the pool is split across the workers and comes back in page order
    images = [draw_page(s) for s in range(5)]
    for got, want in zip(pool.embed_images(images), PatchEmbedder().embed_images(images)):
        np.testing.assert_array_equal(got, want)
    pool.shutdown()
