"""The CPU stand-in's page reader (`vrag_rl.reader`) reads pages by their structure and says nothing
rather than quote a fragment.

Hand-built layouts first (the `search_engine.page_layout` contract: a table read by its row and column
headers, the shortest span of a sentence, a figure's labels and caption, not-found, Chinese, the box
geometry of resized and cropped images), then the real thing: a page of a deck the reader has never seen,
drawn here, read with tesseract and the bundled MiniLM through the policy server on loopback, with the
agent's own resize and crop between the turns.
"""
from __future__ import annotations

import base64
import io
import re

import openai
import pytest
from PIL import Image, ImageDraw, ImageFont

from search_engine.page_layout import Label, PageLayout, Region, TableCell
from testkit.loopback import LoopbackServer
from vrag_rl.agent.images import map_bbox_to_page, smart_resize
from vrag_rl.reader import Frame, Reader, crop_box_of, map_layout, question_form
from vrag_rl.reader.spans import answer_span, sentences_of
from vrag_rl.reader.terms import content_terms
from vrag_rl.reader.values import values_in
from vrag_rl.serving.policy_server.app import create_app
from vrag_rl.serving.policy_server.rule_based import RuleBasedBackend


def _table(rid: str, rows: list[list[str]], x: float = 50, y: float = 100, w: float = 120, h: float = 24,
           caption: str = "", header_rows: int = 0, header_cols: int = 0) -> Region:
    cells = [TableCell(r, c, text, (x + c * w, y + r * h, x + (c + 1) * w, y + (r + 1) * h))
             for r, row in enumerate(rows) for c, text in enumerate(row)]
    return Region(rid, "table", (x, y, x + w * len(rows[0]), y + h * len(rows)),
                  "\n".join(" | ".join(row) for row in rows), caption, cells, header_rows, header_cols)


def _page(*regions: Region) -> PageLayout:
    return PageLayout("p1", 800, 1000, list(regions), "pdf")


REPORT = _page(
    Region("h", "heading", (50, 20, 700, 60), "Harbour traffic 2024"),
    Region("p", "text", (50, 70, 700, 95), "All figures are for the calendar year."),
    _table("t", [["Terminal", "Vessels", "Cargo (kt)", "Berths"], ["North quay", "412", "1,850", "6"],
                 ["Container yard", "633", "4,210", "9"], ["Ferry terminal", "1,204", "380", "3"]],
           caption="Table 1: Traffic and cargo handled by terminal."),
    Region("q", "text", (50, 300, 700, 380), "The new tide gauge at the north pier was commissioned by engineer\n"
                                           "Marta Quillfeather in October 2024. It records the water level every\n"
                                           "minute. The pilot station opened to visitors on 14 June 2024."),
    Region("f", "figure", (50, 400, 700, 700), "January\nFebruary\nMarch\nApril\n30\n45\n62\n51",
           caption="Figure 1: Monthly cruise calls in the first quarter and April."),
    Region("foot", "footer", (50, 960, 700, 990), "Harbour Authority Annual Review - page 3"),
)


@pytest.mark.parametrize(("question", "answer", "kind"), [
    ("How many vessels called at the container yard?", "633", "table"),  # row x column by their headers
    ("How much cargo did the ferry terminal handle?", "380", "table"),
    ("How many berths does the North quay have?", "6", "table"),
    ("Which terminal handled the most cargo?", "Container yard", "table"),  # the extreme row's label
    ("Which terminal has the fewest berths?", "Ferry terminal", "table"),
    ("Who commissioned the new tide gauge?", "Marta Quillfeather", "text"),  # the name, not the sentence
    ("When did the pilot station open to visitors?", "14 June 2024", "text"),
    ("How many cruise calls were there in March?", "62", "figure"),  # a figure's label paired with its value
    ("In which month were cruise calls highest in the figure?", "March", "figure"),
])
def test_reads_tables_sentences_and_figures_by_their_structure(question, answer, kind):
    reading = Reader(None).read(question, REPORT)
    assert reading is not None, question
    assert (reading.answer, reading.kind) == (answer, kind), reading
    assert answer in reading.evidence  # the quoted evidence holds the answer


def test_zoom_box_is_the_cell_with_its_headers():
    reading = Reader(None).read("How many vessels called at the container yard?", REPORT)
    table = REPORT.region("t")
    cell = next(c for c in table.cells if c.text == "633")
    header = next(c for c in table.cells if c.text == "Vessels")
    label = next(c for c in table.cells if c.text == "Container yard")
    x1, y1, x2, y2 = reading.box
    for box in (cell.box, header.box, label.box):
        assert x1 <= box[0] and y1 <= box[1] and x2 >= box[2] and y2 >= box[3]
    assert y2 <= cell.box[3] and x2 <= cell.box[2]  # and nothing below or right of the cell


def test_a_sentence_zoom_is_its_band_of_the_paragraph():
    reading = Reader(None).read("When did the pilot station open to visitors?", REPORT)
    region = REPORT.region("q")
    assert reading.box[1] > region.box[1] and reading.box[3] <= region.box[3]  # the last line, not the first


@pytest.mark.parametrize("question", [
    "What is the capital of France?",  # the page never mentions it
    "How many passengers did the ferry terminal carry?",  # the row is there, the column is not
    "What was the dredging budget?",
])
def test_not_found_rather_than_a_fragment(question):
    assert Reader(None).read(question, REPORT) is None


def test_year_columns_and_money_kinds():
    layout = _page(Region("c", "text", (0, 0, 500, 20), "Figures in millions of US dollars."),
                   _table("t", [["Metric", "2021", "2022", "2023"], ["Revenue", "212", "268", "341"],
                                ["Net income", "18", "27", "41"]]))
    assert Reader(None).read("What was the net income in 2022?", layout).answer == "27"
    assert Reader(None).read("What was the revenue in 2023?", layout).answer == "341"


def test_headers_marked_by_ingestion_are_used():
    layout = _page(_table("t", [["", "Q1", "Q2"], ["Sales", "10", "12"], ["Costs", "7", "8"]],
                          header_rows=1, header_cols=1))
    assert Reader(None).read("What were the costs in Q2?", layout).answer == "8"


def test_label_value_lines_under_a_header_read_as_a_table():
    """OCR of a slide gives one region per line: a stack of "label value" rows under a header is a table."""
    lines = ["Route Sailings", "Bayview 1,240", "Eastport 860", "Kellen Island 415"]
    layout = _page(*[Region(f"r{i}", "text", (40, 100 + 30 * i, 200, 118 + 30 * i), text)
                     for i, text in enumerate(lines)])
    assert Reader(None).read("How many sailings were there on the Eastport route?", layout).answer == "860"
    assert Reader(None).read("Which route has the most sailings?", layout).answer == "Bayview"


def test_key_value_fields_and_shortest_spans():
    form = question_form("What is the Kestrel code?")
    assert answer_span("Kestrel code 4711", "What is the Kestrel code?", form) == ("4711", 2)
    question = "Where are the headquarters?"
    assert answer_span("Headquarters: Lyon, France.", question, question_form(question))[0] == "Lyon, France"
    question = "What was the median rent?"
    text = "Median rent rose to €1,140 per month, 6% more than in 2021."
    assert answer_span(text, question, question_form(question))[0] == "€1,140"
    question = "By what percentage did rent rise?"
    assert answer_span(text, question, question_form(question))[0] == "6%"
    question = "Why did the rent rise?"  # no span of a kind is asked: the whole sentence
    assert answer_span(text, question, question_form(question)) == (text, 1)


def test_identifiers_and_rows_found_by_their_cell():
    """Technical documents answer "which command/option" with an identifier, and a table row can be found by
    the cell the question quotes: the answer is then the row's label."""
    layout = _page(Region("p", "text", (0, 0, 600, 40), "To simulate overprint, set the -dSimulateOverprint "
                                                      "option on the command line."),
                   _table("t", [["Command", "Note"], ["\\citet{key}", "Textual citation"],
                                ["\\citealt{key}", "For use with manual brackets"]], y=200))
    reading = Reader(None).read("Which option simulates overprint on the command line?", layout)
    assert reading is not None and reading.answer == "-dSimulateOverprint"
    reading = Reader(None).read("Which command is noted as 'For use with manual brackets'?", layout)
    assert reading is not None and reading.answer == "\\citealt{key}" and reading.kind == "table"


def test_sentences_join_wrapped_lines_and_keep_rows_apart():
    text = "The board approved a dividend of\n0.42 dollars per share, payable in April.\nBus 34%\nMetro 29%"
    assert [s.text for s in sentences_of(text)] == [
        "The board approved a dividend of 0.42 dollars per share, payable in April.", "Bus 34%", "Metro 29%"]
    assert [s.text for s in sentences_of("Sales rose 4% in 2023. Costs fell. See Fig. 2 for details.")][:2] == [
        "Sales rose 4% in 2023.", "Costs fell."]


