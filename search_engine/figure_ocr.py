"""OCR of the pictures on text-layer pages: a raster chart's ticks, legend and callouts are pixels.

A born-digital PDF's text layer holds every word typed into the document, but not the words inside its
pictures: a chart pasted as an image, a screenshot, a scanned diagram. Those words are often the answer
("which region grew most?") and the words a searcher types. `read_figures` OCRs the largest figures of a
text-layer page that carry no text of their own (`layout.figures.unread_figures`), crop by crop, and
makes the lines it reads the figures' labels and text (`layout.figures.add_figure_reading`), so the
region search and the chart reader see a raster chart as they see a vector one.

Cost is bounded: at most `MAX_FIGURES_READ` crops a page, each read once in one language (the script of the
page's text decides when the language is "auto": `ocr_languages`, instead of the detection and extra passes
that "auto" may take on a whole page). Lines Tesseract is unsure of (photographs read as letters) are dropped.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from PIL import Image

from search_engine.documents import MissingToolError
from search_engine.layout.figures import add_figure_reading, unread_figures
from search_engine.layout.geometry import clamp_box, crop_box
from search_engine.ocr_languages import choose_languages, script_of_text
from search_engine.page_layout import PageLayout
from search_engine.text_extraction import SPARSE_TEXT, installed_ocr_langs, ocr_lines

log = logging.getLogger(__name__)

MAX_FIGURES_READ = 3  # crops OCR'd per page: the largest figures; a page of many thumbnails is not a chart
# Tesseract's mean word confidence (0-100) under which a line is taken for texture read as letters: printed
# labels read at 80-95, a photograph's leaves and bricks at 20-50 (Tesseract's own scale).
MIN_LINE_CONFIDENCE = 60.0
SMALL_CROP_SIDE = 800  # a crop smaller than this (pixels, longer side) is read enlarged 2x: small labels
PAD = 4  # pixels added around the figure's box: labels often touch its edge
MIN_CROP_SIDE = 8  # pixels: a smaller crop (a sliver of a figure at the page's edge) holds no readable label


def figure_lang(configured: str | None, page_text: str) -> str:
    """The language to read a page's figures in: the configured one, or for "auto"/None the packs of the page's
    own script plus English (a figure in a Chinese report is labelled in Chinese, usually with Latin digits;
    `ocr_languages.script_of_text`)."""
    if configured and configured != "auto":
        return configured
    installed = set(installed_ocr_langs())
    choice = choose_languages(script_of_text(page_text) or "Latin", installed)
    if choice is not None and choice.lang:
        return choice.lang
    return "eng" if "eng" in installed else (sorted(installed)[0] if installed else "eng")


def _covers(region: tuple[float, float, float, float], line: tuple[int, int, int, int],
            scale: tuple[float, float], origin: tuple[int, int]) -> bool:
    """Whether a line read in a crop (crop pixels) has its centre inside a region of the layout (layout pixels)."""
    cx = (origin[0] + (line[0] + line[2]) / 2) / scale[0]
    cy = (origin[1] + (line[1] + line[3]) / 2) / scale[1]
    return region[0] <= cx <= region[2] and region[1] <= cy <= region[3]


def read_figures(layout: PageLayout, image: Image.Image, lang: str | None, page_text: str,
                 on_error: Callable[[str, Exception], None] | None = None) -> str:
    """OCR the page's unread figures into `layout` (in place); the text read, for the page's text channel
    ("" when there was nothing to read). A figure OCR cannot read stays as it was: the page keeps its text,
    and the failure goes to `on_error(region_id, exception)` (ingestion records it; default: a warning).

    Each crop is the figure's box mapped onto `image` and clamped to it (`layout.geometry.crop_box`): a box
    that lies past the page's edge (a picture placed off the page, a layout of another rendering) is cut at
    the edge, or skipped when nothing of it is on the image — never a crop PIL refuses."""
    figures = unread_figures(layout)[:MAX_FIGURES_READ]
    if not figures:
        return ""
    language = figure_lang(lang, page_text)
    sx, sy = image.width / max(layout.width, 1), image.height / max(layout.height, 1)
    typed = [r.box for r in layout.regions if r.kind != "figure"]  # words the text layer has already
    read: list[str] = []
    for region in figures:
        window = crop_box(region.box, (sx, sy), image.size, pad=PAD, min_side=MIN_CROP_SIDE)
        if window is None:
            continue
        left, top = window[0], window[1]
        try:
            crop = image.crop(window)
            lines = ocr_lines(crop, language, scale=2.0 if max(crop.size) < SMALL_CROP_SIDE else 1.0,
                              config=SPARSE_TEXT)
        except MissingToolError:  # no tesseract: no page's fault
            raise
        except Exception as exc:  # noqa: BLE001 - an OCR failure costs the figure its words, not the page
            log.warning("page %s: figure %s not read (%s: %s)", layout.page_id, region.region_id,
                        type(exc).__name__, exc)
            if on_error is not None:
                on_error(region.region_id, exc)
            continue
        sure = [line for line in lines if line.text.strip() and line.confidence >= MIN_LINE_CONFIDENCE
                and not any(_covers(box, line.box, (sx, sy), (left, top)) for box in typed)]
        if not sure:
            continue
        for line in sure:  # crop pixels -> page-image pixels of the layout
            line.box = (int(line.box[0] / sx), int(line.box[1] / sy), int(line.box[2] / sx), int(line.box[3] / sy))
            for word in line.words:
                word.box = (int(word.box[0] / sx), int(word.box[1] / sy), int(word.box[2] / sx), int(word.box[3] / sy))
        add_figure_reading(region, sure, (left / sx, top / sy))
        for label in region.labels:  # read inside the crop, which is on the image: on the page, to the pixel
            label.box = clamp_box(label.box, layout.width, layout.height) or region.box
        read.append(region.text)
    return "\n".join(read)
