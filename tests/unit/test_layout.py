"""Page structure from a real PDF's text layer and from OCR of a scanned page (search_engine.layout)."""
from __future__ import annotations

import pytest
from PIL import Image, ImageDraw, ImageFont

from search_engine.layout.margins import running_key
from search_engine.layout.ocr import layout_from_ocr_lines
from search_engine.layout.pdf import pdf_document_layouts
from search_engine.layout.search_texts import region_search_texts
from search_engine.page_layout import PageLayout
from testkit import structured_pdf as spdf

IMAGE_SIZE = (1191, 1684)  # A4 at 144 dpi: boxes must come back in these pixels, not in PDF points


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> list[PageLayout]:
    built = spdf.build_structured_pdf(tmp_path_factory.mktemp("pdf") / "report.pdf")
    return pdf_document_layouts(str(built.path), ["report_1", "report_2", "report_3"], [IMAGE_SIZE] * 3)


def _kinds(layout: PageLayout, kind: str):
    return [r for r in layout.regions if r.kind == kind]


def test_running_header_and_page_number_footer_are_marked(layouts):
    for number, layout in enumerate(layouts, start=1):
        assert [r.text for r in _kinds(layout, "header")] == [spdf.RUNNING_HEADER]
        assert [r.text for r in _kinds(layout, "footer")] == [f"Page {number}"]
        assert layout.regions[0].kind == "header" and layout.regions[-1].kind == "footer"
    # they say nothing about the page: not searched
    assert all(text == "" for r, text in zip(layouts[0].regions, region_search_texts(layouts[0]), strict=True)
               if r.kind in ("header", "footer"))
    assert running_key("Page 12") == running_key("page 3")
    # a running header whose spaces the font maps to U+FFFF is the same header as the layout reads it
    assert running_key("LG\uffffElectronics\uffffGmbH 2014") == running_key("LG Electronics GmbH 2015")


def test_multi_topic_page_is_split_into_headed_paragraphs(layouts):
    page = layouts[0]
    headings = [r.text for r in _kinds(page, "heading")]
    assert headings == ["Operations review"] + [title for title, _ in spdf.TOPIC_PARAGRAPHS]
    paragraphs = _kinds(page, "text")
    assert len(paragraphs) == len(spdf.TOPIC_PARAGRAPHS)
    fact = next(r for r in paragraphs if "Quillfeather" in r.text)
    assert "dredging" not in fact.text.lower()  # one topic per region
    # the region is searched with its section heading in front of it
    texts = dict(zip([r.region_id for r in page.regions], region_search_texts(page), strict=True))
    assert texts[fact.region_id].startswith("Tide gauge ")
    # reading order: headings come right before their paragraphs
    order = [r.region_id for r in page.regions]
    heading = next(r for r in page.regions if r.text == "Tide gauge")
    assert order.index(heading.region_id) + 1 == order.index(fact.region_id)


def test_boxes_are_page_image_pixels(layouts):
    width, height = IMAGE_SIZE
    for layout in layouts:
        assert (layout.width, layout.height) == IMAGE_SIZE and layout.source == "pdf"
        for region in layout.regions:
            x1, y1, x2, y2 = region.box
            assert 0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height, region
    footer = _kinds(layouts[0], "footer")[0]
    assert footer.box[1] > 0.95 * height  # 24 pt from the bottom of an 842 pt page, scaled to pixels


def test_ruled_table_has_cells_header_row_and_label_column(layouts):
    tables = _kinds(layouts[1], "table")
    assert len(tables) == 1
    table = tables[0]
    assert table.caption == spdf.TABLE_CAPTION
    assert (table.header_rows, table.header_cols) == (1, 1)
    grid = {(c.row, c.col): c for c in table.cells}
    for r, row in enumerate(spdf.TABLE_ROWS):
        for c, text in enumerate(row):
            assert grid[(r, c)].text == text
            assert grid[(r, c)].is_header == (r == 0 or c == 0)
    cell = grid[(2, 3)]  # Container yard, Berths
    assert cell.text == "9" and table.box[0] <= cell.box[0] < cell.box[2] <= table.box[2] + 1
    assert table.text.splitlines()[2] == "Container yard | 633 | 4,210 | 9"
    # the caption is the table's, not a separate region; the table's cells are not repeated as paragraphs
    assert not _kinds(layouts[1], "caption")
    assert not any("North quay" in r.text for r in _kinds(layouts[1], "text"))