def test_question_forms_english_and_chinese():
    assert question_form("How many employees did it have?").quantity
    assert question_form("What share of trips are by bus?").kind == "percent"
    assert question_form("What dividend per share was paid?").kind == "money"  # the first noun decides
    assert question_form("When did the plant open?").time
    assert question_form("Which city has the highest rent?").superlative == 1
    assert question_form("Which city has the highest rent?").entity
    assert not question_form("Which city has the highest rent?").quantity
    assert question_form("What is the most used travel app?").entity
    assert question_form("Which figure shows the trend?").figure
    assert question_form("数据中心有多少台服务器？").quantity
    assert question_form("哪个地区的收入最高？").superlative == 1


def test_values_keep_currency_scale_unit_and_dates():
    texts = [v.text for v in values_in("Sales were $12.5 million, up 8% on 2021; the site uses 40 MW and 3 km.")]
    assert texts == ["$12.5 million", "8%", "2021", "40 MW", "3 km"]
    assert [v.is_year for v in values_in("in 2021 and 20210")] == [True, False]
    assert [v.text for v in values_in("带宽达到 400G，时延 2 微秒，规模 10万台")] == ["400G", "2", "10万台"]
    assert [v.text for v in values_in("Signed on 14 February 2024.")] == ["14 February 2024"]
    # units of manuals and data sheets stay with their number; a lone "a" or "in" is no unit
    units = ["Center pin +7.5 VDC@2amps", "a rate of 1000 Hz or 192 kHz", "135 mg/m2 by infusion",
             "40dB gain, 5 mA, 12 V", "5 a day, 5 in all"]
    assert [[v.text for v in values_in(t)] for t in units] == [
        ["+7.5 VDC", "2amps"], ["1000 Hz", "192 kHz"], ["135 mg/m2"], ["40dB", "5 mA", "12 V"], ["5", "5"]]
    # dates as other Western European languages and numeric day-first or month-first forms print them
    dated = ["Arrêté du 4 mai 2007 relatif", "am 4. März 2020 in Kraft", "el 4 de mayo de 2007", "op 12 mei 2015",
             "signed 19/05/2007", "vom 1.2.2007"]
    assert [[(v.text, v.is_date) for v in values_in(t)] for t in dated] == [
        [("4 mai 2007", True)], [("4. März 2020", True)], [("4 de mayo de 2007", True)], [("12 mei 2015", True)],
        [("19/05/2007", True)], [("1.2.2007", True)]]
    assert [v.text for v in values_in("Figure 2: Revenue 41")] == ["41"]  # a caption's label is no value


def test_chinese_by_character_bigrams():
    assert content_terms("数据中心有多少台服务器？") == ["数据", "据中", "中心", "心有", "台服", "服务", "务器"]
    layout = _page(Region("a", "heading", (0, 0, 400, 30), "网络架构演进"),
                   Region("b", "text", (0, 40, 400, 70), "单集群规模达到10万台服务器。网络时延降低到2微秒。"))
    reading = Reader(None).read("单集群规模是多少台服务器？", layout)
    assert reading is not None and reading.answer == "10万台"
    assert Reader(None).read("机房的电价是多少？", layout) is None


def test_frames_map_layouts_onto_resized_and_cropped_images():
    frame = Frame.fit((1600, 1200), (800, 600))
    assert frame.box((100, 200, 300, 400)) == (50, 100, 150, 200)
    crop = frame.then_crop((40, 90, 240, 190), (400, 200))  # zoom x2 into the shown image
    assert crop.box((100, 200, 300, 400)) == pytest.approx((20, 20, 220, 220))
    assert crop.inverse_box((20, 20, 220, 220)) == pytest.approx((100, 200, 300, 400))
    mapped = map_layout(REPORT, frame, (400, 500))
    assert mapped.width == 400 and mapped.region("t").cells[0].box == frame.box(REPORT.region("t").cells[0].box)


def test_crop_box_estimates_the_agents_margin():
    """The agent pads a bbox (in page pixels) and clamps it at the page's edges; the crop's aspect ratio
    tells the reader how much, so it knows what the crop shows."""
    page_size, shown_size = (1600, 1200), (800, 600)
    bbox = [100.0, 100.0, 300.0, 160.0]
    page_box, _ = map_bbox_to_page(bbox, shown_size, (0, 0, *page_size), page_size, 56, 28)
    h, w = smart_resize(page_box[3] - page_box[1], page_box[2] - page_box[0])
    estimate = crop_box_of(tuple(bbox), shown_size, (w, h))
    truth = tuple(v / 2 for v in page_box)
    assert estimate == pytest.approx(truth, abs=6)


# ---- the real reader on an unseen page, through the server ---------------------------------------------------

DECK = [  # (text, font size): a page of a deck no rule was written for
    ("Northwind Ferries - 2025 operations", 34),
    ("The fleet carried 2.7 million passengers in 2025.", 24),
    ("Average crossing time fell to 48 minutes.", 24),
    ("Route   Sailings", 22),
    ("Bayview   1,240", 22),
    ("Eastport   860", 22),
    ("Kellen Island   415", 22),
    ("Fares are set by the regional transport authority.", 24),
]


def _deck_page() -> Image.Image:
    image = Image.new("RGB", (1400, 900), "white")
    draw = ImageDraw.Draw(image)
    y = 50
    for text, size in DECK:
        draw.text((60, y), text, fill="black", font=ImageFont.load_default(size=size))
        y += int(size * 2.6)
    return image


def _data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _image_msg(image: Image.Image, text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text},
                                        {"type": "image_url", "image_url": {"url": _data_url(image)}}]}


@pytest.fixture(scope="module")
def reader():
    server = LoopbackServer(create_app(RuleBasedBackend(), "rule-based")).start()
    yield openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)
    server.stop()


def _ask(client: openai.OpenAI, page: Image.Image, question: str) -> tuple[str, str]:
    """search → page (resized as the agent does) → bbox → crop → answer; returns (evidence, answer)."""
    def reply(messages):
        return client.chat.completions.create(model="rule-based", messages=messages, temperature=0) \
            .choices[0].message.content

    h, w = smart_resize(page.height, page.width)
    shown = page.resize((w, h))
    messages = [{"role": "user", "content": f"Question: {question}"}]
    first = reply(messages)
    assert "<search>" in first
    messages += [{"role": "assistant", "content": first}, _image_msg(shown, "Search result.")]
    second = reply(messages)
    box = re.search(r"<bbox>\[(\d+), (\d+), (\d+), (\d+)\]</bbox>", second)
    assert box, second
    x1, y1, x2, y2 = (int(v) for v in box.groups())
    sx, sy = page.width / w, page.height / h
    crop = page.crop((int(x1 * sx), int(y1 * sy), int(x2 * sx), int(y2 * sy)))
    ch, cw = smart_resize(crop.height, crop.width)
    messages += [{"role": "assistant", "content": second}, _image_msg(crop.resize((cw, ch)), "Zoomed region.")]
    third = reply(messages)
    evidence = re.search(r'reads "(.*)"\.</think>', third)
    answer = re.search(r"<answer>(.*)</answer>$", third)
    assert evidence and answer, third
    return evidence.group(1), answer.group(1)


@pytest.mark.parametrize(("question", "expected"), [
    ("How many passengers did the fleet carry in 2025?", "2.7 million"),
    ("How long is the average crossing?", "48 minutes"),
    ("How many sailings were there on the Eastport route?", "860"),
    ("Who sets the fares?", "Fares are set by the regional transport authority."),  # no name: the sentence
    ("Which route has the most sailings?", "Bayview"),
])
def test_unseen_page_answers_with_a_value_a_label_or_the_whole_sentence(reader, question, expected):
    evidence, answer = _ask(reader, _deck_page(), question)
    assert answer == expected, (question, evidence, answer)
    assert answer in evidence


def test_unseen_page_says_not_found_for_what_it_does_not_say(reader):
    h, w = smart_resize(_deck_page().height, _deck_page().width)
    messages = [{"role": "user", "content": "Question: What is the price of a season ticket?"},
                {"role": "assistant", "content": "<search>price of a season ticket</search>"},
                _image_msg(_deck_page().resize((w, h)), "Search result.")]
    reply = reader.chat.completions.create(model="rule-based", messages=messages, temperature=0)
    assert "<bbox>" not in reply.choices[0].message.content  # nothing to zoom into: it searches again


# ---- real PDF layouts (the ingestion's extractor on a reportlab PDF built like a report) ------------------------

