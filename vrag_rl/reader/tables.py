"""Reading a table by its headers: the row the question names, the column it names, the cell where they meet.

A table region carries its cells with row/column indices and which rows/columns are headers
(`search_engine.page_layout`). When ingestion marked none, the structure decides: a top row without
numbers over rows with numbers is a header row, and a left column of labels is a header column.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from search_engine.page_layout import Box, Label, Region, RegionKind, TableCell
from vrag_rl.reader.geometry import union
from vrag_rl.reader.rows import is_value
from vrag_rl.reader.values import SPACE_GROUPED, number_of


@dataclass
class Grid:
    """A table's cells by position, its header rows and columns, and each body row's and column's labels."""

    cells: dict[tuple[int, int], TableCell]
    header_rows: int
    header_cols: int
    n_rows: int
    n_cols: int
    row_labels: dict[int, str] = field(default_factory=dict)
    col_labels: dict[int, str] = field(default_factory=dict)
    # each column's own name: its lowest header cell ("Sfax" under a group header "votes by town" that spans
    # several columns and is printed over the first of them only)
    col_names: dict[int, str] = field(default_factory=dict)

    def cell(self, row: int, col: int) -> TableCell | None:
        return self.cells.get((row, col))

    @property
    def body_rows(self) -> list[int]:
        return [r for r in range(self.header_rows, self.n_rows) if any((r, c) in self.cells for c in self.body_cols)]

    @property
    def body_cols(self) -> list[int]:
        return list(range(self.header_cols, self.n_cols))

    def header_boxes(self, row: int, col: int) -> list[Box]:
        """The boxes of the header cells that label the cell at (row, col)."""
        boxes = [self.cells[(r, col)].box for r in range(self.header_rows) if (r, col) in self.cells]
        boxes += [self.cells[(row, c)].box for c in range(self.header_cols) if (row, c) in self.cells]
        return boxes


