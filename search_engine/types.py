"""Plain data records shared by the ingestion pipeline, the index, the engine and the API."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

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
    def from_dict(cls, data: dict[str, Any]) -> "PageRecord":
        return cls(**data)


@dataclass
class SearchHit:
    """One ranked page returned by the engine. `image_path` is absolute on the engine's machine."""

    rank: int
    page_id: str
    doc_id: str
    page_number: int
    score: float
    image_path: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
