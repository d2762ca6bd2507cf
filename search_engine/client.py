"""A small HTTP client of the search API, shared by the agent, the demo, the MCP server and scripts.

It speaks both dialects a VRAG search server may have:

* ours — `POST /search` with `{"queries", "top_k", "doc_ids"}` → `{"results": [[hit, ...], ...]}`,
  page images at `GET /pages/{page_id}/image`;
* upstream VRAG's — `GET /search?queries=a&queries=b` → a list per query of `{"idx", "image_file"}`
  (`image_file` is a path on the server's machine, relative to its working directory; no `top_k`,
  no document filter, no image endpoint).

`protocol="auto"` (the default) posts first and, when the server answers 405 to that (or the bare
404 of a route that does not exist — our server's 404 for an unknown document says what is
unknown, and must not flip the dialect), switches to upstream's GET for the rest of the client's
life; `"vrag"` or `"upstream"` fixes it.
Hits come back as `search_engine.types.SearchHit`; for an
upstream server `page_id` is the image file's stem, `image_path` the file as the server named it,
and `image_url` is "" (its pixels are read from `image_path`, so the client must share the
server's filesystem, exactly as upstream's own agent must).

Async first (the agent runs many episodes on one connection pool), with retries and exponential
backoff for the failures that pass (connection refused while the server starts, timeouts, 5xx); a
4xx is the caller's mistake and is raised at once. The transport is aiohttp (see
`search_engine.infra.http_session` for why, and for the session-per-loop rule); bodies are read up to
`max_response_bytes` and refused past it; redirects are not followed. Ids reach a URL only through
`id_path`, which refuses anything outside the id grammar and escapes the rest, so an id such as
`"../stats?x="` can never make the client call another endpoint (issue 21).
"""
from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import aiohttp

from search_engine.infra.http_session import BodyTooLarge, LoopSession, send_with_retries
from search_engine.page_layout import PageLayout, RegionHit
from search_engine.types import SearchHit, is_valid_id

Protocol = Literal["auto", "vrag", "upstream"]
PROTOCOLS = ("auto", "vrag", "upstream")
_PAGE_SUFFIX = re.compile(r"^(?P<doc>.+)_(?P<page>\d{1,6})$")
MAX_RESPONSE_BYTES = 64 * 2**20  # a page image or a result list; more than this is not an answer


class SearchError(RuntimeError):
    """The search server could not answer (after retries), or refused the request."""


class InvalidIdError(SearchError, ValueError):
    """An id that does not fit the index's id grammar (`search_engine.types.ID_PATTERN`, no ".."): it is
    refused before any request, so it can never name another endpoint or path of the server."""


def check_id(value: object, what: str = "id") -> str:
    """`value` if it is a valid page or document id, else InvalidIdError (a SearchError and a ValueError)."""
    if not isinstance(value, str) or not is_valid_id(value):
        raise InvalidIdError(f"{what} {str(value)[:80]!r} is not a valid id (1-200 characters: letters, digits, "
                             "'.', '_', '-', starting with a letter or digit, no '..')")
    return value


def id_path(template: str, *ids: str) -> str:
    """A URL path with each id checked (`check_id`) and percent-escaped into `template`'s `{}` slots:
    every client method that puts an id into a URL builds it here."""
    return template.format(*(quote(check_id(i), safe="") for i in ids))