@pytest.fixture(scope="module")
def report_layouts(tmp_path_factory):
    import pymupdf

    from search_engine.layout.pdf import pdf_document_layouts
    from testkit.structured_pdf import build_structured_pdf

    pdf = build_structured_pdf(tmp_path_factory.mktemp("pdf") / "harbour.pdf")
    with pymupdf.open(pdf.path) as doc:
        sizes = [(int(page.rect.width * 2), int(page.rect.height * 2)) for page in doc]
    return pdf, pdf_document_layouts(str(pdf.path), [f"harbour_{i + 1}" for i in range(len(sizes))], sizes)


@pytest.mark.parametrize(("page", "question", "answer"), [
    ("fact_page", "Who commissioned the new tide gauge at the north pier?", "Marta Quillfeather"),  # 1 of 6 topics
    ("fact_page", "When was the tide gauge commissioned?", "October"),
    ("table_page", "How many vessels called at the ferry terminal?", "1,204"),  # a ruled table's cell
    ("table_page", "How much cargo did the container yard handle?", "4,210"),
    ("table_page", "Which terminal has the most berths?", "Container yard"),
    ("table_page", "What is the pilotage fee?", None),  # not on the page: nothing, not a fragment
    ("figure_page", "What does Figure 1 show?", "Monthly cruise calls in the first quarter and April"),
    # the chart's labels carry their boxes: each month pairs with the value printed above its bar
    ("figure_page", "In which month were cruise calls highest?", "Mar"),
    ("figure_page", "How many cruise calls were there in April?", "51"),
    ("figure_page", "What is the highest value on the y-axis of the cruise chart?", "60"),
    ("figure_page", "What is the y-axis title of the cruise chart?", "Calls per month"),
])
def test_reads_real_pdf_layouts(report_layouts, page, question, answer):
    pdf, layouts = report_layouts
    reading = Reader(None).read(question, layouts[getattr(pdf, page) - 1])
    assert (reading.answer if reading else None) == answer, reading


def test_layouts_from_the_search_server(text_search_server):
    """With the search server's URL the stand-in reads the layout stored at ingestion (the PDF's text layer):
    the small table whose print OCR garbles at the size the agent shows it reads exactly, with no OCR."""
    from vrag_rl import VRAG

    backend = RuleBasedBackend(search_url=text_search_server.url)
    server = LoopbackServer(create_app(backend, "rule-based")).start()
    try:
        with VRAG(base_url=server.url + "/v1", search_url=text_search_server.url) as agent:
            result = agent.run("What satisfaction score did the Riverside district get?")
    finally:
        server.stop()
    assert result.status == "answered" and result.answer == "7.4", result.answer
    thoughts = [e.text for e in result.events if e.type == "think"]
    assert any("The table reads" in t for t in thoughts), thoughts
    layout = backend.layouts.fetch("metro_travel_survey_2024_4")
    assert layout is not None and layout.source == "pdf" and any(r.kind == "table" for r in layout.regions)
    assert backend.layouts.fetch("no_such_page_1") is None  # a failed fetch is logged and read by OCR instead


# ---- charts read by where their labels sit ------------------------------------------------------------------

@pytest.fixture(scope="module")
def chart_layout(tmp_path_factory):
    from search_engine.layout.pdf import pdf_document_layouts
    from testkit.structured_pdf import build_chart_pdf

    path = build_chart_pdf(tmp_path_factory.mktemp("charts") / "charts.pdf")
    return pdf_document_layouts(str(path), ["charts_1"], [(1191, 1684)])[0]


def test_chart_structure_from_label_geometry(chart_layout):
    from testkit import structured_pdf as spdf
    from vrag_rl.reader.charts import read_chart

    routes, series = [r for r in chart_layout.regions if r.kind == "figure"]
    chart = read_chart(routes)
    assert [lb.text for lb in chart.value_axis] == [str(t) for t in reversed(spdf.ROUTE_TICKS)]
    assert chart.value_axis_side == "y" and chart.category_side == "x"
    assert [(p.category.text, p.value.text) for p in chart.pairs] == [(n, str(v)) for n, v in spdf.ROUTE_BARS]
    assert chart.x_title.text == spdf.ROUTE_X_TITLE and chart.y_title.text == spdf.ROUTE_Y_TITLE
    assert chart.title.text == spdf.CHART_TITLE
    # two bars per quarter: two values in each category's column, so no category pairs with one of them
    two = read_chart(series)
    assert [lb.text for lb in two.categories] == [q for q, *_ in spdf.SERIES_BARS] and two.pairs == []


@pytest.mark.parametrize(("question", "answer"), [
    ("In the ferry chart, how many passengers did Eastgate carry?", "340"),
    ("Which route has the most passengers in the ferry chart?", "Eastgate"),
    ("Which route carried the fewest ferry passengers?", "Southpier"),
    ("What is the x-axis label of the ferry passengers chart?", "Route"),
    ("What is the y-axis title of the ferry passengers chart?", "Passengers (thousands)"),
    ("What is the highest value on the y-axis of the ferry passengers chart?", "400"),
    ("What is the title of the ferry chart?", "Ferry passengers by route"),
    # the two-series chart cannot pair a quarter with one value: no answer rather than a guess
    ("How many cargo calls were there in Q2 according to the two-series chart?", None),
    ("Which quarter has the most cargo calls in the two-series chart?", None),
    ("How many ferry passengers did the Harbourside route carry?", None),  # no such category
])
def test_reads_a_chart_by_its_label_geometry(chart_layout, question, answer):
    reading = Reader(None).read(question, chart_layout)
    assert (reading.answer if reading else None) == answer, reading


def test_a_category_is_not_guessed_from_bar_heights(chart_layout):
    # the tallest bar is in the drawing, not in the labels: no category is named (its caption may be quoted)
    reading = Reader(None).read("Which quarter has the tallest bars in the two-series chart?", chart_layout)
    assert reading is None or reading.answer not in ("Q1", "Q2", "Q3"), reading


def _line_plot(with_caption: bool) -> Region:
    """A line plot as OCR reads a scanned one: y ticks in a column, x ticks in a row, the x axis' title under
    them, a title over the plot, and (when `with_caption`) the caption's two pieces side by side at the bottom."""
    labels = [Label("Fuel savings by speed", (220, 60, 400, 80))]
    labels += [Label(f"{v}%", (100, 100 + 40 * i, 130, 114 + 40 * i)) for i, v in enumerate((40, 30, 20, 10, 0))]
    labels += [Label(str(v), (200 + 100 * i, 300, 215 + 100 * i, 314)) for i, v in enumerate((5, 10, 15, 20))]
    labels.append(Label("Maximum speed (mph)", (300, 330, 480, 346)))
    caption = ""
    if with_caption:
        labels += [Label("Fig. 7.", (90, 380, 130, 396)), Label("Savings at the maximum speed.", (150, 380, 400, 396))]
        caption = "Fig. 7. Savings at the maximum speed."
    return Region("f", "figure", (80, 50, 600, 400), "\n".join(lb.text for lb in labels), caption, labels=labels)


@pytest.mark.parametrize("with_caption", [False, True])
def test_a_line_plots_x_title_lies_under_its_second_axis(with_caption):
    from vrag_rl.reader.charts import read_chart

    chart = read_chart(_line_plot(with_caption))
    assert chart.value_axis_side == "y" and [lb.text for lb in chart.second_axis] == ["5", "10", "15", "20"]
    # the caption OCR read among the labels is neither a row of categories nor the x axis' title
    assert chart.categories == [] and chart.x_title.text == "Maximum speed (mph)"
    assert chart.title.text == "Fuel savings by speed"


@pytest.mark.parametrize("question", ["Which drive cycle shows the largest fuel savings by speed?",
                                      "Which cycle has the most savings at the maximum speed?"])
def test_an_axis_title_answers_no_which_question(question):
    # "Maximum speed (mph)" says what the x axis measures: it is no category, whatever words it shares
    for reading in Reader(None).rank(question, _page(_line_plot(with_caption=True))):
        assert "Maximum speed" not in reading.answer and reading.answer != "Maximum", reading


def test_an_axis_title_question_is_answered_by_the_axis_title_only():
    page = _page(_line_plot(with_caption=True))
    reader = Reader(None)
    # named by its caption in brackets or by the title printed over it; "maximum" there asks for no extreme
    for question in ("What is the x-axis label of Fig. 7 (savings at the maximum speed)?",
                     "What is the x-axis label of the 'Fuel savings by speed' chart?"):
        reading = reader.read(question, page)
        assert reading is not None and reading.answer == "Maximum speed (mph)", (question, reading)
    # a chart whose x axis has no title says nothing, not its caption
    untitled = _line_plot(with_caption=True)
    untitled.labels = [lb for lb in untitled.labels if lb.text != "Maximum speed (mph)"]
    assert reader.read("What is the x-axis label of Fig. 7 (savings at the maximum speed)?", _page(untitled)) is None


