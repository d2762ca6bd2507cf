"""Documents → page images: PDFs through pdf2image (poppler), image files as one-page documents.

Pages are rendered in small chunks so a 2,000-page PDF never sits in memory at once; corrupt and
encrypted files raise `DocumentError` with a reason, so callers can skip them and go on.
"""
from __future__ import annotations

import hashlib
import logging
import math
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from PIL import Image, ImageOps

from search_engine import video as videos
from search_engine.documents import DocumentError, MissingToolError, RenderedPage
from search_engine.index.atomic import atomic_file

# DocumentError and RenderedPage live in the leaf module search_engine.documents; importing them from here
# keeps working (issue 22 broke the corpus -> video -> text_extraction -> corpus circle).
__all__ = ["DocumentError", "RenderedPage", "discover_documents", "doc_id_for", "count_pages", "render_pages",
           "pdf_to_images", "is_pdf", "is_supported", "render_dpi", "check_rendered_size"]

log = logging.getLogger(__name__)

PDF_SUFFIXES = {".pdf"}
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff"}
RENDER_CHUNK = 8  # pages per poppler call: bounded memory, few enough process starts
RENDER_TIMEOUT_S = 600  # per chunk: a pathological PDF must not hang an ingestion forever
MAX_ID_CHARS = 120
JPEG_QUALITY = 90
Image.MAX_IMAGE_PIXELS = 300_000_000  # big scans are fine; decompression bombs beyond this are not
# A PDF can claim any page size (the format allows 200 x 200 inches, UserUnit more): the render dpi is
# lowered per page so a page never renders to more than this, whatever the file says. 25 MP is
# 75 MB as RGB (A0 at 144 dpi), above what any embedder or the agent uses (pages are shrunk to max_side after).
MAX_RENDER_PIXELS = 25_000_000
MAX_RENDER_SIDE = 16_000  # poppler's cairo/splash backends fail on sides of ~32k pixels
PageErrorHandler = Callable[[int, DocumentError], None]  # (page number, why it could not be rendered)


# --------------------------------------------------------------------------------------------- ids


def doc_id_for(path: str | Path, taken: set[str] | None = None) -> str:
    """A URL- and filename-safe id from the file stem, so page ids stay upstream's `<stem>_<page>`.

    Two different files whose stems sanitise alike get a suffix from their resolved path, which is
    stable across runs. vrag_rl.scoring.qa_dataset mirrors this rule: keep the two in step.
    """
    path = Path(path)
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", path.stem)
    stem = re.sub(r"\.{2,}", ".", stem)  # ".." could read as a parent folder in a URL or a path
    stem = re.sub(r"^[^A-Za-z0-9]+", "", stem)[:MAX_ID_CHARS] or "doc"
    if taken is not None and stem in taken:
        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
        stem = f"{stem}-{digest}"
    return stem


# --------------------------------------------------------------------------------------------- discovery


def is_pdf(path: str | Path) -> bool:
    return Path(path).suffix.lower() in PDF_SUFFIXES


def is_supported(path: str | Path) -> bool:
    suffix = Path(path).suffix.lower()
    return suffix in PDF_SUFFIXES or suffix in IMAGE_SUFFIXES or suffix in videos.VIDEO_SUFFIXES


def _files_under(folder: Path) -> Iterator[Path]:
    """Supported files below a folder; hidden files (".DS_Store", "._x.png", temp files) are skipped."""
    for candidate in folder.rglob("*"):
        relative = candidate.relative_to(folder).parts
        if candidate.is_file() and is_supported(candidate) and not any(p.startswith(".") for p in relative):
            yield candidate


