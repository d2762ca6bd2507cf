"""Page routes: one page's record (`/pages/{page_id}`), its layout (`/layout`) and its image (`/image`).

Every id is looked up in the manifest before any file is touched, so no request can read a file outside the
index.
"""
import io
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response

from search_engine.api_models import PageInfo
from search_engine.engine import SearchEngine
from search_engine.infra.http_guard import error_responses
from search_engine.page_layout import PageLayout
from search_engine.regions import LayoutUnavailable
from search_engine.routes.common import PAGE_ID, Engine, Options

router = APIRouter()


def known_page(engine: SearchEngine, page_id: str):
    record = engine.page(page_id)
    if record is None:
        raise HTTPException(404, f"unknown page id {page_id!r}")
    return record


@router.get("/pages/{page_id}", response_model=PageInfo, responses=error_responses(404))
async def page_info(engine: Engine, options: Options, page_id: str = PAGE_ID) -> PageInfo:
    r = known_page(engine, page_id)
    return PageInfo(page_id=r.page_id, doc_id=r.doc_id, page_number=r.page_number, width=r.width,
                    height=r.height, source_path=options.shown(r.source_path), text=r.text,
                    text_source=r.text_source, image_url=f"/pages/{r.page_id}/image")


@router.get("/pages/{page_id}/layout", response_model=PageLayout, responses=error_responses(404))
async def page_layout(engine: Engine, options: Options, page_id: str = PAGE_ID) -> PageLayout:
    """The page's regions (paragraphs, headings, tables with cells, figures with their labels and
    captions, running headers/footers), boxes in pixels of the page image; 404 with the reason when
    the page has no stored layout (e.g. an index built before layouts: the message says how to upgrade)."""
    known_page(engine, page_id)
    try:
        return await run_in_threadpool(engine.page_layout, page_id)
    except LayoutUnavailable as exc:  # its upgrade command names the index directory: shown() it (issue 21)
        index_dir = str(engine.index_dir)
        raise HTTPException(404, str(exc).replace(index_dir, options.shown(index_dir))) from None
    except KeyError:
        raise HTTPException(404, f"unknown page id {page_id!r}") from None


@router.get("/pages/{page_id}/image", response_class=Response,
            responses={200: {"content": {"image/jpeg": {"schema": {"type": "string", "format": "binary"}}},
                             "description": "The page image (JPEG), shrunk to `max_side` when given"},
                       **error_responses(404)})
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


def _resized_jpeg(path, max_side: int) -> bytes:
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB")
        image.thumbnail((max_side, max_side))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=88)
        return buffer.getvalue()
