"""Tables: by their rulings (PyMuPDF's finder, PDF pages) and by the alignment of their text (PDF and OCR).

Tables without rulings (`aligned_tables`), the one finder both readers share: text pieces separated by wide
gaps, on consecutive rows, whose x-ranges line up into the same columns are a table — pure geometry, so it
works for booktabs-style PDF tables and for OCR'd tables alike. Header rows are recognised by typography
(bold, or set apart from the body rows' font) or by content (a non-numeric first row above numeric columns),
a header column when the first column is labels and the others are numbers. Ruled tables
(`pdf_ruled_tables`) take their cells from PyMuPDF and each cell's text from the words inside it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from search_engine.layout.geometry import area, inside, union
from search_engine.layout.parts import Block, Line, Piece, Table, is_numeric
from search_engine.page_layout import Box
from search_engine.text_extraction import clean_glyphs

if TYPE_CHECKING:  # pragma: no cover
    import pymupdf


def _rows_of(lines: list[Line]) -> list[list[Piece]]:
    """Pieces of all lines grouped into printed rows (vertical overlap of more than half a line)."""
    pieces = sorted((p for line in lines for p in line.pieces), key=lambda p: (p.box[1], p.box[0]))
    rows: list[list[Piece]] = []
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


def _columns(rows: list[list[Piece]]) -> list[tuple[float, float]]:
    """Column bands: the x-ranges of the rows' pieces, merged where they overlap."""
    spans = sorted((p.box[0], p.box[2]) for row in rows for p in row)
    bands: list[list[float]] = []
    for x1, x2 in spans:
        if bands and x1 <= bands[-1][1]:
            bands[-1][1] = max(bands[-1][1], x2)
        else:
            bands.append([x1, x2])
    return [(a, b) for a, b in bands]


def _fits_columns(rows: list[list[Piece]]) -> list[tuple[float, float]] | None:
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


def _table_like(rows: list[list[Piece]]) -> bool:
    """Cells are short (a table), not lines of prose set in two columns."""
    pieces = [p for row in rows for p in row]
    short = sum(1 for p in pieces if len(p.text.split()) <= 5 or is_numeric(p.text))
    return short >= 0.8 * len(pieces)


def aligned_tables(lines: list[Line], min_rows: int = 3) -> list[Table]:
    """Tables without rulings: runs of ≥ `min_rows` consecutive printed rows of ≥ 2 short pieces whose
    x-ranges line up into the same columns (see the module doc)."""
    rows = _rows_of(lines)
    tables: list[Table] = []
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


def text_columns(lines: list[Line], min_words: int = 5) -> list[list[Line]]:
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
    groups: list[list[Line]] = [[] for _ in columns]
    for line in lines:
        centre = (line.box[0] + line.box[2]) / 2
        nearest = min(range(len(columns)), key=lambda k: max(columns[k][0] - centre, centre - columns[k][1], 0.0))
        groups[nearest].append(line)
    return groups


def _grid_table(rows: list[list[Piece]], bands: list[tuple[float, float]]) -> Table:
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
    box = union(p.box for row in rows for p in row)
    header_rows = _header_rows(grid, bold_rows)
    return Table(box, grid, header_rows, _header_cols(grid, header_rows))


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
    if not first or any(is_numeric(t) for t in first):
        return 0
    body = [text for row in grid[1:] for text, _ in row[1:] if text]
    return 1 if body and sum(is_numeric(t) for t in body) >= 0.5 * len(body) else 0


def _header_cols(grid: list[list[tuple[str, Box]]], header_rows: int) -> int:
    """1 when the first column labels the rows: words in it, mostly numbers in the other columns."""
    body = grid[header_rows:]
    labels = [row[0][0] for row in body if row and row[0][0]]
    values = [text for row in body for text, _ in row[1:] if text]
    if len(labels) < max(1, len(body) // 2) or not values:
        return 0
    if sum(is_numeric(t) for t in labels) > 0.3 * len(labels):
        return 0
    return 1 if sum(is_numeric(t) for t in values) >= 0.5 * len(values) else 0


def has_rulings(page: pymupdf.Page) -> bool:
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


def pdf_ruled_tables(page: pymupdf.Page, blocks: list[Block]) -> list[Table]:
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
                in_cell = [w for w in words
                           if box[0] <= (w[0] + w[2]) / 2 <= box[2] and box[1] <= (w[1] + w[3]) / 2 <= box[3]]
                in_cell.sort(key=lambda w: (w[5], w[6], w[7]))
                cells.append((" ".join(clean_glyphs(w[4]).strip() for w in in_cell), box))
            grid.append(cells)
            row_box = tuple(row.bbox)
            texts = [c for c, _ in cells if c]
            bold_rows.append(bool(texts) and any(inside(b, row_box) for b in bold_boxes) and all(
                any(inside(b, box) for b in bold_boxes) for c, box in cells if c))
        # drop empty placeholder boxes of merged cells from the union
        grid = [[(t, b if area(b) else (0.0, 0.0, 0.0, 0.0)) for t, b in row] for row in grid]
        filled = sum(1 for row in grid for t, _ in row if t)
        if filled < 0.5 * sum(len(row) for row in grid):
            continue  # rulings around few words: a chart's bars and axes, a form, a framed box — not a table
        header_rows = _header_rows(grid, bold_rows)
        tables.append(Table(tuple(found.bbox), grid, header_rows, _header_cols(grid, header_rows), ruled=True))
    return tables


def _find_tables(page: pymupdf.Page) -> list:
    """PyMuPDF's line-based table finder. Where the `pymupdf_layout` package is installed, PyMuPDF ≥ 2.0
    first runs its ONNX page-layout model (~1.6 s a page on 2 CPU cores, 6x the rest of this module):
    `use_layout=False` keeps ingestion above 2 pages/s; older PyMuPDF has no such argument."""
    try:
        return page.find_tables(use_layout=False).tables
    except TypeError:
        return page.find_tables().tables
