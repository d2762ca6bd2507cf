"""`GET /health`: whether the server is up and how many pages it serves; the one route open without the API key
(load balancers and the agent's start-up check call it)."""
from fastapi import APIRouter

from search_engine.api_models import Health
from search_engine.infra.http_guard import error_responses
from search_engine.routes.common import Engine

router = APIRouter()


@router.get("/health", response_model=Health, responses=error_responses(413))
async def health(engine: Engine) -> Health:
    return Health(status="ok", pages=engine.stats()["pages"])