def test_what_a_question_quotes_or_captions_is_no_form_word():
    from vrag_rl.reader.question import without_names

    assert without_names("What is the x-axis label of Fig. 7 (maximum bit rates)?") == \
        "What is the x-axis label of Fig. 7?"
    assert "Two" not in without_names("In ReportLab's Figure 11-3 'Two isolated axes', which label is rotated?")
    assert without_names("What are the authors' and the editors' names?") == \
        "What are the authors' and the editors' names?"  # apostrophes quote nothing
    assert question_form("What is the x-axis label of Fig. 7 (maximum bit rates for VCR scanning)?").superlative == 0
    assert question_form("What is the maximum bit rate in Fig. 7?").superlative == 1


def test_a_cell_looked_up_by_most_words_of_both_headers_leads():
    from vrag_rl.reader.reader import _header_terms, _mostly_named

    # "International Cargo Ton" shares one word of three with "international pax": the question names
    # another column, and the cell it does name ("International Pax") leads by the lookup's margin
    table = _table("t", [["Month", "International Pax", "International Cargo Ton"], ["Aug-2015", "721,817", "24,193"],
                         ["Sep-2015", "700,100", "25,300"]], w=160)
    first, second = Reader(None).rank("How many international pax were carried in Aug-2015?", _page(table))[:2]
    assert (first.answer, second.answer) == ("721,817", "24,193") and first.score - second.score >= 0.2
    assert _mostly_named(_header_terms("净利润(百万元)"), {"净利", "利润"})
    assert _mostly_named(_header_terms("Net profit"), {"net", "profit"})
    assert not _mostly_named(_header_terms("International Cargo Ton"), {"international", "pax"})


def test_figure_of_labels_only_counts_its_parts():
    from search_engine.page_layout import Label

    names = ["Alpha", "Beta", "Gamma", "Delta", "Epsilon"]
    labels = [Label(n, (500 + 40 * (i % 2), 100 + 60 * i, 580 + 40 * (i % 2), 120 + 60 * i))
              for i, n in enumerate(names)]
    pie = Region("f", "figure", (300, 80, 700, 420), "\n".join(names),
                 "Figure 4: Shares of the five products in a pie.", labels=labels)
    reader = Reader(None)
    assert reader.read("How many slices does the pie in Figure 4 have?", _page(pie)).answer == "5"
    assert reader.read("How many units of Gamma were sold, according to the pie?", _page(pie)) is None


def test_a_pictures_words_read_whole_answer_only_as_a_short_label():
    # a slide's title banner that layout analysis took for a picture: its OCR'd words are no answer
    banner = Region("f", "figure", (0, 0, 726, 79),
                    "The Integrated Approach\nHow blocks help in perfect phylogeny haplotyping.")
    steps = Region("s", "text", (76, 164, 612, 185), "Partition the site set into overlapping contiguous blocks.")
    reader = Reader(None)
    reading = reader.read("What makes perfect phylogeny haplotyping hard?", _page(banner, steps))
    assert reading is None or reading.region_id != "f"
    # a short label still answers whole ("which connector is labelled at the bottom")
    board = Region("b", "figure", (100, 100, 600, 500), "P17", "Figure 4-5. Power connector location")
    reading = reader.read("Which power connector is shown in Figure 4-5?", _page(board))
    assert reading is not None and reading.answer == "P17"


def test_title_row_above_column_names_and_merged_row_labels():
    textfield = _table("t", [["textfield parameters", "", ""], ["Parameter", "Meaning", "Default"],
                             ["name", "the field's group name", "None"],
                             ["maxlen", "maximum length of the value", "100"], ["value", "the field's text", "''"]])
    reader = Reader(None)
    assert reader.read("What is the default maxlen of the textfield?", _page(textfield)).answer == "100"
    # a word answers a question that only names a quantity noun ("value"); "how many" still needs a number
    choice = _table("c", [["choice parameters", "", ""], ["Parameter", "Meaning", "Default"],
                          ["fieldFlags", "flags of the widget", "'combo'"], ["maxlen", "the longest value", "100"]])
    assert reader.read("What is the default fieldFlags value of the choice widget?", _page(choice)).answer == "'combo'"
    counted = reader.read("How many fieldFlags does the choice widget have by default?", _page(choice))
    assert counted is None or not counted.legible  # no number in the cell: the policy says not found
    engines = _table("e", [["", "Format", "plain TeX", "LaTeX"], ["TeX engine", "DVI", "tex", "N/A"],
                           ["pdfTeX engine", "DVI", "etex", "latex"], ["", "PDF", "pdftex", "pdflatex"]],
                     header_rows=1)  # the bold top row, as ingestion marks it
    assert reader.read("Which command does the pdfTeX engine use to make PDF with plain TeX?",
                       _page(engines)).answer == "pdftex"


def test_a_row_found_by_a_key_printed_in_it_alone():
    mirrors = _table("m", [["Aliyun", "https://mirrors.aliyun.com/ctan/"],
                           ["Harbin Institute", "https://mirrors.hit.edu.cn/ctan/"],
                           ["Tsinghua University", "https://mirrors.tuna.tsinghua.edu.cn/ctan/"]])
    reading = Reader(None).read("Which institution runs the mirror at mirrors.hit.edu.cn?", _page(mirrors))
    assert reading is not None and reading.answer == "Harbin Institute"


def test_when_inside_a_question_is_a_condition():
    assert question_form("When was the gauge commissioned?").time
    assert question_form("In 2020, when did the plant open?").time
    assert not question_form("What is the result when only the user password is set?").time
    assert question_form("How many berths are there?").needs_number
    assert not question_form("What is the default value of maxlen?").needs_number


def test_years_under_bars_are_categories_and_a_titles_year_no_value():
    from search_engine.page_layout import Label
    from vrag_rl.reader.charts import read_chart

    ticks = [Label(str(v), (100, 500 - 4 * v, 130, 520 - 4 * v)) for v in (0, 50, 100)]
    years = [Label(str(y), (180 + 120 * i, 530, 230 + 120 * i, 550)) for i, y in enumerate((2021, 2022, 2023))]
    values = [Label(str(v), (190 + 120 * i, 490 - 4 * v, 220 + 120 * i, 510 - 4 * v))
              for i, v in enumerate((64, 91, 77))]
    title = Label("Sales by year, 2021-2023 (units)", (200, 40, 480, 60))
    region = Region("f", "figure", (90, 30, 560, 560), "", "Figure 5: Unit sales.",
                    labels=[title, *ticks, *years, *values])
    chart = read_chart(region)
    assert [lb.text for lb in chart.categories] == ["2021", "2022", "2023"]
    assert [(p.category.text, p.value.text) for p in chart.pairs] == [("2021", "64"), ("2022", "91"), ("2023", "77")]
    reader = Reader(None)
    assert reader.read("In which year were unit sales highest?", _page(region)).answer == "2022"
    assert reader.read("How many units were sold in 2023?", _page(region)).answer == "77"


def test_a_definition_lists_term_names_its_indented_description():
    options = _page(
        Region("a", "text", (180, 100, 330, 118), "--min-vsize=N"),
        Region("b", "text", (295, 124, 1040, 170), "Set the initial trigger size for garbage collection. "
                                                   "The default is 6Mb."),
        Region("c", "text", (180, 190, 340, 208), "--max-ppsize=N"),
        Region("d", "text", (295, 214, 1040, 260), "Specify the size of the pointer protection stack. "
                                                   "Currently the maximum value accepted is 100000."),
    )
    reading = Reader(None).read("What is the maximum value accepted for the --max-ppsize option?", options)
    assert reading is not None and reading.answer == "100000"
    # the term names only the paragraphs indented under it
    assert Reader(None).read("What is the default of the --max-ppsize option?", options) is None


def _plot(*, legend: bool) -> Region:
    """A plot numbered on both axes, as pgfplots draws a line plot: y ticks in a column (typeset minus signs),
    x ticks in a row; with `legend`, three series names stacked inside the plot's frame."""
    y_ticks = [Label(t, (110, 134 + 62 * i, 145, 150 + 62 * i)) for i, t in enumerate(["1", "0.5", "0", "−0.5", "−1"])]
    x_ticks = [Label(t, (192 + 94 * i, 401, 212 + 94 * i, 417)) for i, t in enumerate(["−4", "−2", "0", "2", "4"])]
    names = [Label(t, (540, 140 + 23 * i, 585, 156 + 23 * i)) for i, t in enumerate(["lorem", "ipsum", "dolor"])]
    labels = y_ticks + x_ticks + (names if legend else [])
    return Region("f", "figure", (100, 120, 620, 420), "\n".join(lb.text for lb in labels), labels=labels)


