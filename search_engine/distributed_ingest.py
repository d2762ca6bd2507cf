"""Distributed embedding for large corpora: page images embedded by a pool of Ray actors.

Why this shape: page rendering, checkpointing and committing stay in the one `Ingestor` (so a
distributed run is resumable and crash-safe exactly like a local one: chunk checkpoints under
`.partial/`, documents committed atomically, the fast index / Qdrant brought up to date after),
while the expensive part — the embedding model's forward pass — runs in N Ray actors, each holding
its own model copy on its own GPU (or CPU cores). Each chunk of pages is split across the actors
and their results are put back in page order. Ray is the project's cluster runtime already (RL
training); `ray.init(address="auto")` joins an existing cluster, otherwise a local one starts.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)


class _EmbedWorker:
    """A Ray actor: builds its embedder once, then embeds the image shards it is sent."""

    def __init__(self, factory: Callable[[], Any]):
        self.embedder = factory()

    def spec(self):
        return self.embedder.spec

    def embed_images(self, images: Sequence[Image.Image]) -> list[np.ndarray]:
        return self.embedder.embed_images(list(images))

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        return self.embedder.embed_queries(list(queries))


class RayEmbedderPool:
    """An `Embedder` whose `embed_images` fans out across Ray actors (pass it to `Ingestor`).

    `factory`: a picklable zero-argument callable that builds the embedder inside a worker, e.g.
    `functools.partial(load_visual_embedder, "vidore/colqwen2-v1.0", device="cuda")`.
    """

    def __init__(self, factory: Callable[[], Any], num_workers: int = 2, num_gpus_per_worker: float = 0.0,
                 num_cpus_per_worker: float = 1.0, ray_address: str | None = None):
        import ray

        if num_workers < 1:
            raise ValueError("num_workers must be ≥ 1")
        if not ray.is_initialized():
            ray.init(address=ray_address, ignore_reinit_error=True, log_to_driver=False)
        actor = ray.remote(num_gpus=num_gpus_per_worker, num_cpus=num_cpus_per_worker)(_EmbedWorker)
        self._ray = ray
        # Ray's actor handles are generated at run time; typed Any (ray's stubs type the handle as the class)
        self.workers: list[Any] = [actor.remote(factory) for _ in range(num_workers)]
        self.spec = ray.get(self.workers[0].spec.remote())

    def embed_images(self, images: Sequence[Image.Image]) -> list[np.ndarray]:
        images = list(images)
        if not images:
            return []
        shards = np.array_split(np.arange(len(images)), min(len(self.workers), len(images)))
        futures = [w.embed_images.remote([images[i] for i in shard]) for w, shard in zip(self.workers, shards)]
        out: list[np.ndarray] = []
        for result in self._ray.get(futures):  # shards come back in submission order: page order kept
            out.extend(result)
        return out

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        return self._ray.get(self.workers[0].embed_queries.remote(list(queries)))

    def embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        raise NotImplementedError("the pool embeds page images; text channels embed locally")

    def shutdown(self) -> None:
        for worker in self.workers:
            self._ray.kill(worker)
        self.workers = []
