"""Page text for the CPU text channel: the PDF text layer, or OCR (tesseract) when there is none."""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from PIL import Image

from search_engine.corpus import DocumentError

# tesseract's OpenMP threads fight each other on small machines: 1.5 s instead of 5 s per page.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

TESSERACT_HINT = "OCR needs the tesseract binary: apt-get install tesseract-ocr tesseract-ocr-eng"


@dataclass
class OcrLine:
    text: str
    box: tuple[int, int, int, int]  # x1, y1, x2, y2 in image pixels
    confidence: float = 0.0  # mean word confidence, 0-100


def _normalise(text: str) -> str:
    """One space between words: embedders and BM25 gain nothing from layout whitespace."""
    return re.sub(r"\s+", " ", text).strip()


def pdf_page_texts(path: str | Path) -> list[str]:
    """The text layer of every page (empty strings for scanned pages), read in one pass."""
    import pymupdf

    name = Path(path).name
    try:
        with pymupdf.open(path) as doc:
            if doc.needs_pass:
                raise DocumentError(f"{name}: encrypted PDF (password required)")
            return [_normalise(page.get_text()) for page in doc]
    except DocumentError:
        raise
    except Exception as exc:  # noqa: BLE001 - pymupdf raises several types for broken files
        raise DocumentError(f"{name}: cannot read the text layer ({exc})") from exc


@functools.cache
def _checked_tesseract() -> ModuleType:
    """pytesseract once the binary is known to run (cached: the check costs a process start)."""
    import pytesseract

    try:
        pytesseract.get_tesseract_version()
    except pytesseract.TesseractNotFoundError as exc:  # not cached: a later install is picked up
        raise RuntimeError(TESSERACT_HINT) from exc
    return pytesseract


def _tesseract() -> ModuleType:
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # tesseract inherits the environment at each call
    return _checked_tesseract()


def ocr_image(image: Image.Image, lang: str = "eng") -> str:
    """All text tesseract reads on the image, whitespace-normalised."""
    return _normalise(_tesseract().image_to_string(image.convert("RGB"), lang=lang))


def _group_words(data: dict[str, list]) -> dict[tuple[int, int, int], list[int]]:
    """Word indices per (block, paragraph, line): tesseract's own notion of a printed line."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, word in enumerate(data["text"]):
        if not str(word).strip() or float(data["conf"][i]) < 0:
            continue
        groups.setdefault((data["block_num"][i], data["par_num"][i], data["line_num"][i]), []).append(i)
    return groups


def _line(data: dict[str, list], indices: list[int]) -> OcrLine:
    indices = sorted(indices, key=lambda i: data["left"][i])  # words left to right
    x1 = min(data["left"][i] for i in indices)
    y1 = min(data["top"][i] for i in indices)
    x2 = max(data["left"][i] + data["width"][i] for i in indices)
    y2 = max(data["top"][i] + data["height"][i] for i in indices)
    text = " ".join(str(data["text"][i]).strip() for i in indices)
    confidence = sum(float(data["conf"][i]) for i in indices) / len(indices)
    return OcrLine(text, (int(x1), int(y1), int(x2), int(y2)), confidence)


def ocr_lines(image: Image.Image, lang: str = "eng") -> list[OcrLine]:
    """Text lines with their boxes, top to bottom, so callers can find *where* something is printed."""
    pytesseract = _tesseract()
    data = pytesseract.image_to_data(image.convert("RGB"), lang=lang, output_type=pytesseract.Output.DICT)
    lines = [_line(data, indices) for indices in _group_words(data).values()]
    lines.sort(key=lambda line: (line.box[1], line.box[0]))
    return lines


def page_text(pdf_text: str, image: Image.Image | None, ocr: bool = True, min_chars: int = 20) -> tuple[str, str]:
    """(text, source): the text layer when it has real content, else OCR of the page image.

    A layer under `min_chars` non-space characters is usually a scan with a page number or a stray
    header, so OCR reads the page instead. When OCR is off or finds nothing, whatever short layer
    text there is still beats nothing ("pdf"); with no text at all the answer is ("", "").
    """
    layer = _normalise(pdf_text or "")
    if len(layer.replace(" ", "")) >= min_chars:
        return layer, "pdf"
    if ocr and image is not None:
        text = ocr_image(image)
        if text:
            return text, "ocr"
    return (layer, "pdf") if layer else ("", "")
