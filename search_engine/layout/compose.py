"""One page's parts → typed regions in reading order (`compose`), boxes in page-image pixels.

Running headers and footers, headings (printed larger or bolder than the body), paragraphs (a block split at
its breaks, at most MAX_REGION_WORDS words each), lists, captions, tables with their cells and figures with
their labels. Both readers (`pdf`, `ocr`) end here, so a PDF page and a scan come out in one shape.

Every box is clamped to the page here, once for both readers (`geometry.clamp_box`): the parts as they come in
(page units: a picture placed past the page edge, text set outside it, NaN or corner-reversed coordinates of a
broken PDF), and the regions, cells and labels as they go out (image pixels). A part with nothing on the page
is dropped (a table's cell keeps its place in the grid with an empty box), so every box of a layout is finite,
ordered (x1 <= x2, y1 <= y2) and inside `[0, width] x [0, height]` of its page image, and whatever crops a
region out of the page image can trust it.
"""
from __future__ import annotations

import math
import re
from collections import Counter

from search_engine.layout.captions import MAX_CAPTION_WORDS, attach_captions, is_caption
from search_engine.layout.figures import figure_texts, labels_not_tables
from search_engine.layout.geometry import clamp_box, grow, inside, union
from search_engine.layout.margins import margin_kind, running_key
from search_engine.layout.parts import Block, Figure, Line, Piece, Table, join_lines
from search_engine.page_layout import Box, Label, PageLayout, Region, RegionKind, TableCell

_NOWHERE: Box = (0.0, 0.0, 0.0, 0.0)  # the box of a table cell with nothing on the page (as a merged cell's)
_BULLET = re.compile(r"^\s*(?:[•◦▪●○■□–—\-*·]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s+")
MAX_REGION_WORDS = 120  # longer text blocks are split at line ends: a region is a paragraph, not a column


def _body_size(blocks: list[Block]) -> float:
    """The font size (line height for OCR) most characters are printed in."""
    sizes: Counter[float] = Counter()
    for block in blocks:
        for line in block.lines:
            sizes[round(line.size * 2) / 2] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def _is_heading(block: Block, body: float, body_bold: bool) -> bool:
    if len(block.lines) > 3 or block.words > 20 or not block.text.strip():
        return False
    if block.text.rstrip().endswith((".", ";", ",")) and block.words > 8:
        return False
    larger = min(line.size for line in block.lines) >= 1.15 * body
    bolder = all(line.bold for line in block.lines) and not body_bold
    return larger or bolder


def _apart(line: Line, following: Line) -> bool:
    """Two lines of one block that cannot be one paragraph: on different printed rows with no x-range in common.
    PyMuPDF groups a table row's last cells with the next row's label ("100.0 66.1" over "Apr-2015" at the left
    edge) into one block; read as one paragraph, the label's place is lost and its row's values have no label.
    Rows set tight touch or overlap by a sliver (a glyph box is taller than the line pitch), so "another row" is
    a vertical overlap of at most a quarter of the lower line's height."""
    overlap = min(line.box[3], following.box[3]) - max(line.box[1], following.box[1])
    below = overlap <= 0.25 * min(line.box[3] - line.box[1], following.box[3] - following.box[1])
    return below and (following.box[0] > line.box[2] or following.box[2] < line.box[0])


def _split_paragraphs(block: Block) -> list[list[Line]]:
    """A block as paragraphs: a break after a line that ends well short of the block's right edge and
    before an indented line, between lines that share no x-range (`_apart`), and at most MAX_REGION_WORDS
    words each (a block can be a whole column)."""
    box = block.box
    width = max(1.0, box[2] - box[0])
    parts: list[list[Line]] = [[]]
    words = 0
    for k, line in enumerate(block.lines):
        n = len(line.text.split())
        if parts[-1] and (words + n > MAX_REGION_WORDS or _apart(parts[-1][-1], line)):
            parts.append([])
            words = 0
        parts[-1].append(line)
        words += n
        nxt = block.lines[k + 1] if k + 1 < len(block.lines) else None
        if nxt is not None and len(block.lines) > 3:
            short = line.box[2] < box[2] - 0.2 * width
            indented = nxt.box[0] > box[0] + 1.5 * line.size
            if short and (indented or line.text.rstrip().endswith((".", ":", "。", "：", "!", "?"))):
                parts.append([])
                words = 0
    return [p for p in parts if p]


