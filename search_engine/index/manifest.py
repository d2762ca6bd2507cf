"""manifest.json: the single source of truth of what an index holds.

A document is listed only after its pages and embedding segments are on disk, and the manifest
is replaced atomically, so whatever moment an ingestion dies at, the index on disk is valid and
names only complete documents.

It also records what ingestion could not do, so a page that came out degraded is never silent:
`degraded` (doc id -> `DegradedPage` records: a page step that failed, the page kept with what succeeded, or
left out when it could not be rendered) switches atomically with its document's entry, and is replaced or
dropped with it; `skipped` (source path -> why) names the documents that are not in the index at all, until one
is ingested. Both are plain top-level keys that older readers ignore. `vrag-search report` lists them, `/health`
counts them.
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


# The per-page steps of ingestion, in the order they run; a `DegradedPage` names the one that failed.
PAGE_STEPS = ("render", "text_layer", "ocr", "layout", "tables", "figures", "figure_ocr", "embed_visual",
              "embed_text")
# What a page lost where the record is a judgement, not a failure (the error names the judgement)
_CONSEQUENCE_OF_ERROR = {
    "UnusableTextLayer": "text layer set aside (garbled, or not what the page shows): page read by OCR where OCR is "
                         "on and reads something, else its layer is kept",
    "MissingLanguagePack": "page read by OCR with the installed language packs, not those of its script",
}
NOT_INDEXED = "page not indexed: it could not be rendered, and a page without an image cannot be searched or shown"


@dataclass
class DegradedPage:
    """One page step that failed during ingestion (`PAGE_STEPS`): the page was kept with what the other steps
    gave (`indexed`), or, when it could not be rendered, left out of the index (`indexed=False`)."""

    doc_id: str
    page: int  # 1-based page number (a video: segment number)
    step: str  # one of PAGE_STEPS
    error: str  # the exception's type, e.g. "ValueError"
    message: str
    indexed: bool = True
    source: str = ""  # the source file's name

    @property
    def reason(self) -> str:
        """What failed, in one line: the error type and its message."""
        return f"{self.error}: {self.message}" if self.message else self.error

    @property
    def consequence(self) -> str:
        """What the failure cost the page."""
        if not self.indexed:
            return NOT_INDEXED
        if self.error in _CONSEQUENCE_OF_ERROR:
            return _CONSEQUENCE_OF_ERROR[self.error]
        return {"render": "page kept", "text_layer": "page read by OCR where OCR is on, else without its text",
                "ocr": "page kept without its OCR text", "layout": "page kept without its regions",
                "tables": "page kept without its tables", "figures": "page kept without its figures",
                "figure_ocr": "page kept without the words of its pictures",
                "embed_visual": "page kept, not found by the visual channel",
                "embed_text": "page kept, not found by the text embedder (BM25 still reads it)"}.get(self.step,
                                                                                                  "page kept")

    @classmethod
    def of(cls, doc_id: str, page: int, step: str, exc: BaseException, indexed: bool = True,
           source: str = "") -> DegradedPage:
        message = " ".join(str(exc).split())[:500]  # one line, bounded: a report is read by people
        return cls(doc_id, int(page), step, type(exc).__name__, message, indexed, source)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DegradedPage:
        known = {k: data[k] for k in ("doc_id", "page", "step", "error", "message", "indexed", "source") if k in data}
        return cls(**known)


@dataclass
class Manifest:
    version: int = FORMAT_VERSION
    embedders: dict[str, dict[str, Any]] = field(default_factory=dict)  # channel -> EmbedderSpec fields
    documents: dict[str, DocumentEntry] = field(default_factory=dict)
    pages: dict[str, PageRecord] = field(default_factory=dict)
    updated_at: float = 0.0
    degraded: dict[str, list[DegradedPage]] = field(default_factory=dict)  # doc id -> its degraded pages
    # source path -> {"doc_id", "reason", "at", "degraded": [DegradedPage dicts]}: documents not in the index
    skipped: dict[str, dict[str, Any]] = field(default_factory=dict)

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

    def add_document(self, entry: DocumentEntry, pages: list[PageRecord],
                     degraded: list[DegradedPage] | None = None) -> None:
        """List a document with its pages and the record of its degraded pages (replacing any earlier one);
        it is no longer a skipped document."""
        self.documents[entry.doc_id] = entry
        for page in pages:
            self.pages[page.page_id] = page
        if degraded:
            self.degraded[entry.doc_id] = list(degraded)
        else:
            self.degraded.pop(entry.doc_id, None)
        self.skipped.pop(entry.source_path, None)

    def remove_document(self, doc_id: str) -> DocumentEntry | None:
        entry = self.documents.pop(doc_id, None)
        if entry:
            for page_id in entry.page_ids:
                self.pages.pop(page_id, None)
        self.degraded.pop(doc_id, None)
        return entry

    def skip_document(self, source_path: str, doc_id: str, reason: str,
                      degraded: list[DegradedPage] | None = None) -> None:
        """Record that a document could not be ingested at all (what it held before, if anything, stays)."""
        self.skipped[source_path] = {"doc_id": doc_id, "reason": reason, "at": time.time(),
                                     "degraded": [d.to_dict() for d in degraded or []]}

    def degraded_pages(self) -> list[DegradedPage]:
        """Every degraded page the index records: of its documents, then of the documents it skipped."""
        found = [d for doc_id in self.documents for d in self.degraded.get(doc_id, [])]
        for skipped in self.skipped.values():
            found.extend(DegradedPage.from_dict(d) for d in skipped.get("degraded", []))
        return found

    # ---- persistence ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "updated_at": self.updated_at,
            "embedders": self.embedders,
            "documents": {k: asdict(v) for k, v in self.documents.items()},
            "pages": {k: v.to_dict() for k, v in self.pages.items()},
            "degraded": {k: [d.to_dict() for d in v] for k, v in self.degraded.items() if v},
            "skipped": self.skipped,
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
            degraded={k: [DegradedPage.from_dict(d) for d in v] for k, v in data.get("degraded", {}).items()},
            skipped=data.get("skipped", {}),
        )

    @property
    def has_layouts(self) -> bool:
        """Whether every document carries its page layouts (format 2 and later)."""
        return self.version >= FIRST_LAYOUT_VERSION

    @staticmethod
    def exists(index_dir: Path) -> bool:
        return (Path(index_dir) / MANIFEST_NAME).exists()
