"""One interface for every visual backend, so the engine, the HTTP server and the tests never care which runs.

A backend scores a batch of query token matrices against the index's pages and returns a dense
(queries, pages) float32 array in the engine's page order; pages it did not rank are -inf (an
approximate or remote backend only ranks its candidates). `allowed` is a boolean page mask (the
`doc_ids` filter) applied *before* candidates are chosen, so a filter never starves the results.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

BACKENDS = ("auto", "exact", "fast", "qdrant")


@runtime_checkable
class VisualBackend(Protocol):
    num_pages: int

    def score(self, queries: Sequence[np.ndarray], allowed: np.ndarray | None = None) -> np.ndarray:
        """(queries, pages) MaxSim scores; -inf for pages the backend did not score."""


class ExactBackend:
    """Exact MaxSim over every page (all tokens in RAM): the reference the others are measured against."""

    def __init__(self, scorer):
        self.scorer = scorer
        self.num_pages = scorer.num_pages

    def score(self, queries: Sequence[np.ndarray], allowed: np.ndarray | None = None) -> np.ndarray:
        scores = self.scorer.score(list(queries))
        if allowed is not None:
            scores[:, ~allowed] = -np.inf
        return scores


def open_visual_backend(name: str, index_dir: Path, manifest, page_ids: list[str], page_index: dict[str, int],
                        load_exact, *, device: str = "cpu", fast_params=None, qdrant: dict[str, Any] | None = None,
                        previous: Any = None):
    """Open the named backend for an index; `load_exact()` builds the in-RAM exact scorer on demand.

    `auto` = `fast` when the index has a fast sidecar, else `exact` (so existing indexes open as before).
    `previous`: the backend this engine used before a reload; a Qdrant client is reused (a local-mode
    path can only be opened by one client at a time).
    """
    from search_engine.index.fast_index import FastVisualIndex, has_fast_index

    if name not in BACKENDS:
        raise ValueError(f"unknown visual backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "auto":
        name = "fast" if has_fast_index(index_dir) else "exact"
    if name == "exact":
        return ExactBackend(load_exact())
    if name == "fast":
        backend = FastVisualIndex.open(index_dir, manifest, page_index, params=fast_params, device=device)
        if backend is None:
            raise FileNotFoundError(f"{index_dir} has no fast index; build it with "
                                    f"`vrag-search build-fast-index --index {index_dir}`")
        return backend
    from search_engine.backends.qdrant import QdrantBackend

    if isinstance(previous, QdrantBackend):
        qdrant_backend = previous
        qdrant_backend.rebind(page_ids)
    else:
        qdrant_backend = QdrantBackend(page_ids=page_ids, **(qdrant or {}))
    qdrant_backend.sync(index_dir, manifest)
    return qdrant_backend
