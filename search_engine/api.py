"""The search server: FastAPI over one `SearchEngine`.

Run it with `vrag-search serve --index DIR` (or `python -m search_engine serve --index DIR`): the one command.
Every id from outside is looked up in the manifest before any file is touched, so no request can
read a file outside the index. Whatever a client sends ends in a documented status with a JSON
body (see `search_engine.infra.http_guard`): bodies are size-limited (413), validation errors never echo
the input nor fail to encode (422), API keys are compared as bytes (401), and the OpenAPI document
states every bound, so it can be fuzzed as a contract (tests/fuzz/).

Absolute paths on the server's machine (`image_path`, upstream's `image_file`, `source_path`,
`/stats` `index_dir`) are returned only with `expose_paths=True`: a client on the same machine can
then open page images directly (the agent does, and upstream's trainer reads `image_file`); any
other client fetches `image_url`. `serve` turns it on by default only for loopback binds.
"""

import dataclasses
import io
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, Response

from search_engine.api_models import (
    MAX_QUERIES,
    DocumentInfo,
    Health,
    Hit,
    PageInfo,
    QueryText,
    ReloadResponse,
    SearchRequest,
    SearchResponse,
    Stats,
    UpstreamHit,
    check_queries,
)
from search_engine.engine import MAX_TOP_K, SearchEngine
from search_engine.infra.http_guard import (
    AllowHeaderMiddleware,
    BodyLimitMiddleware,
    SafeJSONResponse,
    error_responses,
    keys_match,
    validation_error_body,
)
from search_engine.infra.malloc_tuning import bound_heap_growth, malloc_tuning_enabled, release_free_memory
from search_engine.page_layout import PageLayout
from search_engine.query_batcher import SearchBatcher
from search_engine.regions import LayoutUnavailable
from search_engine.types import ID_PATTERN, page_image_url

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 1 << 20  # 64 queries x 2,000 characters of \uXXXX escapes is ~770 KB
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
# The documented id alphabet; an id that fits it but is not in the manifest is a 404.
PAGE_ID = PathParam(..., min_length=1, max_length=200, pattern=ID_PATTERN.pattern)


def _unprocessable(msg: str, *loc: str | int) -> RequestValidationError:
    """A 422 in the same documented shape as pydantic's own validation errors."""
    return RequestValidationError([{"loc": list(loc), "msg": msg, "type": "value_error"}])


