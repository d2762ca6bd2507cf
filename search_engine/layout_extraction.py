"""A page's structure (`search_engine.page_layout.PageLayout`) from a PDF's text layer or from OCR.

Born-digital PDFs (`pdf_page_layout`): PyMuPDF's blocks, lines and spans give paragraphs, and font
size and weight tell headings from body text; `Page.find_tables` reads ruled tables (cells with row
and column); images and clusters of vector drawings are figures, and the short text printed on or
right around them (axis labels, tick values, legends, callouts) is the figure's text; a caption is
the block right below or above a figure or table that starts with a label and a number ("Figure 3:",
"Table 2.", "图 1", "表2") — found by position and that shape, not by a list of words. Text repeated
in the top or bottom margin band of several pages of a document (`running_texts`), or printed in the
outermost band of a page, is a running header or footer.

Scans, slides and photos (`layout_from_ocr_lines` / `ocr_page_layout`): Tesseract's blocks and
paragraphs are regions, and lines printed markedly larger than the page's body lines are headings.

Both paths share one table finder for tables without rulings (`_aligned_tables`): text pieces
separated by wide gaps, on consecutive rows, whose x-ranges line up into the same columns are a
table — pure geometry, so it works for booktabs-style PDF tables and for OCR'd tables alike.
Header rows are recognised by typography (bold, or set apart from the body rows' font) or by content
(a non-numeric first row above numeric columns), a header column when the first column is labels and
the others are numbers.

Why by hand: PyMuPDF and Tesseract give the raw blocks, lines and ruled tables (used here), but no
library here turns them into typed regions (heading / caption / figure with its labels / running
header) with one box convention for both sources; pdfplumber was not measured (PyMuPDF is already
a dependency and its text layer is exact; pdfplumber's table finder is the one PyMuPDF's ports).

Boxes of a PDF page are converted from PDF points to the pixels of the stored page image
(`image_size`), so every consumer (search hits, readers, the demo's crops) uses one unit.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from search_engine.page_layout import Box, Label, PageLayout, Region, RegionKind, TableCell
from search_engine.text_extraction import CONTROL_CHARACTERS

if TYPE_CHECKING:  # pragma: no cover
    import pymupdf
    from PIL import Image

    from search_engine.text_extraction import OcrLine

# A caption starts with a short label word (any script) and a number: "Figure 3:", "Fig. 2.", "Table IV",
# "图 1", "表2：", "Table A.1" (an appendix's). Position decides which figure or table it belongs to.
# The label starts with a capital or a character of a caseless script (captions are set that way); a Roman
# numeral must stand apart from it ("Table IV", not the acronym "ICC"); after the number comes a separator,
# a capital or CJK text ("Figure 2: ...", "Table 3 Results", "图1 收入"), not a sentence ("Table 2 shows").
# A figure's number has at most three digits per part ("Revenue 2023: 41" is a row, not "Figure 2023");
# a Latin label is a word of two letters or more ("Q3 Results" is a quarter); a label and a number with
# nothing after them ("Dove 5.4", "Jan 30") is a row of a table or a chart's label (OCR prints those as
# lines of their own), and so is one whose text goes on with more numbers ("Car 25 Bicycle 12"), unless a
# separator says it is a caption ("Figure 2: ...").
_CAPTION_START = re.compile(
    r"^\s*(?![a-z])(?:[^\W\d_]{2,12}|[^\W\d_a-zA-Z])(?:\.?\s*(?:[A-Z][.\-])?\d{1,3}(?:[.\-]\d{1,3})*[a-z]?|\.?\s+[IVXLC]{1,6})"
    r"(?:(?P<sep>\s*(?:[:：、)|]|[.\-–—](?!\d)))|\s*(?=[\u3400-\u9fff])|\s+(?=[A-Z(\[\"“]))")
_STANDALONE_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?%?(?![\w.])")
_BULLET = re.compile(r"^\s*(?:[•◦▪●○■□–—\-*·]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s+")
_NUMERIC = re.compile(r"^[\s(]*[-+−–]?[$€£¥%]?\s*[\d.,]+\s*[%‰kKmMbB]?[)\s]*$")
_DIGITS = re.compile(r"\d+")
MARGIN_BAND = 0.06  # outermost band (fraction of the page height) where short text is a header/footer
RUNNING_BAND = 0.15  # band searched for text repeated across pages (running headers/footers: a 1-inch margin
# plus the header line is ~0.13 of a letter page)
MAX_REGION_WORDS = 120  # longer text blocks are split at line ends: a region is a paragraph, not a column
SNIPPET_CHARS = 240
MAX_CAPTION_WORDS = 60  # a longer block that starts "Figure 5a shows ..." is a paragraph about the figure
# Clustering vector paths into figures is quadratic in the number of paths: past this many on one page
# (a map, a scatter plot of thousands of points) the page's drawings are taken as one figure.
MAX_CLUSTERED_PATHS = 1500
# A drawing covering at least this share of the page is its background (a slide theme's fill, a tinted
# page), not part of a figure: the same bound above which a figure candidate is taken for the page itself.
BACKGROUND_SHARE = 0.85


# ---------------------------------------------------------------------------------------- shared pieces


@dataclass
class _Piece:
    """A run of text on one printed line without a wide gap inside: a table-cell candidate."""

    text: str
    box: Box
    size: float
    bold: bool = False


@dataclass
class _Line:
    text: str
    box: Box
    size: float  # font size (PDF) or line height (OCR), in page units
    bold: bool
    pieces: list[_Piece] = field(default_factory=list)
    angle: float = 0.0  # degrees counter-clockwise of the baseline (PDF text layer; OCR lines are level)


@dataclass
class _Block:
    """A paragraph-like group of lines in reading order (PyMuPDF block or Tesseract paragraph)."""

    order: int
    lines: list[_Line]

    @property
    def box(self) -> Box:
        return _union(line.box for line in self.lines)

    @property
    def text(self) -> str:
        return _join_lines(line.text for line in self.lines)

    @property
    def words(self) -> int:
        return sum(len(line.text.split()) for line in self.lines)


@dataclass
class _Table:
    box: Box
    rows: list[list[tuple[str, Box]]]  # rows of (cell text, cell box); "" for an empty cell
    header_rows: int
    header_cols: int
    order: float = 0.0
    caption: str = ""
    ruled: bool = False  # found by its rulings (PyMuPDF), not by the alignment of its text


@dataclass
class _Figure:
    box: Box
    texts: list[_Line] = field(default_factory=list)
    order: float = 0.0
    caption: str = ""


def _union(boxes: Iterable[Box]) -> Box:
    boxes = list(boxes)
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _area(box: Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _overlap(a: Box, b: Box) -> float:
    return _area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def _inside(inner: Box, outer: Box, share: float = 0.6) -> bool:
    """Whether most of `inner` lies inside `outer`."""
    area = _area(inner)
    return area > 0 and _overlap(inner, outer) >= share * area or (
        area == 0 and outer[0] <= inner[0] <= outer[2] and outer[1] <= inner[1] <= outer[3])


def _gap(a: Box, b: Box) -> float:
    """Distance between two boxes (0 when they touch or overlap)."""
    dx = max(0.0, max(a[0], b[0]) - min(a[2], b[2]))
    dy = max(0.0, max(a[1], b[1]) - min(a[3], b[3]))
    return max(dx, dy)


def _grow(box: Box, by: float) -> Box:
    return (box[0] - by, box[1] - by, box[2] + by, box[3] + by)


_CJK_END = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]$")


def _join_lines(lines: Iterable[str]) -> str:
    """Lines of a paragraph as one text: hyphenated line ends are rejoined, CJK lines are joined without a space."""
    out = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if not out:
            out = line
        elif out.endswith("-") and len(out) > 1 and out[-2].isalpha() and line[:1].islower():
            out = out[:-1] + line
        elif _CJK_END.search(out) and _CJK_END.search(line[:1]):
            out += line
        else:
            out += " " + line
    return out


def _is_numeric(text: str) -> bool:
    return bool(_NUMERIC.match(text)) and any(c.isdigit() for c in text)


def running_key(text: str) -> str:
    """What two running headers have in common across pages: case, digits (page numbers) and spacing aside."""
    return re.sub(r"\s+", " ", _DIGITS.sub("#", text.lower())).strip()


def _number_key(box: Box, page_w: float, page_h: float) -> str:
    """The running key of a bare number printed in a margin band: a page number has no words to repeat,
    so what repeats is where it sits — the band (top/bottom) and the third of the page width (a slide's
    number in the bottom-right corner, a report's centred under the text)."""
    band = "top" if box[3] <= RUNNING_BAND * page_h else "bottom"
    third = min(2, int(3 * ((box[0] + box[2]) / 2) / max(page_w, 1e-6)))
    return f"# @{band}-{('left', 'centre', 'right')[third]}"


def _is_caption(text: str) -> bool:
    """Caption-shaped text (see `_CAPTION_START`): a label, its number, then a separator or the caption's words."""
    match = _CAPTION_START.match(text)
    if match is None or len(text) > 600 or not text[match.end():].strip():
        return False
    if match.group("sep") is not None and match.group("sep").strip() not in ("-", "|"):
        return True
    rest = text[match.end():].split("\n", 1)[0]  # no separator: the rest must read as words, not as a row
    return bool(rest.strip()) and _STANDALONE_NUMBER.search(rest) is None


# ---------------------------------------------------------------------------------------- tables by alignment


def _rows_of(lines: list[_Line]) -> list[list[_Piece]]:
    """Pieces of all lines grouped into printed rows (vertical overlap of more than half a line)."""
    pieces = sorted((p for line in lines for p in line.pieces), key=lambda p: (p.box[1], p.box[0]))
    rows: list[list[_Piece]] = []
    for piece in pieces:
        centre = (piece.box[1] + piece.box[3]) / 2
        for row in rows[-3:]:
            top, bottom = min(p.box[1] for p in row), max(p.box[3] for p in row)
            if top <= centre <= bottom:
                row.append(piece)
                break
        else:
            rows.append([piece])
    for row in rows:
        row.sort(key=lambda p: p.box[0])
    return rows


def _columns(rows: list[list[_Piece]]) -> list[tuple[float, float]]:
    """Column bands: the x-ranges of the rows' pieces, merged where they overlap."""
    spans = sorted((p.box[0], p.box[2]) for row in rows for p in row)
    bands: list[list[float]] = []
    for x1, x2 in spans:
        if bands and x1 <= bands[-1][1]:
            bands[-1][1] = max(bands[-1][1], x2)
        else:
            bands.append([x1, x2])
    return [(a, b) for a, b in bands]


def _fits_columns(rows: list[list[_Piece]]) -> list[tuple[float, float]] | None:
    """The column bands when every row puts at most one piece in each band, else None."""
    bands = _columns(rows)
    if len(bands) < 2:
        return None
    for row in rows:
        seen = set()
        for piece in row:
            band = next(i for i, (a, b) in enumerate(bands) if a <= piece.box[0] <= b)
            if band in seen:
                return None
            seen.add(band)
    return bands


def _table_like(rows: list[list[_Piece]]) -> bool:
    """Cells are short (a table), not lines of prose set in two columns."""
    pieces = [p for row in rows for p in row]
    short = sum(1 for p in pieces if len(p.text.split()) <= 5 or _is_numeric(p.text))
    return short >= 0.8 * len(pieces)


def _aligned_tables(lines: list[_Line], min_rows: int = 3) -> list[_Table]:
    """Tables without rulings: runs of ≥ `min_rows` consecutive printed rows of ≥ 2 short pieces whose
    x-ranges line up into the same columns (see the module doc)."""
    rows = _rows_of(lines)
    tables: list[_Table] = []
    i = 0
    while i < len(rows):
        if len(rows[i]) < 2:
            i += 1
            continue
        run = [rows[i]]
        j = i + 1
        while j < len(rows) and len(rows[j]) >= 2:
            height = max(p.box[3] - p.box[1] for p in rows[j - 1])
            if rows[j][0].box[1] - max(p.box[3] for p in rows[j - 1]) > 2.5 * height:
                break
            if _fits_columns(run + [rows[j]]) is None:
                break
            run.append(rows[j])
            j += 1
        bands = _fits_columns(run) if len(run) >= min_rows else None
        if bands is not None and _table_like(run):
            tables.append(_grid_table(run, bands))
            i = j
        else:
            i += 1
    return tables


def _text_columns(lines: list[_Line], min_words: int = 5) -> list[list[_Line]]:
    """The page's lines split into its text columns, or [] on a one-column page. Columns are the x-ranges
    that lines of prose (≥ `min_words` words) cover, merged where they overlap: a two-column paper gives two,
    with the gutter between them; a page whose prose spans the width gives one. Each line goes to the column
    holding its centre. Short lines (table cells, labels) do not make columns, so a table's own columns
    never split it."""
    spans = sorted((ln.box[0], ln.box[2]) for ln in lines if len(ln.text.split()) >= min_words)
    columns: list[list[float]] = []
    for x1, x2 in spans:
        if columns and x1 <= columns[-1][1]:
            columns[-1][1] = max(columns[-1][1], x2)
        else:
            columns.append([x1, x2])
    if len(columns) < 2:
        return []
    groups: list[list[_Line]] = [[] for _ in columns]
    for line in lines:
        centre = (line.box[0] + line.box[2]) / 2
        nearest = min(range(len(columns)), key=lambda k: max(columns[k][0] - centre, centre - columns[k][1], 0.0))
        groups[nearest].append(line)
    return groups


def _grid_table(rows: list[list[_Piece]], bands: list[tuple[float, float]]) -> _Table:
    grid: list[list[tuple[str, Box]]] = []
    bold_rows = []
    for row in rows:
        top, bottom = min(p.box[1] for p in row), max(p.box[3] for p in row)
        cells = [("", (a, top, b, bottom)) for a, b in bands]
        for piece in row:
            band = next(k for k, (a, b) in enumerate(bands) if a <= piece.box[0] <= b)
            cells[band] = (piece.text, piece.box)
        grid.append(cells)
        bold_rows.append(all(p.bold for p in row))
    box = _union(p.box for row in rows for p in row)
    header_rows = _header_rows(grid, bold_rows)
    return _Table(box, grid, header_rows, _header_cols(grid, header_rows))


def _header_rows(grid: list[list[tuple[str, Box]]], bold_rows: list[bool] | None = None) -> int:
    """Header rows: the bold rows above non-bold ones (up to three: a title row and column names), else 1
    for words above columns of numbers."""
    if len(grid) < 2:
        return 0
    if bold_rows:  # a run of bold rows above plain ones: a title row and the column names, or the names alone
        run = next((k for k, bold in enumerate(bold_rows) if not bold), len(bold_rows))
        if 0 < run <= 3 and run < len(grid) and not any(bold_rows[run:]):
            return run
    first = [text for text, _ in grid[0] if text]
    if not first or any(_is_numeric(t) for t in first):
        return 0
    body = [text for row in grid[1:] for text, _ in row[1:] if text]
    return 1 if body and sum(_is_numeric(t) for t in body) >= 0.5 * len(body) else 0


def _header_cols(grid: list[list[tuple[str, Box]]], header_rows: int) -> int:
    """1 when the first column labels the rows: words in it, mostly numbers in the other columns."""
    body = grid[header_rows:]
    labels = [row[0][0] for row in body if row and row[0][0]]
    values = [text for row in body for text, _ in row[1:] if text]
    if len(labels) < max(1, len(body) // 2) or not values:
        return 0
    if sum(_is_numeric(t) for t in labels) > 0.3 * len(labels):
        return 0
    return 1 if sum(_is_numeric(t) for t in values) >= 0.5 * len(values) else 0


# ---------------------------------------------------------------------------------------- composing regions


def _body_size(blocks: list[_Block]) -> float:
    """The font size (line height for OCR) most characters are printed in."""
    sizes: Counter[float] = Counter()
    for block in blocks:
        for line in block.lines:
            sizes[round(line.size * 2) / 2] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def _is_heading(block: _Block, body: float, body_bold: bool) -> bool:
    if len(block.lines) > 3 or block.words > 20 or not block.text.strip():
        return False
    if block.text.rstrip().endswith((".", ";", ",")) and block.words > 8:
        return False
    larger = min(line.size for line in block.lines) >= 1.15 * body
    bolder = all(line.bold for line in block.lines) and not body_bold
    return larger or bolder


def _split_paragraphs(block: _Block) -> list[list[_Line]]:
    """A block as paragraphs: a break after a line that ends well short of the block's right edge and
    before an indented line, and at most MAX_REGION_WORDS words each (a block can be a whole column)."""
    box = block.box
    width = max(1.0, box[2] - box[0])
    parts: list[list[_Line]] = [[]]
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


def _margin_kind(box: Box, text: str, running: frozenset[str], page_w: float,
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


def _attach_captions(blocks: list[_Block], items: Sequence[_Table | _Figure], used: set[int]) -> None:
    """Give each table/figure the caption-shaped block nearest below or above it (within a few lines,
    overlapping it horizontally)."""
    for item in items:
        best, best_gap = None, None
        for block in blocks:
            if block.order in used or not _is_caption(block.text) or block.words > MAX_CAPTION_WORDS:
                continue
            b = block.box
            horizontal = min(b[2], item.box[2]) - max(b[0], item.box[0]) > 0
            size = max(line.size for line in block.lines)
            gap = b[1] - item.box[3] if b[1] >= item.box[3] - size else item.box[1] - b[3]
            if horizontal and -size <= gap <= 3.5 * size and (best_gap is None or gap < best_gap):
                best, best_gap = block, gap
        if best is not None:
            item.caption = best.text
            item.box = _union([item.box, best.box]) if isinstance(item, _Figure) else item.box
            used.add(best.order)


def _figure_texts(figures: list[_Figure], blocks: list[_Block], used: set[int]) -> None:
    """Short blocks printed on a figure or right beside it (labels, ticks, legend) become its text; the
    figure's box grows to hold them, and grows again for labels next to those (a rotated axis title)."""
    for figure in figures:
        changed = True
        while changed:
            changed = False
            for block in blocks:
                if block.order in used or block.words > 12 or _is_caption(block.text):
                    continue
                size = max(line.size for line in block.lines)
                if _inside(block.box, figure.box) or _gap(block.box, figure.box) <= 2.0 * size:
                    figure.texts.extend(block.lines)
                    figure.box = _union([figure.box, block.box])
                    figure.order = min(figure.order, block.order)
                    used.add(block.order)
                    changed = True


def _labels_not_tables(tables: list[_Table], figures: list[_Figure]) -> list[_Table]:
    """Tables found by alignment that lie mostly on a figure are its labels (a pie's callouts in two
    columns, a legend in a grid): their cells become the figure's labels, each with its box."""
    kept = []
    for table in tables:
        host = next((f for f in figures if not table.ruled and _overlap(table.box, f.box) > 0.5 * _area(table.box)),
                    None)
        if host is None:
            kept.append(table)
            continue
        for row in table.rows:
            for text, box in row:
                if text:
                    size = max(1.0, box[3] - box[1])
                    host.texts.append(_Line(text, box, size, False, [_Piece(text, box, size)]))
        host.box = _union([host.box, table.box])
    return kept


def _compose(page_id: str, blocks: list[_Block], tables: list[_Table], figures: list[_Figure],
             page_w: float, page_h: float, scale: tuple[float, float], image_size: tuple[int, int],
             running: frozenset[str], source: str) -> PageLayout:
    """Blocks, tables and figures of one page → typed regions in reading order, boxes in image pixels."""
    sx, sy = scale

    def px(box: Box) -> Box:
        return (round(box[0] * sx, 1), round(box[1] * sy, 1), round(box[2] * sx, 1), round(box[3] * sy, 1))

    used: set[int] = set()
    for table in tables:  # text of a table is its cells
        for block in blocks:
            if _inside(block.box, _grow(table.box, 1.0)):
                used.add(block.order)
                table.order = min(table.order, block.order) if table.order else block.order
    body = _body_size(blocks)
    body_bold = sum(len(ln.text) for b in blocks for ln in b.lines if ln.bold) > 0.5 * max(
        1, sum(len(ln.text) for b in blocks for ln in b.lines))
    margin: dict[int, RegionKind] = {}
    drawn = [t.box for t in tables] + [f.box for f in figures]
    for block in blocks:
        if not running_key(block.text).strip("# ") and any(_inside(block.box, _grow(box, 1.0)) for box in drawn):
            continue  # a bare number on a chart or in a table is its tick label or cell, not a page number
        angles = {round(line.angle) for line in block.lines}
        kind = _margin_kind(block.box, block.text, running, page_w, page_h, angles.pop() if len(angles) == 1 else 0.0)
        if kind is not None:
            margin[block.order] = kind
            used.add(block.order)
    # labels first: a caption lies outside the figure's tick and category labels, not its drawing alone
    _figure_texts(figures, blocks, used)
    tables = _labels_not_tables(tables, figures)
    _attach_captions(blocks, [*tables, *figures], used)
    placed: list[_Table | _Figure] = [*tables, *figures]
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
        if _is_caption(block.text) and block.words <= MAX_CAPTION_WORDS:  # of a figure not found as such
            entries.append((block.order, Region("", "caption", px(block.box), block.text)))
            continue
        body_kind: RegionKind = "list" if _BULLET.match(block.lines[0].text) and len(block.lines) > 1 else "text"
        for k, part in enumerate(_split_paragraphs(block)):
            # OCR keeps a paragraph's printed lines apart: Tesseract groups a slide's list or a scan's small
            # table into one paragraph, and its rows are what a reader pairs (the reader rejoins wrapped lines)
            text = ("\n".join(ln.text.strip() for ln in part if ln.text.strip()) if source == "ocr"
                    else _join_lines(line.text for line in part))
            if text:
                entries.append((block.order + k * 1e-3, Region("", body_kind, px(_union(ln.box for ln in part)), text)))
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
                  for p in (ln.pieces or [_Piece(ln.text, ln.box, ln.size)]) if p.text.strip()]
        entries.append((figure.order, Region("", "figure", px(figure.box), text, figure.caption, labels=labels)))
    entries.sort(key=lambda e: e[0])
    regions = []
    for n, (_, region) in enumerate(entries, start=1):
        region.region_id = f"r{n}"
        regions.append(region)
    return PageLayout(page_id, int(image_size[0]), int(image_size[1]), regions, source)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------- PDF text layer


def _pdf_blocks(page: pymupdf.Page) -> list[_Block]:
    import pymupdf

    flags = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES
    blocks: list[_Block] = []
    for raw in page.get_text("dict", flags=flags)["blocks"]:
        if raw.get("type", 0) != 0:
            continue
        lines = []
        for raw_line in raw["lines"]:
            for span in raw_line["spans"]:  # glyphs of a font without a Unicode map come out as control codes
                span["text"] = CONTROL_CHARACTERS.sub("", span["text"])
            spans = [s for s in raw_line["spans"] if s["text"].strip()]
            if not spans:
                continue
            pieces: list[_Piece] = []
            spaced = False  # the previous span ended in a space: its box holds the space, the gap is 0
            for span in spans:
                bold = bool(span["flags"] & 16) or "bold" in span["font"].lower()
                box = tuple(span["bbox"])
                if pieces and box[0] - pieces[-1].box[2] <= 0.8 * span["size"]:
                    prev = pieces[-1]
                    # "The " + "LongTable" (two fonts): the space is printed, so it is kept
                    spaced = spaced or span["text"][:1].isspace()
                    joiner = " " if spaced or box[0] - prev.box[2] >= 0.15 * span["size"] else ""
                    pieces[-1] = _Piece((prev.text + joiner + span["text"]).strip(), _union([prev.box, box]),
                                        max(prev.size, span["size"]), prev.bold and bold)
                else:
                    pieces.append(_Piece(span["text"].strip(), box, span["size"], bold))
                spaced = span["text"][-1:].isspace()
            text = re.sub(r"\s+", " ", " ".join(p.text for p in pieces)).strip()
            size = max(s["size"] for s in spans)
            cos, sin = raw_line.get("dir", (1.0, 0.0))
            angle = round(math.degrees(math.atan2(-sin, cos)), 1)  # PDF image y grows downwards
            lines.append(_Line(text, _union(p.box for p in pieces), size, all(p.bold for p in pieces), pieces,
                               angle))
        if lines:
            blocks.append(_Block(len(blocks) + 1, lines))
    return blocks


def _has_rulings(page: pymupdf.Page) -> bool:
    """Whether the page draws enough horizontal and vertical strokes for a ruled table: PyMuPDF's table
    finder costs ~0.2-0.5 s a page, and finds nothing on a page without rulings."""
    horizontal = vertical = 0
    for path in page.get_cdrawings():
        stroked = "s" in (path.get("type") or "")
        for item in path.get("items", ()):
            if item[0] == "re":
                x1, y1, x2, y2 = item[1]
                if stroked:  # a framed box: four rules
                    horizontal += 2
                    vertical += 2
                elif abs(y2 - y1) <= 2 < abs(x2 - x1):  # a thin filled bar is a rule; a filled box is a background
                    horizontal += 1
                elif abs(x2 - x1) <= 2 < abs(y2 - y1):
                    vertical += 1
            elif item[0] == "l":
                (x1, y1), (x2, y2) = item[1], item[2]
                if abs(y1 - y2) < 1 and abs(x2 - x1) > 5:
                    horizontal += 1
                elif abs(x1 - x2) < 1 and abs(y2 - y1) > 5:
                    vertical += 1
            if horizontal >= 3 and vertical >= 3:
                return True
    return False


def _pdf_ruled_tables(page: pymupdf.Page, blocks: list[_Block]) -> list[_Table]:
    """PyMuPDF's ruled tables, each cell's text read from the words inside it (its own `extract` joins
    glyphs without spaces on some PDFs)."""
    words = page.get_text("words")
    bold_boxes = [p.box for b in blocks for line in b.lines for p in line.pieces if p.bold]
    tables = []
    for found in _find_tables(page):
        if found.row_count < 2 or found.col_count < 2:
            continue
        grid: list[list[tuple[str, Box]]] = []
        bold_rows = []
        for row in found.rows:
            cells = []
            for cell in row.cells:
                if cell is None:
                    cells.append(("", (0.0, 0.0, 0.0, 0.0)))
                    continue
                box = tuple(cell)
                inside = [w for w in words
                          if box[0] <= (w[0] + w[2]) / 2 <= box[2] and box[1] <= (w[1] + w[3]) / 2 <= box[3]]
                inside.sort(key=lambda w: (w[5], w[6], w[7]))
                cells.append((" ".join(w[4] for w in inside), box))
            grid.append(cells)
            row_box = tuple(row.bbox)
            texts = [c for c, _ in cells if c]
            bold_rows.append(bool(texts) and any(_inside(b, row_box) for b in bold_boxes) and all(
                any(_inside(b, box) for b in bold_boxes) for c, box in cells if c))
        # drop empty placeholder boxes of merged cells from the union
        grid = [[(t, b if _area(b) else (0.0, 0.0, 0.0, 0.0)) for t, b in row] for row in grid]
        filled = sum(1 for row in grid for t, _ in row if t)
        if filled < 0.5 * sum(len(row) for row in grid):
            continue  # rulings around few words: a chart's bars and axes, a form, a framed box — not a table
        header_rows = _header_rows(grid, bold_rows)
        tables.append(_Table(tuple(found.bbox), grid, header_rows, _header_cols(grid, header_rows), ruled=True))
    return tables


def _find_tables(page: pymupdf.Page) -> list:
    """PyMuPDF's line-based table finder. Where the `pymupdf_layout` package is installed, PyMuPDF ≥ 2.0
    first runs its ONNX page-layout model (~1.6 s a page on 2 CPU cores, 6x the rest of this module):
    `use_layout=False` keeps ingestion above 2 pages/s; older PyMuPDF has no such argument."""
    try:
        return page.find_tables(use_layout=False).tables
    except TypeError:
        return page.find_tables().tables


def _skeleton(path: Box, cluster: Box) -> bool:
    """Whether a drawn path is the frame of its cluster rather than its content: it spans (nearly) the
    whole cluster's width — a box's outline or fill, a title band, a horizontal axis — or it is a thin
    line that is long (an axis, a gridline, a table's or a block's rule) or lies on the cluster's edge
    (a frame's or a shadow's pieces). A tall filled shape is content (a column chart's highest bar).
    What is left in a chart or diagram is its bars,
    curves, markers, ticks, arrows and shapes; what is left in a framed block of text is nothing."""
    width, height = max(cluster[2] - cluster[0], 1e-6), max(cluster[3] - cluster[1], 1e-6)
    w, h = path[2] - path[0], path[3] - path[1]
    if w >= 0.9 * width:  # a band, a fill or outline behind the rest, a horizontal axis
        return True
    # a horizontal line: a long rule, or a piece of the top or bottom edge (a shadow's steps); a vertical
    # line likewise, on the left or right edge (a dot-sized piece is tested both ways)
    horizontal = h <= 2 and (w >= 0.3 * width or min(abs(path[1] - cluster[1]), abs(path[3] - cluster[3])) <= 2)
    vertical = w <= 2 and (h >= 0.3 * height or min(abs(path[0] - cluster[0]), abs(path[2] - cluster[2])) <= 2)
    return horizontal or vertical


def _pdf_figures(page: pymupdf.Page, tables: list[_Table]) -> list[_Figure]:
    """Images and clusters of vector drawings large enough to be a picture or a chart, not a table's
    rulings, not a full-page background."""
    page_box = tuple(page.rect)
    page_area = _area(page_box)
    candidates: list[Box] = []
    for info in page.get_image_info():
        box = tuple(info["bbox"])
        candidates.append(box)
    def drawn_on_the_page(found: list) -> list:
        # a fill behind most of the page (a slide's background, a coloured page) touches every drawing on
        # it, so clustering would join them all into one page-sized cluster that is no figure
        return [p for p in found if _area(tuple(p["rect"])) < BACKGROUND_SHARE * page_area]

    try:
        paths = drawn_on_the_page(page.get_cdrawings())
        if len(paths) > MAX_CLUSTERED_PATHS:  # a map or a plot of many points: one picture
            clusters = [_union(tuple(p["rect"]) for p in paths)]
        else:
            paths = drawn_on_the_page(page.get_drawings())
            clusters = page.cluster_drawings(drawings=paths) if paths else []
    except Exception:  # noqa: BLE001 - a malformed drawing must not cost the page its text regions
        paths, clusters = [], []
    for cluster in clusters:
        # a chart or diagram is drawn with several paths of its own; a cluster of frames, bands and rules
        # only (a beamer block around text, a banner behind a title, a table's rules) is decoration
        box = tuple(cluster)
        drawn = sum(1 for path in paths
                    if _inside(tuple(path["rect"]), _grow(box, 1.0), 0.9) and not _skeleton(tuple(path["rect"]), box))
        if drawn >= 3:
            candidates.append(box)
    figures: list[_Figure] = []
    for box in candidates:
        w, h = box[2] - box[0], box[3] - box[1]
        if w < 0.08 * page_box[2] or h < 0.04 * page_box[3] or _area(box) > BACKGROUND_SHARE * page_area:
            continue
        if any(_overlap(box, t.box) > 0.5 * _area(box) for t in tables):
            continue
        for figure in figures:
            if _overlap(box, figure.box) > 0:
                figure.box = _union([figure.box, box])
                break
        else:
            figures.append(_Figure(box))
    return figures


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


def running_texts(doc: pymupdf.Document, band: float = RUNNING_BAND) -> frozenset[str]:
    """`running_key`s of short text printed in the top or bottom band of at least two pages of the
    document: its running headers and footers (titles, chapter names, "Page n")."""
    seen: Counter[str] = Counter()
    pages = 0
    for page in map(upright, doc.pages()):
        pages += 1
        width, height = page.rect.width, page.rect.height
        keys = set()
        for x1, y1, x2, y2, text, *_ in page.get_text("blocks"):
            if (y2 <= band * height or y1 >= (1 - band) * height) and 0 < len(text.split()) <= 25:
                key = running_key(text)
                if not key.strip("# "):  # a bare number: a page number repeats by its place, not its text
                    key = _number_key((x1, y1, x2, y2), width, height) if _NUMERIC.match(text) else ""
                keys.add(key)
        seen.update(keys)
    # a bare number in one place of the margin is a page number when it is there on at least half the
    # pages (a chart's axis or a table's last row may put a number in the band of a page or two)
    return frozenset(key for key, count in seen.items() if count >= 2 and key.strip("# ") and (
        not key.startswith("# @") or count >= pages / 2))


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


def pdf_page_layout(page: pymupdf.Page, page_id: str, image_size: tuple[int, int],
                    running: frozenset[str] = frozenset()) -> PageLayout:
    """The page's regions from its text layer (see the module doc), boxes in pixels of an image of the page
    rendered at `image_size` (width, height). `running`: the document's `running_texts`, so headers and
    footers repeated across pages are marked even outside the outermost margin band. A `/Rotate` page is
    read as it is displayed (`upright`)."""
    upright(page)
    width, height = page.rect.width, page.rect.height
    blocks = _pdf_blocks(page)
    tables = _pdf_ruled_tables(page, blocks) if _has_rulings(page) else []
    figures = _pdf_figures(page, tables)
    # unruled tables among the remaining lines; labels printed on a chart (ticks, legends) are not a table
    taken = [t.box for t in tables] + [f.box for f in figures]
    free_lines = [line for b in blocks for line in b.lines if not any(_inside(line.box, box) for box in taken)]
    tables += _aligned_tables(free_lines)
    # a table in one column of a two-column page: its rows share their height with the other column's
    # prose, which the page-wide run joins into the same printed rows; each column alone shows it
    for column in _text_columns(free_lines):
        tables += [t for t in _aligned_tables(column) if not any(_overlap(t.box, o.box) > 0 for o in tables)]
    scale = (image_size[0] / max(width, 1e-6), image_size[1] / max(height, 1e-6))
    return _compose(page_id, blocks, tables, figures, width, height, scale, image_size, running, "pdf")


def pdf_document_layouts(path: str, page_ids: Sequence[str], image_sizes: Sequence[tuple[int, int]],
                         first_page: int = 1) -> list[PageLayout]:
    """Layouts of pages `first_page ..` of a PDF (one per page id), running headers found over the whole
    document."""
    import pymupdf

    with pymupdf.open(path) as doc:
        running = running_texts(doc)
        return [pdf_page_layout(doc[first_page - 1 + k], page_id, size, running)
                for k, (page_id, size) in enumerate(zip(page_ids, image_sizes, strict=True))]


# ---------------------------------------------------------------------------------------- OCR layout


def _ocr_pieces(line: OcrLine) -> list[_Piece]:
    """A line's words grouped into pieces: a gap wider than the line's height starts a new piece."""
    height = max(1, line.box[3] - line.box[1])
    pieces: list[_Piece] = []
    for word in line.words:
        if pieces and word.box[0] - pieces[-1].box[2] <= 1.0 * height:
            prev = pieces[-1]
            pieces[-1] = _Piece(prev.text + " " + word.text, _union([prev.box, word.box]), prev.size)
        else:
            pieces.append(_Piece(word.text, tuple(float(v) for v in word.box), float(height)))  # type: ignore[arg-type]
    for piece in pieces:
        piece.text = re.sub(r"(?<=[\u3400-\u9fff]) (?=[\u3400-\u9fff])", "", piece.text)
    return pieces


def layout_from_ocr_lines(lines: Sequence[OcrLine], page_id: str, image_size: tuple[int, int]) -> PageLayout:
    """The page's regions from one OCR reading (`text_extraction.ocr_reading`): paragraphs by Tesseract's
    block and paragraph, headings by line height, tables by column alignment, margins by position."""
    blocks: list[_Block] = []
    index: dict[tuple[int, int], _Block] = {}
    for line in lines:
        if not line.text.strip():
            continue
        key = (line.block, line.paragraph)
        height = float(max(1, line.box[3] - line.box[1]))
        pieces = _ocr_pieces(line) if line.words else [_Piece(line.text, tuple(map(float, line.box)), height)]  # type: ignore[arg-type]
        entry = _Line(line.text, tuple(float(v) for v in line.box), height, False, pieces)  # type: ignore[arg-type]
        if key not in index:
            index[key] = _Block(len(blocks) + 1, [])
            blocks.append(index[key])
        index[key].lines.append(entry)
    for block in blocks:
        block.lines.sort(key=lambda ln: (ln.box[1], ln.box[0]))
    tables = _aligned_tables([line for b in blocks for line in b.lines])
    width, height = image_size
    return _compose(page_id, blocks, tables, [], float(width), float(height), (1.0, 1.0), image_size,
                    frozenset(), "ocr")


def unread_figures(layout: PageLayout) -> list[Region]:
    """The figures of a text-layer page that carry no text of their own: pictures whose words (a raster
    chart's ticks and legend, a screenshot's labels, a scanned diagram's callouts) are pixels, which only
    OCR can read (`add_figure_reading`). Largest first, so a cap on OCR time reads the main figures."""
    if layout.source != "pdf":
        return []
    found = [r for r in layout.regions if r.kind == "figure" and not r.text.strip() and not r.labels]
    return sorted(found, key=lambda r: -_area(r.box))


def add_figure_reading(region: Region, lines: Sequence[OcrLine], origin: tuple[float, float]) -> None:
    """Lines OCR read from a crop of the page image whose top-left corner is `origin` (page-image pixels)
    become the figure's labels (pieces split at wide gaps, as a chart prints them) and its text, so search
    and the chart reader see a raster figure's words as they see a vector chart's."""
    dx, dy = origin
    labels: list[Label] = []
    texts: list[str] = []
    for line in lines:
        pieces = _ocr_pieces(line) if line.words else [_Piece(line.text, tuple(map(float, line.box)), 1.0)]  # type: ignore[arg-type]
        for piece in pieces:
            if piece.text.strip():
                x1, y1, x2, y2 = piece.box
                labels.append(Label(piece.text.strip(), (round(x1 + dx, 1), round(y1 + dy, 1),
                                                         round(x2 + dx, 1), round(y2 + dy, 1))))
        if line.text.strip():
            texts.append(line.text.strip())
    region.labels = labels
    region.text = "\n".join(texts)


def ocr_page_layout(image: Image.Image, page_id: str, lang: str | None = None) -> PageLayout:
    """OCR the image once (`lang` as `text_extraction.resolve_ocr_lang`) and return its layout."""
    from search_engine.text_extraction import ocr_reading

    return layout_from_ocr_lines(ocr_reading(image, lang), page_id, image.size)


# ---------------------------------------------------------------------------------------- what search indexes

# Headings are not scored on their own: their text leads every region under them (below), so the match
# lands on the paragraph, table or figure that holds the answer rather than on its title.
SEARCHED_KINDS = frozenset({"text", "list", "table", "figure", "caption"})


def region_search_texts(layout: PageLayout, title: str = "", title_once: bool = False) -> list[str]:
    """Per region (in `layout.regions` order) the text the search channels score it by: the document's
    title, the section heading above it, its caption and its text — a paragraph alone often lacks the
    subject its heading and its document name (DPR prepends a passage's article title for the same
    reason). With the title on every region, a question naming the document ("... in the MNRAS guide")
    matches all its pages alike instead of favouring its title page. `title_once`: the title leads only
    the page's first searched region (the embedder's texts: a fifth fewer tokens, and the page vector, their
    mean, still carries it). "" for headings (carried by the regions under them) and running
    headers/footers, which say nothing about the page."""
    heading = ""
    titled = False
    texts = []
    for region in layout.regions:
        if region.kind == "heading":
            heading = region.text
            texts.append("")
            continue
        if region.kind not in SEARCHED_KINDS or not (region.text.strip() or region.caption.strip()):
            texts.append("")
            continue
        parts = ["" if title_once and titled else title, heading, region.caption,
                 region.text.replace("\n", " ; ") if region.kind != "text" else region.text]
        titled = True
        texts.append(" ".join(p for p in parts if p).strip())
    return texts


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The start of a region's text, cut at a word boundary, for a search hit."""
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else text[:limit]) + "…"


def empty_layout(page_id: str, image_size: tuple[int, int]) -> PageLayout:
    """A page with no readable structure (no text layer, OCR off or found nothing)."""
    return PageLayout(page_id, int(image_size[0]), int(image_size[1]), [], "none")