def discover_documents(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and folders into the documents to ingest, sorted and without duplicates.

    A folder is searched recursively and its other files are ignored; a file named explicitly
    must be a PDF or an image, since silently dropping it would hide a user's mistake.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"no such file or folder: {path}")
        if path.is_dir():
            found.extend(_files_under(path))
        elif is_supported(path):
            found.append(path)
        else:
            raise ValueError(f"{path}: unsupported file type {path.suffix!r} (PDF, image or video expected)")
    return sorted(dict.fromkeys(p.resolve() for p in found))


# --------------------------------------------------------------------------------------------- reading


def _check_pdf_readable(path: Path) -> None:
    """pymupdf opens a PDF in milliseconds and, unlike poppler, tells encryption apart from corruption."""
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


def _poppler_missing() -> MissingToolError:
    """Not a document's fault: every document would fail, so stop instead of skipping them all."""
    return MissingToolError("poppler is missing: install it (Debian: apt-get install poppler-utils)")


def count_pages(path: str | Path, video: videos.VideoOptions | None = None) -> int:
    """Number of pages (1 for an image, segments for a video); DocumentError for a file that cannot be read."""
    from pdf2image import pdfinfo_from_path
    from pdf2image.exceptions import PDFInfoNotInstalledError, PDFPageCountError, PDFPopplerTimeoutError, PDFSyntaxError

    path = Path(path)
    if not path.is_file():
        raise DocumentError(f"{path}: file not found")
    if videos.is_video(path):
        return videos.corpus_segment_count(path, video or videos.VideoOptions())
    if not is_pdf(path):
        _open_image(path).close()
        return 1
    _check_pdf_readable(path)
    try:
        return int(pdfinfo_from_path(str(path), timeout=RENDER_TIMEOUT_S)["Pages"])
    except PDFInfoNotInstalledError as exc:
        raise _poppler_missing() from exc
    except (PDFPageCountError, PDFSyntaxError, PDFPopplerTimeoutError) as exc:
        raise DocumentError(f"{path.name}: not a valid PDF ({exc})") from exc
    except (KeyError, ValueError) as exc:  # pdfinfo ran but printed no usable page count
        raise DocumentError(f"{path.name}: cannot read the page count ({exc})") from exc


def _open_image(path: Path) -> Image.Image:
    try:
        image = Image.open(path)
        image.load()
    except Exception as exc:  # noqa: BLE001 - PIL raises many types for broken images
        raise DocumentError(f"{path.name}: not a readable image ({exc})") from exc
    return image


def _fit(image: Image.Image, max_side: int | None) -> Image.Image:
    """Upright RGB, longer side ≤ max_side: phone photos carry their rotation in EXIF, models need RGB."""
    image = ImageOps.exif_transpose(image).convert("RGB")
    if max_side and max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return image


def render_dpi(width_pt: float, height_pt: float, dpi: float) -> float:
    """`dpi`, lowered for a page so large that it would render beyond MAX_RENDER_PIXELS or MAX_RENDER_SIDE."""
    w_in, h_in = width_pt / 72.0, height_pt / 72.0
    if w_in <= 0 or h_in <= 0:
        return dpi
    return min(dpi, math.sqrt(MAX_RENDER_PIXELS / (w_in * h_in)), MAX_RENDER_SIDE / max(w_in, h_in))


def _page_sizes(path: Path, first: int, last: int) -> list[tuple[float, float] | None]:
    """(width, height) in points of pages first..last as poppler renders them (media box, /Rotate applied);
    None for a page whose size PyMuPDF cannot read (poppler renders it at the asked dpi, unchecked)."""
    import pymupdf

    sizes: list[tuple[float, float] | None] = []
    with pymupdf.open(path) as doc:
        for number in range(first, min(last, doc.page_count) + 1):
            try:
                page = doc[number - 1]
                box = page.mediabox
                w, h = abs(box.width), abs(box.height)
                sizes.append((h, w) if page.rotation % 180 == 90 else (w, h))
            except Exception as exc:  # noqa: BLE001 - pymupdf raises several types for a broken page
                log.warning("%s: page %d: size not read (%s)", path.name, number, exc)
                sizes.append(None)
    return sizes


def _render_plan(path: Path, dpi: int, first: int, last: int) -> list[tuple[int, int, float]]:
    """(start, end, dpi) runs of at most RENDER_CHUNK consecutive pages rendered at the same dpi."""
    sizes = _page_sizes(path, first, last)
    runs: list[tuple[int, int, float]] = []
    for offset, size in enumerate(sizes):
        number = first + offset
        w_pt, h_pt = size or (0.0, 0.0)
        page_dpi = render_dpi(w_pt, h_pt, dpi) if math.isfinite(w_pt) and math.isfinite(h_pt) else dpi
        if page_dpi < dpi:
            page_dpi = max(math.floor(page_dpi * 100) / 100, 0.01)
            log.warning("%s: page %d is %.0f x %.0f pt; rendering it at %.2f dpi instead of %s to stay within %d "
                        "pixels", path.name, number, w_pt, h_pt, page_dpi, dpi, MAX_RENDER_PIXELS)
        if runs and runs[-1][2] == page_dpi and runs[-1][1] == number - 1 and number - runs[-1][0] < RENDER_CHUNK:
            runs[-1] = (runs[-1][0], number, page_dpi)
        else:
            runs.append((number, number, page_dpi))
    if first + len(sizes) - 1 < last:  # pages pymupdf does not see: let poppler report them
        runs.append((first + len(sizes), last, dpi))
    return runs


def check_rendered_size(path: Path, number: int, image: Image.Image, size_pt: tuple[float, float] | None,
                        dpi: float) -> None:
    """A page poppler could not render comes back as a tiny placeholder (1x1 px): a per-document failure,
    never an image indexed in the page's place."""
    if size_pt is None:
        return
    expected = (size_pt[0] * dpi / 72.0, size_pt[1] * dpi / 72.0)
    got = image.size

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= max(2.0, 0.02 * b)

    if not (close(got[0], expected[0]) and close(got[1], expected[1])) and \
            not (close(got[0], expected[1]) and close(got[1], expected[0])):
        raise DocumentError(f"{path.name}: page {number} could not be rendered (poppler returned {got[0]}x{got[1]} "
                            f"px for a {size_pt[0]:.0f} x {size_pt[1]:.0f} pt page at {dpi:g} dpi)")


def _render_pdf_chunk(path: Path, dpi: float, first: int, last: int, thread_count: int) -> list[Image.Image]:
    from pdf2image import convert_from_path
    from pdf2image.exceptions import PDFInfoNotInstalledError, PopplerNotInstalledError

    try:
        # pdf2image annotates dpi as int, but it passes it on to pdftoppm's -r, which takes a fractional resolution
        images = convert_from_path(str(path), dpi=dpi, fmt="jpeg",  # type: ignore[arg-type]
                                   first_page=first, last_page=last,
                                   thread_count=thread_count, timeout=RENDER_TIMEOUT_S)
    except (PDFInfoNotInstalledError, PopplerNotInstalledError) as exc:
        raise _poppler_missing() from exc
    except Exception as exc:  # noqa: BLE001 - poppler failures surface as assorted exception types
        raise DocumentError(f"{path.name}: rendering pages {first}-{last} failed ({exc})") from exc
    if len(images) != last - first + 1:
        raise DocumentError(f"{path.name}: expected {last - first + 1} pages from page {first}, got {len(images)}")
    return images


def _render_run(path: Path, dpi: float, start: int, end: int, thread_count: int,
                on_page_error: PageErrorHandler | None) -> Iterator[tuple[int, Image.Image]]:
    """(page number, image) of pages start..end. With `on_page_error`, a run poppler fails on is rendered
    again page by page, so one page it cannot draw costs that page alone (told to `on_page_error`)."""
    try:
        images = _render_pdf_chunk(path, dpi, start, end, thread_count)
    except DocumentError as exc:
        if on_page_error is None:
            raise
        if start == end:
            on_page_error(start, exc)
            return
        log.warning("%s: %s; rendering pages %d-%d one by one", path.name, exc, start, end)
        for number in range(start, end + 1):
            yield from _render_run(path, dpi, number, number, thread_count, on_page_error)
        return
    yield from zip(range(start, end + 1), images, strict=True)


def render_pages(path: str | Path, dpi: int = 144, first_page: int = 1, last_page: int | None = None,
                 thread_count: int = 2, max_side: int | None = 2400,
                 video: videos.VideoOptions | None = None,
                 on_page_error: PageErrorHandler | None = None) -> Iterator[RenderedPage]:
    """Yield pages `first_page..last_page` (1-based, inclusive) as RGB images, a chunk at a time.

    A page that cannot be rendered (poppler fails on it, or returns a placeholder) is a `DocumentError` for
    the whole document, unless `on_page_error` is given: then it is told `on_page_error(page_number, error)`
    and left out, and the other pages are yielded (ingestion keeps them and reports the page). A file that
    cannot be opened at all stays a `DocumentError`; a missing poppler a `MissingToolError`."""
    path = Path(path)
    if first_page < 1:
        raise ValueError(f"first_page is 1-based, got {first_page}")
    if videos.is_video(path):  # pages are segments: frame sheets (search_engine.video)
        yield from videos.render_segments(path, video or videos.VideoOptions(), first_page, last_page)
        return
    if not is_pdf(path):
        if first_page == 1 and (last_page is None or last_page >= 1):
            image = _fit(_open_image(path), max_side)
            yield RenderedPage(1, image, image.width, image.height)
        return
    if last_page is None:
        last_page = count_pages(path)
    else:
        _check_pdf_readable(path)  # poppler's own message for an encrypted file is unhelpful
    try:
        sizes = dict(enumerate(_page_sizes(path, first_page, last_page), start=first_page))
    except Exception as exc:  # noqa: BLE001 - pymupdf raises several types for broken files
        raise DocumentError(f"{path.name}: cannot read the page sizes ({exc})") from exc
    for start, end, run_dpi in _render_plan(path, dpi, first_page, last_page):
        for number, image in _render_run(path, run_dpi, start, end, thread_count, on_page_error):
            try:
                check_rendered_size(path, number, image, sizes.get(number), run_dpi)
                image = _fit(image, max_side)
            except Exception as exc:  # noqa: BLE001 - a placeholder, or PIL failing on the decoded page
                if on_page_error is None:
                    raise
                on_page_error(number, exc if isinstance(exc, DocumentError) else DocumentError(
                    f"{path.name}: page {number} could not be converted ({type(exc).__name__}: {exc})"))
                continue
            yield RenderedPage(number, image, image.width, image.height)


# --------------------------------------------------------------------------------------------- converter


def _save_jpeg_atomic(image: Image.Image, target: Path) -> None:
    """Write to a hidden temp name, then rename: a killed run never leaves a half-written JPEG."""
    with atomic_file(target) as fh:
        image.save(fh, format="JPEG", quality=JPEG_QUALITY)


def _warn(path: Path, error: DocumentError) -> None:
    log.warning("skipping %s: %s", path, error)


def _plan_conversion(documents: list[Path], on_error: Callable[[Path, DocumentError], None]):
    """(path, doc_id, pages) for every readable document; counting first gives the progress bar a total."""
    taken: set[str] = set()
    plan = []
    for doc in documents:
        try:
            pages = count_pages(doc)
        except DocumentError as exc:
            on_error(doc, exc)
            continue
        doc_id = doc_id_for(doc, taken)
        taken.add(doc_id)
        plan.append((doc, doc_id, pages))
    return plan


def _convert_document(doc: Path, doc_id: str, out_dir: Path, dpi: int, max_side: int | None, bar) -> list[Path]:
    written: list[Path] = []
    try:
        for page in render_pages(doc, dpi=dpi, thread_count=1, max_side=max_side):
            target = out_dir / f"{doc_id}_{page.page_number}.jpg"
            _save_jpeg_atomic(page.image, target)
            written.append(target)
            bar.update(1)
    except DocumentError:
        for target in written:  # a skipped document leaves nothing behind, as if never given
            target.unlink(missing_ok=True)
        raise
    return written


def pdf_to_images(pdf_paths: Iterable[str | Path], out_dir: str | Path, dpi: int = 144, workers: int = 2,
                  progress: bool = True, max_side: int | None = None,
                  on_error: Callable[[Path, DocumentError], None] | None = None) -> dict[str, list[Path]]:
    """Upstream's `pdf2images` step: `<out>/<doc_id>_<page>.jpg` for every page, documents in parallel.

    A document that cannot be read is handed to `on_error` (default: a logged warning) and skipped,
    so one bad file never stops a batch. Returns doc_id → written images, in page order.
    """
    from tqdm.auto import tqdm

    on_error = on_error or _warn
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plan = _plan_conversion(discover_documents(pdf_paths), on_error)
    written: dict[str, list[Path]] = {}
    with tqdm(total=sum(n for *_, n in plan), unit="page", desc="pdf2images", disable=not progress) as bar, \
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(_convert_document, doc, doc_id, out, dpi, max_side, bar): (doc, doc_id)
                   for doc, doc_id, _ in plan}
        for future in as_completed(futures):
            doc, doc_id = futures[future]
            try:
                written[doc_id] = future.result()
            except DocumentError as exc:
                on_error(doc, exc)
    return {doc_id: written[doc_id] for _, doc_id, _ in plan if doc_id in written}
