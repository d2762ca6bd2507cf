"""Search routes: `POST /search` (1–64 queries, filters, channels) and upstream VRAG's `GET /search`.

Concurrent requests share encoder forwards: every search goes through the app's `SearchBatcher`
(`app.state.search_batcher`, made by `search_batcher`; see `search_engine.query_batcher`).
"""
import dataclasses
import time
from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from fastapi.exceptions import RequestValidationError

from search_engine.api_models import (
    MAX_QUERIES,
    Hit,
    QueryText,
    SearchRequest,
    SearchResponse,
    UpstreamHit,
    check_queries,
)
from search_engine.engine import MAX_TOP_K
from search_engine.infra.http_guard import error_responses
from search_engine.infra.malloc_tuning import malloc_tuning_enabled, release_free_memory
from search_engine.query_batcher import SearchBatcher
from search_engine.routes.common import Batcher, Options, ServerOptions
from search_engine.types import page_image_url

router = APIRouter()


def search_batcher(state) -> SearchBatcher:
    """The batcher of an app whose engine is `state.engine` (read at every batch, so a swapped engine serves)."""
    trim_heap = malloc_tuning_enabled()

    def search_batch(queries, top_k, doc_ids, channels):
        try:
            return state.engine.batch_search(queries, top_k, doc_ids, channels)
        finally:
            if trim_heap:  # the batch's freed activations go back to the system (search_engine.infra.malloc_tuning)
                release_free_memory()

    return SearchBatcher(search_batch)


def unprocessable(msg: str, *loc: str | int) -> RequestValidationError:
    """A 422 in the same documented shape as pydantic's own validation errors."""
    return RequestValidationError([{"loc": list(loc), "msg": msg, "type": "value_error"}])


async def run_search(batcher: SearchBatcher, queries: list[str], top_k: int, doc_ids: list[str] | None,
                     channels: Sequence[str] | None = None):
    try:
        return await batcher.search(queries, top_k, doc_ids, channels)
    except KeyError as exc:
        raise HTTPException(404, str(exc.args[0]) if exc.args else "not found") from None
    except ValueError as exc:  # e.g. a channel this index does not have
        raise unprocessable(str(exc), "body") from None


def to_hit(hit, options: ServerOptions) -> Hit:
    metadata = dict(hit.metadata)
    if "source_path" in metadata:
        metadata["source_path"] = options.shown(str(metadata["source_path"]))
    return dataclasses.replace(hit, image_url=page_image_url(hit.page_id),
                               image_path=hit.image_path if options.expose_paths else "", metadata=metadata)


@router.post("/search", response_model=SearchResponse, responses=error_responses(400, 404))
async def search(body: SearchRequest, batcher: Batcher, options: Options) -> SearchResponse:
    """Rank pages for 1–64 queries at once; `doc_ids` restricts, `channels` picks the rankers."""
    started = time.perf_counter()
    results = await run_search(batcher, body.queries, body.top_k, body.doc_ids, body.channels)
    return SearchResponse(results=[[to_hit(h, options) for h in hits] for hits in results],
                          took_ms=(time.perf_counter() - started) * 1000)


@router.get("/search", response_model=list[list[UpstreamHit]])
async def search_upstream(
    batcher: Batcher,
    options: Options,
    queries: Annotated[list[QueryText], Query(min_length=1, max_length=MAX_QUERIES)],
    top_k: Annotated[int, Query(ge=1, le=MAX_TOP_K)] = 5,
) -> list[list[UpstreamHit]]:
    """Upstream VRAG's endpoint: `GET /search?queries=a&queries=b` → a list of hits per query."""
    try:
        check_queries(queries)
    except ValueError as exc:
        raise unprocessable(str(exc), "query", "queries") from None
    results = await run_search(batcher, queries, top_k, None)
    return [[UpstreamHit(idx=h.rank - 1, page_id=h.page_id, score=h.score,
                         image_file=h.image_path if options.expose_paths else f"/pages/{h.page_id}/image")
             for h in hits] for hits in results]