def test_a_plot_numbered_on_both_axes_and_its_legend():
    from vrag_rl.reader.charts import read_chart

    chart = read_chart(_plot(legend=True))
    assert [lb.text for lb in chart.axis("y")] == ["1", "0.5", "0", "−0.5", "−1"]
    assert [lb.text for lb in chart.axis("x")] == ["−4", "−2", "0", "2", "4"]
    assert [lb.text for lb in chart.legend] == ["lorem", "ipsum", "dolor"]
    assert chart.categories == []  # a column of words over the x ticks is a legend, not horizontal bars' names
    page = _page(Region("h", "heading", (20, 17, 130, 41), "Line plots"), _plot(legend=True))
    assert Reader(None).read("What is the lowest tick label on the y axis of the line plot?", page).answer == "−1"
    assert Reader(None).read("What is the highest tick label on the x axis of the line plot?", page).answer == "4"
    reading = Reader(None).read("Which series are in the legend of the line plot?", page)
    assert reading is not None and reading.answer == "lorem, ipsum, dolor"
    bare = _page(Region("h", "heading", (20, 17, 130, 41), "Line plots"), _plot(legend=False))
    assert Reader(None).read("Which series are in the legend of the line plot?", bare) is None


@pytest.mark.parametrize("question, answer, evidence, kind, fits", [
    # a time question wants a date or a year
    ("When was the plant opened?", "the northern site", "It opened the northern site.", "text", False),
    ("When was the plant opened?", "March 2019", "It opened in March 2019.", "text", True),
    # a quantity: not a year alone, not a lone digit of running text, not a number cut out of a code
    ("How much did revenue grow?", "2023", "Revenue 2023 grew 12%", "text", False),
    ("What is the total dose?", "3", "See note 3 for the dose", "text", False),
    ("What were the costs in Q2?", "8", "Costs 7 8", "table", True),  # a cell the question pins is a value
    ("What is the total amount?", "33069", "CAS 33069-62-4 amount", "text", False),
    ("How many sites are there?", "4", "There are 4 sites.", "text", True),
    # a name: more than the question's own words; a value when the thing asked is a value; no date alone
    ("Which layer holds the cache?", "layer", "The layer holds the cache.", "text", False),
    ("Which engine makes PDF with pdfTeX?", "pdftex", "pdfTeX engine PDF pdftex", "table", True),
    ("Which sample frequency is used?", "the default", "the default sample frequency", "text", False),
    ("Which company built the plant?", "12 May 2020", "Built 12 May 2020", "text", False),
    ("Which company built the plant?", "Acme Robotics", "Acme Robotics built it", "text", True),
    ("Which colour does the alert use?", "You can use it to grab attention. It will typeset your content in red.",
     "You can use it to grab attention. It will typeset your content in red.", "text", True),  # a sentence may say it
    # a caption describes the figure; it is not the value or the name it shows
    ("Which series is drawn dashed in Figure 8?", "Figure 8 shows the results of the second trial",
     "Figure 8 shows the results of the second trial", "caption", False),
    ("What does Figure 8 show?", "Figure 8 shows the results of the second trial",
     "Figure 8 shows the results of the second trial", "caption", True),
])
def test_an_answer_is_a_span_of_the_type_asked(question, answer, evidence, kind, fits):
    from vrag_rl.reader.question import question_form
    from vrag_rl.reader.spans import span_fits

    assert span_fits(answer, evidence, question, question_form(question), kind, pinned=kind == "table") is fits
    if kind == "table" and answer.isdigit():  # a lone digit in a cell the question does not pin: an index, a label
        assert not span_fits(answer, evidence, question, question_form(question), kind, pinned=False)


@pytest.mark.parametrize("question, quantity, time", [
    ("Combien d'employés compte l'entreprise ?", True, False),
    ("¿Cuántos empleados tiene la empresa?", True, False),
    ("Wie viele Mitarbeiter hat die Firma?", True, False),
    ("회사의 직원은 몇 명입니까?", True, False),
    ("Quand l'usine a-t-elle ouvert ?", False, True),
    ("공장은 언제 문을 열었습니까?", False, True),
    ("When the fan fails, what speed does the pump run at?", True, False),  # "when" sets the scene
    # "what is the date" asked as the other languages ask it: the date noun a few words after "what"/"which"
    ("Quelle est la date de la facture ?", False, True),
    ("Was ist das Datum der Rechnung?", False, True),
    ("¿Cuál es la fecha de emisión?", False, True),
    ("Wat is de datum van de factuur?", False, True),
    ("Was ist der Wert?", False, False),
])
def test_question_forms_in_other_languages_and_when_clauses(question, quantity, time):
    from vrag_rl.reader.question import question_form

    form = question_form(question)
    assert (form.quantity, form.time) == (quantity, time)


def test_below_the_confidence_threshold_the_reader_answers_nothing():
    question = "How many vessels called at the container yard?"
    best = Reader(None).read(question, REPORT)
    assert best is not None and best.answer == "633"
    assert Reader(None, min_score=best.score).read(question, REPORT) == best
    assert Reader(None, min_score=best.score + 0.01).read(question, REPORT) is None


def test_the_stand_in_is_confident_only_with_an_embedder():
    """The calibrated threshold is on scores that hold the embedder's cosine: without one, none applies."""
    from vrag_rl.reader.relevance import CONFIDENT_SCORE

    class Constant:
        def embed_queries(self, texts):
            return [[1.0, 0.0] for _ in texts]

    assert RuleBasedBackend(embedder=None).reader.min_score == 0.0
    assert RuleBasedBackend(embedder=Constant()).reader.min_score == CONFIDENT_SCORE
    assert RuleBasedBackend(embedder=Constant(), min_score=0.3).reader.min_score == 0.3


def test_a_row_label_that_is_a_field_answers_with_its_own_value():
    # a two-column fact sheet read as one table: the left column's "key: value" lines are fields, and the
    # cells to their right are the other column's references, not their values
    sheet = _table("s", [["Chemistry (cont.)", "AIDS-associated Kaposi's sarcoma. Expert Rev"],
                         ["Molecular weight: 853.90[30]", "Anticancer Ther. 2005 Apr;5(2):215-9. Review."],
                         ["Melting point: 213 C to 216 C[31]", "Manufacturer Information"]], w=300)
    reading = Reader(None).read("What is the molecular weight of paclitaxel?", _page(sheet))
    assert reading is not None and reading.answer == "853.90"


@pytest.mark.parametrize("question, noun, quantity", [
    ("What is the invoice number on the receipt?", "invoice", False),
    ("What is the CAS number of paclitaxel?", "cas", False),
    ("What phone number is printed on the form?", "phone", False),
    ("What is the number of employees?", "", True),
    ("What is the total number of votes?", "", True),
    ("What is the highest number of visitors?", "", True),
    ("What is the carrier's total flight number in the monthly data?", "", True),
])
def test_a_noun_before_number_asks_for_an_identifier(question, noun, quantity):
    form = question_form(question)
    assert (form.identifier, form.quantity) == (noun, quantity)


def test_an_identifier_is_the_code_its_field_prints():
    # a receipt's key/value table under a title row (ingestion marked two header rows): the code of the row the
    # question names, not the other row's number nor a date; a reference mark after a field is not its value
    receipt = _table("r", [["Receipt", "", "Noisebridge"], ["Invoice number", "87B37C9-0152", ""],
                           ["Receipt number", "2721-5058", ""], ["Date paid", "July 19, 2024", ""]], header_rows=2)
    page = _page(Region("h", "heading", (50, 20, 700, 60), "Payment receipt"), receipt,
                 Region("a", "text", (50, 300, 700, 330), "Bill to treasurer 272 Capp St, paid on July 19, 2024."))
    reading = Reader(None).read("What is the invoice number on the payment receipt?", page)
    assert reading is not None and reading.answer == "87B37C9-0152"
    sheet = _page(Region("h", "heading", (50, 20, 700, 60), "Paclitaxel"),
                  Region("a", "text", (50, 70, 700, 95), "Paclitaxel is a chemotherapy medication given by injection."),
                  Region("b", "text", (50, 300, 700, 330), "CAS Number: 33069-62-4[27]"),
                  Region("c", "text", (50, 500, 700, 530), "The usual dose is 135 mg/m2 given over 3 hours."))
    reading = Reader(None).read("What is the CAS number of paclitaxel?", sheet)
    assert reading is not None and reading.answer == "33069-62-4"
    # a page that prints no such field has no identifier to give, though it prints other numbers
    assert Reader(None).read("What is the serial number of the pump?", sheet) is None


