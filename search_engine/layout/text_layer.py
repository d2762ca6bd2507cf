"""A PDF page's text layer as blocks of lines (`pdf_blocks`), read in the frame of its page image (`upright`),
and the document's title (`document_title`).

PyMuPDF's blocks, lines and spans give the blocks; each line keeps its pieces (runs of text without a wide gap
inside: table-cell candidates), its font size and weight (headings) and its angle (text set sideways).
"""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from search_engine.layout.geometry import union
from search_engine.layout.parts import Block, Line, Piece
from search_engine.text_extraction import CONTROL_CHARACTERS

if TYPE_CHECKING:  # pragma: no cover
    import pymupdf


def pdf_blocks(page: pymupdf.Page) -> list[Block]:
    import pymupdf

    flags = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES
    blocks: list[Block] = []
    for raw in page.get_text("dict", flags=flags)["blocks"]:
        if raw.get("type", 0) != 0:
            continue
        lines = []
        for raw_line in raw["lines"]:
            for span in raw_line["spans"]:  # glyphs of a font without a Unicode map come out as control codes
                span["text"] = CONTROL_CHARACTERS.sub("", span["text"])
            # a span without a finite box (a broken font matrix) cannot be placed: left out, like its glyphs
            spans = [s for s in raw_line["spans"] if s["text"].strip() and all(map(math.isfinite, s["bbox"]))
                     and math.isfinite(s["size"])]
            if not spans:
                continue
            pieces: list[Piece] = []
            spaced = False  # the previous span ended in a space: its box holds the space, the gap is 0
            for span in spans:
                bold = bool(span["flags"] & 16) or "bold" in span["font"].lower()
                box = tuple(span["bbox"])
                if pieces and box[0] - pieces[-1].box[2] <= 0.8 * span["size"]:
                    prev = pieces[-1]
                    # "The " + "LongTable" (two fonts): the space is printed, so it is kept
                    spaced = spaced or span["text"][:1].isspace()
                    joiner = " " if spaced or box[0] - prev.box[2] >= 0.15 * span["size"] else ""
                    pieces[-1] = Piece((prev.text + joiner + span["text"]).strip(), union([prev.box, box]),
                                       max(prev.size, span["size"]), prev.bold and bold)
                else:
                    pieces.append(Piece(span["text"].strip(), box, span["size"], bold))
                spaced = span["text"][-1:].isspace()
            text = re.sub(r"\s+", " ", " ".join(p.text for p in pieces)).strip()
            size = max(s["size"] for s in spans)
            cos, sin = raw_line.get("dir", (1.0, 0.0))
            angle = round(math.degrees(math.atan2(-sin, cos)), 1)  # PDF image y grows downwards
            lines.append(Line(text, union(p.box for p in pieces), size, all(p.bold for p in pieces), pieces,
                              angle))
        if lines:
            blocks.append(Block(len(blocks) + 1, lines))
    return blocks


def upright(page: pymupdf.Page) -> pymupdf.Page:
    """The page with its `/Rotate` baked into its content (in memory only), so text, drawings, images and
    tables come back in the frame of the rendered page image; the page itself, for chaining.

    Why: PyMuPDF reports text and drawings in the *unrotated* page's coordinates while the page image is
    rendered rotated, so on a `/Rotate` page (landscape slides made as rotated portrait pages, a landscape
    table in a paper, a scan stored sideways) every box landed elsewhere on the image, and the layout rules
    (rows, columns, margins, headings) read text that runs down the page. `Page.remove_rotation` rewrites
    the page so it looks the same at rotation 0 (the document on disk is not touched); rendering is
    unchanged. Older PyMuPDF without it: the page is left as it is.
    """
    if page.rotation % 360 and hasattr(page, "remove_rotation"):
        page.remove_rotation()
    return page


def document_title(doc: pymupdf.Document, max_words: int = 25) -> str:
    """The document's title: the text set in the largest font on its first page (what a reader takes for
    the title), else the PDF's metadata title; "" when neither says anything."""
    import pymupdf

    best_size, best = 0.0, []  # the spans of the largest size, from the first block that has it
    if doc.page_count:
        flags = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES
        for block in upright(doc[0]).get_text("dict", flags=flags)["blocks"]:
            spans = [s for line in block.get("lines", []) for s in line["spans"] if s["text"].strip()]
            if not spans:
                continue
            size = max(round(s["size"], 1) for s in spans)
            if size > best_size:
                best_size, best = size, [s["text"].strip() for s in spans if round(s["size"], 1) == size]
    title = re.sub(r"\s+", " ", " ".join(best)).strip()
    if title and len(title.split()) <= max_words and any(c.isalpha() for c in title):
        return title
    meta = re.sub(r"\s+", " ", (doc.metadata or {}).get("title") or "").strip()
    return meta if 2 <= len(meta.split()) <= max_words else ""
