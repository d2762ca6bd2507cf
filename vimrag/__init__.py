"""VimRAG, the memory-graph agent: reasoning as a DAG of multimodal memory nodes.

`from vimrag import VimRAG` — the agent (`run` / `stream` / `arun` / `astream` / `run_batch`, as
`vrag_rl.VRAG`); `vimrag.graph.MemoryGraph` — the graph, its JSON and its GGPO export;
`vimrag.energy` — memory energy and the pixel budget; `vimrag.context` — the context rebuilt
from the graph each turn; `vimrag.tools` — the `<tool_call>` protocol.
"""
from __future__ import annotations

from typing import Any

__all__ = ["EnergyConfig", "MemoryGraph", "VimRAG", "VimRAGConfig", "VimRAGResult"]

_EXPORTS = {
    "VimRAG": "vimrag.agent",
    "VimRAGConfig": "vimrag.config",
    "VimRAGResult": "vimrag.result",
    "MemoryGraph": "vimrag.graph",
    "EnergyConfig": "vimrag.energy",
}


def __getattr__(name: str) -> Any:  # lazy: importing the graph does not pull in the HTTP clients
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'vimrag' has no attribute {name!r}")
