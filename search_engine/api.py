"""The search server: FastAPI over one `SearchEngine`.

Run it with `vrag-search serve --index DIR` or `python -m search_engine.api --index DIR`.
Every id from outside is checked against the id alphabet and looked up in the manifest before
any file is touched, so no request can read a file outside the index.
"""

import argparse
import io
import os
import secrets
import time
from typing import Annotated

from fastapi import Depends, FastAPI, Header, HTTPException, Path as PathParam, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response

from search_engine.api_models import (
    MAX_QUERIES, DocumentInfo, Health, Hit, PageInfo, ReloadResponse, SearchRequest, SearchResponse, UpstreamHit,
)
from search_engine.engine import MAX_QUERY_CHARS, MAX_TOP_K, SearchEngine
from search_engine.types import is_valid_id

PAGE_ID = PathParam(..., min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def create_app(engine: SearchEngine | None = None, index_dir: str | None = None, api_key: str | None = None,
               device: str = "auto") -> FastAPI:
    """Build the app around a loaded engine (tests, embedding in other apps) or an index path."""
    if engine is None:
        if index_dir is None:
            raise ValueError("give an engine or an index_dir")
        engine = SearchEngine.load(index_dir, device=device)
    api_key = api_key if api_key is not None else os.environ.get("VRAG_SEARCH_API_KEY") or None

    app = FastAPI(title="VRAG search engine", version="1.0",
                  description="Page-image retrieval over an index built by `vrag-search ingest`.")
    app.state.engine = engine

    def get_engine() -> SearchEngine:
        return app.state.engine

    def check_key(x_api_key: Annotated[str | None, Header()] = None,
                  authorization: Annotated[str | None, Header()] = None) -> None:
        if api_key is None:
            return
        given = x_api_key or (authorization[7:] if authorization and authorization.lower().startswith("bearer ")
                              else None)
        if not given or not secrets.compare_digest(given, api_key):
            raise HTTPException(401, "missing or wrong API key (X-API-Key header or Authorization: Bearer)")

    Engine = Annotated[SearchEngine, Depends(get_engine)]
    protected = [Depends(check_key)]

    def to_hit(hit) -> Hit:
        return Hit(rank=hit.rank, page_id=hit.page_id, doc_id=hit.doc_id, page_number=hit.page_number,
                   score=hit.score, image_url=f"/pages/{hit.page_id}/image", image_path=hit.image_path,
                   metadata=hit.metadata)

    async def run_search(engine: SearchEngine, queries: list[str], top_k: int, doc_ids: list[str] | None,
                         channels: list[str] | None = None):
        try:
            return await run_in_threadpool(engine.batch_search, queries, top_k, doc_ids, channels)
        except KeyError as exc:
            raise HTTPException(404, str(exc.args[0]) if exc.args else "not found") from None
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None

    @app.post("/search", response_model=SearchResponse, dependencies=protected)
    async def search(body: SearchRequest, engine: Engine) -> SearchResponse:
        started = time.perf_counter()
        results = await run_search(engine, body.queries, body.top_k, body.doc_ids, body.channels)
        return SearchResponse(results=[[to_hit(h) for h in hits] for hits in results],
                              took_ms=(time.perf_counter() - started) * 1000)

    @app.get("/search", response_model=list[list[UpstreamHit]], dependencies=protected)
    async def search_upstream(
        engine: Engine,
        queries: Annotated[list[str], Query(min_length=1, max_length=MAX_QUERIES)],
        top_k: Annotated[int, Query(ge=1, le=MAX_TOP_K)] = 5,
    ) -> list[list[UpstreamHit]]:
        """Upstream VRAG's endpoint: `GET /search?queries=a&queries=b` → a list of hits per query."""
        try:
            SearchRequest(queries=queries, top_k=top_k)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        results = await run_search(engine, queries, top_k, None)
        return [[UpstreamHit(idx=h.rank - 1, image_file=h.image_path, page_id=h.page_id, score=h.score)
                 for h in hits] for hits in results]

    def known_page(engine: SearchEngine, page_id: str):
        if not is_valid_id(page_id):
            raise HTTPException(422, "invalid page id")
        record = engine.page(page_id)
        if record is None:
            raise HTTPException(404, f"unknown page id {page_id!r}")
        return record

    @app.get("/pages/{page_id}", response_model=PageInfo, dependencies=protected)
    async def page_info(engine: Engine, page_id: str = PAGE_ID) -> PageInfo:
        r = known_page(engine, page_id)
        return PageInfo(page_id=r.page_id, doc_id=r.doc_id, page_number=r.page_number, width=r.width,
                        height=r.height, source_path=r.source_path, text=r.text, text_source=r.text_source,
                        image_url=f"/pages/{r.page_id}/image")

    @app.get("/pages/{page_id}/image", dependencies=protected,
             responses={200: {"content": {"image/jpeg": {}}}})
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

    @app.get("/documents", response_model=list[DocumentInfo], dependencies=protected)
    async def documents(engine: Engine) -> list[DocumentInfo]:
        return [DocumentInfo(**d) for d in engine.documents()]

    @app.get("/health", response_model=Health)
    async def health(engine: Engine) -> Health:
        return Health(status="ok", pages=engine.stats()["pages"])

    @app.get("/stats", dependencies=protected)
    async def stats(engine: Engine) -> dict:
        return engine.stats()

    @app.post("/reload", response_model=ReloadResponse, dependencies=protected)
    async def reload(engine: Engine) -> ReloadResponse:
        changed = await run_in_threadpool(engine.reload)
        return ReloadResponse(changed=changed, pages=engine.stats()["pages"])

    return app


def _resized_jpeg(path, max_side: int) -> bytes:
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB")
        image.thumbnail((max_side, max_side))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=88)
        return buffer.getvalue()


def serve(index_dir: str, host: str = "127.0.0.1", port: int = 8002, api_key: str | None = None,
          device: str = "auto", log_level: str = "info") -> None:
    import uvicorn

    app = create_app(index_dir=index_dir, api_key=api_key, device=device)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a VRAG search index over HTTP")
    parser.add_argument("--index", required=True, help="index directory built by `vrag-search ingest`")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8002)
    parser.add_argument("--api-key", default=None, help="require this key (or env VRAG_SEARCH_API_KEY)")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    serve(args.index, args.host, args.port, args.api_key, args.device)


if __name__ == "__main__":
    main()