def test_a_value_in_the_unit_of_the_questions_condition_is_not_the_answer():
    # "once every 3 weeks" is a condition: "every 2 weeks" is the other regimen's schedule, "[24]" a reference
    # mark, and the dose asked is the amount printed before the condition
    text = ("One regimen is 135 mg/m2 by IV infusion once every 3 weeks; another is 100 mg/m2 by IV infusion "
            "once every 2 weeks.[24]")
    question = "What dose is given by IV infusion once every 3 weeks?"
    assert answer_span(text, question, question_form(question))[0] == "135 mg/m2"
    # without a condition in weeks, a duration is what "how long" asks for
    how_long = "How long is the interval of the second regimen?"
    assert answer_span("The second regimen repeats every 2 weeks.", how_long, question_form(how_long))[0] == "2 weeks"
    # a money or scale condition says nothing of the unit asked: other amounts in millions stay answers
    money = "What was the net income of the segment with $5 million of sales?"
    assert answer_span("Its net income was $2 million.", money, question_form(money))[0] == "$2 million"


def test_a_count_is_not_a_share_its_header_marks_in_percent():
    # "how many flights were operated": the count in the "Flights" row, not the rate printed "(%)" under it,
    # whose label holds more of the question's words
    sheet = _table("f", [["", "Domestic", "International"],
                         ["Flights", "3,916", "4,348"],
                         ["Flights operated (%)", "98.7", "99.1"]], w=180)
    reading = Reader(None).read("How many domestic flights were operated?", _page(sheet))
    assert reading is not None and reading.answer == "3,916"
    rate = Reader(None).read("What percentage of domestic flights were operated?", _page(sheet))
    assert rate is not None and rate.answer == "98.7"


def test_a_sentence_reads_with_the_condition_the_sentence_before_sets():
    """"One recommended regimen is 135 mg/m2 …" answers for the patients the sentence before names: half
    credit for that sentence's words makes the dose supported (it was short of the coverage a reading needs)."""
    text = Region("t", "text", (50, 100, 550, 160),
                  "For patients with Kaposi's sarcoma that failed first-line chemotherapy, there are two recommended "
                  "regimens. One recommended regimen is paclitaxel 135 mg/m2 by 3-hour infusion once every 3 weeks.")
    reading = Reader(None).read("For Kaposi's sarcoma that failed first-line chemotherapy, what paclitaxel dose is "
                                "given by 3-hour infusion?", _page(text))
    assert reading is not None and reading.answer == "135 mg/m2"


def test_a_month_alone_is_no_name():
    """"Aug" read out of "Jul 19 – Aug 19, 2024" is a month, no name, unless the question asks which month."""
    line = _page(Region("t", "text", (50, 100, 550, 130), "The membership renewal covers Jul 19 – Aug 19, 2024."))
    assert "Aug" not in [r.answer for r in Reader(None).rank("Which plan does the renewal cover?", line)]


def test_a_code_the_question_quotes_names_the_row_that_prints_it():
    """A parts list's rows are labelled by item numbers; the question names its row by the part's code or its
    reference designator, printed in another column: that row, and the column the question names."""
    from vrag_rl.reader.reader import quoted_codes

    parts = _page(_table("bom", [
        ["Item", "Qty", "Description", "Reference", "Manufacturer", "Part Number"],
        ["1", "1", "FLASH-512K-X-8", "U5", "ST MICRO", "M29W040B120K6"],
        ["2", "2", "HEX-INVERTER", "U21-22", "PHILIPS", "74LVC14AD"],
        ["3", "3", "SDRAM-143MHZ", "U2-4", "MICRON", "MT48LC1M16A1TG"],
        ["4", "1", "AUDIO-RECEIVER", "U8", "CIRRUS LOGIC", "CS8414-CS"],
    ], header_rows=1, header_cols=1))
    assert quoted_codes("Which manufacturer supplies the FLASH-512K-X-8 part (U5)?") == {"flash-512k-x-8", "u5"}
    assert quoted_codes("How many passengers in FY2014, Q3 and 2023E?") == set()  # periods, not codes
    best = Reader(None).read("Which manufacturer supplies the FLASH-512K-X-8 part?", parts)
    assert best is not None and best.answer == "ST MICRO"
    best = Reader(None).read("What is the part number of the part at U8?", parts)
    assert best is not None and best.answer == "CS8414-CS"


@pytest.mark.parametrize(("sentence", "question", "answer"), [
    ("LaTeX ondersteunt drie vooraf gedefinieerde paginastijlen.", "Hoeveel paginastijlen ondersteunt LaTeX?", "3"),
    ("Das Gerät hat zwölf Anschlüsse auf der Rückseite.", "Wie viele Anschlüsse hat das Gerät?", "12"),
    ("La carte comporte quatre ports série.", "Combien de ports série la carte comporte-t-elle ?", "4"),
    ("El kit incluye cinco cables de conexión.", "¿Cuántos cables incluye el kit?", "5"),
])
def test_a_count_spelled_in_another_language_answers_as_digits(sentence, question, answer):
    page = _page(Region("t", "text", (50, 100, 700, 140), sentence))
    best = Reader(None).read(question, page)
    assert best is not None and best.answer == answer


def test_the_article_and_english_words_are_no_counts():
    from vrag_rl.reader.values import number_words_in

    assert number_words_in("een boek, ein Buch, un livre, due to rain, once more, Otto Hahn") == []


FACT_SHEET = _page(
    Region("title", "text", (50, 20, 700, 60), "Brightwater Analytics"),
    Region("about", "text", (50, 80, 700, 140),
           "Brightwater Analytics (BWA) is a consulting firm serving regional hospitals and water utilities."),
    Region("box", "figure", (50, 200, 400, 320), "COMPANY FACTS\nFounder Ilse Varga\nLocation: Tromsø, Norway\n"
           "Registry Codes:\n4471, 4472\nOwnership Status: Employee-owned",
           labels=[Label(t, (50, 200 + 20 * i, 400, 218 + 20 * i)) for i, t in enumerate(
               ["COMPANY FACTS", "Founder Ilse Varga", "Location: Tromsø, Norway", "Registry Codes:", "4471, 4472",
                "Ownership Status: Employee-owned"])]),
    Region("foot", "footer", (50, 960, 700, 990), "Vendor ID: QX7734LM2"),
)


def test_a_field_line_is_not_joined_to_the_line_above():
    """Fact boxes and forms print one field per line without punctuation: a line that opens on its label
    starts anew, so "Location: Tromsø, Norway" is read as a field, not as the tail of "Founder Ilse Varga"."""
    texts = [s.text for s in sentences_of("Founder Ilse Varga\nLocation: Tromsø, Norway\nRegistry Codes:\n4471")]
    assert texts == ["Founder Ilse Varga", "Location: Tromsø, Norway", "Registry Codes:", "4471"]
    assert [s.text for s in sentences_of("the answer is\nthat we wait")] == ["the answer is that we wait"]


def test_a_field_key_named_by_another_ending_of_the_word_answers():
    """"Where is it located" names the field "Location:"; its value answers over a sentence that only shares
    the company's name, and the company asked about by its short form in brackets is the one the box names."""
    best = Reader(None).read("Where is Brightwater Analytics (BWA) located?", FACT_SHEET)
    assert best is not None and best.answer == "Tromsø, Norway"


def test_a_field_in_a_footer_answers_but_a_running_footer_does_not():
    best = Reader(None).read("What is Brightwater Analytics' vendor ID?", FACT_SHEET)
    assert best is not None and best.answer == "QX7734LM2"
    running = _page(Region("t", "text", (50, 100, 700, 140), "Brightwater serves regional hospitals."),
                    Region("foot", "footer", (50, 960, 700, 990), "Brightwater Analytics Annual Review - page 3"))
    assert all(r.region_id != "foot" for r in Reader(None).rank("Which page is the annual review on?", running))


SIDE_BY_SIDE = _page(_table("fin", [
    ["Key ratios", "2022", "2023E", "2024E", "Income statement", "2022", "2023E", "2024E"],
    ["EPS", "1.07", "2.91", "4.43", "Revenue", "1,567", "3,684", "5,056"],
    ["P/E", "82.90", "30.47", "20.02", "Cost of sales", "1,038", "2,394", "3,236"],
    ["EV/EBITDA", "49.85", "24.12", "15.68", "R&D expense", "117", "276", "379"],
    ["Cash flow", "2022", "2023E", "2024E", "EBIT", "213", "534", "814"],
    ["Net income", "173", "471", "717", "Finance cost", "7", "1", "11"],
    ["Capex", "-83", "-184", "-203", "Tax", "14", "52", "80"],
], w=90, header_rows=1, header_cols=1))


