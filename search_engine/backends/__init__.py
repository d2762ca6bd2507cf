"""Visual-channel search backends behind one interface (`VisualBackend`).

* `exact` — every page token in RAM, exact MaxSim (the reference; `index/maxsim.py`).
* `fast` — centroid candidates + exact rerank from the on-disk fp16 segments (`index/fast_index.py`).
* `qdrant` — a Qdrant multivector collection with the MaxSim comparator (`backends/qdrant.py`),
  in-process (`qdrant-client` local mode) or a Qdrant server / cluster URL.

The engine picks one with `SearchEngine(..., visual_backend=...)` or `vrag-search serve --backend`.
"""
from search_engine.backends.base import BACKENDS, VisualBackend, open_visual_backend

__all__ = ["BACKENDS", "VisualBackend", "open_visual_backend"]