def test_chart_keeps_its_labels_legend_and_caption(layouts):
    figures = _kinds(layouts[2], "figure")
    assert len(figures) == 1
    figure = figures[0]
    assert figure.caption == spdf.FIGURE_CAPTION
    lines = figure.text.splitlines()
    for label in [spdf.CHART_LEGEND, spdf.CHART_Y_LABEL] + [m for m, _ in spdf.CHART_BARS] + [
            str(v) for _, v in spdf.CHART_BARS]:
        assert label in lines, label
    # the paragraph under the caption stays a paragraph of the page
    assert any(r.text.startswith("Cruise calls rose") for r in _kinds(layouts[2], "text"))


def test_layout_round_trips_through_json(layouts):
    for layout in layouts:
        assert PageLayout.from_dict(layout.to_dict()) == layout


# ---- OCR path -------------------------------------------------------------------------------------------

READINGS = [["Reservoir", "January", "February", "March"], ["Alder Lake", "41.2", "39.8", "44.1"],
            ["Birch Pond", "12.7", "13.9", "15.0"], ["Cedar Basin", "88.3", "85.6", "90.2"],
            ["Dove Creek", "5.4", "6.1", "7.7"]]


def _scan() -> Image.Image:
    """A scanned page: a title, a sentence, an unruled table in columns and its caption (pixels only)."""
    fonts = "/usr/share/fonts/truetype/dejavu/"
    try:
        body = ImageFont.truetype(fonts + "DejaVuSans.ttf", 28)
        bold = ImageFont.truetype(fonts + "DejaVuSans-Bold.ttf", 40)
    except OSError:
        pytest.skip("DejaVu fonts not installed (apt-get install fonts-dejavu-core)")
    image = Image.new("RGB", (1400, 1000), "white")
    draw = ImageDraw.Draw(image)
    draw.text((80, 60), "Quarterly water readings", font=bold, fill="black")
    draw.text((80, 150), "Readings were taken at four reservoirs during the quarter by the field team.", font=body,
              fill="black")
    for i, row in enumerate(READINGS):
        for x, cell in zip((80, 480, 730, 1000), row, strict=True):
            draw.text((x, 260 + i * 60), cell, font=body, fill="black")
    draw.text((80, 600), "Table 2: Water level in metres by reservoir and month.", font=body, fill="black")
    return image


def test_scanned_page_layout_from_one_ocr_reading():
    from search_engine.text_extraction import installed_ocr_langs, ocr_reading, ocr_text

    try:
        if "eng" not in installed_ocr_langs():
            pytest.skip("tesseract's English pack is not installed")
    except RuntimeError as exc:
        pytest.skip(str(exc))
    image = _scan()
    reading = ocr_reading(image, "eng")
    layout = layout_from_ocr_lines(reading, "scan_1", image.size)
    assert layout.source == "ocr" and (layout.width, layout.height) == image.size
    assert "Quarterly water readings" in ocr_text(reading)
    kinds = [r.kind for r in layout.regions]
    assert kinds[0] == "heading" and layout.regions[0].text == "Quarterly water readings"
    table = next(r for r in layout.regions if r.kind == "table")
    assert table.caption.startswith("Table 2")
    assert (table.header_rows, table.header_cols) == (1, 1)
    grid = {(c.row, c.col): c.text for c in table.cells}
    assert grid[(0, 2)] == "February" and grid[(3, 0)] == "Cedar Basin" and grid[(3, 2)] == "85.6"
    x1, y1, x2, y2 = table.box
    assert 70 <= x1 <= 90 and 250 <= y1 <= 270 and y2 < 600  # pixels of the scan, caption not inside