@pytest.mark.parametrize(("question", "answer"), [
    ("What R&D expense is forecast for 2024E?", "379"),  # the right table's row, not the left one's
    ("What EV/EBITDA multiple is forecast for 2023E?", "24.12"),
    ("What capex is forecast for 2024E?", "-203"),  # under the repeated header row: the cash-flow table
])
def test_tables_printed_side_by_side_are_read_as_tables(question, answer):
    from vrag_rl.reader.tables import panels

    parts = panels(SIDE_BY_SIDE.regions[0])
    assert [p.text.split(" | ")[0] for p in parts] == ["Key ratios", "Cash flow", "Income statement"]
    best = Reader(None).read(question, SIDE_BY_SIDE)
    assert best is not None and best.answer == answer


def test_a_column_of_words_inside_one_table_does_not_cut_it():
    """A table with a text column after a value column is one table when the parts share no column name."""
    from vrag_rl.reader.tables import panels

    stock = _table("s", [["Product", "Price", "Description", "Stock"], ["Kettle", "24.00", "steel, 1.7 l", "12"],
                         ["Toaster", "31.50", "two slots", "4"], ["Mixer", "89.90", "five speeds", "7"]])
    assert panels(stock) == [stock]


def _drawn(rid: str, lines: list[list[tuple[float, str]]], y: float = 200, step: float = 30) -> Region:
    """A figure whose labels sit at the given x positions, one printed line per list."""
    labels = [Label(text, (x, y + i * step, x + 9 * len(text), y + i * step + 20))
              for i, line in enumerate(lines) for x, text in line]
    return Region(rid, "figure", (40, y, 760, y + step * len(lines)), "\n".join(lb.text for lb in labels),
                  labels=labels)


PARTS_DRAWN = _drawn("connectors", [
    [(60, "4.5.1 Power connector (P1)")],
    [(80, "The power connector takes a 2.5 mm barrel plug.")],
    [(80, "Part Description"), (400, "Manufacturer"), (600, "Part Number")],
    [(80, "2.5 mm barrel jack"), (400, "Switchcraft"), (600, "RAPC712X")],
    [(400, "Digi-Key"), (600, "SC1152-ND")],
    [(360, "Mating Connector")],
    [(80, "Power supply (provided with kit)"), (400, "Condor"), (600, "DSA-0151A")],
    [(400, "Mouser"), (600, "CN2105-ND")],
])


def test_a_table_drawn_as_a_figure_is_read_by_its_headers():
    """Layout analysis takes a ruled parts list for a figure: its labels' rows and shared left edges make the
    table again, read by its column names — and the row that prints its label comes before the row that
    continues it (a second supplier)."""
    from vrag_rl.reader.tables import table_from_labels

    table = table_from_labels(PARTS_DRAWN)
    assert table is not None and table.text.split("\n")[0] == "Part Description | Manufacturer | Part Number"
    best = Reader(None).read("Which manufacturer makes the power supply provided with the kit?", _page(PARTS_DRAWN))
    assert best is not None and best.answer == "Condor"


def test_labels_that_print_no_table_make_none():
    """A legend of two columns and a chart's labels are not tables."""
    from vrag_rl.reader.tables import table_from_labels

    legend = _drawn("legend", [[(80, "Car"), (300, "Bus")], [(80, "Bicycle"), (300, "Walking")],
                               [(80, "Train"), (300, "Ferry")]])
    chart = _drawn("chart", [[(60, "100")], [(60, "50")], [(60, "0")],
                             [(120, "2021"), (220, "2022"), (320, "2023"), (420, "2024")]])
    assert table_from_labels(legend) is None and table_from_labels(chart) is None


@pytest.mark.parametrize(("text", "sentences"), [
    ("Prepared by Dr. Ilse Varga, Bergen, 14. März 2023", ["Prepared by Dr. Ilse Varga, Bergen, 14. März 2023"]),
    ("Gepubliceerd op 3. maart 2021 in Gent.", ["Gepubliceerd op 3. maart 2021 in Gent."]),
    ("See Fig. 3 for the layout. It shows both quays.", ["See Fig. 3 for the layout.", "It shows both quays."]),
    ("The total was 42. The next one is 7.", ["The total was 42.", "The next one is 7."]),
])
def test_a_full_stop_after_a_title_or_a_day_ends_no_sentence(text, sentences):
    assert [s.text for s in sentences_of(text)] == sentences


def test_a_date_written_with_a_day_ordinal_is_read_whole():
    """"14. März 2023" was cut after "14." into two sentences, and neither held a date."""
    page = _page(Region("h", "heading", (50, 20, 700, 60), "Hafenbericht Bergen"),
                 Region("t", "text", (50, 900, 700, 960), "Erstellt von Dr. Ilse Varga, Bergen, 14. März 2023"))
    best = Reader(None).read("Wann wurde der Hafenbericht Bergen erstellt?", page)
    assert best is not None and best.answer == "14. März 2023"


def test_a_range_answers_whole_and_a_wrapped_line_ending_in_a_number_goes_on():
    """A scanned page wraps "… beyond the 12-15" / "berths typical of …": the line ends in a number but the
    sentence goes on in lower case, and "how many" is answered by the whole range, not one of its ends."""
    text = Region("t", "text", (50, 100, 700, 180), "The harbour, we may add, has grown beyond the 12-15\n"
                  "berths typical of small northern ports, as the survey of 2019 shows.")
    best = Reader(None).read("How many berths are typical of small northern ports?", _page(text))
    assert best is not None and best.answer == "12-15"
    from vrag_rl.reader.spans import _ranged
    from vrag_rl.reader.values import values_in

    for code in ("Part 897-30-004 costs 12", "Call 650-701-7829 now", "Issued 2023-05-04", "Scores fell 40-30"):
        assert all("-" not in printed for _, printed in _ranged(code, values_in(code))), code
    assert [t for _, t in _ranged("between 1,200 to 1,500 units", values_in("between 1,200 to 1,500 units"))] == [
        "1,200 to 1,500"]


def test_a_headings_number_is_no_labelled_value():
    """"2. Total Domestic Traffic" heads a figure: its number numbers the heading, it is no value of a label
    (it was read as "Total Domestic Traffic: 2" and answered "how many domestic passengers" with 2)."""
    from vrag_rl.reader.figures import _line_pair

    assert _line_pair("2. Total Domestic Traffic") is None and _line_pair("3) Install the kit") is None
    assert _line_pair("Car 25%") is not None and _line_pair("Cruise calls: 45") is not None


def test_a_field_in_running_text_reads_with_its_own_words_only():
    """In a fact box every field is about what the box names; in a paragraph of sentences a field is about
    its own words: "Definition: …" of a queue does not answer what a deque is because the deque is named
    two lines below (with the whole region as its context it did, and outranked the sentence that answers)."""
    slide = _page(Region("t", "text", (50, 100, 750, 300),
                         "A stack is a list where items are added and removed at one end only, the top.\n"
                         "Definition: a queue adds items at the back and removes them at the front.\n"
                         "A deque is a list that adds and removes items at either of its two ends."))
    best = Reader(None).read("What is the definition of a deque?", slide)
    assert best is None or "queue adds" not in best.answer


def test_an_abbreviated_header_answers_for_the_words_it_abbreviates():
    # a data sheet heads its columns "Pax", "L/F(%)", "y.o.y(%)": the question spells them out, and none of its
    # words is printed in the header it asks for
    sheet = _page(_table("t", [["Month", "Pax", "L/F(%)", "y.o.y(%)"], ["Jul-2015", "702,011", "80.1", "99.2"],
                               ["Aug-2015", "721,817", "82.5", "101.2"]], header_rows=1, header_cols=1))
    load = Reader(None).read("What was the international passenger load factor in August 2015?", sheet)
    assert load is not None and load.answer == "82.5"
    growth = Reader(None).read("By how much did traffic change year over year in August 2015?", sheet)
    assert growth is not None and growth.answer == "101.2"


def test_abbreviations_stand_only_for_phrases_that_spell_them():
    from vrag_rl.reader.rewrite import spelled_out

    page = _page(Region("l", "text", (50, 50, 300, 70), "EPS (diluted)"),
                 Region("m", "text", (50, 80, 300, 100), "Earnings per share"),
                 Region("n", "text", (50, 110, 700, 130), "The HDTV prototype was built by the SE lab in 1997 "
                                                          "for the video server, e.g. a hard drive of 9 GB."))
    spelled = spelled_out(page, "What were the earnings per share?")
    assert spelled.regions[0].text == "EPS(earnings-per-share) (diluted)"
    back = spelled_out(page, "What was the EPS?")
    assert back.regions[1].text == "Earnings per share(EPS)"
    # running text, two letters alone, function words the abbreviation does not stand for: nothing added
    assert spelled_out(page, "Which hard drive does the video server use, and what is its size?") is page
    assert spelled_out(page, "Which lab was it, the school of engineering?") is page


