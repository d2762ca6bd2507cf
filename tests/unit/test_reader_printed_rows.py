"""Tables nobody found: values paired with their row's label and their column's header by where they are
printed (`vrag_rl.reader.rows`), and ruled tables whose rulings frame blocks of rows (`tables.unstacked_rows`).

The pages are invented (a statement laid out as loose text regions, a data sheet), shaped like what layout
analysis makes of real financial statements and data sheets: each number its own region, a line holding a
label and its values, a block taken for a figure with its labels kept."""
from __future__ import annotations

import pytest

from search_engine.page_layout import Label, PageLayout, Region, TableCell
from vrag_rl.reader import Reader
from vrag_rl.reader.rows import is_value, pieces_of, row_values
from vrag_rl.reader.tables import grid_of, unstacked_rows


def _text(rid: str, box: tuple[float, float, float, float], text: str) -> Region:
    return Region(rid, "text", box, text)


def _statement() -> PageLayout:
    """A two-year statement with its title, its column years, a unit, and rows as loose text pieces."""
    regions = [
        Region("h", "heading", (40, 20, 700, 44), "Consolidated Statement of Income of Larkspur Mills"),
        _text("u", (520, 60, 640, 72), "Yen (millions)"),
        _text("y1", (430, 80, 470, 92), "2022"),
        _text("y2", (580, 80, 620, 92), "2023"),
        _text("l1", (40, 100, 200, 112), "Revenue"),
        _text("v1", (420, 100, 470, 112), "812,400"),
        _text("v2", (570, 100, 620, 112), "905,118"),
        _text("l2", (40, 120, 200, 132), "Net profit"),
        _text("v3", (420, 120, 470, 132), "61,093"),
        _text("v4", (570, 120, 620, 132), "(4,207)"),
        # one region holds both values of a row (two cells layout analysis did not cut apart)
        _text("l3", (40, 140, 300, 152), "Net changes in the fair value of hedges"),
        _text("v5", (420, 140, 620, 152), "1,220 3,018"),
    ]
    return PageLayout("statement_1", 800, 400, regions, "pdf")


def test_values_pair_with_their_row_label_and_their_column_header():
    found = {(rv.label.text, rv.header, rv.value.text) for rv in row_values(_statement().regions)}
    assert ("Revenue", "2022", "812,400") in found
    assert ("Net profit", "Yen (millions) 2023", "(4,207)") in found
    # a region's values are cut apart by character position: each value under its own year
    assert ("Net changes in the fair value of hedges", "2022", "1,220") in found
    assert ("Net changes in the fair value of hedges", "Yen (millions) 2023", "3,018") in found
    # the statement's title spans every column: it heads none
    assert not any("Larkspur" in header for _, header, _ in found)


@pytest.mark.parametrize(("question", "answer"), [
    ("What net profit did Larkspur Mills report for 2023, in yen millions?", "(4,207)"),
    ("What was Larkspur Mills' revenue in 2022?", "812,400"),
    ("How large were the net changes in the fair value of hedges in 2023?", "3,018"),
])
def test_a_statement_of_loose_pieces_reads_as_a_table(question, answer):
    reading = Reader(None).read(question, _statement())
    assert reading is not None and reading.answer == answer and reading.kind == "table"


def test_a_column_of_another_year_than_the_one_asked_is_no_answer():
    # only the 2024 column is asked; the page prints 2022 and 2023
    assert Reader(None).read("What net profit did Larkspur Mills report for 2024?", _statement()) is None


def test_a_period_set_over_some_columns_dates_the_table_and_names_no_column():
    """A route table whose month is printed once, over its middle columns ("Dec-2015" above "RPK" and its
    growth): the month asked names that title, not the column under it, so the passenger count is not read
    off the RPK column (a wrong answer, not "not found")."""
    page = PageLayout("routes_2", 800, 300, [
        _text("t", (300, 40, 360, 52), "Dec-2015"),
        _text("h1", (200, 60, 240, 72), "Seats"), _text("h2", (300, 60, 360, 72), "RPK"),
        _text("h3", (400, 60, 440, 72), "Growth"),
        _text("l1", (40, 80, 150, 92), "Pacific"), _text("a1", (200, 80, 240, 92), "157,642"),
        _text("b1", (300, 80, 360, 92), "1,225,977"), _text("c1", (400, 80, 440, 92), "107.1"),
        _text("l2", (40, 100, 150, 112), "Europe"), _text("a2", (200, 100, 240, 112), "42,097"),
        _text("b2", (300, 100, 360, 112), "383,539"), _text("c2", (400, 100, 440, 112), "88.3"),
    ], "pdf")
    found = {(rv.label.text, rv.value.text): rv.header for rv in row_values(page.regions)}
    assert found[("Europe", "383,539")] == "Dec-2015 RPK"  # the title is read above its column ...
    reading = Reader(None).read("How many passengers flew on Europe routes in December 2015?", page)
    assert reading is None or reading.answer != "383,539"  # ... but dates every column, and pins none