# ---- figure labels with their boxes; captions; OCR lines ------------------------------------------------------


@pytest.fixture(scope="module")
def chart_page(tmp_path_factory) -> PageLayout:
    path = spdf.build_chart_pdf(tmp_path_factory.mktemp("charts") / "charts.pdf")
    return pdf_document_layouts(str(path), ["charts_1"], [IMAGE_SIZE])[0]


def test_figure_labels_keep_their_boxes_and_angles(chart_page):
    figures = _kinds(chart_page, "figure")
    assert len(figures) == 2
    routes = figures[0]
    by_text = {label.text: label for label in routes.labels}
    for name, value in spdf.ROUTE_BARS:
        category, printed = by_text[name], by_text[str(value)]
        # each label has its own box in page pixels, inside the figure's box; a bar's value sits above its
        # category, centred on the same column
        assert routes.box[0] <= category.box[0] < category.box[2] <= routes.box[2] + 1
        assert printed.box[3] < category.box[1]
        assert abs((printed.box[0] + printed.box[2]) - (category.box[0] + category.box[2])) / 2 < 10
    assert abs(by_text[spdf.ROUTE_Y_TITLE].angle - 90) < 1  # printed upwards
    assert by_text[spdf.ROUTE_X_TITLE].angle == pytest.approx(0, abs=1)
    ticks = [by_text[str(t)] for t in spdf.ROUTE_TICKS]
    assert len({round(t.box[2]) for t in ticks}) == 1  # right-aligned in one column: the value axis


def test_caption_below_a_charts_labels_is_the_figures(chart_page):
    # the caption lies under the categories and the x-axis title, further from the drawing than from the labels
    figures = _kinds(chart_page, "figure")
    assert [f.caption for f in figures] == [spdf.ROUTE_CAPTION, spdf.SERIES_CAPTION]
    assert not _kinds(chart_page, "caption") and not _kinds(chart_page, "heading")[1:]


def test_layouts_stored_before_labels_still_load(layouts):
    stored = layouts[2].to_dict()
    for region in stored["regions"]:
        region.pop("labels")
    old = PageLayout.from_dict(stored)
    assert all(region.labels == [] for region in old.regions)
    assert [r.text for r in old.regions] == [r.text for r in layouts[2].regions]


@pytest.mark.parametrize(("text", "expected"), [
    ("Figure 3: Revenue by segment", True), ("Fig. 2. Layout of the plant", True), ("Table IV Results", True),
    ("Table A.1: Mirrors in mainland China", True), ("Figure 11-5: Simple bar chart", True), ("图 1 收入构成", True),
    ("表2：主要指标", True), ("Table 3 Results of the survey", True), ("Figure 3\nMonthly sales", True),
    # rows of a table and a chart's labels, as OCR prints them on lines of their own
    ("Dove 5.4", False), ("Jan 30", False), ("Car 25 Bicycle 12", False), ("Revenue 2023: 41", False),
    ("Q3 Results", False), ("Table 2 shows the results", False), ("Figure 3", False),
])
def test_caption_shape_is_not_a_table_row(text, expected):
    from search_engine.layout.captions import is_caption

    assert is_caption(text) is expected


def test_bold_title_and_header_rows_are_both_headers():
    from search_engine.layout.tables import _header_rows

    grid = [[(t, (0.0, 0.0, 1.0, 1.0)) for t in row] for row in
            [["widget parameters", "", ""], ["Parameter", "Meaning", "Default"], ["maxlen", "maximum length", "100"],
             ["name", "the field name", "None"]]]
    assert _header_rows(grid, [True, True, False, False]) == 2
    assert _header_rows(grid, [True, False, False, False]) == 1
    assert _header_rows(grid, [True, True, True, True]) == 0  # all bold: typography says nothing