class SearchClient:
    """Client of one search server (ours or upstream VRAG's; see the module doc).

    `base_url` is the server's root (a trailing `/search`, as upstream configs write it, is dropped);
    `api_key` is sent as `X-API-Key`; `session` shares an existing `aiohttp.ClientSession` (then
    `aclose()` leaves it open). One client serves one event loop.
    """

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 30.0, max_retries: int = 3,
                 backoff: float = 0.5, session: aiohttp.ClientSession | None = None, protocol: Protocol = "auto",
                 max_response_bytes: int = MAX_RESPONSE_BYTES):
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
        base_url = base_url.rstrip("/")
        self.base_url = base_url[: -len("/search")] if base_url.endswith("/search") else base_url
        self.protocol: Protocol = protocol
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_response_bytes = max_response_bytes
        self._session = LoopSession(self.base_url, {"X-API-Key": api_key} if api_key else None, timeout=timeout,
                                    session=session)

    async def _request(self, method: str, path: str, *, json: Any = None, params: Any = None) -> _Response:
        try:
            status, body = await send_with_retries(
                self._session.get(), method, self.base_url + path, max_retries=self.max_retries, backoff=self.backoff,
                retry_status=lambda code: code >= 500, limit=self.max_response_bytes, json=json, params=params)
        except BodyTooLarge as exc:
            raise SearchError(f"search server {exc}") from None
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise SearchError(f"search server at {self.base_url} unavailable after {self.max_retries + 1} attempts: "
                              f"{exc if str(exc) else exc.__class__.__name__}") from None
        if status >= 500:
            raise SearchError(f"search server at {self.base_url} unavailable after {self.max_retries + 1} attempts: "
                              f"search server error {status}: {_detail(body)}")
        if status >= 400:
            detail = _detail(body)
            raise _Refused(status, f"search server refused the request ({status}): {detail}", detail)
        if status >= 300:
            raise SearchError(f"search server redirected ({status}); give its final address as the URL")
        return _Response(status, body)

    async def search(self, queries: Sequence[str], top_k: int = 5,
                     doc_ids: Sequence[str] | None = None) -> list[list[SearchHit]]:
        """The `top_k` best pages for each query, in query order (one request for the whole batch)."""
        if self.protocol != "upstream":
            body = {"queries": list(queries), "top_k": top_k, "doc_ids": list(doc_ids) if doc_ids else None}
            try:
                payload = (await self._request("POST", "/search", json=body)).json()
            except _Refused as exc:
                if self.protocol == "vrag" or not exc.no_such_endpoint:
                    raise
                self.protocol = "upstream"  # no POST /search here: upstream VRAG's server
            else:
                self.protocol = "vrag"
                return [[self._our_hit(h) for h in hits] for hits in _results(payload)]
        if doc_ids:
            raise SearchError("an upstream VRAG search server cannot restrict a search to documents (doc_ids)")
        response = await self._request("GET", "/search", params=[("queries", q) for q in queries])
        return [[_upstream_hit(h, rank, self.base_url) for rank, h in enumerate(hits[:top_k], 1)]
                for hits in _upstream_results(response.json(), len(queries))]

    def _our_hit(self, h: dict[str, Any]) -> SearchHit:
        try:
            return SearchHit(rank=int(h["rank"]), page_id=h["page_id"], doc_id=h["doc_id"],
                             page_number=int(h["page_number"]), score=float(h["score"]),
                             image_path=h.get("image_path") or "", metadata=h.get("metadata") or {},
                             image_url=self.base_url + h["image_url"] if h.get("image_url") else "",
                             kind=h.get("kind", "page"), start_s=h.get("start_s"), end_s=h.get("end_s"),
                             regions=[RegionHit(**{**r, "box": tuple(r["box"])}) for r in h.get("regions") or []])
        except (KeyError, TypeError, ValueError) as exc:
            raise SearchError(f"search server sent a malformed hit ({exc!r}): {str(h)[:300]}") from None

    async def page_image(self, page_id: str, max_side: int | None = None) -> bytes:
        """The page's image (JPEG bytes), shrunk to `max_side` when given (our servers only)."""
        path = id_path("/pages/{}/image", page_id)
        params = {"max_side": max_side} if max_side else None
        try:
            return (await self._request("GET", path, params=params)).content
        except _Refused as exc:
            if self.protocol == "upstream" and exc.status in (404, 405):
                raise SearchError(f"page {page_id}: an upstream VRAG search server serves no images; its hits' "
                                  "image_file must be readable on this machine") from None
            raise

    async def page_layout(self, page_id: str) -> PageLayout:
        """The page's structure (regions with boxes in page-image pixels; our servers only). SearchError
        when the server has none for the page (its message says why, e.g. an index to upgrade)."""
        body = (await self._request("GET", id_path("/pages/{}/layout", page_id))).json()
        try:
            return PageLayout.from_dict(body)
        except (KeyError, TypeError, ValueError) as exc:
            raise SearchError(f"search server sent a malformed page layout ({exc!r}): {str(body)[:300]}") from None

    async def documents(self) -> list[dict[str, Any]]:
        """Every indexed document (id, source, pages) — our servers only."""
        return (await self._request("GET", "/documents")).json()

    async def health(self) -> dict[str, Any]:
        """The server's /health body."""
        return (await self._request("GET", "/health")).json()

    async def reload(self) -> dict[str, Any]:
        """Ask the server to pick up documents ingested since it started (our servers only)."""
        return (await self._request("POST", "/reload")).json()

    async def aclose(self) -> None:
        """Close the connection pool (unless it was given to the constructor)."""
        await self._session.aclose()


