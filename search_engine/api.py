"""The search server: FastAPI over one `SearchEngine`.

Run it with `vrag-search serve --index DIR` (or `python -m search_engine serve --index DIR`): the one command.
`create_app` assembles the app: middleware, error handlers, per-app state, and the routers of
`search_engine.routes` (search, pages, the index, health). Every id from outside is looked up in the
manifest before any file is touched, so no request can read a file outside the index. Whatever a client
sends ends in a documented status with a JSON body (see `search_engine.infra.http_guard`): bodies are
size-limited (413), validation errors never echo the input nor fail to encode (422), API keys are compared
as bytes (401), and the OpenAPI document states every bound, so it can be fuzzed as a contract (tests/fuzz/).

Absolute paths on the server's machine (`image_path`, upstream's `image_file`, `source_path`,
`/stats` `index_dir`) are returned only with `expose_paths=True`: a client on the same machine can
then open page images directly (the agent does, and upstream's trainer reads `image_file`); any
other client fetches `image_url`. `serve` turns it on by default only for loopback binds.
"""

import logging
import os
import sys

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError

from search_engine.engine import SearchEngine
from search_engine.infra.http_guard import (
    AllowHeaderMiddleware,
    BodyLimitMiddleware,
    SafeJSONResponse,
    error_responses,
    validation_error_body,
)
from search_engine.infra.malloc_tuning import bound_heap_growth
from search_engine.routes import health, index, pages, search
from search_engine.routes.common import ServerOptions, check_key
from search_engine.settings import EngineSettings

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 1 << 20  # 64 queries x 2,000 characters of \uXXXX escapes is ~770 KB
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


def create_app(engine: SearchEngine | None = None, index_dir: str | None = None, api_key: str | None = None,
               device: str = "auto", *, expose_paths: bool = False,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, settings: EngineSettings | None = None) -> FastAPI:
    """Build the app around a loaded engine (tests, embedding in other apps) or an index path.

    `expose_paths`: return absolute server paths (only for clients on this machine; see the module doc).
    `max_body_bytes`: larger request bodies get 413 before they are parsed.
    `settings`: the engine's, when it is loaded here from `index_dir` (default: `EngineSettings.from_env()`,
    as the server reads them).
    """
    if engine is None:
        if index_dir is None:
            raise ValueError("give an engine or an index_dir")
        engine = SearchEngine.load(index_dir, device=device, settings=settings or EngineSettings.from_env())
    api_key = api_key if api_key is not None else os.environ.get("VRAG_SEARCH_API_KEY") or None

    app = FastAPI(title="VRAG search engine", version="1.0", default_response_class=SafeJSONResponse,
                  description="Page-image retrieval over an index built by `vrag-search ingest`.")
    app.state.engine = engine
    app.state.options = ServerOptions(api_key=api_key, expose_paths=expose_paths)
    app.state.search_batcher = search.search_batcher(app.state)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    app.add_middleware(AllowHeaderMiddleware)  # a 405's Allow names GET and POST of /search alike
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)

    protected_errors = error_responses(401, 413) if api_key else error_responses(413)
    for routes in (search.router, pages.router, index.router):
        app.include_router(routes, dependencies=[Depends(check_key)], responses=protected_errors)
    app.include_router(health.router)  # open: no API key
    _serve_channels_in_schema(app)
    return app


async def _invalid(request: Request, exc: RequestValidationError):
    return SafeJSONResponse(validation_error_body(exc.errors()), status_code=422)


async def _unexpected(request: Request, exc: Exception):
    log.exception("search request failed")  # the trace goes to the server log, not to the client
    return SafeJSONResponse({"detail": "internal error (see the search server's log)"}, status_code=500)


def _serve_channels_in_schema(app: FastAPI) -> None:
    """The app's OpenAPI document with the channel enum narrowed to what its index has: the schema then
    accepts exactly the channels the server serves (others are 422)."""
    base_openapi = app.openapi

    def openapi() -> dict:
        schema = base_openapi()
        items = schema["components"]["schemas"]["SearchRequest"]["properties"]["channels"]["anyOf"][0]["items"]
        items["enum"] = sorted(app.state.engine.stats()["channels"]) or ["text"]
        return schema

    # Replacing app.openapi is FastAPI's documented way to customise the schema; its class declares a method.
    app.openapi = openapi  # type: ignore[method-assign]


def default_expose_paths(host: str) -> bool:
    """Paths are useful only to clients on the server's own machine: expose them for loopback binds only."""
    return host in LOOPBACK_HOSTS


def serve(index_dir: str, host: str = "127.0.0.1", port: int = 8002, api_key: str | None = None,
          device: str = "auto", log_level: str = "info", expose_paths: bool | None = None,
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, settings: EngineSettings | None = None) -> None:
    """Serve an index; `expose_paths=None` means: only when bound to a loopback address; `settings`: the
    engine's (default: `EngineSettings.from_env()`)."""
    import uvicorn

    bound_heap_growth()  # before the models load: without it RSS ratchets up under load (malloc_tuning)
    if expose_paths is None:
        expose_paths = default_expose_paths(host)
    app = create_app(index_dir=index_dir, api_key=api_key, device=device, expose_paths=expose_paths,
                     max_body_bytes=max_body_bytes, settings=settings)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


if __name__ == "__main__":  # the old second way to start the server, with options of its own that drifted
    sys.exit("python -m search_engine.api is gone: start the server with `vrag-search serve --index DIR` "
             "(or `python -m search_engine serve --index DIR`), the one command with every option")