def test_ocr_paragraph_keeps_its_printed_lines():
    from search_engine.text_extraction import OcrLine

    rows = ["Route sailings this year", "Bayview harbour 1,240", "Eastport 860", "Kellen Island 415"]
    lines = [OcrLine(text, (40, 100 + 30 * i, 400, 122 + 30 * i), 90.0, [], 1, 1) for i, text in enumerate(rows)]
    layout = layout_from_ocr_lines(lines, "slide_1", (1000, 800))
    body = [r for r in layout.regions if r.kind in ("text", "list")]
    assert len(body) == 1 and body[0].text.split("\n") == rows
    assert not _kinds(layout, "caption")


def _rotated_copy(source, target) -> None:
    """Each page of `source` drawn sideways on a landscape page carrying `/Rotate 90`, which turns it back:
    it renders exactly as the original (checked in the test), the way landscape slides made as rotated
    pages and pdflscape tables are built, while PyMuPDF reports its text running down the page."""
    import pymupdf

    with pymupdf.open(source) as src, pymupdf.open() as out:
        for number, page in enumerate(src):
            new = out.new_page(width=page.rect.height, height=page.rect.width)
            new.show_pdf_page(new.rect, src, number, rotate=90)
            new.set_rotation(90)
        out.save(target)


def test_a_rotated_page_is_read_as_it_is_displayed(tmp_path):
    import numpy as np
    import pymupdf

    built = spdf.build_structured_pdf(tmp_path / "report.pdf")
    _rotated_copy(built.path, tmp_path / "rotated.pdf")
    with pymupdf.open(built.path) as a, pymupdf.open(tmp_path / "rotated.pdf") as b:
        assert b[0].rotation == 90
        shown = [np.frombuffer(doc[0].get_pixmap(dpi=40).samples, np.uint8).astype(int) for doc in (a, b)]
        assert np.abs(shown[0] - shown[1]).mean() < 1.0  # the same picture
    page_ids = ["report_1", "report_2", "report_3"]
    plain = pdf_document_layouts(str(built.path), page_ids, [IMAGE_SIZE] * 3)
    turned = pdf_document_layouts(str(tmp_path / "rotated.pdf"), page_ids, [IMAGE_SIZE] * 3)
    for want, got in zip(plain, turned, strict=True):
        assert [(r.kind, r.text) for r in got.regions] == [(r.kind, r.text) for r in want.regions]
        for r, s in zip(want.regions, got.regions, strict=True):  # boxes on the page image, where they are drawn
            assert max(abs(u - v) for u, v in zip(r.box, s.box, strict=True)) < 3.0, (r.kind, r.text[:40])
            assert [(c.row, c.col, c.text, c.is_header) for c in r.cells] == [
                (c.row, c.col, c.text, c.is_header) for c in s.cells]