def test_a_row_the_question_does_not_name_gives_nothing():
    assert Reader(None).read("How many employees did Larkspur Mills have in 2023?", _statement()) is None


def test_a_figure_of_label_boxes_is_read_by_rows_too():
    """A block of label/value pairs taken for a figure (a broker note's "stock data" box), two tables side
    by side: a value's label is the nearest words on its left, not the other table's."""
    labels = [Label("Market cap (millions)", (40, 100, 160, 112)), Label("18,785.44", (200, 100, 260, 112)),
              Label("Revenue (m)", (300, 100, 400, 112)), Label("746", (450, 100, 480, 112)),
              Label("1,567", (520, 100, 560, 112)),
              Label("2020", (450, 80, 480, 92)), Label("2021", (520, 80, 560, 92)),
              Label("Total assets (m)", (40, 120, 160, 132)), Label("3,508.81", (200, 120, 260, 132))]
    page = PageLayout("note_2", 800, 400, [Region("f", "figure", (30, 70, 600, 140), "", labels=labels)], "pdf")
    found = {(rv.label.text, rv.value.text): rv for rv in row_values(page.regions)}
    assert found[("Market cap (millions)", "18,785.44")].row_values == 1
    assert found[("Revenue (m)", "1,567")].header == "2021"
    reader = Reader(None)
    assert reader.read("How much is the market cap, in millions?", page).answer == "18,785.44"
    assert reader.read("What was revenue in 2020, in millions?", page).answer == "746"


def test_value_cells_and_pieces():
    assert is_value("(2,983)") and is_value("¥ 233,512") and is_value("21.60-97.40") and is_value("4.5%")
    assert not is_value("2020") and not is_value("FY2014") and not is_value("RPK(000's)")
    pieces = pieces_of([_text("a", (0, 0, 300, 10), "Net profit ¥ 221,834 11,678")])
    assert [p.text for p in pieces] == ["Net profit", "¥221,834", "11,678"]
    assert pieces[0].box[2] < pieces[1].box[0] < pieces[2].box[0]
    # a value before words is prose or a label holding a number: kept whole
    assert [p.text for p in pieces_of([_text("b", (0, 0, 300, 10), "Balance as of 9/12/17: 15,682")])] == [
        "Balance as of 9/12/17:", "15,682"]
    assert len(pieces_of([_text("c", (0, 0, 300, 10), "In 2019 the 12 mills closed")])) == 1


def _sheet() -> Region:
    """A data sheet ruled by blocks: each ruled row holds several printed rows in the same cells."""
    rows = [["International Passenger Traffic", "", ""], ["", "Pax", "L/F(%)"],
            ["FY2013 FY2014", "7,723,293 7,793,704", "76.5 75.7"],
            ["Apr-2015 May-2015 Jun-2015", "653,278 686,908 667,181", "74.9 77.7 81.2"]]
    cells = [TableCell(r, c, text, (100 + 200 * c, 100 + 40 * r, 300 + 200 * c, 140 + 40 * r))
             for r, row in enumerate(rows) for c, text in enumerate(row)]
    return Region("t", "table", (100, 100, 700, 260), "", cells=cells)


def test_rows_stacked_in_ruled_cells_are_split_into_printed_rows():
    grid = grid_of(unstacked_rows(_sheet()))
    assert grid is not None and grid.n_rows == 7
    assert grid.header_rows == 2 and grid.header_cols == 1  # title and column names; periods label rows
    labels = {grid.row_labels[r]: r for r in grid.body_rows}
    assert grid.cell(labels["FY2014"], 1).text == "7,793,704"
    assert grid.cell(labels["May-2015"], 2).text == "77.7"
    # the split row's cells are cut into bands, top to bottom
    assert grid.cell(labels["FY2013"], 1).box[3] <= grid.cell(labels["FY2014"], 1).box[1]
    page = PageLayout("sheet_1", 800, 400, [_sheet()], "pdf")
    reading = Reader(None).read("How many passengers (Pax) flew in May 2015?", page)
    assert reading is not None and reading.answer == "686,908"


def test_a_row_of_words_is_not_split():
    cells = [TableCell(0, 0, "Name", (0, 0, 10, 10)), TableCell(0, 1, "Role", (10, 0, 20, 10)),
             TableCell(1, 0, "Ada Byron", (0, 10, 10, 20)), TableCell(1, 1, "analyst engineer", (10, 10, 20, 20))]
    region = Region("t", "table", (0, 0, 20, 20), "", cells=cells)
    assert unstacked_rows(region) is region