class _Response:
    """Status and body of a finished request (the connection is already back in the pool)."""

    __slots__ = ("status_code", "content")

    def __init__(self, status_code: int, content: bytes):
        self.status_code = status_code
        self.content = content

    def json(self) -> Any:
        try:
            return json.loads(self.content)
        except (ValueError, RecursionError) as exc:
            raise SearchError(f"search server answered with a body that is not JSON ({exc.__class__.__name__}): "
                              f"{self.content[:200]!r}") from None


class _Refused(SearchError):
    """A 4xx: status and detail are kept so the dialect detection can tell "no such endpoint" apart."""

    def __init__(self, status: int, message: str, detail: str = ""):
        super().__init__(message)
        self.status = status
        self.detail = detail

    @property
    def no_such_endpoint(self) -> bool:
        """405 (a GET-only /search), or the bare 404 of a route that does not exist — not our 404 for an
        unknown document, which must reach the caller instead of switching the dialect for good."""
        return self.status == 405 or (self.status == 404 and self.detail.strip().lower() in ("not found", ""))


def _results(payload: Any) -> list[list[dict[str, Any]]]:
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise SearchError(f'search server answered without a "results" list: {str(payload)[:300]}')
    return payload["results"]


def _upstream_results(payload: Any, num_queries: int) -> list[list[dict[str, Any]]]:
    if not isinstance(payload, list) or len(payload) != num_queries or not all(isinstance(h, list) for h in payload):
        raise SearchError(f"upstream search server must answer a list of hit lists, one per query "
                          f"({num_queries}): {str(payload)[:300]}")
    return payload


def _upstream_hit(h: Any, rank: int, base_url: str) -> SearchHit:
    """Upstream's `{"idx", "image_file"}` as a SearchHit: the page id is the file's stem, and a trailing
    `_<n>` (our `{doc}_{page}` naming, upstream's pdf2images output) gives the document and page. Our
    own server's GET /search, when it does not expose paths, names the image by its URL path instead."""
    if not isinstance(h, dict) or not isinstance(h.get("image_file"), str) or not h["image_file"]:
        raise SearchError(f'upstream search hit without an "image_file": {str(h)[:300]}')
    image_file = h["image_file"]
    page_id = str(h.get("page_id") or Path(image_file).stem)
    match = _PAGE_SUFFIX.match(page_id)
    doc_id, page_number = (match["doc"], int(match["page"])) if match else (page_id, 1)
    score = h.get("score")
    served = image_file.startswith("/pages/")
    return SearchHit(rank=rank, page_id=page_id, doc_id=doc_id, page_number=page_number,
                     score=float(score) if isinstance(score, (int, float)) else 0.0,
                     image_path="" if served else os.path.abspath(image_file),
                     image_url=base_url + image_file if served else "",
                     metadata={"image_file": image_file, "idx": h.get("idx")})


def _detail(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    try:
        return str(json.loads(text).get("detail", text))[:500]
    except (ValueError, AttributeError, RecursionError):
        return text[:500]
