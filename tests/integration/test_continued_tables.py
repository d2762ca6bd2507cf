"""A table that runs over several pages keeps its header on every page (`search_engine.layout.continued`).

A real PDF (drawn with PyMuPDF: a ruled table of 28 rows over three pages, its column names printed once on
the first) is ingested in chunks of two pages, so the third page continues a table of the checkpoint before
it; the stored layouts of pages 2 and 3 hold the header, the reader answers from page 3 by column name, and
the evidence box stays on the rows that page prints.
"""
from __future__ import annotations

from pathlib import Path

from search_engine.engine import SearchEngine
from search_engine.ingest import Ingestor
from search_engine.layout.continued import carry_table_header
from search_engine.page_layout import PageLayout, Region, TableCell
from vrag_rl.reader import Reader

HEADER = ["Station", "Rainfall (mm)", "Sunshine (h)"]


def _weather_pdf(path: Path) -> Path:
    import pymupdf

    rows = [[f"Station {chr(65 + k)}{k}", str(100 + 7 * k), str(1500 + 11 * k)] for k in range(28)]
    doc = pymupdf.open()
    for head, body in ((HEADER, rows[:8]), (None, rows[8:18]), (None, rows[18:28])):
        page = doc.new_page(width=595, height=842)
        if head:
            page.insert_text((60, 60), "Table 3: weather stations of the northern district", fontsize=12)
        table = ([head] if head else []) + body
        xs, top = [60, 260, 400, 540], 80
        for r, row in enumerate(table):
            for c, text in enumerate(row):
                page.insert_text((xs[c] + 4, top + 24 * r + 16), text, fontsize=10)
        for k in range(len(table) + 1):
            page.draw_line((xs[0], top + 24 * k), (xs[-1], top + 24 * k))
        for x in xs:
            page.draw_line((x, top), (x, top + 24 * len(table)))
    doc.save(path)
    return path


def _table(layout: PageLayout) -> Region:
    return next(r for r in layout.regions if r.kind == "table")


def test_a_table_over_three_pages_keeps_its_header_across_checkpoints(tmp_path):
    pdf = _weather_pdf(tmp_path / "weather.pdf")
    Ingestor(tmp_path / "index", visual_model=None, text_model="minilm", ocr=False, chunk_pages=2,
             progress=False).add([pdf])
    engine = SearchEngine.load(tmp_path / "index", load_models=False)
    first, second, third = (engine.page_layout(f"weather_{n}") for n in (1, 2, 3))
    assert _table(first).text.startswith(" | ".join(HEADER))
    for page in (second, third):  # page 3 begins the second checkpoint: carried from the stored page 2
        table = _table(page)
        assert table.header_rows == 1 and table.text.startswith(" | ".join(HEADER))
        carried = [c for c in table.cells if c.row == 0]
        assert [c.text for c in sorted(carried, key=lambda c: c.col)] == HEADER
        assert all(c.is_header and c.box == (0.0, 0.0, 0.0, 0.0) for c in carried)  # printed on page 1 only
    reading = Reader(None).read("What was the rainfall at Station V21?", third)
    assert reading is not None and reading.answer == "247"
    assert reading.box[1] > _table(third).box[1]  # the row on page 3, not a box from the page's corner


def _page(regions: list[Region]) -> PageLayout:
    return PageLayout("p", 600, 800, regions, "pdf")


def _grid(rows: list[list[str]], header_rows: int = 0) -> Region:
    cells = [TableCell(r, c, text, (50 + 100 * c, 100 + 20 * r, 150 + 100 * c, 120 + 20 * r))
             for r, row in enumerate(rows) for c, text in enumerate(row)]
    return Region("t", "table", (50, 100, 350, 100 + 20 * len(rows)), "\n".join(" | ".join(r) for r in rows), "",
                  cells, header_rows)


def test_only_a_headerless_table_of_the_same_width_that_starts_with_values_continues():
    before = _page([_grid([["Town", "Votes", "Share"], ["Adra", "1 422", "12%"], ["Bel", "980", "9%"]], 1)])
    continued = _page([_grid([["Cato", "3 066", "25%"], ["Dun", "410", "3%"]])])
    assert _table(carry_table_header(before, continued)).header_rows == 1
    assert carry_table_header(None, continued) is continued
    other_width = _page([_grid([["Cato", "3 066"], ["Dun", "410"]])])
    assert carry_table_header(before, other_width) is other_width
    own_header = _page([_grid([["Item", "Price", "Stock"], ["Pen", "2", "40"]], 1)])
    assert carry_table_header(before, own_header) is own_header
    new_section = _page([Region("h", "heading", (50, 40, 300, 60), "Results by region"),
                         _grid([["Cato", "3 066", "25%"], ["Dun", "410", "3%"]])])
    assert carry_table_header(before, new_section) is new_section
