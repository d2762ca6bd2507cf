"""A llama-index retriever over our engine, so llama-index apps can retrieve page images.

It returns `ImageNode`s (image path — or image URL when the server does not expose its paths — + page
metadata) with the engine's scores; give it a loaded
`SearchEngine` (in-process) or the URL of a running search server. llama-index-core is an optional
extra (`pip install 'vrag-rl[llama-index]'`): importing this module without it raises `MissingExtraError`.
"""
from __future__ import annotations

from typing import Any

import httpx

from search_engine.extras import MissingExtraError

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle
except ImportError as exc:
    raise MissingExtraError("search_engine.llama_index_retriever", "llama-index-core", "llama-index", exc) from exc


class VragPageRetriever(BaseRetriever):
    """Pages as llama-index `ImageNode`s, so a llama-index app can use this engine as its retriever.

    The node id is the page id and the metadata carries doc id, page number, rank and the page's own
    scalar metadata, so an app can cite pages the way the agent does.
    """

    def __init__(self, engine: Any = None, search_url: str | None = None, top_k: int = 5,
                 doc_ids: list[str] | None = None, api_key: str | None = None, timeout: float = 30.0, **kwargs):
        if (engine is None) == (search_url is None):
            raise ValueError("give exactly one of engine= (a SearchEngine) or search_url=")
        self._engine = engine
        self._search_url = search_url.rstrip("/") if search_url else None
        self._top_k = top_k
        self._doc_ids = doc_ids
        self._headers = {"X-API-Key": api_key} if api_key else {}
        self._timeout = timeout
        super().__init__(**kwargs)

    def _hits(self, query: str) -> list[dict[str, Any]]:
        if self._engine is not None:
            return [h.to_dict() for h in self._engine.search(query, top_k=self._top_k, doc_ids=self._doc_ids)]
        response = httpx.post(f"{self._search_url}/search", headers=self._headers, timeout=self._timeout,
                              json={"queries": [query], "top_k": self._top_k, "doc_ids": self._doc_ids})
        response.raise_for_status()
        return response.json()["results"][0]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        nodes = []
        for hit in self._hits(query_bundle.query_str):
            metadata = {"page_id": hit["page_id"], "doc_id": hit["doc_id"], "page_number": hit["page_number"],
                        "rank": hit["rank"], **{k: v for k, v in hit.get("metadata", {}).items()
                                                 if isinstance(v, (str, int, float))}}
            if hit.get("image_path"):
                node = ImageNode(id_=hit["page_id"], image_path=hit["image_path"], metadata=metadata)
            else:  # the server does not expose its paths (not on this machine): the node points at its URL
                node = ImageNode(id_=hit["page_id"], image_url=f"{self._search_url}{hit['image_url']}",
                                 metadata=metadata)
            nodes.append(NodeWithScore(node=node, score=float(hit["score"])))
        return nodes
