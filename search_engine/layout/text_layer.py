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
from search_engine.text_extraction import clean_glyphs

if TYPE_CHECKING:  # pragma: no cover
    import pymupdf

# Empty space, in font sizes, that separates two pieces of a line (table cells); runs of text closer than this
# are one piece
CELL_GAP = 0.8


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
                span["text"] = clean_glyphs(span["text"])
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
                if pieces and box[0] - pieces[-1].box[2] <= CELL_GAP * span["size"]:
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
        lines = rows_in_reading_order(lines)
        if lines:
            blocks.append(Block(len(blocks) + 1, lines))
    return blocks


def _same_row(a: Line, b: Line) -> bool:
    """Two level lines printed on one row: their vertical extents overlap by half the lower one's height."""
    overlap = min(a.box[3], b.box[3]) - max(a.box[1], b.box[1])
    return a.angle == b.angle == 0.0 and overlap >= 0.5 * min(a.box[3] - a.box[1], b.box[3] - b.box[1]) > 0


def rows_in_reading_order(lines: list[Line]) -> list[Line]:
    """A block's lines with each printed row whose lines the content stream drew out of order rebuilt as one
    line, left to right: a PDF may draw a row's numbers in another font after its words (Korean and Chinese
    reports: "피해액 | 조원에 이르며 … | 1.3" for "피해액 1.3조원에 이르며 …"), and read in stream order the
    number lands at the end of the sentence, away from its unit. A row drawn left to right keeps its lines as
    they are (a table's cells, which the table finders read line by line).

    Why by hand: PyMuPDF's `sort=True` orders blocks, not the lines of one printed row."""
    out: list[Line] = []
    k = 0
    while k < len(lines):
        end = k + 1
        while end < len(lines) and _same_row(lines[k], lines[end]):
            end += 1
        row = lines[k:end]
        if any(b.box[0] < a.box[0] for a, b in zip(row, row[1:])):
            out.append(_joined_row(row))
        else:
            out.extend(row)
        k = end
    return out


def _joined_row(row: list[Line]) -> Line:
    """One line of a row's lines: their pieces left to right, two pieces closer than CELL_GAP (as spans are
    joined in `pdf_blocks`) joined into one."""
    pieces: list[Piece] = []
    for piece in sorted((p for line in row for p in (line.pieces or [Piece(line.text, line.box, line.size,
                                                                           line.bold)])),
                        key=lambda p: p.box[0]):
        if pieces and piece.box[0] - pieces[-1].box[2] <= CELL_GAP * piece.size:
            prev = pieces[-1]
            pieces[-1] = Piece(f"{prev.text} {piece.text}", union([prev.box, piece.box]), max(prev.size, piece.size),
                               prev.bold and piece.bold)
        else:
            pieces.append(piece)
    text = re.sub(r"\s+", " ", " ".join(p.text for p in pieces)).strip()
    return Line(text, union(line.box for line in row), max(line.size for line in row),
                all(line.bold for line in row), pieces, 0.0)


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
    title = re.sub(r"\s+", " ", clean_glyphs(" ".join(best))).strip()
    if title and len(title.split()) <= max_words and any(c.isalpha() for c in title):
        return title
    meta = re.sub(r"\s+", " ", (doc.metadata or {}).get("title") or "").strip()
    return meta if 2 <= len(meta.split()) <= max_words else ""