def _numeric(text: str) -> bool:
    return number_of(text) is not None and sum(ch.isdigit() for ch in text) >= max(1, len(text.strip()) // 3)


def _label_like(text: str) -> bool:
    """A header cell: words, or a year/period ("2023", "FY2022", "Q3 2024") heading a column of values."""
    return not _numeric(text) or bool(re.fullmatch(r"\D{0,4}(19|20)\d\d\D{0,4}", text.strip()))


# letters of the scripts written from right to left: Hebrew, Arabic with its supplements and presentation forms
_RTL_LETTER = re.compile(r"[\u0590-\u05ff\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb1d-\ufdff\ufe70-\ufeff]")


def right_to_left(texts: list[str]) -> bool:
    """Whether most letters of the texts are of a script written from right to left (Arabic, Hebrew): such a
    table starts on the right, its row labels in its rightmost columns."""
    text = "".join(texts)
    letters = sum(ch.isalpha() for ch in text)
    return letters > 0 and 2 * len(_RTL_LETTER.findall(text)) > letters


def _numbering(texts: list[str]) -> bool:
    """A column that numbers the rows (1, 2, 3 …: a rank, a line number), not a column of values."""
    numbers = [t.strip().rstrip(".") for t in texts]
    return len(numbers) >= 3 and all(n.isdecimal() for n in numbers) and [int(n) for n in numbers] == list(
        range(int(numbers[0]), int(numbers[0]) + len(numbers)))


def grid_of(region: Region) -> Grid | None:
    """The table's grid, with header rows/columns inferred where ingestion marked none. None without cells.
    A right-to-left table is read mirrored (its first column is its rightmost), so its row labels lead as a
    left-to-right table's do."""
    cells = {(c.row, c.col): c for c in region.cells if c.text.strip()}
    if not cells:
        return None
    n_rows = max(r for r, _ in cells) + 1
    n_cols = max(c for _, c in cells) + 1
    header_rows, header_cols = region.header_rows, region.header_cols
    if right_to_left([c.text for c in cells.values()]):
        cells = {(r, n_cols - 1 - c): replace(cell, col=n_cols - 1 - c) for (r, c), cell in cells.items()}
        header_cols = 0  # ingestion marks header columns on the left
    for r in range(1, header_rows):
        # a row below the first that reads as the rows under it — a label, then a value or a code ("Invoice
        # number | 87B37C9-0152" under a "Receipt | Noisebridge" title) — is the table's first body row,
        # whatever ingestion marked: column names are words or periods
        first_cell = cells.get((r, 0))
        if first_cell is not None and _label_like(first_cell.text) and any(
                not _label_like(cells[(r, c)].text) for c in range(1, n_cols) if (r, c) in cells):
            header_rows = r
            break
    filled = [sum((r, c) in cells for c in range(n_cols)) for r in range(n_rows)]
    if n_cols > 1 and n_rows > 2 and filled[0] == 1 and filled[1] >= 2 and header_rows <= 1:
        # a title row spanning the table ("canvas.acroform.textfield parameters") above a row of column
        # names: both are headers when the names are short words (not values)
        names = [cells[(1, c)].text for c in range(n_cols) if (1, c) in cells]
        if all(_label_like(t) and len(t.split()) <= 4 for t in names):
            header_rows = 2
    if header_rows == 0 and n_rows > 1:
        top = [cells[(0, c)].text for c in range(n_cols) if (0, c) in cells]
        below = [cells[(r, c)].text for r in range(1, n_rows) for c in range(n_cols) if (r, c) in cells]
        if top and all(_label_like(t) for t in top) and any(_numeric(t) and not _label_like(t) for t in below):
            header_rows = 1
        elif all(c.is_header for c in cells.values() if c.row == 0):
            header_rows = 1
    if n_cols > 1 and n_rows > 2:
        # a title row, a subtitle, a group row and the column names above the first row of values: all headers
        has_value = [any(is_value(cells[(r, c)].text) for c in range(1, n_cols) if (r, c) in cells)
                     for r in range(n_rows)]
        first_values = next((r for r, found in enumerate(has_value) if found), 0)
        value_rows = has_value[first_values:]
        # …when the rows below are a table of values (most rows print one), not rows of words with a number
        if header_rows < first_values <= 4 and len(value_rows) >= 2 and sum(value_rows) >= 0.8 * len(
                value_rows) and not any(is_value(c.text) for c in cells.values() if c.row < first_values):
            header_rows = first_values
    if header_cols == 0 and n_cols > 1:
        first = [cells[(r, 0)].text for r in range(header_rows, n_rows) if (r, 0) in cells]
        # periods label rows as words do ("FY2014", "Apr-2015")
        if first and sum(_label_like(t) for t in first) >= max(1, len(first) * 2 // 3):
            header_cols = 1
        elif n_cols > 2 and _numbering(first):  # a column of row numbers, then the rows' labels
            second = [cells[(r, 1)].text for r in range(header_rows, n_rows) if (r, 1) in cells]
            if second and sum(_label_like(t) for t in second) >= max(1, len(second) * 2 // 3):
                header_cols = 2
    grid = Grid(cells, header_rows, header_cols, n_rows, n_cols)
    for r in range(n_rows):
        grid.row_labels[r] = " ".join(cells[(r, c)].text for c in range(header_cols) if (r, c) in cells)
        if (header_cols and r > header_rows and not grid.row_labels[r] and filled[r]
                and grid.row_labels.get(r - 1)):  # a row label spanning several rows is printed in the first only
            grid.row_labels[r] = grid.row_labels[r - 1]
    # a header row of one cell in a wider table is its title, spanning every column: it names none (its text
    # sits in the cell where the span starts, the first column, or the last once a right-to-left table is
    # mirrored)
    titles = {r for r in range(header_rows) if filled[r] == 1 and n_cols > 2}
    for c in range(n_cols):
        grid.col_labels[c] = " ".join(cells[(r, c)].text for r in range(header_rows)
                                      if (r, c) in cells and r not in titles)
        grid.col_names[c] = next((cells[(r, c)].text for r in reversed(range(header_rows))
                                  if (r, c) in cells and r not in titles), "")
    return grid


def table_regions_from_text(region: Region) -> Region:
    """A table region whose ingestion found no cells, split into cells from its " | "-separated rows
    (the contract's text form of a table), with boxes as equal bands of the region."""
    if region.cells or " | " not in region.text:
        return region
    rows = [row for row in region.text.split("\n") if row.strip()]
    x1, y1, x2, y2 = region.box
    n = max(1, len(rows))
    cells = []
    for r, row in enumerate(rows):
        parts = [p.strip() for p in row.split(" | ")]
        width = (x2 - x1) / max(1, len(parts))
        for c, text in enumerate(parts):
            cells.append(TableCell(r, c, text, (x1 + c * width, y1 + r * (y2 - y1) / n,
                                                x1 + (c + 1) * width, y1 + (r + 1) * (y2 - y1) / n)))
    return Region(region.region_id, region.kind, region.box, region.text, region.caption, cells,
                  region.header_rows, region.header_cols)


def unstacked_rows(region: Region) -> Region:
    """A table whose rulings frame blocks of rows, each printed row of a block written into the same
    ruled cells ("FY2013 FY2014" beside "7,723,293 7,793,704": a data sheet ruled by quarter), split into
    its printed rows: a ruled row whose filled cells all hold the same number k ≥ 2 of words, values in
    all but its first cell, becomes k rows, each cell's box cut into k bands. Unchanged otherwise."""
    if not region.cells:
        return region
    by_row: dict[int, list[TableCell]] = {}
    for cell in region.cells:
        by_row.setdefault(cell.row, []).append(cell)
    out: list[TableCell] = []
    shift = 0
    for row in sorted(by_row):
        cells = by_row[row]
        filled = [c for c in cells if c.text.strip()]
        counts = {len(c.text.split()) for c in filled}
        k = counts.pop() if len(counts) == 1 else 1
        first_col = min((c.col for c in filled), default=0)
        values = [c for c in filled if c.col > first_col]
        # "4 210" is one number grouped by spaces (`values.SPACE_GROUPED`), not two stacked rows
        if k < 2 or not values or not all(all(_numeric(w) for w in c.text.split()) for c in values) or all(
                SPACE_GROUPED.fullmatch(c.text.strip()) for c in values):
            out += [TableCell(c.row + shift, c.col, c.text, c.box, c.is_header) for c in cells]
            continue
        for c in cells:
            words = c.text.split() or [""] * k
            x1, y1, x2, y2 = c.box
            step = (y2 - y1) / k
            out += [TableCell(c.row + shift + i, c.col, words[i], (x1, y1 + i * step, x2, y1 + (i + 1) * step),
                              c.is_header) for i in range(k)]
        shift += k - 1
    if not shift:
        return region
    return Region(region.region_id, region.kind, region.box, region.text, region.caption, out,
                  region.header_rows, region.header_cols, region.labels)


def table_from_labels(region: Region) -> Region | None:
    """The table a figure's labels print: a parts list or a spec sheet drawn with rulings is often taken for
    a figure by layout analysis, its cells kept as labels with boxes. Rows are labels whose vertical centres
    agree; columns are left edges that three or more rows share. The table runs from the first row of two or
    more aligned labels, none a value (its column names), to the last row of two or more aligned labels; a
    row of one label inside it (a group's name, a continued cell) is kept in the column it sits in. At least
    three columns, or two and four rows below the names: fewer is a legend or a caption beside a drawing, not
    a table. None when the labels print no such table."""
    labels = [lb for lb in region.labels if lb.text.strip() and lb.box[3] > lb.box[1]]
    if len(labels) < 6:
        return None
    height = sorted(lb.box[3] - lb.box[1] for lb in labels)[len(labels) // 2]
    rows: list[list[Label]] = []
    for lb in sorted(labels, key=lambda lb: (lb.box[1] + lb.box[3]) / 2):
        centre = (lb.box[1] + lb.box[3]) / 2
        if rows and abs(centre - sum((x.box[1] + x.box[3]) / 2 for x in rows[-1]) / len(rows[-1])) <= height / 2:
            rows[-1].append(lb)
        else:
            rows.append([lb])
    lefts: list[float] = []  # column anchors: left edges shared by three or more rows
    for left in sorted(lb.box[0] for lb in labels):
        if sum(any(abs(lb.box[0] - left) <= height / 2 for lb in row) for row in rows) >= 3 and not any(
                abs(left - a) <= height for a in lefts):
            lefts.append(left)

    def column(lb: Label) -> int | None:
        return next((i for i, a in enumerate(lefts) if abs(lb.box[0] - a) <= height / 2), None)

    aligned = [len(row) >= 2 and all(column(lb) is not None for lb in row)
               and len({column(lb) for lb in row}) == len(row) for row in rows]
    start = next((i for i, row in enumerate(rows) if aligned[i] and all(not _numeric(lb.text) for lb in row)), None)
    if start is None:
        return None
    end = max(i for i in range(start, len(rows)) if aligned[i]) + 1
    cells: list[TableCell] = []
    for r, row in enumerate(rows[start:end]):
        for lb in row:
            col = column(lb)
            if col is None:  # a label spanning columns: the column it starts in
                col = max((i for i, a in enumerate(lefts) if a <= lb.box[0] + height / 2), default=0)
            cells.append(TableCell(r, col, lb.text.strip(), lb.box, r == 0))
    n_rows, n_cols = end - start, len({c.col for c in cells})
    if n_cols < 2 or (n_cols < 3 and n_rows < 5) or n_rows < 3:
        return None
    return _table_of(region, "table", cells, n_rows, 1, ())


def _table_of(source: Region, kind: RegionKind, cells: list[TableCell], n_rows: int, header_rows: int,
              labels: Sequence[Label]) -> Region:
    """A table region of `source`'s id and caption made of `cells` (rows 0 … n_rows - 1): its box the cells'
    union, its text the contract's " | "-separated rows."""
    text = "\n".join(" | ".join(c.text for c in cells if c.row == r) for r in range(n_rows))
    return Region(source.region_id, kind, union([c.box for c in cells]), text, source.caption, cells,
                  header_rows, 0, list(labels))


PANEL_SHARE = 0.7  # of a column's filled cells: words in a panel's label column, values in the column before it


def panels(region: Region) -> list[Region]:
    """A table printed as several tables side by side and one under another (a broker's note prints its
    income statement beside its per-share data, the balance sheet under the income statement; a fact sheet
    prints "Item | Value | Item | Value"), cut into those tables, each read by its own row labels and column
    names. Side by side: a column of words right after a column of values, when the table's first column is
    words too and the two parts share a column name ("2021 … 2024E" over both). One under another: a row that
    repeats the column names of the top row (its first cell names the new table). Each part keeps the region's
    id; the table is returned whole when it has no such parts."""
    cells = {(c.row, c.col): c for c in region.cells if c.text.strip()}
    if not cells:
        return [region]
    n_rows = max(r for r, _ in cells) + 1
    n_cols = max(c for _, c in cells) + 1

    def share(col: int, test: Callable[[str], bool]) -> float:
        texts = [cells[r, col].text for r in range(n_rows) if (r, col) in cells]
        return sum(test(t) for t in texts) / len(texts) if len(texts) >= 3 else 0.0

    def words(text: str) -> bool:
        return not _numeric(text)

    def names(first: int, last: int) -> set[str]:
        return {cells[0, c].text.strip() for c in range(first + 1, last) if (0, c) in cells}

    starts = [0]
    if share(0, words) >= PANEL_SHARE:
        for col in range(2, n_cols - 1):
            if share(col, words) >= PANEL_SHARE and share(col - 1, _numeric) >= PANEL_SHARE \
                    and names(starts[-1], col) & names(col, n_cols):
                starts.append(col)
    out: list[Region] = []
    for first, last in zip(starts, [*starts[1:], n_cols]):
        header = [cells[0, c].text.strip() for c in range(first + 1, last) if (0, c) in cells]
        tops = [0] + [r for r in range(1, n_rows) if len(header) >= 2 and (r, first) in cells and [
            cells[r, c].text.strip() for c in range(first + 1, last) if (r, c) in cells] == header]
        for top, bottom in zip(tops, [*tops[1:], n_rows]):
            part = [TableCell(r - top, c - first, cells[r, c].text, cells[r, c].box, cells[r, c].is_header)
                    for r in range(top, bottom) for c in range(first, last) if (r, c) in cells]
            if part:
                out.append(_table_of(region, region.kind, part, bottom - top, 1 if top or region.header_rows else 0,
                                     region.labels))
    return out if len(out) > 1 else [region]


def _row_parts(text: str) -> tuple[str, str] | None:
    """A printed row "label value" split in two ("Kellen Island 415" → ("Kellen Island", "415")), or None."""
    from vrag_rl.reader.values import values_in

    values = [v for v in values_in(text) if not v.is_date]
    if len(values) != 1 or not text.rstrip().endswith(values[0].text):
        return None
    label = text[:values[0].start].strip(" :|-–")
    return (label, values[0].text) if label and re.search(r"[^\W\d_]", label) else None


def stacked_tables(regions: list[Region]) -> list[Region]:
    """Tables that layout analysis saw as separate one-line regions: two or more "label value" lines
    stacked at one left edge with row spacing, under an optional header line without a value (a slide's
    or a scan's small table, read line by line by OCR). Returned as table regions with cells, so they are
    read by their headers like any table; the original regions stay too."""
    def single(r: Region) -> bool:
        return r.kind in ("text", "caption", "list", "heading") and 0 < len(r.text.split()) <= 8

    lines: list[Region] = []
    for region in regions:  # a paragraph region with its lines kept apart: each line a candidate row
        row_texts = [row for row in region.text.split("\n") if row.strip()]
        if len(row_texts) > 1 and region.kind in ("text", "list"):
            x1, y1, x2, y2 = region.box
            step = (y2 - y1) / len(row_texts)
            lines += [Region(f"{region.region_id}.{i}", "text", (x1, y1 + i * step, x2, y1 + (i + 1) * step), row)
                      for i, row in enumerate(row_texts)]
        else:
            lines.append(region)
    out: list[Region] = []
    ordered = sorted((r for r in lines if single(r)), key=lambda r: (r.box[1], r.box[0]))
    used: set[str] = set()
    for start in ordered:
        if start.region_id in used:
            continue
        stack = [start]
        for nxt in ordered:
            last = stack[-1]
            height = max(1.0, last.box[3] - last.box[1])
            if nxt.box[1] <= last.box[1] or nxt.region_id in used:
                continue
            if abs(nxt.box[0] - start.box[0]) <= 1.5 * height and 0 <= nxt.box[1] - last.box[3] <= 2.5 * height:
                stack.append(nxt)
        # the longest run of consecutive "label value" lines, under the line right above it when that line
        # holds no value (its header); lines above that (a title, a paragraph's lines) are not the table's
        parts = [_row_parts(r.text) for r in stack]
        best_run: tuple[int, int] = (0, 0)
        k = 0
        while k < len(stack):
            end = k
            while end < len(stack) and parts[end] is not None:
                end += 1
            if end - k > best_run[1] - best_run[0]:
                best_run = (k, end)
            k = end + 1
        run_start, run_end = best_run
        header = stack[run_start - 1] if run_start > 0 else None
        rows = [(r, part) for i, (r, part) in enumerate(zip(stack, parts))
                if run_start <= i < run_end and part is not None]  # no part in the run is None (the loop
        # above): the test only says so to the type checker
        if len(rows) < 2:
            continue
        used.update(r.region_id for r in ([header] if header else []) + [r for r, _ in rows])
        cells: list[TableCell] = []
        offset = 0
        if header is not None:
            cells += [TableCell(0, 0, header.text, header.box, True), TableCell(0, 1, header.text, header.box, True)]
            offset = 1
        for i, (region, (label, value)) in enumerate(rows):
            x1, y1, x2, y2 = region.box
            split = x1 + (x2 - x1) * len(label) / max(1, len(region.text))
            cells += [TableCell(i + offset, 0, label, (x1, y1, split, y2), False),
                      TableCell(i + offset, 1, value, (split, y1, x2, y2), False)]
        members = ([header] if header else []) + [r for r, _ in rows]
        box = (min(r.box[0] for r in members), min(r.box[1] for r in members), max(r.box[2] for r in members),
               max(r.box[3] for r in members))
        out.append(Region("+".join(r.region_id for r in members), "table", box,
                          "\n".join(r.text for r in members), "", cells, offset, 1))
    return out
