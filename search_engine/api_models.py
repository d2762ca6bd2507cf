"""Request and response bodies of the search API; pydantic enforces the bounds before any model runs."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from search_engine.engine import MAX_QUERY_CHARS, MAX_TOP_K
from search_engine.types import is_valid_id

MAX_QUERIES = 64


class SearchRequest(BaseModel):
    queries: list[str] = Field(..., min_length=1, max_length=MAX_QUERIES,
                               description=f"1 to {MAX_QUERIES} queries, each 1 to {MAX_QUERY_CHARS} characters")
    top_k: int = Field(5, ge=1, le=MAX_TOP_K)
    doc_ids: list[str] | None = Field(None, max_length=1000, description="restrict the search to these documents")
    channels: list[Literal["visual", "text", "bm25"]] | None = Field(
        None, description="rank with these channels only (default: every channel of the index, fused)")

    @field_validator("queries")
    @classmethod
    def _queries_in_bounds(cls, queries: list[str]) -> list[str]:
        for i, query in enumerate(queries):
            if not query.strip():
                raise ValueError(f"query {i} is empty")
            if len(query) > MAX_QUERY_CHARS:
                raise ValueError(f"query {i} is longer than {MAX_QUERY_CHARS} characters")
        return queries

    @field_validator("doc_ids")
    @classmethod
    def _ids_are_safe(cls, doc_ids: list[str] | None) -> list[str] | None:
        for doc_id in doc_ids or []:
            if not is_valid_id(doc_id):
                raise ValueError(f"invalid document id {doc_id!r}")
        return doc_ids


class Hit(BaseModel):
    rank: int
    page_id: str
    doc_id: str
    page_number: int
    score: float
    image_url: str
    image_path: str
    metadata: dict[str, Any]


class SearchResponse(BaseModel):
    results: list[list[Hit]]
    took_ms: float


class UpstreamHit(BaseModel):
    """One hit in upstream VRAG's GET /search shape (its demo and trainer read `image_file`)."""

    idx: int
    image_file: str
    page_id: str
    score: float


class PageInfo(BaseModel):
    page_id: str
    doc_id: str
    page_number: int
    width: int
    height: int
    source_path: str
    text: str
    text_source: str
    image_url: str


class DocumentInfo(BaseModel):
    doc_id: str
    source_path: str
    num_pages: int
    kind: str
    added_at: float


class Health(BaseModel):
    status: str
    pages: int


class ReloadResponse(BaseModel):
    changed: bool
    pages: int
