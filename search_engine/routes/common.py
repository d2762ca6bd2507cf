"""What every route of the search server shares: the engine it serves, its query batcher, the API key check,
how absolute server paths are shown to clients, and the documented page id.

Per-app options live in `app.state` (set by `search_engine.api.create_app`): the routers are module-level
objects, so two apps in one process (tests, a server embedding another) each answer with their own.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request
from fastapi import Path as PathParam

from search_engine.engine import SearchEngine
from search_engine.infra.http_guard import keys_match
from search_engine.query_batcher import SearchBatcher
from search_engine.types import ID_PATTERN

# The documented id alphabet; an id that fits it but is not in the manifest is a 404.
PAGE_ID = PathParam(..., min_length=1, max_length=200, pattern=ID_PATTERN.pattern)


@dataclass(frozen=True)
class ServerOptions:
    """One app's options (`app.state.options`): its API key (None: open) and whether absolute server paths are
    returned whole (`expose_paths`; see `search_engine.api`)."""

    api_key: str | None = None
    expose_paths: bool = False

    def shown(self, path: str) -> str:
        """An absolute server path as clients may see it: whole with expose_paths, else its last part."""
        return path if self.expose_paths or not path else Path(path).name


def get_engine(request: Request) -> SearchEngine:
    return request.app.state.engine


def get_options(request: Request) -> ServerOptions:
    return request.app.state.options


def get_batcher(request: Request) -> SearchBatcher:
    """The app's query batcher (`routes.search.search_batcher`): searches and their counts in /stats."""
    return request.app.state.search_batcher


Engine = Annotated[SearchEngine, Depends(get_engine)]
Options = Annotated[ServerOptions, Depends(get_options)]
Batcher = Annotated[SearchBatcher, Depends(get_batcher)]


def check_key(request: Request, x_api_key: Annotated[str | None, Header()] = None,
              authorization: Annotated[str | None, Header()] = None) -> None:
    """401 unless the request carries the app's API key (X-API-Key, or Authorization: Bearer); apps
    without a key let every request through."""
    api_key = get_options(request).api_key
    if api_key is None:
        return
    given = x_api_key or (authorization[7:] if authorization and authorization.lower().startswith("bearer ")
                          else None)
    if not keys_match(given, api_key):
        raise HTTPException(401, "missing or wrong API key (X-API-Key header or Authorization: Bearer)")