def create_app(engine: SearchEngine | None = None, index_dir: str | None = None, api_key: str | None = None,
               device: str = "auto", *, expose_paths: bool = False,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """Build the app around a loaded engine (tests, embedding in other apps) or an index path.

    `expose_paths`: return absolute server paths (only for clients on this machine; see the module doc).
    `max_body_bytes`: larger request bodies get 413 before they are parsed.
    """
    if engine is None:
        if index_dir is None:
            raise ValueError("give an engine or an index_dir")
        engine = SearchEngine.load(index_dir, device=device)
    api_key = api_key if api_key is not None else os.environ.get("VRAG_SEARCH_API_KEY") or None
    protected_errors = error_responses(401, 413) if api_key else error_responses(413)

    app = FastAPI(title="VRAG search engine", version="1.0", default_response_class=SafeJSONResponse,
                  description="Page-image retrieval over an index built by `vrag-search ingest`.")
    app.state.engine = engine
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    app.add_middleware(AllowHeaderMiddleware)  # a 405's Allow names GET and POST of /search alike

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        return SafeJSONResponse(validation_error_body(exc.errors()), status_code=422)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        log.exception("search request failed")  # the trace goes to the server log, not to the client
        return SafeJSONResponse({"detail": "internal error (see the search server's log)"}, status_code=500)

    def get_engine() -> SearchEngine:
        return app.state.engine

    def check_key(x_api_key: Annotated[str | None, Header()] = None,
                  authorization: Annotated[str | None, Header()] = None) -> None:
        if api_key is None:
            return
        given = x_api_key or (authorization[7:] if authorization and authorization.lower().startswith("bearer ")
                              else None)
        if not keys_match(given, api_key):
            raise HTTPException(401, "missing or wrong API key (X-API-Key header or Authorization: Bearer)")

    Engine = Annotated[SearchEngine, Depends(get_engine)]
    protected = [Depends(check_key)]

    def shown(path: str) -> str:
        """An absolute server path as clients may see it: whole with expose_paths, else its last part."""
        return path if expose_paths or not path else Path(path).name

    def to_hit(hit) -> Hit:
        metadata = dict(hit.metadata)
        if "source_path" in metadata:
            metadata["source_path"] = shown(str(metadata["source_path"]))
        return dataclasses.replace(hit, image_url=page_image_url(hit.page_id),
                                   image_path=hit.image_path if expose_paths else "", metadata=metadata)

    trim_heap = malloc_tuning_enabled()

    def search_batch(queries, top_k, doc_ids, channels):
        try:
            return app.state.engine.batch_search(queries, top_k, doc_ids, channels)
        finally:
            if trim_heap:  # the batch's freed activations go back to the system (search_engine.infra.malloc_tuning)
                release_free_memory()

    # concurrent requests share encoder forwards (see search_engine.query_batcher)
    batcher = SearchBatcher(search_batch)
    app.state.search_batcher = batcher

    async def run_search(queries: list[str], top_k: int, doc_ids: list[str] | None,
                         channels: Sequence[str] | None = None):
        try:
            return await batcher.search(queries, top_k, doc_ids, channels)
        except KeyError as exc:
            raise HTTPException(404, str(exc.args[0]) if exc.args else "not found") from None
        except ValueError as exc:  # e.g. a channel this index does not have
            raise _unprocessable(str(exc), "body") from None

    @app.post("/search", response_model=SearchResponse, dependencies=protected,
              responses={**protected_errors, **error_responses(400, 404)})
    async def search(body: SearchRequest) -> SearchResponse:
        """Rank pages for 1–64 queries at once; `doc_ids` restricts, `channels` picks the rankers."""
        started = time.perf_counter()
        results = await run_search(body.queries, body.top_k, body.doc_ids, body.channels)
        return SearchResponse(results=[[to_hit(h) for h in hits] for hits in results],
                              took_ms=(time.perf_counter() - started) * 1000)

    @app.get("/search", response_model=list[list[UpstreamHit]], dependencies=protected, responses=protected_errors)
    async def search_upstream(
        queries: Annotated[list[QueryText], Query(min_length=1, max_length=MAX_QUERIES)],
        top_k: Annotated[int, Query(ge=1, le=MAX_TOP_K)] = 5,
    ) -> list[list[UpstreamHit]]:
        """Upstream VRAG's endpoint: `GET /search?queries=a&queries=b` → a list of hits per query."""
        try:
            check_queries(queries)
        except ValueError as exc:
            raise _unprocessable(str(exc), "query", "queries") from None
        results = await run_search(queries, top_k, None)
        return [[UpstreamHit(idx=h.rank - 1, page_id=h.page_id, score=h.score,
                             image_file=h.image_path if expose_paths else f"/pages/{h.page_id}/image")
                 for h in hits] for hits in results]

    def known_page(engine: SearchEngine, page_id: str):
        record = engine.page(page_id)
        if record is None:
            raise HTTPException(404, f"unknown page id {page_id!r}")
        return record

    @app.get("/pages/{page_id}", response_model=PageInfo, dependencies=protected,
             responses={**protected_errors, **error_responses(404)})
    async def page_info(engine: Engine, page_id: str = PAGE_ID) -> PageInfo:
        r = known_page(engine, page_id)
        return PageInfo(page_id=r.page_id, doc_id=r.doc_id, page_number=r.page_number, width=r.width,
                        height=r.height, source_path=shown(r.source_path), text=r.text, text_source=r.text_source,
                        image_url=f"/pages/{r.page_id}/image")

    @app.get("/pages/{page_id}/layout", response_model=PageLayout, dependencies=protected,
             responses={**protected_errors, **error_responses(404)})
    async def page_layout(engine: Engine, page_id: str = PAGE_ID) -> PageLayout:
        """The page's regions (paragraphs, headings, tables with cells, figures with their labels and
        captions, running headers/footers), boxes in pixels of the page image; 404 with the reason when
        the page has no stored layout (e.g. an index built before layouts: the message says how to upgrade)."""
        known_page(engine, page_id)
        try:
            return await run_in_threadpool(engine.page_layout, page_id)
        except LayoutUnavailable as exc:  # its upgrade command names the index directory: shown() it (issue 21)
            raise HTTPException(404, str(exc).replace(str(engine.index_dir), shown(str(engine.index_dir)))) from None
        except KeyError:
            raise HTTPException(404, f"unknown page id {page_id!r}") from None

    @app.get("/pages/{page_id}/image", dependencies=protected, response_class=Response,
             responses={200: {"content": {"image/jpeg": {"schema": {"type": "string", "format": "binary"}}},
                              "description": "The page image (JPEG), shrunk to `max_side` when given"},
                        **protected_errors, **error_responses(404)})
    async def page_image(engine: Engine, page_id: str = PAGE_ID,
                         max_side: Annotated[int | None, Query(ge=16, le=8192)] = None):
        known_page(engine, page_id)
        try:
            path = engine.page_image_path(page_id)
        except (KeyError, PermissionError):
            raise HTTPException(404, f"unknown page id {page_id!r}") from None
        if not path.is_file():
            raise HTTPException(404, f"image of page {page_id!r} is missing from the index")
        if max_side is None:
            return FileResponse(path, media_type="image/jpeg")
        return Response(await run_in_threadpool(_resized_jpeg, path, max_side), media_type="image/jpeg")

    @app.get("/documents", response_model=list[DocumentInfo], dependencies=protected, responses=protected_errors)
    async def documents(engine: Engine) -> list[DocumentInfo]:
        return [DocumentInfo(**{**d, "source_path": shown(d["source_path"])}) for d in engine.documents()]

    @app.get("/health", response_model=Health, responses=error_responses(413))
    async def health(engine: Engine) -> Health:
        return Health(status="ok", pages=engine.stats()["pages"])

    @app.get("/stats", response_model=Stats, dependencies=protected, responses=protected_errors)
    async def stats(engine: Engine) -> Stats:
        data = engine.stats()
        return Stats(**{**data, "index_dir": shown(data["index_dir"])}, search_requests=batcher.requests,
                     search_batches=batcher.batches)

    @app.post("/reload", response_model=ReloadResponse, dependencies=protected, responses=protected_errors)
    async def reload(engine: Engine) -> ReloadResponse:
        changed = await run_in_threadpool(engine.reload)
        return ReloadResponse(changed=changed, pages=engine.stats()["pages"])

    base_openapi = app.openapi

    def openapi() -> dict:
        """The generated document, with the channel enum narrowed to what this index has: the schema then
        accepts exactly the channels the server serves (others are 422)."""
        schema = base_openapi()
        items = schema["components"]["schemas"]["SearchRequest"]["properties"]["channels"]["anyOf"][0]["items"]
        items["enum"] = sorted(app.state.engine.stats()["channels"]) or ["text"]
        return schema

    # Replacing app.openapi is FastAPI's documented way to customise the schema; its class declares a method.
    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _resized_jpeg(path, max_side: int) -> bytes:
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB")
        image.thumbnail((max_side, max_side))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=88)
        return buffer.getvalue()


def default_expose_paths(host: str) -> bool:
    """Paths are useful only to clients on the server's own machine: expose them for loopback binds only."""
    return host in LOOPBACK_HOSTS


def serve(index_dir: str, host: str = "127.0.0.1", port: int = 8002, api_key: str | None = None,
          device: str = "auto", log_level: str = "info", expose_paths: bool | None = None,
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    """Serve an index; `expose_paths=None` means: only when bound to a loopback address."""
    import uvicorn

    bound_heap_growth()  # before the models load: without it RSS ratchets up under load (malloc_tuning)
    if expose_paths is None:
        expose_paths = default_expose_paths(host)
    app = create_app(index_dir=index_dir, api_key=api_key, device=device, expose_paths=expose_paths,
                     max_body_bytes=max_body_bytes)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


if __name__ == "__main__":  # the old second way to start the server, with options of its own that drifted
    sys.exit("python -m search_engine.api is gone: start the server with `vrag-search serve --index DIR` "
             "(or `python -m search_engine serve --index DIR`), the one command with every option")
