"""Documents → page images: PDFs through pdf2image (poppler), image files as one-page documents.

Pages are rendered in small chunks so a 2,000-page PDF never sits in memory at once; corrupt and
encrypted files raise `DocumentError` with a reason, and callers skip them and go on.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from PIL import Image, ImageOps

log = logging.getLogger(__name__)

PDF_SUFFIXES = {".pdf"}
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff"}
RENDER_CHUNK = 8
Image.MAX_IMAGE_PIXELS = 300_000_000  # big scans are fine; decompression bombs beyond this are not


class DocumentError(Exception):
    """A document that cannot be read (corrupt, encrypted, empty); the message names file and reason."""


@dataclass
class RenderedPage:
    page_number: int  # 1-based
    image: Image.Image
    width: int
    height: int


def doc_id_for(path: str | Path, taken: set[str] | None = None) -> str:
    """A URL- and filename-safe document id from the file stem; collisions get a path hash suffix."""
    path = Path(path)
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", path.stem)
    stem = re.sub(r"\.{2,}", ".", stem)
    stem = re.sub(r"^[^A-Za-z0-9]+", "", stem)[:120] or "doc"
    if taken is not None and stem in taken:
        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
        stem = f"{stem}-{digest}"
    return stem


def discover_documents(paths: Iterable[str | Path]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"no such file or folder: {path}")
        candidates = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for candidate in candidates:
            suffix = candidate.suffix.lower()
            if suffix in PDF_SUFFIXES or suffix in IMAGE_SUFFIXES:
                found.append(candidate)
            elif not path.is_dir():
                raise ValueError(f"{candidate}: unsupported file type {suffix!r} (PDF or image expected)")
    return sorted(dict.fromkeys(p.resolve() for p in found))


def is_pdf(path: Path) -> bool:
    return path.suffix.lower() in PDF_SUFFIXES


def _check_pdf_readable(path: Path) -> None:
    """pymupdf opens a PDF in milliseconds and tells encryption apart from corruption."""
    import pymupdf

    try:
        with pymupdf.open(path) as doc:
            if doc.needs_pass:
                raise DocumentError(f"{path.name}: encrypted PDF (password required)")
            if doc.page_count < 1:
                raise DocumentError(f"{path.name}: PDF has no pages")
    except DocumentError:
        raise
    except Exception as exc:  # noqa: BLE001 - pymupdf raises several types for broken files
        raise DocumentError(f"{path.name}: not a valid PDF ({exc})") from exc


def count_pages(path: str | Path) -> int:
    path = Path(path)
    if not path.is_file():
        raise DocumentError(f"{path}: file not found")
    if not is_pdf(path):
        _open_image(path).close()
        return 1
    _check_pdf_readable(path)
    from pdf2image import pdfinfo_from_path
    from pdf2image.exceptions import PDFInfoNotInstalledError

    try:
        return int(pdfinfo_from_path(str(path))["Pages"])
    except PDFInfoNotInstalledError as exc:
        raise RuntimeError("poppler is missing: install it (Debian: apt-get install poppler-utils)") from exc
    except Exception as exc:  # noqa: BLE001 - pdf2image raises generic errors for unreadable files
        raise DocumentError(f"{path.name}: cannot read page count ({exc})") from exc


def _open_image(path: Path) -> Image.Image:
    try:
        image = Image.open(path)
        image.load()
    except Exception as exc:  # noqa: BLE001 - PIL raises many types for broken images
        raise DocumentError(f"{path.name}: not a readable image ({exc})") from exc
    return image


def _fit(image: Image.Image, max_side: int | None) -> Image.Image:
    image = ImageOps.exif_transpose(image).convert("RGB")
    if max_side and max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return image


def render_pages(path: str | Path, dpi: int = 144, first_page: int = 1, last_page: int | None = None,
                 thread_count: int = 2, max_side: int | None = 2400) -> Iterator[RenderedPage]:
    path = Path(path)
    if not is_pdf(path):
        image = _fit(_open_image(path), max_side)
        yield RenderedPage(1, image, image.width, image.height)
        return
    from pdf2image import convert_from_path

    if last_page is None:
        last_page = count_pages(path)
    for start in range(first_page, last_page + 1, RENDER_CHUNK):
        end = min(last_page, start + RENDER_CHUNK - 1)
        try:
            images = convert_from_path(str(path), dpi=dpi, fmt="jpeg", first_page=start, last_page=end,
                                       thread_count=thread_count)
        except Exception as exc:  # noqa: BLE001
            raise DocumentError(f"{path.name}: rendering pages {start}-{end} failed ({exc})") from exc
        if len(images) != end - start + 1:
            raise DocumentError(f"{path.name}: expected {end - start + 1} pages from {start}, got {len(images)}")
        for offset, image in enumerate(images):
            image = _fit(image, max_side)
            yield RenderedPage(start + offset, image, image.width, image.height)


def pdf_to_images(pdf_paths: Iterable[str | Path], out_dir: str | Path, dpi: int = 144, workers: int = 2,
                  progress: bool = True, max_side: int | None = None) -> tuple[dict[str, list[Path]], dict[str, str]]:
    """Upstream's `pdf2images` step, robust: `<out>/<doc_id>_<page>.jpg`, bad files reported and skipped.

    Returns (doc_id → written images, source → failure reason).
    """
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    documents = discover_documents(pdf_paths)
    taken: set[str] = set()
    plan, failed = [], {}
    for doc in documents:
        try:
            plan.append((doc, doc_id_for(doc, taken), count_pages(doc)))
            taken.add(plan[-1][1])
        except DocumentError as exc:
            failed[str(doc)] = str(exc)
            log.warning("skipping %s", exc)
    written: dict[str, list[Path]] = {}
    bar = tqdm(total=sum(n for *_, n in plan), unit="page", desc="pdf2images", disable=not progress)

    def convert(doc: Path, doc_id: str) -> list[Path]:
        paths = []
        for page in render_pages(doc, dpi=dpi, thread_count=1, max_side=max_side):
            target = out_dir / f"{doc_id}_{page.page_number}.jpg"
            tmp = target.with_name(f".{target.name}.tmp")
            page.image.save(tmp, format="JPEG", quality=90)
            os.replace(tmp, target)
            paths.append(target)
            bar.update(1)
        return paths

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(convert, doc, doc_id): (doc, doc_id) for doc, doc_id, _ in plan}
        for future in as_completed(futures):
            doc, doc_id = futures[future]
            try:
                written[doc_id] = future.result()
            except DocumentError as exc:
                failed[str(doc)] = str(exc)
                log.warning("skipping %s", exc)
    bar.close()
    return written, failed