def test_a_sum_row_answers_a_total_question_in_another_word():
    table = _table("t", [["구분", "판매점 수", "금액"], ["1 백만원 이하", "33,350", "76"],
                         ["1 억원 이하", "3,650", "1,114"], ["계", "48,124", "12,789"]], header_rows=1, header_cols=1)
    reading = Reader(None).read("금액대별 분포 표에서 판매점 수의 합계는 몇 개인가?", _page(table))
    assert reading is not None and reading.answer == "48,124"
    english = _table("e", [["Region", "Stores"], ["North", "120"], ["South", "80"], ["Total", "200"]],
                     header_rows=1, header_cols=1)
    reading = Reader(None).read("What is the sum of stores over all regions?", _page(english))
    assert reading is not None and reading.answer == "200"


def test_a_period_column_answers_the_period_the_question_says_in_words():
    perf = _page(_table("t", [["股价表现(%)", "1M", "3M", "12M"], ["绝对涨幅", "7.18", "80.86", "32.88"],
                              ["相对涨幅", "5.02", "61.30", "40.10"]], header_rows=1, header_cols=1))
    reading = Reader(None).read("高测股份近3个月的绝对涨幅是多少？", perf)
    assert reading is not None and reading.answer == "80.86"
    reading = Reader(None).read("What was the absolute gain (绝对涨幅) over twelve months?", perf)
    assert reading is not None and reading.answer == "32.88"
    from vrag_rl.reader.rewrite import periods_named

    years = _page(_table("y", [["", "24Y", "1M"], ["Revenue", "5", "6"]], header_rows=1, header_cols=1))
    # a year's last digits ("2024年") and a word that ends like a number ("phone") name no period
    assert periods_named(years, "2024年的营业收入是多少？") is years
    assert periods_named(years, "What did the phone months cost?") is years


@pytest.mark.parametrize(("text", "question", "answer"), [
    ("Noisebridge 272 Capp St San Francisco, California 94110 United States +1 650-701-7829",
     "What street address of Noisebridge is printed on its receipt?", "272 Capp St"),
    ("LG Electronics Deutschland GmbH l Berliner Straße 93 l D-40880 Ratingen", "Wie lautet die Adresse?",
     "Berliner Straße 93"),
    ("Siège : 12 rue de la Paix, 75002 Paris", "Quelle est l'adresse du siège ?", "12 rue de la Paix"),
    ("$10 / month Jul 19 – Aug 19, 2024", "Which billing period does the $10 / month line item cover?",
     "Jul 19 – Aug 19, 2024"),
    ("Valid from 1 March - 30 June 2023 for members", "What is the validity period for members?",
     "1 March - 30 June 2023"),
])
def test_an_address_or_a_period_answers_whole(text, question, answer):
    # a name inside an address ("Capp St San Francisco") or one end of a period ("Aug") is no answer
    assert answer_span(text, question, question_form(question))[0] == answer


def test_no_address_or_period_where_the_text_prints_none():
    from vrag_rl.reader.spans import addresses_in, periods_in

    for text in ("pages 48-67 of the book", "Figure 3-1 shows the board", "Section 2 covers 30 to 40 calls",
                 "20 people in the way of the parade"):
        assert addresses_in(text) == [] and periods_in(text) == []


def test_a_street_address_question_takes_an_address_not_a_code():
    from vrag_rl.reader.spans import span_fits

    question = "What street address of Noisebridge is printed on its receipt?"
    form = question_form(question)
    assert not span_fits("2721-5058", "Receipt number: 2721-5058", question, form, "table")
    assert span_fits("272 Capp St", "Noisebridge 272 Capp St San Francisco", question, form)
    # an e-mail or a web address is no street address: a code-like answer still fits
    email = "To which e-mail address are corrections sent?"
    assert span_fits("tex-live@tug.org", "Send corrections to tex-live@tug.org", email, question_form(email))
    # "printed" says where the page puts it, not what it is about: a receipt that prints the address answers
    page = _page(Region("r", "text", (50, 50, 500, 70), "Receipt number 2721-5058"),
                 Region("a", "text", (50, 100, 500, 120), "Noisebridge 272 Capp St San Francisco, California"),
                 Region("b", "text", (50, 150, 500, 170), "Bill to member@example.org"))
    reading = Reader(None).read(question, page)
    assert reading is not None and reading.answer == "272 Capp St"



@pytest.mark.parametrize(("text", "question", "answer"), [
    ("LuaTeX: Lua 5.3.6 を使うようになりました。", "Lua インタプリタのバージョンはいくつになりましたか？", "5.3.6"),
    ("MacTeX requires macOS 10.14 or later (Mojave, Catalina).", "What macOS version does MacTeX require?", "10.14"),
    ("Released on 12.03.2021 as v2.1 of the tool.", "Which version of the tool was released?", "v2.1"),
])
def test_a_version_answers_whole(text, question, answer):
    # a decimal cut out of a release's number ("5.3" of "5.3.6") is no answer, a date is no version
    assert answer_span(text, question, question_form(question))[0] == answer


@pytest.mark.parametrize(("question", "asks"), [
    ("¿Qué versión de Lua incluye LuaTeX?", True),
    ("What is the minimum version of Windows supported?", True),
    ("LuaTeX 包含哪个版本的 Lua？", True),
    ("Welche Version von Lua enthält LuaTeX?", True),
    ("Who translated the English version into Dutch?", False),  # a version named, a name asked
    ("英文版本是谁翻译的？", False),
])
def test_a_version_is_asked_only_where_the_question_asks_for_it(question, asks):
    from vrag_rl.reader.spans import asks_version

    assert asks_version(question) is asks


def test_a_dotted_number_is_no_amount():
    assert [v.text for v in values_in("Lua 5.3.6, section 3.4.2, 12.5 kg on 29.11.2026")] == ["12.5 kg",
                                                                                              "29.11.2026"]


def test_a_header_abbreviation_names_the_word_a_question_spells_out():
    from vrag_rl.reader.terms import content_terms

    assert content_terms("Pax Qty Intl Amt") == content_terms("passengers quantity international amount")
    # a financial table's year column with its mark: "2024E" (estimated) is the year a question names
    assert content_terms("2021A 2024E") == content_terms("2021 2024") and content_terms("FY2014") == ["fy2014"]
    table = _table("t", [["Route", "Pax", "Cargo Ton"],
                         ["Americas", "145,210", "9,104"],
                         ["Southeast Asia", "276,197", "12,330"]], header_rows=1, header_cols=1)
    reading = Reader(None).read("How many passengers flew on Southeast Asia routes?", _page(table))
    assert reading is not None and reading.answer == "276,197"


@pytest.mark.parametrize(("text", "question", "answer"), [
    ("Workshop on Algorithms in Bioinformatics, 2006",
     "At which workshop was the talk on SNP block partitioning given?", "Workshop on Algorithms in Bioinformatics"),
    ("Published by the Ministry of Finance and Economic Affairs in 2020.", "Which ministry published the report?",
     "Ministry of Finance and Economic Affairs"),
])
def test_a_name_that_starts_with_the_kind_asked_is_read_whole(text, question, answer):
    # the kind's word, capitalised, then a preposition and the rest of the name: not "Algorithms" alone
    assert answer_span(text, question, question_form(question))[0] == answer


def test_a_data_sheets_charge_unit_keeps_its_row():
    # "100Ah" read as "100" cut out of its token was no answer, and the row below ("3.2V") answered instead
    assert [v.text for v in values_in("100Ah, 50 mAh, 160 Wh/kg")] == ["100Ah", "50 mAh", "160 Wh/kg"]
    sheet = _table("t", [["项目 Item", "规格 Specification"], ["额定容量 Nominal Capacity", "100Ah"],
                         ["额定电压 Nominal Voltage", "3.2V"]], header_rows=1, header_cols=1)
    reading = Reader(None).read("What is the nominal capacity?", _page(sheet))
    assert reading is not None and reading.answer == "100Ah"


@pytest.mark.parametrize(("question", "answer"), [
    ("By how much did operating income change?", "10%"),  # income is money; its change may be a rate
    ("How much did revenue increase in 2022?", "10%"),
    ("How much income did the company report?", "$5 bn"),
])
def test_a_change_is_read_as_an_amount_or_a_rate(question, answer):
    assert answer_span("Operating income rose 10% to $5 bn", question, question_form(question))[0] == answer
