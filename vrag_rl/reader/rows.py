"""Values read by where they are printed: a row's label on the left, its column's header above.

Financial statements, data sheets and forms print their tables without rulings, and layout analysis
often does not see a table there: each number becomes a text region of its own ("221,834"), a line
holds a label and its values ("Net profit 221,834 233,512"), or the whole block is taken for a figure
and kept as labels with boxes. Read by regions, such a page has numbers without labels. Read by
geometry, it is a table: pieces whose vertical extents overlap sit on one printed row, a value's label
is the nearest words left of it on that row, and its column's header is the words printed above it in
the same x-range, up to the gap that ends the block.

Why by hand: the ingestion's aligned-table finder (`search_engine.layout.tables.aligned_tables`) needs
every row to fit one set of columns, which multi-line headers and side-by-side tables break; PyMuPDF's
and camelot's finders need the PDF. This reads any layout (PDF, OCR, stored figure labels) and only
pairs each value with its own row label and column header, which is all the reader asks of a table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from search_engine.page_layout import Box, Region
from vrag_rl.reader.values import GROUPED_DIGITS

# A printed value cell: a number with its sign, parentheses (a negative in accounts), currency mark and
# percent sign, or a range of two ("21.60-97.40"). Not a year (a column's header) and not a code.
_NUMBER = rf"[-+\u2212]?(?:{GROUPED_DIGITS}|\d[\d,]*)(?:\.\d+)?"  # "1 422": grouped by spaces (`values`)
_VALUE = re.compile(rf"^[(\[]?[$€£¥]?\s?{_NUMBER}\s?%?[)\]]?(?:\s?[-–~]\s?{_NUMBER}\s?%?)?$")
_YEAR = re.compile(r"^(?:FY|CY)?\s?(?:19|20)\d\d[A-Z]?$", re.IGNORECASE)
MAX_LABEL_WORDS = 10  # a row label is a line's start, not prose: longer lines are read as sentences
BLOCK_GAP = 3.0  # line heights of empty space that end a table block above a value
TITLE_WIDTH = 6.0  # a piece this many times wider than a value over it is a title, not its column's header


@dataclass(frozen=True)
class Piece:
    """A run of text on one printed line, with its box and the region it belongs to."""

    text: str
    box: Box
    region_id: str
    header_only: bool = False  # a table's cell (read as a table): it may head a column, not be a value

    @property
    def height(self) -> float:
        return max(1.0, self.box[3] - self.box[1])


@dataclass(frozen=True)
class RowValue:
    """A value with the label of its printed row and the header of its printed column."""

    value: Piece
    label: Piece
    header: str
    header_boxes: tuple[Box, ...]
    row_values: int  # how many values its row prints (one: the label alone pins it)


def is_value(text: str) -> bool:
    """A cell that is a number (with its sign, currency, percent, or a range), not a year."""
    text = text.strip()
    return bool(_VALUE.match(text)) and not _YEAR.match(text)


def _split(text: str, box: Box, region_id: str, header_only: bool) -> list[Piece]:
    """A line's label and the values after it as pieces, x-positions by character offset (a line holds
    "Net profit 221,834 233,512": a label and two values). A line with a value before words is prose or
    a label that holds a number ("Balance as of 9/12/17:"): kept whole."""
    tokens = [(m.start(), m.group(0)) for m in re.finditer(r"\S+", text)]
    if not tokens:
        return []
    # merge "¥ 233,512" and "( 2,983 )": a currency mark or a lone bracket is part of the value after it
    merged: list[tuple[int, str]] = []
    for start, token in tokens:
        if merged and re.fullmatch(r"[$€£¥(\[]", merged[-1][1]):
            merged[-1] = (merged[-1][0], f"{merged[-1][1]}{token}")
        else:
            merged.append((start, token))
    values = [is_value(t) for _, t in merged]
    first = next((i for i, v in enumerate(values) if v), len(merged))
    if first == len(merged) or not all(values[first:]) or first > MAX_LABEL_WORDS or len(merged) == 1:
        return [Piece(text.strip(), box, region_id, header_only)]
    x1, y1, x2, y2 = box
    per_char = (x2 - x1) / max(1, len(text))
    pieces = []
    if first:
        end = merged[first - 1][0] + len(merged[first - 1][1])
        pieces.append(Piece(text[:end].strip(), (x1, y1, x1 + end * per_char, y2), region_id, header_only))
    for start, token in merged[first:]:
        pieces.append(Piece(token, (x1 + start * per_char, y1, x1 + (start + len(token)) * per_char, y2),
                            region_id, header_only))
    return pieces


def pieces_of(regions: list[Region]) -> list[Piece]:
    """The printed pieces of a page: each line of its text regions (a multi-line region's box split into
    equal line bands), each level label of its figures, each cell of its tables (as headers only: a
    table's values are read by its own grid)."""
    pieces: list[Piece] = []
    for region in regions:
        if region.kind in ("header", "footer"):
            continue
        if region.kind == "table" and region.cells:
            pieces += [Piece(c.text.strip(), c.box, region.region_id, True) for c in region.cells if c.text.strip()]
            continue
        if region.kind == "figure":
            pieces += [p for lb in region.labels if abs(lb.angle) < 5
                       for p in _split(lb.text, lb.box, region.region_id, False)]
            continue
        lines = [line for line in region.text.split("\n") if line.strip()]
        if not lines or region.kind == "table":
            continue
        x1, y1, x2, y2 = region.box
        step = (y2 - y1) / len(lines)
        for i, line in enumerate(lines):
            pieces += _split(line, (x1, y1 + i * step, x2, y1 + (i + 1) * step), region.region_id, False)
    return [p for p in pieces if re.search(r"\w", p.text)]


def printed_rows(pieces: list[Piece]) -> list[list[Piece]]:
    """Pieces grouped into printed rows (a piece's vertical centre within the row's extent), top to
    bottom, each row left to right."""
    rows: list[list[Piece]] = []
    for piece in sorted(pieces, key=lambda p: (p.box[1], p.box[0])):
        centre = (piece.box[1] + piece.box[3]) / 2
        for row in rows[-4:]:
            top, bottom = min(p.box[1] for p in row), max(p.box[3] for p in row)
            if top <= centre <= bottom and abs(piece.height - row[0].height) <= 0.6 * max(piece.height, row[0].height):
                row.append(piece)
                break
        else:
            rows.append([piece])
    for row in rows:
        row.sort(key=lambda p: p.box[0])
    return rows


def _overlaps(a: Box, b: Box, slack: float) -> bool:
    return a[0] - slack < b[2] and b[0] - slack < a[2]


def _header(rows: list[list[Piece]], index: int, value: Piece) -> tuple[str, tuple[Box, ...]]:
    """The header of a value's column: the words printed in its x-range in the band of rows right above
    the column's values (a header may take several lines: "Accumulated / other compre- / hensive income"),
    read upwards past the values above it, up to the gap that ends the block. A title spanning many
    columns is no column's header (years count: "2020" heads a column of values)."""
    texts: list[str] = []
    boxes: list[Box] = []
    below = value.box[1]
    line = value.height
    width = value.box[2] - value.box[0]
    for row in reversed(rows[:index]):
        bottom = max(p.box[3] for p in row)
        if below - bottom > BLOCK_GAP * line:
            break
        above = [p for p in row if _overlaps(p.box, value.box, 0.25 * line)]
        words = [p for p in above if not is_value(p.text) and p.box[2] - p.box[0] <= TITLE_WIDTH * max(width, line)]
        if words:  # a line above the ones read so far: its words come first, left to right
            texts = [p.text for p in words] + texts
            boxes = [p.box for p in words] + boxes
        elif texts:
            break  # the band of header lines has ended
        below = min(p.box[1] for p in row)
    return " ".join(texts), tuple(boxes)


def row_values(regions: list[Region]) -> list[RowValue]:
    """Every value printed after a label on its row, with that label and its column's header."""
    rows = printed_rows(pieces_of(regions))
    out = []
    for index, row in enumerate(rows):
        labelled: list[tuple[Piece, Piece]] = []
        for value in (p for p in row if is_value(p.text) and not p.header_only):
            left = [p for p in row if p.box[2] <= value.box[0] + 0.5 * value.height and not is_value(p.text)]
            if not left:
                continue
            label = left[-1]  # the nearest words on its left: a side-by-side table's label is its own
            if _YEAR.match(label.text) or len(label.text.split()) > MAX_LABEL_WORDS or not re.search(
                    r"[^\W\d_]", label.text):
                continue
            labelled.append((value, label))
        for value, label in labelled:
            header, boxes = _header(rows, index, value)
            out.append(RowValue(value, label, header, boxes, sum(other is label for _, other in labelled)))
    return out
