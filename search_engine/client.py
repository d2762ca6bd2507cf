"""A small HTTP client of the search API, shared by the agent, the demo and scripts.

Async first (the agent runs many episodes on one connection pool), with retries and
exponential backoff for the failures that pass (connection refused while the server starts,
timeouts, 5xx); a 4xx is the caller's mistake and is raised at once.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Sequence

import httpx


class SearchError(RuntimeError):
    """The search server could not answer (after retries), or refused the request."""


@dataclass
class SearchResultPage:
    page_id: str
    doc_id: str
    page_number: int
    score: float
    image_url: str  # absolute URL on the search server
    image_path: str  # path on the server's machine (usable when it is this machine)
    metadata: dict[str, Any]


class SearchClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 30.0, max_retries: int = 3,
                 backoff: float = 0.5, client: httpx.AsyncClient | None = None):
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff = backoff
        headers = {"X-API-Key": api_key} if api_key else {}
        self._client = client or httpx.AsyncClient(timeout=timeout, headers=headers,
                                                   limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))
        self._owns_client = client is None

    async def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        last_error: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                response = await self._client.request(method, self.base_url + path, **kwargs)
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                last_error = exc
            else:
                if response.status_code < 500:
                    if response.status_code >= 400:
                        detail = _detail(response)
                        raise SearchError(f"search server refused the request ({response.status_code}): {detail}")
                    return response
                last_error = SearchError(f"search server error {response.status_code}: {_detail(response)}")
            if attempt < self.max_retries:
                await asyncio.sleep(self.backoff * (2**attempt))
        raise SearchError(f"search server at {self.base_url} unavailable after {self.max_retries + 1} attempts: "
                          f"{last_error}")

    async def search(self, queries: Sequence[str], top_k: int = 5,
                     doc_ids: Sequence[str] | None = None) -> list[list[SearchResultPage]]:
        body = {"queries": list(queries), "top_k": top_k, "doc_ids": list(doc_ids) if doc_ids else None}
        payload = (await self._request("POST", "/search", json=body)).json()
        return [[SearchResultPage(page_id=h["page_id"], doc_id=h["doc_id"], page_number=h["page_number"],
                                  score=h["score"], image_url=self.base_url + h["image_url"],
                                  image_path=h["image_path"], metadata=h.get("metadata", {})) for h in hits]
                for hits in payload["results"]]

    async def page_image(self, page_id: str, max_side: int | None = None) -> bytes:
        params = {"max_side": max_side} if max_side else None
        return (await self._request("GET", f"/pages/{page_id}/image", params=params)).content

    async def documents(self) -> list[dict[str, Any]]:
        return (await self._request("GET", "/documents")).json()

    async def health(self) -> dict[str, Any]:
        return (await self._request("GET", "/health")).json()

    async def reload(self) -> dict[str, Any]:
        return (await self._request("POST", "/reload")).json()

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail", response.text))[:500]
    except ValueError:
        return response.text[:500]