def compose(page_id: str, blocks: list[Block], tables: list[Table], figures: list[Figure],
            page_w: float, page_h: float, scale: tuple[float, float], image_size: tuple[int, int],
            running: frozenset[str], source: str) -> PageLayout:
    """Blocks, tables and figures of one page → typed regions in reading order, boxes in image pixels, every
    one on the page (see the module doc). ValueError for a page or an image without a finite positive size."""
    sx, sy = scale
    if not all(map(_positive, (sx, sy, *image_size))):
        raise ValueError(f"page {page_id}: no finite positive scale or image size ({scale}, {image_size})")
    image_w, image_h = int(image_size[0]), int(image_size[1])
    blocks, tables, figures = on_page(blocks, tables, figures, page_w, page_h)

    def px(box: Box) -> Box:
        scaled = (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
        clamped = clamp_box(scaled, image_w, image_h) or _NOWHERE
        return (round(clamped[0], 1), round(clamped[1], 1), round(clamped[2], 1), round(clamped[3], 1))

    used: set[int] = set()
    for table in tables:  # text of a table is its cells
        for block in blocks:
            if inside(block.box, grow(table.box, 1.0)):
                used.add(block.order)
                table.order = min(table.order, block.order) if table.order else block.order
    body = _body_size(blocks)
    body_bold = sum(len(ln.text) for b in blocks for ln in b.lines if ln.bold) > 0.5 * max(
        1, sum(len(ln.text) for b in blocks for ln in b.lines))
    margin: dict[int, RegionKind] = {}
    drawn = [t.box for t in tables] + [f.box for f in figures]
    for block in blocks:
        if not running_key(block.text).strip("# ") and any(inside(block.box, grow(box, 1.0)) for box in drawn):
            continue  # a bare number on a chart or in a table is its tick label or cell, not a page number
        angles = {round(line.angle) for line in block.lines}
        kind = margin_kind(block.box, block.text, running, page_w, page_h, angles.pop() if len(angles) == 1 else 0.0)
        if kind is not None:
            margin[block.order] = kind
            used.add(block.order)
    # labels first: a caption lies outside the figure's tick and category labels, not its drawing alone
    figure_texts(figures, blocks, used)
    tables = labels_not_tables(tables, figures)
    attach_captions(blocks, [*tables, *figures], used)
    placed: list[Table | Figure] = [*tables, *figures]
    for item in placed:
        if not item.order:
            later = [b.order for b in blocks if b.box[1] >= item.box[1] and b.order not in used]
            item.order = (min(later) - 0.5) if later else len(blocks) + item.box[1] / max(page_h, 1)

    entries: list[tuple[float, Region]] = []
    for block in blocks:
        if block.order in margin:  # running headers first, footers last, whatever the content stream's order
            key = block.order - len(blocks) - 1 if margin[block.order] == "header" else block.order + 2 * len(blocks)
            entries.append((key, Region("", margin[block.order], px(block.box), block.text)))
            continue
        if block.order in used:
            continue
        if _is_heading(block, body, body_bold):
            entries.append((block.order, Region("", "heading", px(block.box), block.text)))
            continue
        if is_caption(block.text) and block.words <= MAX_CAPTION_WORDS:  # of a figure not found as such
            entries.append((block.order, Region("", "caption", px(block.box), block.text)))
            continue
        body_kind: RegionKind = "list" if _BULLET.match(block.lines[0].text) and len(block.lines) > 1 else "text"
        for k, part in enumerate(_split_paragraphs(block)):
            # OCR keeps a paragraph's printed lines apart: Tesseract groups a slide's list or a scan's small
            # table into one paragraph, and its rows are what a reader pairs (the reader rejoins wrapped lines)
            text = ("\n".join(ln.text.strip() for ln in part if ln.text.strip()) if source == "ocr"
                    else join_lines(line.text for line in part))
            if text:
                entries.append((block.order + k * 1e-3, Region("", body_kind, px(union(ln.box for ln in part)), text)))
    for table in tables:
        cells = [TableCell(r, c, text, px(box), r < table.header_rows or c < table.header_cols)
                 for r, row in enumerate(table.rows) for c, (text, box) in enumerate(row)]
        text = "\n".join(" | ".join(t for t, _ in row) for row in table.rows)
        entries.append((table.order, Region("", "table", px(table.box), text, table.caption, cells,
                                            table.header_rows, table.header_cols)))
    for figure in figures:
        lines = sorted(figure.texts, key=lambda ln: (round(ln.box[1] / max(ln.size, 1)), ln.box[0]))
        text = "\n".join(ln.text for ln in lines if ln.text)
        labels = [Label(p.text, px(p.box), ln.angle) for ln in lines
                  for p in (ln.pieces or [Piece(ln.text, ln.box, ln.size)]) if p.text.strip()]
        entries.append((figure.order, Region("", "figure", px(figure.box), text, figure.caption, labels=labels)))
    entries.sort(key=lambda e: e[0])
    regions = []
    for n, (_, region) in enumerate(entries, start=1):
        region.region_id = f"r{n}"
        regions.append(region)
    return PageLayout(page_id, int(image_size[0]), int(image_size[1]), regions, source)  # type: ignore[arg-type]


def on_page(blocks: list[Block], tables: list[Table], figures: list[Figure], page_w: float,
            page_h: float) -> tuple[list[Block], list[Table], list[Figure]]:
    """The parts of a page clamped to it (`geometry.clamp_box`, page units): pieces, lines, blocks, tables and
    figures with nothing on the page are dropped, a table cell keeps its place with an empty box; blocks are
    numbered again in their order (composition ranks regions by it). ValueError for a page without a finite
    positive size (a broken page's media box): its parts cannot be placed."""

    def line_on_page(line: Line) -> Line | None:
        box = clamp_box(line.box, page_w, page_h)
        if box is None or not math.isfinite(line.size) or not math.isfinite(line.angle):
            return None
        pieces = [Piece(p.text, b, p.size if math.isfinite(p.size) else line.size, p.bold)
                  for p in line.pieces if (b := clamp_box(p.box, page_w, page_h)) is not None]
        return Line(line.text, box, line.size, line.bold, pieces, line.angle)

    if not (_positive(page_w) and _positive(page_h)):
        raise ValueError(f"a page needs a finite positive size, got {page_w!r} x {page_h!r}")
    kept_blocks: list[Block] = []
    for block in blocks:
        lines = [ln for ln in map(line_on_page, block.lines) if ln is not None]
        if lines:
            kept_blocks.append(Block(len(kept_blocks) + 1, lines))
    kept_tables: list[Table] = []
    for table in tables:
        box = clamp_box(table.box, page_w, page_h)
        if box is None or not table.rows:
            continue
        rows = [[(text, clamp_box(cell, page_w, page_h) or _NOWHERE) for text, cell in row] for row in table.rows]
        kept_tables.append(Table(box, rows, table.header_rows, table.header_cols, table.order, table.caption,
                                 table.ruled))
    kept_figures: list[Figure] = []
    for figure in figures:
        box = clamp_box(figure.box, page_w, page_h)
        if box is not None:
            texts = [ln for ln in map(line_on_page, figure.texts) if ln is not None]
            kept_figures.append(Figure(box, texts, figure.order, figure.caption))
    return kept_blocks, kept_tables, kept_figures


def _positive(value: float) -> bool:
    """A finite number above 0 (a page's size, a scale)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and number > 0


def empty_layout(page_id: str, image_size: tuple[int, int]) -> PageLayout:
    """A page with no readable structure (no text layer, OCR off or found nothing)."""
    return PageLayout(page_id, int(image_size[0]), int(image_size[1]), [], "none")