def _slides(path, pages: int = 3, background: bool = True, chart_on: int | None = 0, block_on: int | None = 1):
    """A small landscape deck built with PyMuPDF: a full-page background fill on every slide (as themes
    draw it), a title, a slide number in the bottom-right corner, a bar chart of separate bars on
    `chart_on` and, on `block_on`, a beamer-style block (a title band and a body fill, shadow pieces on its
    edge) around prose."""
    import pymupdf

    doc = pymupdf.open()
    for number in range(pages):
        page = doc.new_page(width=363, height=272)
        if background:
            page.draw_rect(page.rect, color=None, fill=(0.98, 0.97, 0.93))
        page.insert_text((12, 20), f"Slide title {number + 1}", fontsize=12)
        page.insert_text((345, 262), str(number + 1), fontsize=7)
        if number == chart_on:
            page.draw_line((80, 200), (300, 200))  # the axis
            for k, height in enumerate((60, 110, 85)):
                page.draw_rect(pymupdf.Rect(100 + 60 * k, 200 - height, 130 + 60 * k, 200), color=(0, 0, 0),
                               fill=(0.2, 0.4, 0.8))
                page.insert_text((100 + 60 * k, 212), ("apples", "pears", "plums")[k], fontsize=7)
            page.insert_text((120, 235), "Figure 1: Fruit sold", fontsize=8)
        if number == block_on:
            page.draw_rect(pymupdf.Rect(24, 60, 338, 74), color=None, fill=(0.5, 0.2, 0.55), radius=0.1)
            page.draw_rect(pymupdf.Rect(24, 74, 338, 150), color=None, fill=(0.95, 0.92, 0.95), radius=0.05)
            for step in range(4):  # a drop shadow drawn as short strokes on the right edge
                page.draw_line((338, 62 + step), (338, 63 + step), color=(0.6, 0.6, 0.6))
            page.insert_text((30, 70), "Theorem", fontsize=9, color=(1, 1, 1))
            page.insert_text((30, 90), "Every bounded monotone sequence of real numbers converges.", fontsize=9)
            page.insert_text((30, 104), "The proof uses the completeness of the real line.", fontsize=9)
    doc.save(path)


def test_a_chart_on_a_slide_background_is_a_figure_and_a_framed_block_is_text(tmp_path):
    _slides(tmp_path / "deck.pdf")
    pages = pdf_document_layouts(str(tmp_path / "deck.pdf"), ["d_1", "d_2", "d_3"], [(726, 544)] * 3)
    figures = _kinds(pages[0], "figure")
    assert len(figures) == 1 and {"apples", "pears", "plums"} <= {label.text for label in figures[0].labels}
    assert figures[0].caption == "Figure 1: Fruit sold"
    assert figures[0].box[2] - figures[0].box[0] < 0.8 * 726  # the chart, not the slide
    block = pages[1]
    assert not _kinds(block, "figure")
    assert any("bounded monotone sequence" in r.text for r in block.regions if r.kind in ("text", "list"))


def test_slide_numbers_in_one_corner_are_footers_but_a_charts_numbers_are_not(tmp_path):
    _slides(tmp_path / "deck.pdf", pages=4, block_on=None)
    pages = pdf_document_layouts(str(tmp_path / "deck.pdf"), [f"d_{k}" for k in range(1, 5)], [(726, 544)] * 4)
    for number, page in enumerate(pages, start=1):
        assert [r.text for r in _kinds(page, "footer")] == [str(number)]
        assert str(number) not in [r.text for r in page.regions if r.kind in ("text", "heading")]


def test_an_unruled_table_in_one_column_of_a_two_column_page_is_a_table(tmp_path):
    """Its rows share their height with the other column's prose, which a page-wide row search joins to
    them; read column by column it is a table, with its caption."""
    import pymupdf

    prose = ("Harbour pilots board arriving ships at the outer anchorage and bring them to their berths in all "
             "weathers, day and night, throughout the year.")
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for k in range(14):  # the left column: prose from top to bottom
        page.insert_text((50, 80 + 14 * k), prose[: 60 + (k % 3) * 5][:62], fontsize=9)
    page.insert_text((320, 80), "Pilots work in shifts of twelve hours at the station.", fontsize=9)
    page.insert_text((320, 110), "Table 3. Pilot boats by station.", fontsize=9)
    rows = [("Station", "Boats", "Crew"), ("North", "4", "12"), ("South", "2", "7"), ("Bay", "3", "9")]
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            page.insert_text((330 + 70 * c, 130 + 14 * r), cell, fontsize=9)
    page.insert_text((320, 200), "The boats of the north station are the newest of the fleet.", fontsize=9)
    doc.save(tmp_path / "two_columns.pdf")
    layout = pdf_document_layouts(str(tmp_path / "two_columns.pdf"), ["tc_1"], [(1191, 1684)])[0]
    tables = _kinds(layout, "table")
    assert len(tables) == 1 and tables[0].caption == "Table 3. Pilot boats by station."
    cells = {(c.row, c.col): c.text for c in tables[0].cells}
    assert cells[(0, 1)] == "Boats" and cells[(2, 0)] == "South" and cells[(2, 2)] == "7"
    assert tables[0].box[0] > 1191 / 2  # in the right column only


