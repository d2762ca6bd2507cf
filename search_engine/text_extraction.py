"""Page text for the CPU text channel: the PDF text layer, or OCR (tesseract) when there is none."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from search_engine.corpus import DocumentError

# tesseract's OpenMP threads fight each other on small machines: 1.5 s instead of 5 s per page.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")


@dataclass
class OcrLine:
    text: str
    box: tuple[int, int, int, int]  # x1, y1, x2, y2 in image pixels
    confidence: float


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def pdf_page_texts(path: str | Path) -> list[str]:
    import pymupdf

    try:
        with pymupdf.open(path) as doc:
            if doc.needs_pass:
                raise DocumentError(f"{Path(path).name}: encrypted PDF (password required)")
            return [_normalise(page.get_text()) for page in doc]
    except DocumentError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise DocumentError(f"{Path(path).name}: cannot read the text layer ({exc})") from exc


def _tesseract():
    import pytesseract

    try:
        pytesseract.get_tesseract_version()
    except pytesseract.TesseractNotFoundError as exc:
        raise RuntimeError("OCR needs tesseract: apt-get install tesseract-ocr tesseract-ocr-eng") from exc
    return pytesseract


def ocr_image(image: Image.Image, lang: str = "eng") -> str:
    return _normalise(_tesseract().image_to_string(image.convert("RGB"), lang=lang))


def ocr_lines(image: Image.Image, lang: str = "eng") -> list[OcrLine]:
    """Text lines with their boxes, so callers can find *where* on a page something is printed."""
    pytesseract = _tesseract()
    data = pytesseract.image_to_data(image.convert("RGB"), lang=lang, output_type=pytesseract.Output.DICT)
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, word in enumerate(data["text"]):
        if not word.strip() or float(data["conf"][i]) < 0:
            continue
        groups.setdefault((data["block_num"][i], data["par_num"][i], data["line_num"][i]), []).append(i)
    lines = []
    for indices in groups.values():
        x1 = min(data["left"][i] for i in indices)
        y1 = min(data["top"][i] for i in indices)
        x2 = max(data["left"][i] + data["width"][i] for i in indices)
        y2 = max(data["top"][i] + data["height"][i] for i in indices)
        text = " ".join(data["text"][i].strip() for i in indices)
        confidence = sum(float(data["conf"][i]) for i in indices) / len(indices)
        lines.append(OcrLine(text, (x1, y1, x2, y2), confidence))
    lines.sort(key=lambda line: (line.box[1], line.box[0]))
    return lines


def page_text(pdf_text: str, image: Image.Image | None, ocr: bool = True, min_chars: int = 20) -> tuple[str, str]:
    """(text, source): the text layer when it has content, else OCR of the page image."""
    if len(re.sub(r"\s", "", pdf_text or "")) >= min_chars:
        return _normalise(pdf_text), "pdf"
    if ocr and image is not None:
        text = ocr_image(image)
        if text:
            return text, "ocr"
    return _normalise(pdf_text or ""), "pdf" if pdf_text else ""
