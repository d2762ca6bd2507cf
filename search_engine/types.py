"""Plain data records shared by the ingestion pipeline, the index, the engine and the API."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from search_engine.page_layout import RegionHit

# Page and document ids appear in URLs and file names: keep them to a safe alphabet so an id
# can never smuggle a path separator or "..".
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def is_valid_id(value: str) -> bool:
    return bool(ID_PATTERN.match(value)) and ".." not in value


def make_page_id(doc_id: str, page_number: int) -> str:
    """Upstream's naming contract `{pdf_stem}_{page}` (1-based) so NDCG rewards and datasets match."""
    return f"{doc_id}_{page_number}"


@dataclass
class PageRecord:
    """One page of the corpus: where its image lives and what we know about it."""

    page_id: str
    doc_id: str
    page_number: int  # 1-based, as in upstream datasets' reference_page
    image_path: str  # relative to the index's root directory
    width: int
    height: int
    source_path: str = ""
    text: str = ""  # text layer or OCR; empty when unknown
    text_source: str = ""  # "pdf", "ocr" or ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PageRecord:
        return cls(**data)


@dataclass
class SearchHit:
    """One ranked page (or video segment): the single hit type of the engine, the HTTP API and the client.

    `SearchEngine.search` returns it with `image_path` absolute on the engine's machine and
    `image_url` the path of the image on a search server (`/pages/{page_id}/image`); the API returns
    it as JSON with `image_path` "" unless the server exposes paths; `SearchClient.search` returns it
    with `image_url` absolute. `kind` is "page" or "video_segment" (then `start_s`/`end_s` are the
    segment's times in seconds of the video, and its frames are in `metadata`).
    `regions` are the page's regions that best match the query (paragraph, table, figure...; box in
    page-image pixels, snippet, score), best first; empty where the index has no layout for the page
    or no region matched (see `SearchEngine.page_layout` for the whole structure).
    `image_path` is for opening the file on the machine that has it (the agent reads pages from it when
    it is a file here); it stays out of the repr, and results shown to users name the image by `image_ref`.
    """

    rank: int
    page_id: str
    doc_id: str
    page_number: int
    score: float
    image_path: str = field(repr=False)  # an absolute path on the engine's machine (or ""): not for display
    metadata: dict[str, Any] = field(default_factory=dict)
    image_url: str = ""
    kind: Literal["page", "video_segment"] = "page"
    start_s: float | None = None
    end_s: float | None = None
    regions: list[RegionHit] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)

    @property
    def image_ref(self) -> str:
        """The hit's image as results shown to users name it: the search server's URL for it, else the page
        id — never `image_path`, whose absolute path means something only on the machine that has the file."""
        return self.image_url or self.page_id

    @staticmethod
    def item_fields(metadata: dict[str, Any]) -> dict[str, Any]:
        """`kind`, `start_s`, `end_s` of a hit from its record's metadata (set by video ingestion)."""
        if metadata.get("kind") != "video_segment":
            return {}
        return {"kind": "video_segment", "start_s": metadata.get("start_s"), "end_s": metadata.get("end_s")}


def page_image_url(page_id: str) -> str:
    """Where a search server serves a page's image (relative to the server's base URL)."""
    return f"/pages/{page_id}/image"
