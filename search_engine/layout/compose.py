"""One page's parts → typed regions in reading order (`compose`), boxes in page-image pixels.

Running headers and footers, headings (printed larger or bolder than the body), paragraphs (a block split at
its breaks, at most MAX_REGION_WORDS words each), lists, captions, tables with their cells and figures with
their labels. Both readers (`pdf`, `ocr`) end here, so a PDF page and a scan come out in one shape.
"""
from __future__ import annotations

import re
from collections import Counter

from search_engine.layout.captions import MAX_CAPTION_WORDS, attach_captions, is_caption
from search_engine.layout.figures import figure_texts, labels_not_tables
from search_engine.layout.geometry import grow, inside, union
from search_engine.layout.margins import margin_kind, running_key
from search_engine.layout.parts import Block, Figure, Line, Piece, Table, join_lines
from search_engine.page_layout import Box, Label, PageLayout, Region, RegionKind, TableCell

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


def _split_paragraphs(block: Block) -> list[list[Line]]:
    """A block as paragraphs: a break after a line that ends well short of the block's right edge and
    before an indented line, and at most MAX_REGION_WORDS words each (a block can be a whole column)."""
    box = block.box
    width = max(1.0, box[2] - box[0])
    parts: list[list[Line]] = [[]]
    words = 0
    for k, line in enumerate(block.lines):
        n = len(line.text.split())
        if parts[-1] and words + n > MAX_REGION_WORDS:
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
    """Blocks, tables and figures of one page → typed regions in reading order, boxes in image pixels."""
    sx, sy = scale

    def px(box: Box) -> Box:
        return (round(box[0] * sx, 1), round(box[1] * sy, 1), round(box[2] * sx, 1), round(box[3] * sy, 1))

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


def empty_layout(page_id: str, image_size: tuple[int, int]) -> PageLayout:
    """A page with no readable structure (no text layer, OCR off or found nothing)."""
    return PageLayout(page_id, int(image_size[0]), int(image_size[1]), [], "none")
