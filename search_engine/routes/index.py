"""Routes about the index as a whole: its documents (`/documents`), its stats (`/stats`) and `POST /reload`,
which picks up documents another process ingested."""
from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from search_engine.api_models import DocumentInfo, ReloadResponse, Stats
from search_engine.routes.common import Batcher, Engine, Options

router = APIRouter()


@router.get("/documents", response_model=list[DocumentInfo])
async def documents(engine: Engine, options: Options) -> list[DocumentInfo]:
    return [DocumentInfo(**{**d, "source_path": options.shown(d["source_path"])}) for d in engine.documents()]


@router.get("/stats", response_model=Stats)
async def stats(engine: Engine, options: Options, batcher: Batcher) -> Stats:
    data = engine.stats()
    return Stats(**{**data, "index_dir": options.shown(data["index_dir"])}, search_requests=batcher.requests,
                 search_batches=batcher.batches)


@router.post("/reload", response_model=ReloadResponse)
async def reload(engine: Engine) -> ReloadResponse:
    changed = await run_in_threadpool(engine.reload)
    return ReloadResponse(changed=changed, pages=engine.stats()["pages"])