def _results_sheet() -> Region:
    """An Arabic results sheet as a PDF's table finder gives it: cells numbered from the left, though the table
    reads from the right (rank, list, then the votes per town, the total last, on the left); a title row of
    one cell, a group row, the towns' row; thousands grouped by spaces."""
    rows = [["نتائج الانتخابات البلدية 2019", "", "", "", ""],
            ["مجموع الأصوات", "توزيع الأصوات حسب المدينة", "", "القائمات", "الترتيب"],
            ["", "صفاقس", "قابس", "", ""],
            ["3 066", "1 422", "1 644", "قائمة الأمل", "1"],
            ["2 510", "1 100", "1 410", "قائمة النور", "2"],
            ["980", "430", "550", "قائمة الغد", "3"]]
    cells = [TableCell(r, c, text, (600 - 100 * c, 100 + 30 * r, 700 - 100 * c, 130 + 30 * r))
             for r, row in enumerate(rows) for c, text in enumerate(row) if text]
    return Region("t", "table", (100, 100, 700, 280), "\n".join(" | ".join(row) for row in rows), cells=cells)


def test_a_right_to_left_table_is_read_from_its_right():
    grid = grid_of(_results_sheet())
    assert grid is not None and grid.header_rows == 3 and grid.header_cols == 2  # rank and list lead, mirrored
    row = next(r for r in grid.body_rows if "الأمل" in grid.row_labels[r])
    col = next(c for c in grid.body_cols if grid.col_labels[c].endswith("صفاقس"))
    assert not any("2019" in label for label in grid.col_labels.values())  # the title row heads no column
    assert grid.cell(row, col).text == "1 422"
    page = PageLayout("results_1", 800, 400, [_results_sheet()], "pdf")
    reading = Reader(None).read("كم عدد الأصوات التي حصلت عليها قائمة الأمل في صفاقس؟", page)
    assert reading is not None and reading.answer == "1 422"  # كم asks a number; "1 422" is one number


def test_a_number_grouped_by_spaces_is_one_value_only_when_alone():
    from vrag_rl.reader.values import number_of, values_in

    assert [v.number for v in values_in("68 795")] == [68795.0] and number_of("−3 001") == -3001.0
    assert [v.number for v in values_in("38 120 5")] == [38.0, 120.0, 5.0]  # a line of cells: three numbers


def test_a_word_most_row_labels_print_names_no_row():
    """"How many votes did the Workers Party get?" over a results table without that party: "party" is printed in
    most row labels and tells none apart, so no row's count is the answer (it was, by that one word)."""
    rows = [["List", "Votes"], ["Green Party", "4 210"], ["Labour Party", "3 980"], ["Liberal Party", "1 204"],
            ["Pirate Party", "410"], ["Independents", "388"]]
    cells = [TableCell(r, c, text, (100 + 200 * c, 100 + 30 * r, 300 + 200 * c, 130 + 30 * r))
             for r, row in enumerate(rows) for c, text in enumerate(row)]
    table = Region("t", "table", (100, 100, 500, 280), "\n".join(" | ".join(row) for row in rows), cells=cells)
    page = PageLayout("results_2", 800, 400, [table], "pdf")
    reader = Reader(None)
    assert reader.read("How many votes did the Workers Party get?", page) is None
    assert reader.read("How many votes did the Pirate Party get?", page).answer == "410"


def test_a_cell_pinned_by_row_and_column_is_a_value_though_its_digits_look_like_a_year():
    """"How much sunshine did Station B1 get?": 1511 hours is the cell's value; a bare 1500–2099 elsewhere is
    taken for a year and never answers a quantity."""
    rows = [["Station", "Rainfall (mm)", "Sunshine (h)"], ["Station A0", "100", "1500"],
            ["Station B1", "107", "1511"], ["Station C2", "114", "1522"]]
    cells = [TableCell(r, c, text, (50 + 100 * c, 100 + 20 * r, 150 + 100 * c, 120 + 20 * r), r == 0)
             for r, row in enumerate(rows) for c, text in enumerate(row)]
    table = Region("t", "table", (50, 100, 350, 180), "\n".join(" | ".join(r) for r in rows), "", cells, 1)
    reading = Reader(None).read("How much sunshine did Station B1 get?", PageLayout("w", 600, 800, [table], "pdf"))
    assert reading is not None and reading.answer == "1511"


def test_a_numbering_column_counts_in_decimal_digits_only():
    from vrag_rl.reader.tables import _numbering

    assert _numbering(["1", "2", "3"]) and _numbering(["١", "٢", "٣"])  # Arabic-Indic digits number rows too
    assert not _numbering(["²", "³", "4"])  # superscripts are digits to str.isdigit, not to int(): no crash
    assert not _numbering(["1", "3", "4"])
