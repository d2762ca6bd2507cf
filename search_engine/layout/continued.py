"""A table continued from the page before gets the header rows that page printed (`carry_table_header`).

A long table breaks across pages and prints its title and column names once, on its first page; its rows on
the next pages are cells under no header ("1 617 | 53 | 59 | …"), and a reader cannot tell which column
holds the value a question asks for. When a page's first table has no header row, starts with a row of
values and has as many columns as the last table of the page before, which had header rows, those rows are
carried onto it: as cells marked header, with an empty box (they are not printed on this page, so nothing
there is to be cropped), and as the first lines of the table's text, which is what search and the reader
see. Carried page by page, a table of any length keeps its header.

Why by hand: PyMuPDF and the aligned-table finder find tables one page at a time; no library in the stack
joins a table across pages.
"""
from __future__ import annotations

import dataclasses
import re

from search_engine.layout.parts import is_numeric
from search_engine.page_layout import PageLayout, Region, TableCell

MAX_HEADER_ROWS = 4  # a title, a subtitle, a group row and the column names
_NO_BOX = (0.0, 0.0, 0.0, 0.0)  # a cell not printed on the page (as composition gives a merged cell's)
_GROUP_SPACE = re.compile(r"(?<=\d)[ \u00a0\u202f](?=\d{3}(?!\d))")  # "1 617": thousands set apart by a space


def _numeric(text: str) -> bool:
    """A value cell (`parts.is_numeric`), its thousands also grouped by spaces ("1 617", "(4,207)")."""
    return is_numeric(_GROUP_SPACE.sub("", text.strip()))


def _n_cols(region: Region) -> int:
    return max((c.col for c in region.cells), default=-1) + 1


def _rows(region: Region) -> dict[int, list[TableCell]]:
    rows: dict[int, list[TableCell]] = {}
    for cell in region.cells:
        if cell.text.strip():
            rows.setdefault(cell.row, []).append(cell)
    return rows


def header_rows_of(region: Region) -> int:
    """How many rows head the table: those marked header, or more — every row above its first row of values
    (a title, a group row, the column names, which a finder often marks as one header row or none), at most
    MAX_HEADER_ROWS. 0 for a table that starts with values."""
    rows = _rows(region)
    first_values = next((r for r in sorted(rows) if any(_numeric(c.text) for c in rows[r])), None)
    inferred = first_values if first_values is not None and first_values <= MAX_HEADER_ROWS else 0
    return min(MAX_HEADER_ROWS, max(region.header_rows, inferred))


def _starts_with_values(region: Region) -> bool:
    rows = _rows(region)
    return bool(rows) and any(_numeric(c.text) for c in rows[min(rows)])


def carry_table_header(previous: PageLayout | None, layout: PageLayout) -> PageLayout:
    """`layout` with its first table given the header rows of the last table of `previous` (the page before
    in the same document) when it continues that table (see the module doc); `layout` itself otherwise."""
    if previous is None:
        return layout
    earlier = [r for r in previous.regions if r.kind == "table" and r.cells]
    if not earlier:
        return layout
    before = earlier[-1]
    carried = header_rows_of(before)
    if not carried:
        return layout
    for index, region in enumerate(layout.regions):
        if region.kind in ("heading", "caption"):
            return layout  # a new section or a captioned table: not the one the page before left open
        if region.kind != "table" or not region.cells:
            continue
        width = _n_cols(before)
        if region.header_rows or region.caption or _n_cols(region) != width or not _starts_with_values(region):
            return layout
        header = [TableCell(c.row, c.col, c.text, _NO_BOX, True) for c in before.cells
                  if c.row < carried and c.text.strip()]
        body = [dataclasses.replace(c, row=c.row + carried) for c in region.cells]
        by_position = {(c.row, c.col): c.text for c in header}
        lines = [" | ".join(by_position.get((r, col), "") for col in range(width)) for r in range(carried)]
        regions = list(layout.regions)
        regions[index] = dataclasses.replace(region, text="\n".join([*lines, region.text]), cells=header + body,
                                             header_rows=carried)
        return dataclasses.replace(layout, regions=regions)
    return layout
