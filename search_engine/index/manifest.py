"""manifest.json: the single source of truth of what an index holds.

A document is listed only after its pages and embedding segments are on disk, and the manifest
is replaced atomically, so whatever moment an ingestion dies at, the index on disk is valid and
names only complete documents.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from search_engine.embedders.base import EmbedderSpec
from search_engine.index.atomic import atomic_write_json
from search_engine.types import PageRecord

MANIFEST_NAME = "manifest.json"
# 2: every document has a page-layout segment (`segments["layout"]`, see search_engine.page_layout) and, with
# a text channel, region vectors (`segments["text_regions"]`). An index of format 1 still opens (page-level
# search, no regions) and is upgraded in place by `vrag-search upgrade` (`Ingestor.upgrade`).
FORMAT_VERSION = 2
FIRST_LAYOUT_VERSION = 2
CHANNELS = ("visual", "text")


def upgrade_message(index_dir: Path | str) -> str:
    """What an index of format 1 tells its user: what it lacks and the one command that fixes it."""
    return (f"the index at {index_dir} was built before page layouts (index format 1): search works page by page, "
            "without regions or page layouts. Upgrade it in place with `vrag-search upgrade --index "
            f"{index_dir}` (reads each document's structure from its source file, or by OCR of the stored page "
            "images when the source is gone; an interrupted upgrade leaves a valid index and resumes), or "
            "re-ingest the documents into a new index")


@dataclass
class DocumentEntry:
    doc_id: str
    source_path: str
    sha1: str
    num_pages: int
    kind: str  # "pdf" or "image"
    page_ids: list[str]
    # channel -> segment file (relative to the index root) and per-page token counts
    segments: dict[str, dict[str, Any]] = field(default_factory=dict)
    added_at: float = field(default_factory=time.time)


@dataclass
class Manifest:
    version: int = FORMAT_VERSION
    embedders: dict[str, dict[str, Any]] = field(default_factory=dict)  # channel -> EmbedderSpec fields
    documents: dict[str, DocumentEntry] = field(default_factory=dict)
    pages: dict[str, PageRecord] = field(default_factory=dict)
    updated_at: float = 0.0

    # ---- embedders -------------------------------------------------------------------------
    def spec(self, channel: str) -> EmbedderSpec | None:
        data = self.embedders.get(channel)
        return EmbedderSpec(**data) if data else None

    def set_spec(self, channel: str, spec: EmbedderSpec) -> None:
        self.embedders[channel] = asdict(spec)

    # ---- documents ---------------------------------------------------------------------------
    def doc_for_source(self, source_path: str) -> DocumentEntry | None:
        for entry in self.documents.values():
            if entry.source_path == source_path:
                return entry
        return None

    def add_document(self, entry: DocumentEntry, pages: list[PageRecord]) -> None:
        self.documents[entry.doc_id] = entry
        for page in pages:
            self.pages[page.page_id] = page

    def remove_document(self, doc_id: str) -> DocumentEntry | None:
        entry = self.documents.pop(doc_id, None)
        if entry:
            for page_id in entry.page_ids:
                self.pages.pop(page_id, None)
        return entry

    # ---- persistence ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "updated_at": self.updated_at,
            "embedders": self.embedders,
            "documents": {k: asdict(v) for k, v in self.documents.items()},
            "pages": {k: v.to_dict() for k, v in self.pages.items()},
        }

    def save(self, index_dir: Path) -> None:
        self.updated_at = time.time()
        atomic_write_json(Path(index_dir) / MANIFEST_NAME, self.to_json())

    @classmethod
    def load(cls, index_dir: Path) -> Manifest:
        path = Path(index_dir) / MANIFEST_NAME
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise RuntimeError(f"{path} is not valid JSON ({exc}); the index is damaged") from exc
        if data.get("version", 0) > FORMAT_VERSION:
            raise RuntimeError(f"{path} was written by a newer version (format {data['version']})")
        return cls(
            version=data.get("version", 1),
            embedders=data.get("embedders", {}),
            documents={k: DocumentEntry(**v) for k, v in data.get("documents", {}).items()},
            pages={k: PageRecord.from_dict(v) for k, v in data.get("pages", {}).items()},
            updated_at=data.get("updated_at", 0.0),
        )

    @property
    def has_layouts(self) -> bool:
        """Whether every document carries its page layouts (format 2 and later)."""
        return self.version >= FIRST_LAYOUT_VERSION

    @staticmethod
    def exists(index_dir: Path) -> bool:
        return (Path(index_dir) / MANIFEST_NAME).exists()
