"""`GET /health`: whether the server is up, how many pages it serves and how many of them ingestion degraded; the
one route open without the API key (load balancers and the agent's start-up check call it)."""
from fastapi import APIRouter

from search_engine.api_models import Health
from search_engine.infra.http_guard import error_responses
from search_engine.routes.common import Engine

router = APIRouter()


@router.get("/health", response_model=Health, responses=error_responses(413))
async def health(engine: Engine) -> Health:
    stats = engine.stats()
    return Health(status="ok", pages=stats["pages"], degraded_pages=stats.get("degraded_pages", 0))
