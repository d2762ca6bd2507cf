"""Running headers and footers: short text in a page's top or bottom margin band that repeats on several pages
of the document (`running_texts`: titles, chapter names, "Page n"), or that sits in the outermost band of a
page (`margin_kind`). They say nothing about the page: composed first and last, and not searched.
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from typing import TYPE_CHECKING, Literal

from search_engine.layout.parts import NUMERIC
from search_engine.layout.text_layer import upright
from search_engine.page_layout import Box
from search_engine.text_extraction import clean_glyphs

if TYPE_CHECKING:  # pragma: no cover
    import pymupdf


log = logging.getLogger(__name__)

_DIGITS = re.compile(r"\d+")
MARGIN_BAND = 0.06  # outermost band (fraction of the page height) where short text is a header/footer
RUNNING_BAND = 0.15  # band searched for text repeated across pages (running headers/footers: a 1-inch margin
# plus the header line is ~0.13 of a letter page)


def running_key(text: str) -> str:
    """What two running headers have in common across pages: case, digits (page numbers) and spacing aside
    (a noncharacter read as the space it stands for, as the layout reads it: `clean_glyphs`)."""
    return re.sub(r"\s+", " ", _DIGITS.sub("#", clean_glyphs(text).lower())).strip()


def _number_key(box: Box, page_w: float, page_h: float) -> str:
    """The running key of a bare number printed in a margin band: a page number has no words to repeat,
    so what repeats is where it sits — the band (top/bottom) and the third of the page width (a slide's
    number in the bottom-right corner, a report's centred under the text)."""
    band = "top" if box[3] <= RUNNING_BAND * page_h else "bottom"
    third = min(2, int(3 * ((box[0] + box[2]) / 2) / max(page_w, 1e-6)))
    return f"# @{band}-{('left', 'centre', 'right')[third]}"


def margin_kind(box: Box, text: str, running: frozenset[str], page_w: float,
                page_h: float, angle: float = 0.0) -> Literal["header", "footer"] | None:
    """"header"/"footer" for short text in the outermost band, or repeated across pages in the wider band
    (a bare number: by where it sits, `_number_key`). Text set sideways (`angle` ±90: a landscape page
    in a portrait document keeps the document's running head along its side) is measured across the page:
    its header band is the side its letters' tops point to."""
    if len(text.split()) > 25:
        return None
    if abs(abs(angle) - 90) < 1:  # reading downwards (-90): tops point right; upwards (+90): left
        box, page_h = ((page_w - box[2], box[1], page_w - box[0], box[3]) if angle < 0 else box), page_w
        box = (box[1], box[0], box[3], box[2])  # the distance from the header side is now "y"
    top_band = box[3] <= RUNNING_BAND * page_h
    bottom_band = box[1] >= (1 - RUNNING_BAND) * page_h
    if not (top_band or bottom_band):
        return None
    outer = box[3] <= MARGIN_BAND * page_h or box[1] >= (1 - MARGIN_BAND) * page_h
    key = running_key(text)
    if not key.strip("# "):
        key = _number_key(box, page_w, page_h)
    if outer or key in running:
        return "header" if top_band else "footer"
    return None


def running_texts(doc: pymupdf.Document, band: float = RUNNING_BAND) -> frozenset[str]:
    """`running_key`s of short text printed in the top or bottom band of at least two pages of the
    document: its running headers and footers (titles, chapter names, "Page n")."""
    seen: Counter[str] = Counter()
    pages = 0
    for number in range(doc.page_count):
        pages += 1
        try:  # a page PyMuPDF cannot read adds nothing; its own layout step reports it
            page = upright(doc[number])
            width, height = page.rect.width, page.rect.height
            found = page.get_text("blocks")
        except Exception as exc:  # noqa: BLE001 - PyMuPDF raises several types for a broken page
            log.warning("page %d: margins not read for the running headers (%s: %s)", number + 1,
                        type(exc).__name__, exc)
            continue
        keys = set()
        for x1, y1, x2, y2, text, *_ in found:
            if (y2 <= band * height or y1 >= (1 - band) * height) and 0 < len(text.split()) <= 25:
                key = running_key(text)
                if not key.strip("# "):  # a bare number: a page number repeats by its place, not its text
                    key = _number_key((x1, y1, x2, y2), width, height) if NUMERIC.match(text) else ""
                keys.add(key)
        seen.update(keys)
    # a bare number in one place of the margin is a page number when it is there on at least half the
    # pages (a chart's axis or a table's last row may put a number in the band of a page or two)
    return frozenset(key for key, count in seen.items() if count >= 2 and key.strip("# ") and (
        not key.startswith("# @") or count >= pages / 2))
