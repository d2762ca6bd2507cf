"""How a deployment configures the search engine: which backend serves the visual channel, and its Qdrant options.

`SearchEngine` takes an `EngineSettings` and never reads the environment itself, so an engine built in a
test, a notebook or another app is configured by what it is given alone. The entry points read the
deployment's environment with `EngineSettings.from_env()`: the `vrag-search` commands (`search_engine.cli`)
and the server's app factory when it loads the index itself (`search_engine.api.create_app`).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# QdrantBackend options read from integer environment variables
_QDRANT_INTS = (("shard_number", "VRAG_QDRANT_SHARDS"), ("replication_factor", "VRAG_QDRANT_REPLICAS"),
                ("pool_groups", "VRAG_QDRANT_POOL_GROUPS"), ("prefetch_limit", "VRAG_QDRANT_PREFETCH"))


@dataclass(frozen=True)
class EngineSettings:
    """`visual_backend`: "auto" (fast when the index has a fast sidecar, else exact), "exact", "fast" or
    "qdrant"; `qdrant_options`: `QdrantBackend` options (location, collection, api_key, ...), none by default."""

    visual_backend: str = "auto"
    qdrant_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:  # frozen all the way down: the options are a read-only copy
        object.__setattr__(self, "qdrant_options", MappingProxyType(dict(self.qdrant_options)))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EngineSettings:
        """The settings the environment (`os.environ`, or `environ`) names: `VRAG_VISUAL_BACKEND` (default
        "auto"); with `VRAG_QDRANT_URL` set, the Qdrant options from it, `VRAG_QDRANT_COLLECTION` (default
        "vrag_pages"), `VRAG_QDRANT_API_KEY`, `VRAG_QDRANT_SHARDS`, `VRAG_QDRANT_REPLICAS`,
        `VRAG_QDRANT_POOL_GROUPS`, `VRAG_QDRANT_PREFETCH`, `VRAG_QDRANT_QUANTIZATION` (none | scalar | binary)
        and `VRAG_QDRANT_ON_DISK` (1: full token matrices on disk, mmap)."""
        env = os.environ if environ is None else environ
        qdrant: dict[str, Any] = {}
        if env.get("VRAG_QDRANT_URL"):
            qdrant = {"location": env["VRAG_QDRANT_URL"], "collection": env.get("VRAG_QDRANT_COLLECTION", "vrag_pages"),
                      "api_key": env.get("VRAG_QDRANT_API_KEY") or None}
            for key, var in _QDRANT_INTS:
                if env.get(var):
                    qdrant[key] = int(env[var])
            if env.get("VRAG_QDRANT_QUANTIZATION"):
                qdrant["quantization"] = env["VRAG_QDRANT_QUANTIZATION"]
            if env.get("VRAG_QDRANT_ON_DISK"):
                qdrant["on_disk"] = env["VRAG_QDRANT_ON_DISK"].lower() in ("1", "true", "yes")
        return cls(visual_backend=env.get("VRAG_VISUAL_BACKEND", "auto"), qdrant_options=qdrant)