def test_a_row_drawn_out_of_order_reads_left_to_right(tmp_path):
    """A report that draws a sentence's number in another font after its words ("The loss reached | billion
    won … | 1.3"): read in stream order the number ends the sentence, away from its unit; the row is rebuilt
    left to right. A table row drawn left to right keeps its cells."""
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page(width=400, height=300)
    page.insert_text((72, 100), "The loss reached", fontsize=11, fontname="helv")
    page.insert_text((190, 100), "billion won this year.", fontsize=11, fontname="helv")
    page.insert_text((170, 100), "1.3", fontsize=11, fontname="cour")  # drawn last, printed in the middle
    page.insert_text((72, 200), "Station", fontsize=11)
    page.insert_text((250, 200), "Boats", fontsize=11)
    doc.save(tmp_path / "out_of_order.pdf")
    layout = pdf_document_layouts(str(tmp_path / "out_of_order.pdf"), ["oo_1"], [(800, 600)])[0]
    texts = [r.text for r in layout.regions]
    assert "The loss reached 1.3 billion won this year." in texts
    assert not any(t.endswith("1.3") for t in texts)


def test_rows_in_reading_order_keeps_rows_drawn_in_order():
    from search_engine.layout.parts import Line, Piece
    from search_engine.layout.text_layer import rows_in_reading_order

    def line(text: str, x: float, y: float) -> Line:
        box = (x, y, x + 6 * len(text), y + 10)
        return Line(text, box, 10.0, False, [Piece(text, box, 10.0)])

    cells = [line("Station", 10, 0), line("Boats", 200, 0), line("North", 10, 20), line("4", 200, 20)]
    assert rows_in_reading_order(cells) == cells  # a table's cells, each row left to right: as they are
    shuffled = [line("words", 10, 0), line("after", 120, 0), line("42", 60, 0), line("next row", 10, 20)]
    out = rows_in_reading_order(shuffled)
    assert [ln.text for ln in out] == ["words 42 after", "next row"]
    assert [p.text for p in out[0].pieces] == ["words", "42", "after"]  # apart: wider gaps than a space
    assert out[1:] == shuffled[3:]


def test_lines_of_a_block_that_share_no_x_range_are_two_paragraphs():
    """PyMuPDF groups a table row's last cells with the next row's label into one block; as one paragraph the
    label's place (its x-range) is lost, and a reader by printed rows finds the row's values without a label."""
    from search_engine.layout.compose import _split_paragraphs
    from search_engine.layout.parts import Block, Line

    cells = Line("100.0 66.1", (650.0, 474.0, 785.0, 515.0), 10.0, False)
    label = Line("Apr-2015", (132.0, 519.0, 196.0, 560.0), 10.0, False)
    assert [[ln.text for ln in part] for part in _split_paragraphs(Block(1, [cells, label]))] == [
        ["100.0 66.1"], ["Apr-2015"]]
    # rows set tight: the next row's label box overlaps the row above by a sliver
    tight = [Line("103.1 75.0 72.2", (444.0, 160.0, 566.0, 173.2), 10.0, False),
             Line("Europe", (112.0, 172.9, 142.0, 185.0), 10.0, False)]
    assert [[ln.text for ln in part] for part in _split_paragraphs(Block(3, tight))] == [
        ["103.1 75.0 72.2"], ["Europe"]]
    wrapped = [Line("A paragraph that wraps onto", (100.0, 10.0, 400.0, 20.0), 10.0, False),
               Line("a second line.", (100.0, 22.0, 200.0, 32.0), 10.0, False)]
    assert len(_split_paragraphs(Block(2, wrapped))) == 1  # lines that share an x-range: one paragraph
