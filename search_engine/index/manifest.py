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
FORMAT_VERSION = 1
CHANNELS = ("visual", "text")


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
            version=data.get("version", FORMAT_VERSION),
            embedders=data.get("embedders", {}),
            documents={k: DocumentEntry(**v) for k, v in data.get("documents", {}).items()},
            pages={k: PageRecord.from_dict(v) for k, v in data.get("pages", {}).items()},
            updated_at=data.get("updated_at", 0.0),
        )

    @staticmethod
    def exists(index_dir: Path) -> bool:
        return (Path(index_dir) / MANIFEST_NAME).exists()
