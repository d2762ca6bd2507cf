"""Incremental, resumable ingestion: documents → page images + text → embeddings → index segments.

Why it is built this way:
* Work is checkpointed in chunks of pages under `.partial/`, so a killed ingestion of a
  2,000-page PDF resumes at the last finished chunk instead of page 1.
* A document enters `manifest.json` (replaced atomically) only after its segments are on disk, so
  the index on disk is always valid; readers never see half a document.
* Documents are keyed by content hash: an unchanged file is skipped, a changed one re-ingested,
  and `remove` drops a document without touching the others — nothing is rebuilt.
* Page images of an ingestion go to a new generation folder, `pages/<doc>/<generation>/<n>.jpg`
  (the generation is the content hash), never over the images the manifest points at: readers see
  the old pages under the old manifest and the new pages under the new one, whenever a re-ingestion
  is killed. The old generation is deleted only after the manifest switched; leftovers of killed runs
  (temp files, generations no manifest or checkpoint refers to) are swept by the next ingestion.
* Disk full (ENOSPC) stops the ingestion with `DiskFullError` and removes everything the failed
  document had written (images, checkpoints, segments); the index stays as it was.
* One ingestor per index at a time (an advisory file lock), because two would race on the manifest.
* Every page's structure (`search_engine.page_layout.PageLayout`: paragraphs, headings, tables, figures,
  running headers) is read at ingestion — from the PDF text layer, or from the same OCR reading that gives
  the page text — and stored per document as `layouts/<doc>.<generation>.jsonl` (one layout per line,
  written atomically like the segments); with a text channel its regions are embedded too
  (`segments/text_regions/`), so search scores paragraphs, cells and figure labels, not only whole pages.
  An index of the previous format (no layouts) is upgraded in place, document by document, by `upgrade()`
  (and before an `add`): each document's manifest entry switches only once its layout is on disk.
* One page never stops an ingestion. Each per-page step (render, text layer, OCR, layout, tables, figures,
  figure OCR, visual and text embedding: `manifest.PAGE_STEPS`) runs behind its own boundary: a step that
  fails costs its page what that step gives (a layout without tables, a figure without OCR words, a zero
  vector), the page is kept with what the other steps gave, and the failure is recorded as a
  `DegradedPage` (doc, page, step, reason) — in the chunk checkpoint, then in the manifest beside the
  document's entry — and returned in `IngestReport.degraded`. A page that cannot be rendered is left out
  (without an image it can be neither searched nor shown) and recorded likewise; the rest of its document
  is indexed. What is no page's fault still stops the run: a missing poppler or tesseract
  (`MissingToolError`), a full disk, an embedder that fails on every page of a chunk (`EmbedderFailure`).
  Anything else that escapes a document is that document's failure (`IngestReport.failed`, and the
  manifest's `skipped`), and the next document goes on.
* A text layer is used only when it is what the page shows (`layout.text_quality`): glyphs without a Unicode
  map (private-use, U+FFFD, control characters; fonts without ToUnicode whose text OCR does not confirm) and
  hidden layers that do not match the page image make the page read by OCR instead, recorded like a failed
  step (`text_layer`, `UnusableTextLayer`, with why). OCR reads each page in the packs of the script it shows
  (`text_extraction.ocr_page`); a page whose script has no installed pack is recorded (`ocr`,
  `MissingLanguagePack`), and the language that read a page is in its record (`extra["ocr_lang"]`).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import logging
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from tqdm.auto import tqdm

from search_engine.documents import DocumentError, MissingToolError
from search_engine.embedders import Embedder, load_from_spec, load_text_embedder, load_visual_embedder
from search_engine.index.atomic import atomic_file, atomic_save_npy, atomic_save_npz, atomic_write_bytes
from search_engine.index.manifest import FORMAT_VERSION, DegradedPage, DocumentEntry, Manifest
from search_engine.layout.continued import carry_table_header
from search_engine.page_layout import LAYOUT_FORMAT_VERSION, PageLayout
from search_engine.types import PageRecord, make_page_id
from search_engine.video import VideoOptions, is_video

log = logging.getLogger(__name__)

AUTO = "auto"
LAYOUT_DIR = "layouts"
REGION_CHANNEL = "text_regions"  # segment key and folder of the region vectors of the text channel
ProgressCallback = Callable[[dict[str, Any]], None]


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)  # doc ids
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # source path -> reason
    pages: int = 0  # pages embedded by this run
    # page steps that failed in this run (the page kept with the rest, or left out: `DegradedPage.indexed`)
    degraded: list[DegradedPage] = field(default_factory=list)

    @property
    def degraded_pages(self) -> int:
        """Pages with at least one failed step."""
        return len({(d.doc_id, d.page) for d in self.degraded})

    @property
    def pages_not_indexed(self) -> int:
        """Pages left out of the index (they could not be rendered)."""
        return len({(d.doc_id, d.page) for d in self.degraded if not d.indexed})

    def summary(self) -> str:
        parts = [f"{len(self.added)} added", f"{len(self.updated)} updated", f"{len(self.unchanged)} unchanged",
                 f"{len(self.failed)} failed", f"{self.pages} pages embedded"]
        if self.degraded:
            parts.append(f"{self.degraded_pages} pages degraded ({self.pages_not_indexed} not indexed)")
        return ", ".join(parts)


class EmbedderFailure(RuntimeError):
    """The embedder failed on every page of a chunk, each page tried alone: the model (or its device) is broken,
    not the pages, so the ingestion stops instead of filling the index with pages it cannot find."""


class _NoPages(DocumentError):
    """Every page of a document failed to render: there is nothing to index; `degraded` says why, page by page."""

    def __init__(self, message: str, degraded: list[DegradedPage]):
        super().__init__(message)
        self.degraded = degraded


# Errors that are no page's or document's fault: they stop the ingestion (the CLI exits 2 with them).
_RUN_ERRORS = (MissingToolError, EmbedderFailure)


def file_sha1(path: Path) -> str:
    digest = hashlib.sha1()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class IndexLockedError(RuntimeError):
    pass


class DiskFullError(RuntimeError):
    """The disk (or quota) filled up during an ingestion; what the failed document wrote was removed."""


_NO_SPACE = {errno.ENOSPC, errno.EDQUOT}


def generation_of(sha1: str) -> str:
    """The page-image folder of one ingestion of a document: its content hash, so a killed run that
    resumes writes into the same folder its checkpoints refer to."""
    return sha1[:12]


@contextlib.contextmanager
def index_lock(index_dir: Path) -> Iterator[None]:
    index_dir.mkdir(parents=True, exist_ok=True)
    with open(index_dir / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexLockedError(f"another ingestion is writing {index_dir}; wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Ingestor:
    """Adds, updates and removes documents of one index directory.

    `visual_model` / `text_model`: a model name or path, None to skip that channel, or "auto" —
    reuse what the index already records (a new index gets no visual channel and MiniLM text).
    Pre-built embedders can be passed instead (tests, notebooks with a model already loaded).
    """

    def __init__(self, index_dir: str | Path, visual_model: str | None = AUTO, text_model: str | None = AUTO, *,
                 visual_embedder: Embedder | None = None, text_embedder: Embedder | None = None,
                 device: str = "auto", dpi: int = 144, max_side: int = 1600, ocr: bool = True,
                 ocr_lang: str | None = None, ocr_figures: bool = True, chunk_pages: int = 16,
                 jpeg_quality: int = 90, progress: bool = True,
                 progress_callback: ProgressCallback | None = None, embed_batch_size: int = 4,
                 video: VideoOptions | None = None):
        self.index_dir = Path(index_dir)
        self.video = video  # videos: segment length, fps, frame cap (None: VideoOptions() defaults)
        self._running: frozenset[str] = frozenset()  # the current PDF's running headers/footers
        self._title = ""  # the current PDF's title (prefixed to its regions' search text)
        self.dpi, self.max_side, self.ocr = dpi, max_side, ocr
        self.ocr_figures = ocr_figures  # OCR pictures on text-layer pages (search_engine.figure_ocr)
        if ocr:  # a language pack that is not installed fails here, before any page is rendered
            from search_engine.text_extraction import resolve_ocr_lang

            ocr_lang = resolve_ocr_lang(ocr_lang)
        self.ocr_lang = ocr_lang
        self.chunk_pages, self.jpeg_quality = chunk_pages, jpeg_quality
        self.progress, self.progress_callback = progress, progress_callback
        self.device, self.embed_batch_size = device, embed_batch_size
        self._visual_model, self._text_model = visual_model, text_model
        self._embedders: dict[str, Embedder | None] = {}
        if visual_embedder is not None:
            self._embedders["visual"] = visual_embedder
        if text_embedder is not None:
            self._embedders["text"] = text_embedder

    # ---- embedders ---------------------------------------------------------------------------
    def _resolve_embedders(self, manifest: Manifest) -> dict[str, Embedder | None]:
        wanted = {"visual": self._visual_model, "text": self._text_model}
        defaults = {"visual": None, "text": "minilm"}
        for channel in ("visual", "text"):
            recorded = manifest.spec(channel)
            cached = self._embedders.get(channel)
            if cached is not None:
                embedder = cached
            else:
                name = wanted[channel]
                if name == AUTO:
                    if recorded is not None:
                        self._embedders[channel] = load_from_spec(recorded, device=self.device)
                        continue
                    name = defaults[channel] if not manifest.documents else None
                if name is None:
                    if recorded is not None:
                        raise ValueError(f"the index has a {channel} channel ({recorded.model}); keep using it "
                                         f"(pass {channel}_model='auto') or start a new index")
                    self._embedders[channel] = None
                    continue
                if channel == "visual":
                    embedder = load_visual_embedder(name, device=self.device, batch_size=self.embed_batch_size)
                else:
                    embedder = load_text_embedder(name, device=self.device)
                self._embedders[channel] = embedder
            if recorded is not None and (recorded.kind, recorded.model, recorded.dim) != (
                embedder.spec.kind, embedder.spec.model, embedder.spec.dim
            ):
                raise ValueError(f"the index's {channel} channel was built with {recorded.model!r} "
                                 f"({recorded.kind}); refusing to mix in {embedder.spec.model!r}")
            if recorded is None and manifest.documents:
                raise ValueError(f"the index has documents without a {channel} channel; adding one "
                                 "needs a re-ingestion into a new index")
        return self._embedders

    # ---- public API ----------------------------------------------------------------------------
    def add(self, paths: Iterable[str | Path] | str | Path) -> IngestReport:
        from search_engine.corpus import discover_documents

        if isinstance(paths, (str, Path)):
            paths = [paths]
        documents = discover_documents(paths)
        report = IngestReport()
        with index_lock(self.index_dir):
            manifest = Manifest.load(self.index_dir)
            self._sweep(manifest)
            embedders = self._resolve_embedders(manifest)
            if not any(embedders.values()):
                raise ValueError("no embedder configured: give a visual model, a text model, or both")
            for channel, embedder in embedders.items():
                if embedder is not None and manifest.spec(channel) is None:
                    manifest.set_spec(channel, embedder.spec)
            if not manifest.has_layouts:
                if manifest.documents:
                    log.warning("%s: index of format %d, upgrading it to format %d (page layouts) before adding",
                                self.index_dir, manifest.version, FORMAT_VERSION)
                self._upgrade_documents(manifest, embedders)
            plan = self._plan(documents, manifest, report)
            total_pages = sum(n for _, _, _, n in plan)
            bar = tqdm(total=total_pages, unit="page", desc="ingest", disable=not self.progress)
            try:
                for path, doc_id, sha1, num_pages in plan:
                    self._ingest_document(path, doc_id, sha1, num_pages, manifest, embedders, report, bar)
            finally:
                bar.close()
            if report.failed:  # the skipped documents are recorded too (documents commit their own records)
                manifest.save(self.index_dir)
            self._refresh_fast_index(manifest)
        return report

    def upgrade(self) -> int:
        """Bring an index of an older format up to this one in place (page layouts and region vectors for
        every document that lacks them); returns how many documents were upgraded.

        Crash-safe: each document's new files are written first and its manifest entry switches to them
        in one atomic manifest write, so an interrupted upgrade leaves a valid index (search works, page
        by page for the documents not yet upgraded) and the next run goes on where it stopped.
        """
        with index_lock(self.index_dir):
            manifest = Manifest.load(self.index_dir)
            self._sweep(manifest)
            embedders = self._resolve_embedders(manifest)
            return self._upgrade_documents(manifest, embedders)

    def _upgrade_documents(self, manifest: Manifest, embedders: dict[str, Embedder | None]) -> int:
        """Give every document without a layout segment its layouts (see `upgrade`); call under the lock."""
        from search_engine.layout.compose import empty_layout
        from search_engine.layout.ocr import layout_from_ocr_lines
        from search_engine.text_extraction import ocr_reading

        upgraded = 0
        todo = [e for e in manifest.documents.values() if "layout" not in e.segments]
        for entry in tqdm(todo, unit="doc", desc="upgrade", disable=not self.progress or not todo):
            source = Path(entry.source_path)
            same_source = entry.kind == "pdf" and source.is_file() and file_sha1(source) == entry.sha1
            self._running, self._title = _document_context(source) if same_source else (frozenset(), "")
            layouts: list[PageLayout] = []
            # the layouts are read again: their earlier failures go, the other steps' stay
            degraded = [d for d in manifest.degraded.get(entry.doc_id, [])
                        if d.step not in ("layout", "tables", "figures")]
            with _open_pdf(source if same_source else None) as pdf:
                for page_id in entry.page_ids:
                    record = manifest.pages[page_id]
                    size = (record.width, record.height)

                    def failed(step: str, exc: Exception, number: int = record.page_number,
                               found: list[DegradedPage] = degraded, doc_id: str = entry.doc_id,
                               name: str = source.name) -> None:
                        if isinstance(exc, _RUN_ERRORS):
                            raise exc
                        found.append(DegradedPage.of(doc_id, number, step, exc, True, name))
                        log.warning("%s page %d: %s failed in the upgrade (%s: %s)", name, number, step,
                                    type(exc).__name__, exc)

                    if self.ocr and entry.kind != "video" and record.text_source == "ocr":  # as ingestion read it
                        try:
                            with Image.open(self.index_dir / record.image_path) as image:
                                layout = layout_from_ocr_lines(ocr_reading(image.convert("RGB"), self.ocr_lang),
                                                               page_id, size)
                        except Exception as exc:  # noqa: BLE001 - this page keeps no regions, the others theirs
                            failed("layout", exc)
                            layout = empty_layout(page_id, size)
                    elif pdf is not None:
                        layout = _page_layout(pdf, record.page_number, page_id, size, "pdf", None, self._running,
                                              on_error=failed)
                    else:
                        layout = empty_layout(page_id, size)
                    layouts.append(carry_table_header(layouts[-1] if layouts else None, layout))
            if degraded:
                manifest.degraded[entry.doc_id] = degraded
            else:
                manifest.degraded.pop(entry.doc_id, None)
            region_embedder = embedders.get("text")
            if region_embedder is not None:
                arrays = _region_arrays(region_embedder, layouts, self._title)
                rel = Path("segments") / REGION_CHANNEL / f"{entry.doc_id}.{entry.sha1[:12]}.npy"
                atomic_save_npy(self.index_dir / rel, arrays[f"{REGION_CHANNEL}_vectors"])
                entry.segments[REGION_CHANNEL] = {"file": rel.as_posix(),
                                                  "counts": arrays[f"{REGION_CHANNEL}_counts"].astype(int).tolist()}
            entry.segments["layout"] = self._write_layouts(entry.doc_id, entry.sha1,
                                                           [layout.to_dict() for layout in layouts], self._title)
            manifest.save(self.index_dir)  # this document switches to its layouts in one atomic write
            upgraded += 1
        if manifest.version < FORMAT_VERSION:
            manifest.version = FORMAT_VERSION
            manifest.save(self.index_dir)
        return upgraded

    def remove(self, doc_ids: Sequence[str]) -> list[str]:
        removed = []
        with index_lock(self.index_dir):
            manifest = Manifest.load(self.index_dir)
            self._sweep(manifest)
            for doc_id in doc_ids:
                entry = manifest.remove_document(doc_id)
                if entry is None:
                    continue
                manifest.save(self.index_dir)  # forget first, then delete files: never a dangling entry
                self._delete_files(entry)
                removed.append(doc_id)
            if removed:
                self._refresh_fast_index(manifest)
        return removed

    def _refresh_fast_index(self, manifest: Manifest) -> None:
        """Bring the fast visual index (only if the index has one) in step with the manifest.

        A failure here loses nothing: the documents are committed, and the engine updates a stale
        fast index in memory at load (see search_engine/index/fast_index.py); it is reported loudly.
        """
        from search_engine.index.fast_index import refresh_fast_index

        try:
            refresh_fast_index(self.index_dir, manifest)
        except (OSError, RuntimeError, ValueError) as exc:
            log.error("fast index not refreshed (%s); search updates it in memory, "
                      "`vrag-search build-fast-index` rebuilds it", exc)

    # ---- leftovers of killed runs ---------------------------------------------------------------------
    def _sweep(self, manifest: Manifest) -> None:
        """Delete what killed runs left behind (call under the index lock): temp files of atomic writes,
        page images no manifest entry or resumable checkpoint refers to, checkpoints of committed documents."""
        root = self.index_dir
        for folder in (root / "pages", root / "segments", root / ".partial", root / LAYOUT_DIR):
            for tmp in folder.rglob(".*.tmp") if folder.is_dir() else []:
                tmp.unlink(missing_ok=True)
        for tmp in root.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
        resumable: dict[str, set[str]] = {}
        partial_root = root / ".partial"
        for folder in partial_root.iterdir() if partial_root.is_dir() else []:
            gens = {chunk.name.split("_", 1)[0] for chunk in folder.glob("*.npz")}
            entry = manifest.documents.get(folder.name)
            if entry is not None and gens and gens <= {generation_of(entry.sha1)}:
                shutil.rmtree(folder, ignore_errors=True)  # killed after its commit: nothing left to resume
            else:
                resumable[folder.name] = gens
        referenced = {Path(page.image_path) for page in manifest.pages.values()}
        pages_root = root / "pages"
        for doc_dir in pages_root.iterdir() if pages_root.is_dir() else []:
            if not doc_dir.is_dir():
                continue
            for item in doc_dir.iterdir():
                rel = item.relative_to(root)
                if item.is_dir():
                    if item.name in resumable.get(doc_dir.name, set()):
                        continue
                    if not any(r.parent == rel for r in referenced):
                        shutil.rmtree(item, ignore_errors=True)
                        log.info("removed orphaned page generation %s", rel)
                    else:
                        for image in item.iterdir():
                            if image.relative_to(root) not in referenced:
                                image.unlink(missing_ok=True)
                elif rel not in referenced:
                    item.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                doc_dir.rmdir()  # only when empty

    # ---- planning --------------------------------------------------------------------------------
    def _plan(self, documents: list[Path], manifest: Manifest, report: IngestReport):
        from search_engine.corpus import count_pages, doc_id_for

        taken = set(manifest.documents)
        plan = []
        for path in documents:
            source = str(path.resolve())
            existing = None
            try:
                sha1 = file_sha1(path)
                existing = manifest.doc_for_source(source)
                if existing is not None and existing.sha1 == sha1:
                    report.unchanged.append(existing.doc_id)
                    continue
                num_pages = count_pages(path, video=self.video)
                if num_pages < 1:
                    raise DocumentError(f"{path}: document has no pages")
            except (DocumentError, OSError) as exc:
                report.failed[source] = str(exc)
                log.warning("skipping %s: %s", path, exc)
                manifest.skip_document(source, existing.doc_id if existing else doc_id_for(path), str(exc))
                continue
            if existing is not None:
                doc_id = existing.doc_id
            else:
                doc_id = doc_id_for(path, taken)
                taken.add(doc_id)
            plan.append((path, doc_id, sha1, num_pages))
        return plan

    # ---- one document ------------------------------------------------------------------------------
    def _partial_dir(self, doc_id: str) -> Path:
        return self.index_dir / ".partial" / doc_id

    def _ingest_document(self, path: Path, doc_id: str, sha1: str, num_pages: int, manifest: Manifest,
                         embedders: dict[str, Embedder | None], report: IngestReport, bar) -> None:
        source = str(path.resolve())
        partial = self._partial_dir(doc_id)
        chunk_files = []
        replaced = manifest.documents.get(doc_id)
        old_ids = replaced.page_ids if replaced else []
        old_images = {manifest.pages[p].image_path for p in old_ids if p in manifest.pages}
        try:
            partial.mkdir(parents=True, exist_ok=True)
            texts, text_errors = self._pdf_texts(path)
            previous: PageLayout | None = None  # the last page laid out: a table it leaves open may go on
            for first in range(1, num_pages + 1, self.chunk_pages):
                last = min(num_pages, first + self.chunk_pages - 1)
                chunk_file = partial / f"{generation_of(sha1)}_{first:06d}_{last:06d}.npz"
                if not _has_layouts(chunk_file):  # none yet, or left by a version without layouts
                    report.pages += self._ingest_chunk(path, doc_id, sha1, first, last, texts, text_errors,
                                                       embedders, chunk_file, previous)
                chunk_files.append(chunk_file)
                previous = _last_layout(chunk_file)
                bar.update(last - first + 1)
                self._notify(doc_id=doc_id, source=source, page=last, num_pages=num_pages, stage="pages")
            entry, pages, degraded = self._commit_document(path, doc_id, sha1, num_pages, chunk_files, embedders)
            manifest.remove_document(doc_id)
            manifest.add_document(entry, pages, degraded)
            manifest.save(self.index_dir)
        except DocumentError as exc:
            self._skip_document(path, doc_id, sha1, manifest, report, str(exc), getattr(exc, "degraded", []))
            return
        except OSError as exc:
            if exc.errno not in _NO_SPACE:
                raise
            self._discard_attempt(doc_id, sha1)
            raise DiskFullError(f"disk full while ingesting {path.name} into {self.index_dir} ({exc.strerror}); "
                                f"nothing of {path.name} was kept and the index is unchanged — free some space "
                                "and run the ingestion again") from None
        except _RUN_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug or a library failing on this file costs this document only
            log.exception("%s: ingestion failed", path)
            self._skip_document(path, doc_id, sha1, manifest, report,
                                f"{path.name}: ingestion failed ({type(exc).__name__}: {exc})", [])
            return
        report.degraded.extend(degraded)
        if replaced is not None:
            self._delete_replaced(replaced, entry, old_images - {p.image_path for p in pages})
            report.updated.append(doc_id)
        else:
            report.added.append(doc_id)
        shutil.rmtree(partial, ignore_errors=True)
        self._notify(doc_id=doc_id, source=source, page=num_pages, num_pages=num_pages, stage="done")

    def _skip_document(self, path: Path, doc_id: str, sha1: str, manifest: Manifest, report: IngestReport,
                       reason: str, degraded: list[DegradedPage]) -> None:
        """A document that cannot be indexed: reported, recorded in the manifest (saved by `add`), and nothing
        of its attempt kept; the index keeps what it held of it before."""
        report.failed[str(path.resolve())] = reason
        report.degraded.extend(degraded)
        log.warning("skipping %s: %s", path, reason)
        manifest.skip_document(str(path.resolve()), doc_id, reason, degraded)
        self._discard_attempt(doc_id, sha1)

    def _pdf_texts(self, path: Path) -> tuple[list[str] | None, dict[int, Exception]]:
        """The text layer of every page (None: not a PDF, or no text channel), and the pages whose text layer
        could not be read, with why (their text is "": OCR reads them where it is on)."""
        self._running, self._title = frozenset(), title_from_file_name(path)
        if path.suffix.lower() != ".pdf":
            return None, {}
        # running headers/footers and the title, found over the whole document
        self._running, title = _document_context(path)
        self._title = title or self._title
        if self._embedders.get("text") is None:
            return None, {}
        from search_engine.text_extraction import pdf_page_texts

        errors: dict[int, Exception] = {}
        return pdf_page_texts(path, on_error=errors.__setitem__), errors

    def _discard_attempt(self, doc_id: str, sha1: str) -> None:
        """Remove what a failed ingestion of one document wrote: its checkpoints, its page generation,
        its segment files (the manifest on disk never referred to any of them)."""
        shutil.rmtree(self._partial_dir(doc_id), ignore_errors=True)
        shutil.rmtree(self.index_dir / "pages" / doc_id / generation_of(sha1), ignore_errors=True)
        for channel in ("visual", "text", REGION_CHANNEL):
            (self.index_dir / "segments" / channel / f"{doc_id}.{sha1[:12]}.npy").unlink(missing_ok=True)
        (self.index_dir / LAYOUT_DIR / f"{doc_id}.{sha1[:12]}.jsonl").unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            (self.index_dir / "pages" / doc_id).rmdir()  # only when empty (a new document)

    def _ingest_chunk(self, path: Path, doc_id: str, sha1: str, first: int, last: int, texts: list[str] | None,
                      text_errors: dict[int, Exception], embedders: dict[str, Embedder | None],
                      chunk_file: Path, previous: PageLayout | None = None) -> int:
        """Pages first..last into one checkpoint (images, records, layouts, vectors, degraded pages); returns
        how many pages it holds. Every per-page step runs behind its own boundary (see the module doc).
        `previous`: the layout of the page before `first`, whose last table a page may continue
        (`layout.continued`)."""
        from search_engine.corpus import render_pages
        from search_engine.text_extraction import page_reading

        degraded: list[DegradedPage] = []

        def failed(page: int, step: str, exc: BaseException, indexed: bool = True) -> None:
            if isinstance(exc, _RUN_ERRORS) or (isinstance(exc, OSError) and exc.errno in _NO_SPACE):
                raise exc  # no page's fault: the run stops (`add`)
            record = DegradedPage.of(doc_id, page, step, exc, indexed, path.name)
            degraded.append(record)
            log.warning("%s page %d: %s failed (%s); %s", path.name, page, step, record.reason, record.consequence)

        images: list[Image.Image] = []
        records: list[PageRecord] = []
        layouts: list[PageLayout] = []
        figure_jobs: dict[int, Future[str]] = {}  # index in `records` -> its figures' text, read in the background
        with _open_pdf(path) as pdf, ThreadPoolExecutor(max_workers=1, thread_name_prefix="figure-ocr") as figures:
            for rendered in render_pages(path, dpi=self.dpi, first_page=first, last_page=last, max_side=self.max_side,
                                         video=self.video,
                                         on_page_error=lambda n, exc: failed(n, "render", exc, indexed=False)):
                number = rendered.page_number
                page_id = make_page_id(doc_id, number)
                rel = Path("pages") / doc_id / generation_of(sha1) / f"{number}.jpg"
                try:
                    with atomic_file(self.index_dir / rel) as fh:
                        rendered.image.convert("RGB").save(fh, format="JPEG", quality=self.jpeg_quality)
                except Exception as exc:  # noqa: BLE001 - PIL failing to encode this page (a full disk: `failed` raises)
                    failed(number, "render", exc, indexed=False)
                    continue
                text, text_source, reading = "", "", None
                extra = dict(rendered.extra)
                if rendered.text is not None:  # the source read its own text (a video segment: OCR of its frames)
                    text, text_source = rendered.text, "ocr" if rendered.text else ""
                elif embedders.get("text") is not None:
                    if number in text_errors:
                        failed(number, "text_layer", text_errors[number])
                    layer = texts[number - 1] if texts and number <= len(texts) else ""
                    usable = self._layer_usable(pdf, number, layer, rendered.image, failed)
                    try:
                        read = page_reading(layer, rendered.image, ocr=self.ocr, ocr_lang=self.ocr_lang,
                                            layer_usable=usable)
                    except Exception as exc:  # noqa: BLE001 - tesseract failing on this page: keep its layer text
                        failed(number, "ocr", exc)
                        read = page_reading(layer, None, ocr=False)
                    text, text_source, reading = read.text, read.source, read.lines
                    if read.ocr is not None:
                        extra["ocr_lang"] = read.ocr.lang
                        if read.ocr.missing:
                            failed(number, "ocr", _missing_pack(read.ocr))
                layout = _page_layout(pdf, number, page_id, (rendered.width, rendered.height), text_source, reading,
                                      self._running, on_error=functools.partial(_at_page, failed, number))
                layout = carry_table_header(layouts[-1] if layouts else previous, layout)
                if self.ocr and self.ocr_figures and text_source == "pdf":  # words inside pictures are pixels
                    figure_jobs[len(records)] = figures.submit(_read_figures, layout, rendered.image, self.ocr_lang,
                                                               text, functools.partial(_at_page, failed, number))
                layouts.append(layout)
                records.append(PageRecord(page_id=page_id, doc_id=doc_id, page_number=number,
                                          image_path=rel.as_posix(), width=rendered.width, height=rendered.height,
                                          source_path=str(path.resolve()), text=text, text_source=text_source,
                                          extra=extra))
                images.append(rendered.image)
            for k, job in figure_jobs.items():  # before the chunk is embedded: the figures' words are searched
                figure_text = job.result()
                records[k].text = f"{records[k].text}\n{figure_text}" if figure_text else records[k].text
        degraded.sort(key=lambda d: d.page)  # figure OCR reports from its thread
        numbers = [r.page_number for r in records]
        arrays: dict[str, np.ndarray] = {}
        visual_embedder, text_embedder = embedders.get("visual"), embedders.get("text")
        if visual_embedder is not None and records:
            vectors = _embed_pages(visual_embedder.embed_images, images, numbers, "embed_visual", failed,
                                   lambda _: np.zeros((1, visual_embedder.spec.dim), np.float32))
            arrays["visual_vectors"] = np.concatenate(vectors).astype(np.float16)
            arrays["visual_counts"] = np.asarray([v.shape[0] for v in vectors], np.int64)
        if text_embedder is not None and records:
            arrays.update(_tolerant_text_arrays(text_embedder, [r.text for r in records], layouts, self._title,
                                                numbers, failed))
        arrays["records"] = np.frombuffer(json.dumps([r.to_dict() for r in records]).encode(), dtype=np.uint8)
        arrays["layouts"] = _json_bytes([layout.to_dict() for layout in layouts])
        arrays["degraded"] = _json_bytes([d.to_dict() for d in degraded])
        atomic_save_npz(chunk_file, **arrays)
        return len(records)

    def _layer_usable(self, pdf: Any, number: int, layer: str, image: Image.Image,
                      failed: Callable[[int, str, BaseException], None]) -> bool:
        """Whether the page's text layer is what the page shows (`layout.text_quality`: garbled glyphs, a hidden
        layer that does not match the image); an unusable one is recorded as the page's `text_layer` step
        degraded, with why, and the page is read by OCR instead. Pages without a layer worth checking (not a
        PDF, a layer too short to be the page's text: OCR reads those anyway) are usable."""
        from search_engine.layout.text_quality import MIN_CHARS, UnusableTextLayer, check_text_layer

        if pdf is None or number > pdf.page_count or len(layer.replace(" ", "")) < MIN_CHARS:
            return True
        try:
            verdict = check_text_layer(pdf[number - 1], image if self.ocr else None, self.ocr_lang)
        except _RUN_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 - the check is a guard; the page keeps its layer when it fails
            log.warning("page %d: text layer not checked (%s: %s); the layer is kept", number, type(exc).__name__,
                        exc)
            return True
        if not verdict.usable:
            failed(number, "text_layer", UnusableTextLayer(
                verdict.reason + ("; the page is read by OCR" if self.ocr else "; OCR is off: the layer is kept")))
        return verdict.usable

    def _commit_document(self, path: Path, doc_id: str, sha1: str, num_pages: int, chunk_files: list[Path],
                         embedders: dict[str, Embedder | None],
                         ) -> tuple[DocumentEntry, list[PageRecord], list[DegradedPage]]:
        pages: list[PageRecord] = []
        layouts: list[dict[str, Any]] = []
        degraded: list[DegradedPage] = []
        collected: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {
            "visual": ([], []), "text": ([], []), REGION_CHANNEL: ([], [])}
        for chunk_file in chunk_files:
            with np.load(chunk_file) as data:
                pages.extend(PageRecord.from_dict(r) for r in json.loads(data["records"].tobytes()))
                layouts.extend(json.loads(data["layouts"].tobytes()))
                if "degraded" in data.files:  # checkpoints of earlier versions recorded none
                    degraded.extend(DegradedPage.from_dict(d) for d in json.loads(data["degraded"].tobytes()))
                for channel in collected:
                    if f"{channel}_vectors" in data:
                        collected[channel][0].append(data[f"{channel}_vectors"])
                        collected[channel][1].append(data[f"{channel}_counts"])
        if not pages:
            raise _NoPages(f"{path.name}: none of its {num_pages} pages could be rendered "
                           f"({degraded[0].reason if degraded else 'no reason recorded'})", degraded)
        segments = {}
        for channel, (vectors, counts) in collected.items():
            owner = "text" if channel == REGION_CHANNEL else channel
            if embedders.get(owner) is None or not vectors:
                continue
            rel = Path("segments") / channel / f"{doc_id}.{sha1[:12]}.npy"
            atomic_save_npy(self.index_dir / rel, np.concatenate(vectors))
            segments[channel] = {"file": rel.as_posix(), "counts": np.concatenate(counts).astype(int).tolist()}
        segments["layout"] = self._write_layouts(doc_id, sha1, layouts, self._title)
        kind = "pdf" if path.suffix.lower() == ".pdf" else ("video" if is_video(path) else "image")
        entry = DocumentEntry(doc_id=doc_id, source_path=str(path.resolve()), sha1=sha1, num_pages=len(pages),
                              kind=kind, page_ids=[p.page_id for p in pages], segments=segments)
        return entry, pages, degraded

    def _write_layouts(self, doc_id: str, sha1: str, layouts: list[dict[str, Any]], title: str) -> dict[str, Any]:
        """The document's page layouts as one JSON line per page (atomic, like the segments); `title` is
        what its regions' search text starts with (`layout.search_texts.region_search_texts`)."""
        rel = Path(LAYOUT_DIR) / f"{doc_id}.{sha1[:12]}.jsonl"
        atomic_write_bytes(self.index_dir / rel, b"".join(_json_bytes(layout).tobytes() + b"\n" for layout in layouts))
        return {"file": rel.as_posix(), "version": LAYOUT_FORMAT_VERSION, "pages": len(layouts), "title": title}

    def _delete_files(self, entry: DocumentEntry) -> None:
        for seg in entry.segments.values():
            (self.index_dir / seg["file"]).unlink(missing_ok=True)
        shutil.rmtree(self.index_dir / "pages" / entry.doc_id, ignore_errors=True)

    def _delete_replaced(self, old: DocumentEntry, new: DocumentEntry, old_images: set[str]) -> None:
        """After the manifest switched to `new`: the old generation's images and segments go."""
        keep_files = {seg["file"] for seg in new.segments.values()}
        for seg in old.segments.values():
            if seg["file"] not in keep_files:
                (self.index_dir / seg["file"]).unlink(missing_ok=True)
        folders = set()
        for rel in old_images:
            (self.index_dir / rel).unlink(missing_ok=True)
            folders.add((self.index_dir / rel).parent)
        for folder in folders:
            if folder != self.index_dir / "pages" / old.doc_id:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # the old generation folder, once empty

    def _notify(self, **event: Any) -> None:
        if self.progress_callback is not None:
            self.progress_callback(event)



# ---- page layouts ---------------------------------------------------------------------------------------


def _json_bytes(payload: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(payload, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)


def _last_layout(chunk_file: Path) -> PageLayout | None:
    """The layout of the last page a chunk checkpoint holds (None: no checkpoint, no page, or unreadable: the
    next chunk's first page then continues no table)."""
    try:
        with np.load(chunk_file) as data:
            layouts = json.loads(data["layouts"].tobytes()) if "layouts" in data.files else []
        return PageLayout.from_dict(layouts[-1]) if layouts else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _has_layouts(chunk_file: Path) -> bool:
    """Whether a chunk checkpoint exists and holds page layouts (one from before layouts is redone)."""
    if not chunk_file.exists():
        return False
    try:
        with np.load(chunk_file) as data:
            return "layouts" in data.files
    except (OSError, ValueError):
        return False


def title_from_file_name(path: Path) -> str:
    """The document's name as its title, for a document that prints none (an image, a video, a PDF
    without a title on its first page or in its metadata): the file name's words, without a trailing page
    or frame number (up to three digits: a year stays) — "quarterly_report-p07.png" → "quarterly report".
    People name files after what they hold; a name without a word ("Slide12.png", "0042.jpg") gives ""."""
    stem = re.sub(r"[-_ .]*(?:p|pg|page|slide|frame)?[-_ .]*(?<!\d)\d{1,3}$", "", path.stem, flags=re.IGNORECASE)
    words = [w for w in re.split(r"[\W_]+", stem) if w]
    return " ".join(words) if any(len(w) >= 3 and not w.isdigit() for w in words) else ""


def _document_context(path: Path) -> tuple[frozenset[str], str]:
    """A PDF's running headers/footers (`layout.margins.running_texts`) and its title
    (`layout.text_layer.document_title`)."""
    from search_engine.layout.margins import running_texts
    from search_engine.layout.text_layer import document_title

    try:
        with _open_pdf(path) as pdf:
            return (running_texts(pdf), document_title(pdf)) if pdf is not None else (frozenset(), "")
    except Exception as exc:  # noqa: BLE001 - the text layer's reader reports a broken file itself
        log.warning("%s: running headers and title not read (%s)", path.name, exc)
        return frozenset(), ""


@contextlib.contextmanager
def _open_pdf(path: Path | None) -> Iterator[Any]:
    """The PDF open with PyMuPDF for the page layouts, or None for other files."""
    if path is None or path.suffix.lower() != ".pdf":
        yield None
        return
    import pymupdf

    with pymupdf.open(path) as pdf:
        yield pdf


def _page_layout(pdf: Any, page_number: int, page_id: str, size: tuple[int, int], text_source: str,
                 reading: list | None, running: frozenset[str],
                 on_error: Callable[[str, Exception], None] | None = None) -> PageLayout:
    """The page's layout from what ingestion already read: the PDF's text layer, else the OCR reading;
    a page it cannot read fails alone, with an empty layout, never its document. Failures go to
    `on_error(step, exception)` — "layout" for the whole layout, "tables"/"figures" for one finder (the page
    keeps the rest) — or, without it, to the log."""
    from search_engine.layout.compose import empty_layout
    from search_engine.layout.ocr import layout_from_ocr_lines
    from search_engine.layout.pdf import pdf_page_layout

    def report(step: str, exc: Exception) -> None:
        if on_error is not None:
            on_error(step, exc)
        else:
            log.warning("page %s: %s not read (%s: %s)", page_id, step, type(exc).__name__, exc)

    try:
        if reading:
            return layout_from_ocr_lines(reading, page_id, size)
        if pdf is not None and text_source != "ocr" and page_number <= pdf.page_count:
            return pdf_page_layout(pdf[page_number - 1], page_id, size, running, on_error=report)
    except Exception as exc:  # noqa: BLE001 - a page layout is an extra; the page's text and image stand
        report("layout", exc)
    return empty_layout(page_id, size)


def _missing_pack(reading: Any) -> Exception:
    """The record of a page whose script has no installed tesseract pack (`text_extraction.OcrReading`)."""
    from search_engine.ocr_languages import LanguageChoice, MissingLanguagePack

    hint = LanguageChoice(reading.lang, reading.script, reading.missing).install_hint
    return MissingLanguagePack(f"the page is in {reading.script} script (tesseract's script detection); "
                               f"{', '.join(reading.missing)} is not installed ({hint}): read with {reading.lang}")


def _at_page(failed: Callable[[int, str, BaseException], None], number: int, step: str, exc: Exception) -> None:
    """`failed` for one page: what a layout step's `on_error(step, exc)` calls."""
    failed(number, step, exc)


def _read_figures(layout: PageLayout, image: Image.Image, lang: str | None, page_text: str,
                  failed: Callable[[str, BaseException], None]) -> str:
    """`figure_ocr.read_figures` of one page behind the page's boundary: the text read ("" when nothing was, or
    when OCR failed: the figures keep what they had, the page its text, the failure goes to `failed(step, exc)`).

    Ingestion runs it on a thread while the next pages are rendered and laid out: tesseract is a child
    process, so on 2 cores it reads a page's figures on one core while Python lays out the next page on the
    other (62 Debian pages: 5.7 s of figure OCR, most of it hidden). It writes only this page's `layout`."""
    from search_engine.figure_ocr import read_figures

    try:
        return read_figures(layout, image, lang, page_text, on_error=lambda _region, exc: failed("figure_ocr", exc))
    except Exception as exc:  # noqa: BLE001 - the figures keep what they had, the page its text
        failed("figure_ocr", exc)
        return ""


def _embed_pages(embed: Callable[[list[Any]], list[np.ndarray]], items: list[Any], numbers: list[int], step: str,
                 failed: Callable[[int, str, BaseException], None],
                 fallback: Callable[[Any], np.ndarray]) -> list[np.ndarray]:
    """One embedding per item (a page), the batch at once; when the batch fails, page by page, a page that
    fails alone getting `fallback(item)` (a zero vector: never found by that channel) and reported to `failed`.
    Output that is not one finite array per item counts as a failure. `EmbedderFailure` when every page of a
    batch of several fails alone: the embedder is broken, not the pages."""

    def checked(batch: list[Any]) -> list[np.ndarray]:
        out = embed(batch)
        if len(out) != len(batch):
            raise ValueError(f"the embedder returned {len(out)} embeddings for {len(batch)} inputs")
        for vectors in out:
            if not np.isfinite(np.asarray(vectors, np.float32)).all():
                raise ValueError("the embedding has non-finite values (NaN or inf)")
        return list(out)

    try:
        return checked(items)
    except _RUN_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - find the page(s) it fails on
        log.warning("%s of %d pages failed (%s: %s); embedding them one by one", step, len(items),
                    type(exc).__name__, exc)
    results: list[np.ndarray] = []
    errors: list[tuple[int, Exception]] = []
    for item, number in zip(items, numbers, strict=True):
        try:
            results.extend(checked([item]))
        except _RUN_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 - this page gets no vector of this channel
            errors.append((number, exc))
            results.append(fallback(item))
    if len(items) > 1 and len(errors) == len(items):
        first, error = errors[0]
        raise EmbedderFailure(f"{step}: the embedder failed on each of {len(items)} pages tried alone (first: "
                              f"page {first}, {type(error).__name__}: {error}); it is the embedder, not the pages"
                              ) from error
    for number, error in errors:
        failed(number, step, error)
    return results


def _tolerant_text_arrays(embedder: Embedder, page_texts: list[str], layouts: list[PageLayout], title: str,
                          numbers: list[int], failed: Callable[[int, str, BaseException], None]
                          ) -> dict[str, np.ndarray]:
    """`_text_arrays` of a chunk; when it fails, page by page (`_embed_pages`), a page that fails alone getting
    zero vectors (its page row and one row per region) and reported as an "embed_text" failure."""
    dim = embedder.spec.dim

    def one(k: int) -> dict[str, np.ndarray]:
        return _text_arrays(embedder, [page_texts[k]], [layouts[k]], title)

    def embed(indices: list[int]) -> list[np.ndarray]:
        # the page's arrays packed in one row block: its page vector first, then its region rows
        out = []
        for k in indices:
            arrays = one(k)
            out.append(np.concatenate([arrays["text_vectors"], arrays[f"{REGION_CHANNEL}_vectors"].astype(np.float32)]))
        return out

    try:
        return _text_arrays(embedder, page_texts, layouts, title)
    except _RUN_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - find the page(s) it fails on
        log.warning("embed_text of %d pages failed (%s: %s); embedding them one by one", len(page_texts),
                    type(exc).__name__, exc)
    regions = [len(layout.regions) for layout in layouts]
    packed = _embed_pages(embed, list(range(len(page_texts))), numbers, "embed_text", failed,
                          lambda k: np.zeros((1 + regions[k], dim), np.float32))
    return {"text_vectors": np.concatenate([block[:1] for block in packed]).astype(np.float32),
            "text_counts": np.ones(len(page_texts), np.int64),
            f"{REGION_CHANNEL}_vectors": np.concatenate([block[1:] for block in packed]).astype(np.float16),
            f"{REGION_CHANNEL}_counts": np.asarray(regions, np.int64)}


def _region_arrays(embedder: Embedder, layouts: list[PageLayout], title: str = "") -> dict[str, np.ndarray]:
    """Region vectors of the text channel: one row per region of every page, in layout order (running
    headers and regions without text get a blank row, masked at search), and the rows per page."""
    vectors, counts, _ = _embed_regions(embedder, layouts, title)
    return {f"{REGION_CHANNEL}_vectors": vectors.astype(np.float16), f"{REGION_CHANNEL}_counts": counts}


def _embed_regions(embedder: Embedder, layouts: list[PageLayout], title: str) -> tuple[np.ndarray, np.ndarray,
                                                                                         list[list[str]]]:
    """(float32 vectors, one row per region; rows per page; each page's region search texts)."""
    from search_engine.layout.search_texts import region_search_texts

    per_page = [region_search_texts(layout, title, title_once=True) for layout in layouts]
    texts = [t for page in per_page for t in page]
    vectors = np.zeros((len(texts), embedder.spec.dim), np.float32)
    wanted = [i for i, t in enumerate(texts) if t]
    if wanted:
        vectors[wanted] = np.concatenate(embedder.embed_texts([texts[i] for i in wanted])).astype(np.float32)
    return vectors, np.asarray([len(page) for page in per_page], np.int64), per_page


def _text_arrays(embedder: Embedder, page_texts: list[str], layouts: list[PageLayout],
                 title: str) -> dict[str, np.ndarray]:
    """The text channel of a chunk of pages: region vectors, and page vectors.

    A page's vector is the mean of its regions' vectors weighted by their words — the mean of its
    paragraphs, where it used to be the mean of fixed windows of its text — so its text is embedded
    once, not twice (region embeddings would otherwise double ingestion's MiniLM time, the largest
    part of it). A page without region text (a video segment, no layout) is embedded from its text.
    """
    vectors, counts, per_page = _embed_regions(embedder, layouts, title)
    page_vectors = np.zeros((len(page_texts), embedder.spec.dim), np.float32)
    missing = []
    offset = 0
    for page, texts in enumerate(per_page):
        weights = np.asarray([len(t.split()) for t in texts], np.float32)
        if weights.sum() > 0:
            mean = (vectors[offset:offset + len(texts)] * weights[:, None]).sum(axis=0)
            page_vectors[page] = mean / max(float(np.linalg.norm(mean)), 1e-9)
        else:
            missing.append(page)
        offset += len(texts)
    if missing:
        embedded = embedder.embed_texts([page_texts[p] or " " for p in missing])
        page_vectors[missing] = np.concatenate(embedded).astype(np.float32)
    return {"text_vectors": page_vectors, "text_counts": np.ones(len(page_texts), np.int64),
            f"{REGION_CHANNEL}_vectors": vectors.astype(np.float16), f"{REGION_CHANNEL}_counts": counts}
