"""The scores of the table-extractor benchmark (`scripts/bench_table_extractors.py`): whether an extractor's
tables of a question's reference page hold the answer in a cell (`found`), in a cell that is mostly the answer
(`clean`: not a row or column glued into one cell), with the question's row key in another cell of its row
and its column key in a cell above it (`check_tables`). Cells match whitespace-, case- and width-insensitively
(`holds`). The script runs the extractors and times them; this module counts.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

Grid = list[list[str]]


def compact(text: str | None) -> str:
    """NFKC, case-folded, without whitespace: text layers split and join tokens differently."""
    return "".join(unicodedata.normalize("NFKC", text or "").casefold().split())


def holds(cell: str, ref: str) -> bool:
    """Whether a cell holds a reference string (one or two characters only as the whole cell)."""
    c, r = compact(cell), compact(ref)
    if not r:
        return False
    return c == r if len(r) <= 2 else r in c


def clean(cell: str, ref: str) -> bool:
    """The cell is mostly the answer: at least half its characters, not a row glued into one cell."""
    return holds(cell, ref) and len(compact(ref)) >= 0.5 * len(compact(cell))


@dataclass
class Check:
    """One question checked against one extractor's tables of its reference page."""

    tables: int = 0
    found: bool = False
    clean: bool = False
    row: bool | None = None
    col: bool | None = None


def check_tables(grids: list[Grid], refs: list[str], row_key: str | None, col_key: str | None) -> Check:
    """Find the answer among the tables' cells and check its row and column keys (best over all hits)."""
    found = is_clean = row_ok = col_ok = False
    for grid in grids:
        for r, row in enumerate(grid):
            for c, cell in enumerate(row):
                if not any(holds(cell, ref) for ref in refs):
                    continue
                found = True
                is_clean |= any(clean(cell, ref) for ref in refs)
                if row_key:
                    row_ok |= any(holds(other, row_key) for k, other in enumerate(row) if k != c)
                if col_key and sum(1 for other in row if other.strip()) > 1:  # a row glued into one cell has
                    # no columns: its "header" above is the header row glued too
                    col_ok |= any(c < len(above) and holds(above[c], col_key) for above in grid[:r])
    return Check(tables=len(grids), found=found, clean=is_clean, row=row_ok if row_key else None,
                 col=col_ok if col_key else None)
