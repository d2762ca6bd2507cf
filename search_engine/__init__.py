"""Page-image search: PDFs -> page images -> embeddings -> persistent index -> HTTP search.

Heavy modules (torch, colpali-engine, faiss) load lazily so `import search_engine` stays cheap.
"""
from search_engine.infra.torchvision_shim import install_torchvision_hook

install_torchvision_hook()

__all__ = ["SearchEngine", "Ingestor", "PageRecord", "SearchHit"]


def __getattr__(name: str):
    if name == "SearchEngine":
        from search_engine.engine import SearchEngine

        return SearchEngine
    if name == "Ingestor":
        from search_engine.ingest import Ingestor

        return Ingestor
    if name in ("PageRecord", "SearchHit"):
        from search_engine import types

        return getattr(types, name)
    raise AttributeError(name)
