"""Request and response bodies of the search API; pydantic enforces the bounds before any model runs.

Every bound is expressed as a JSON-schema constraint (strict types, lengths, patterns), so the
OpenAPI document is the contract: what it accepts the server serves, what it rejects gets 422.
Integer fields take integral floats (`top_k: 5.0`) because JSON Schema's `integer` does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from search_engine.engine import MAX_QUERY_CHARS, MAX_TOP_K
from search_engine.infra.http_guard import has_lone_surrogate, whole_number
from search_engine.types import ID_PATTERN, SearchHit

MAX_QUERIES = 64
MAX_DOC_IDS = 1000
# At least one character that Python's str.strip() keeps (the engine strips queries): spelled out
# because regex engines disagree on what \s covers (Python counts \x1c-\x1f, ECMA-262 does not).
NOT_BLANK = (r"[^\u0009-\u000d\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f"
             r"\u205f\u3000]")
QueryText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS, pattern=NOT_BLANK)]
DocId = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=ID_PATTERN.pattern)]
if TYPE_CHECKING:  # a type built by a call is opaque to mypy; to it a top_k is an int, which is what it holds
    TopK = int
else:
    TopK = whole_number(ge=1, le=MAX_TOP_K)


def check_queries(queries: list[str]) -> list[str]:
    """What a JSON schema cannot say: no lone surrogates (they cannot be encoded for the tokenizer)."""
    for i, query in enumerate(queries):
        if has_lone_surrogate(query):
            raise ValueError(f"query {i} is not valid Unicode (lone surrogate)")
    return queries


class SearchRequest(BaseModel):
    model_config = ConfigDict(strict=True)

    queries: list[QueryText] = Field(..., min_length=1, max_length=MAX_QUERIES,
                                 description=f"1 to {MAX_QUERIES} queries, each 1 to {MAX_QUERY_CHARS} characters "
                                             "with at least one that is not whitespace")
    top_k: TopK = Field(5, description="integral floats such as 5.0 count as "
                                                                    "integers, as in JSON Schema")
    doc_ids: list[DocId] | None = Field(None, max_length=MAX_DOC_IDS,
                                        description="restrict the search to these documents (404 if none is known)")
    channels: list[Literal["visual", "text", "bm25"]] | None = Field(
        None, max_length=3, description="rank with these channels only (default: every channel of the index, fused; "
                                        "422 for a channel this index does not have)")

    @field_validator("queries")
    @classmethod
    def _valid_unicode(cls, queries: list[str]) -> list[str]:
        return check_queries(queries)


# The one hit type (search_engine.types.SearchHit) is the response model too; `Hit` is its old name here.
# In responses `image_path` is "" unless the server runs with --expose-paths (clients fetch `image_url`).
Hit = SearchHit


class SearchResponse(BaseModel):
    results: list[list[Hit]]
    took_ms: float


class UpstreamHit(BaseModel):
    """One hit in upstream VRAG's GET /search shape (its demo and trainer read `image_file`)."""

    idx: int
    image_file: str = Field(description="the page image's path on the server (with --expose-paths), "
                                        "else its URL path on this server")
    page_id: str
    score: float


class PageInfo(BaseModel):
    page_id: str
    doc_id: str
    page_number: int
    width: int
    height: int
    source_path: str = Field(description="the source file: absolute path with --expose-paths, else its name")
    text: str
    text_source: str
    image_url: str


class DocumentInfo(BaseModel):
    doc_id: str
    source_path: str = Field(description="the source file: absolute path with --expose-paths, else its name")
    num_pages: int
    kind: str
    added_at: float


class Health(BaseModel):
    status: str
    pages: int
    degraded_pages: int = Field(0, description="pages a step of ingestion failed on (kept with what the other "
                                               "steps gave, or not indexed when they could not be rendered); "
                                               "`vrag-search report --index DIR` lists them")


class Stats(BaseModel):
    index_dir: str = Field(description='absolute path with --expose-paths, else the directory name')
    documents: int
    pages: int
    channels: list[str]
    embedders: dict[str, Any]
    updated_at: float
    visual_backend: str = Field("", description='what serves the visual channel: "exact", "fast", "qdrant", '
                                '"dense" (single-vector) or "" (no visual channel)')
    search_requests: int = Field(0, description="search requests answered since the server started")
    search_batches: int = Field(0, description="engine calls they took: concurrent requests are merged into one")
    degraded_pages: int = Field(0, description="pages a step of ingestion failed on (see /health)")


class ReloadResponse(BaseModel):
    changed: bool
    pages: int
