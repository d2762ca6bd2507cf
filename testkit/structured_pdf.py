"""Real PDFs with structure, drawn with reportlab, for the page-layout and region-retrieval tests.

One document of three pages, each built the way real reports are:
* page 1, a long multi-topic page: a heading and several paragraphs on unrelated subjects, one of
  which holds a short fact (the "drowned answer");
* page 2, a ruled table with a bold header row and a label column, with a "Table 1" caption above it;
* page 3, a vector bar chart whose axis labels and legend are printed inside it, with a
  "Figure 1" caption below it.
Every page carries the same running header and a page-number footer. The facts are returned so a
test asks about what the PDF says, not about strings copied from the test.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RUNNING_HEADER = "Harbour Authority Annual Review 2025"

TOPIC_PARAGRAPHS = [
    ("Fleet renewal", "The authority replaced four of its oldest pilot boats during the year. The new hulls are "
     "built from aluminium and carry hybrid propulsion, which reduces fuel use in the inner harbour where most "
     "pilot transfers happen at low speed. Crews were trained on the new control systems over the winter."),
    ("Dredging programme", "Maintenance dredging of the approach channel continued on the usual three-year "
     "cycle. Sediment samples were analysed before each campaign and the spoil was placed at the licensed "
     "offshore site. Survey vessels confirmed the declared depth along the whole channel after the works."),
    ("Staff and training", "Apprenticeships were offered in marine engineering and in vessel traffic services. "
     "Mentoring pairs each apprentice with an experienced officer for the first eighteen months. Several "
     "senior staff retired after long careers and their knowledge was recorded in written procedures."),
    ("Community", "Open days at the pilot station welcomed schools and local residents. Visitors toured the "
     "control room and watched a demonstration of a pilot boarding a ship from the launch at anchor."),
    ("Tide gauge", "The new tide gauge at the north pier was commissioned by engineer Marta Quillfeather "
     "in October."),
    ("Outlook", "The coming year will see the completion of the quay wall repairs and a review of the "
     "mooring tariffs together with the port users' committee. The authority expects traffic to stay close "
     "to this year's level, with a modest rise in cruise calls during the summer season."),
]

TABLE_ROWS = [
    ["Terminal", "Vessels", "Cargo (kt)", "Berths"],
    ["North quay", "412", "1,850", "6"],
    ["Container yard", "633", "4,210", "9"],
    ["Ferry terminal", "1,204", "380", "3"],
    ["Bulk jetty", "97", "2,760", "2"],
]

CHART_BARS = [("Jan", 30), ("Feb", 45), ("Mar", 62), ("Apr", 51)]
CHART_LEGEND = "Cruise calls"
CHART_Y_LABEL = "Calls per month"
FIGURE_CAPTION = "Figure 1: Monthly cruise calls in the first quarter and April."
TABLE_CAPTION = "Table 1: Traffic and cargo handled by terminal."


@dataclass
class StructuredPdf:
    path: Path
    header: str = RUNNING_HEADER
    fact_page: int = 1  # the tide-gauge engineer's name is on page 1, among five other topics
    table_page: int = 2
    figure_page: int = 3


def _header_footer(c, width: float, height: float, number: int) -> None:
    c.setFont("Helvetica", 8)
    c.drawString(56, height - 30, RUNNING_HEADER)
    c.drawCentredString(width / 2, 24, f"Page {number}")


def _paragraph(c, text: str, x: float, y: float, width: float, size: float = 10.5, leading: float = 14) -> float:
    """Draw wrapped text from y downwards; returns the y below it."""
    from reportlab.lib.utils import simpleSplit

    c.setFont("Helvetica", size)
    for line in simpleSplit(text, "Helvetica", size, width):
        c.drawString(x, y, line)
        y -= leading
    return y


def build_structured_pdf(path: str | Path) -> StructuredPdf:
    """Write the three-page report to `path` (see the module doc) and say where each fact is."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    path = Path(path)
    width, height = A4
    c = canvas.Canvas(str(path), pagesize=A4)

    # page 1: several topics, one short fact
    _header_footer(c, width, height, 1)
    c.setFont("Helvetica-Bold", 18)
    c.drawString(56, height - 80, "Operations review")
    y = height - 115
    for title, body in TOPIC_PARAGRAPHS:
        c.setFont("Helvetica-Bold", 12.5)
        c.drawString(56, y, title)
        y = _paragraph(c, body, 56, y - 18, width - 112) - 14
    c.showPage()

    # page 2: a ruled table with its caption above
    _header_footer(c, width, height, 2)
    c.setFont("Helvetica-Bold", 18)
    c.drawString(56, height - 80, "Traffic by terminal")
    y = _paragraph(c, "The table below lists the traffic handled by each terminal of the port during the "
                      "year under review.", 56, height - 110, width - 112)
    c.setFont("Helvetica", 10)
    c.drawString(56, y - 12, TABLE_CAPTION)
    col_w, row_h = [150, 90, 100, 80], 22
    x0, top = 56, y - 26
    for r, row in enumerate(TABLE_ROWS):
        x = x0
        for col, cell in enumerate(row):
            c.rect(x, top - (r + 1) * row_h, col_w[col], row_h, stroke=1, fill=0)
            c.setFont("Helvetica-Bold" if r == 0 else "Helvetica", 10)
            c.drawString(x + 5, top - (r + 1) * row_h + 7, cell)
            x += col_w[col]
    _paragraph(c, "Container traffic grew fastest; the ferry terminal saw the most vessel calls.", 56,
               top - len(TABLE_ROWS) * row_h - 30, width - 112)
    c.showPage()

    # page 3: a vector bar chart, labels inside it, caption below
    _header_footer(c, width, height, 3)
    c.setFont("Helvetica-Bold", 18)
    c.drawString(56, height - 80, "Cruise traffic")
    ox, oy, plot_w, plot_h = 110, height - 420, 330, 250
    c.setLineWidth(1)
    c.line(ox, oy, ox + plot_w, oy)
    c.line(ox, oy, ox, oy + plot_h)
    c.setFont("Helvetica", 9)
    for tick in (0, 20, 40, 60):
        ty = oy + tick / 70 * plot_h
        c.line(ox - 4, ty, ox, ty)
        c.drawRightString(ox - 7, ty - 3, str(tick))
    bar_w = 45
    for i, (label, value) in enumerate(CHART_BARS):
        bx = ox + 25 + i * 75
        c.setFillColorRGB(0.2, 0.4, 0.7)
        c.rect(bx, oy, bar_w, value / 70 * plot_h, stroke=0, fill=1)
        c.setFillColorRGB(0, 0, 0)
        c.drawCentredString(bx + bar_w / 2, oy - 13, label)
        c.drawCentredString(bx + bar_w / 2, oy + value / 70 * plot_h + 4, str(value))
    c.saveState()
    c.translate(ox - 35, oy + plot_h / 2 - 40)
    c.rotate(90)
    c.drawString(0, 0, CHART_Y_LABEL)
    c.restoreState()
    c.setFillColorRGB(0.2, 0.4, 0.7)
    c.rect(ox + plot_w - 95, oy + plot_h - 14, 10, 10, stroke=0, fill=1)
    c.setFillColorRGB(0, 0, 0)
    c.drawString(ox + plot_w - 80, oy + plot_h - 13, CHART_LEGEND)
    c.setFont("Helvetica-Oblique", 10)
    c.drawString(ox, oy - 40, FIGURE_CAPTION)
    _paragraph(c, "Cruise calls rose through the first quarter as the new season schedule began.", 56,
               oy - 80, width - 112)
    c.showPage()
    c.save()
    return StructuredPdf(path)


# ---- a page of two charts: one whose labels pair, one whose labels do not ---------------------------------

CHART_TITLE = "Ferry passengers by route"
ROUTE_BARS = [("Northway", 120), ("Eastgate", 340), ("Southpier", 95), ("Westbank", 210)]  # thousands
ROUTE_TICKS = [0, 100, 200, 300, 400]
ROUTE_X_TITLE = "Route"
ROUTE_Y_TITLE = "Passengers (thousands)"
ROUTE_CAPTION = "Figure 2: Ferry passengers carried on each route in 2025."
# two series per quarter, each bar labelled: a quarter has two values, so no value pairs with it alone
SERIES_BARS = [("Q1", 14, 22), ("Q2", 18, 25), ("Q3", 31, 12)]
SERIES_CAPTION = "Figure 3: Cargo and cruise calls per quarter, two series."


def _bar_chart(c, ox: float, oy: float, plot_w: float, plot_h: float, top: float, ticks: list[int],
               bars: list[tuple], title: str = "", x_title: str = "", y_title: str = "", caption: str = "") -> None:
    """A vertical bar chart: ticks right-aligned left of the axis, a category under each bar group, each
    bar's value printed above it, an x-axis title under the categories, a y-axis title printed upwards,
    a title centred above the plot, a caption under it."""
    c.setLineWidth(1)
    c.line(ox, oy, ox + plot_w, oy)
    c.line(ox, oy, ox, oy + plot_h)
    c.setFont("Helvetica", 9)
    for tick in ticks:
        ty = oy + tick / top * plot_h
        c.line(ox - 4, ty, ox, ty)
        c.drawRightString(ox - 7, ty - 3, str(tick))
    group_w = plot_w / len(bars)
    for i, (label, *values) in enumerate(bars):
        bar_w = 0.6 * group_w / len(values)
        for k, value in enumerate(values):
            bx = ox + i * group_w + 0.2 * group_w + k * bar_w
            c.setFillColorRGB(0.2 + 0.4 * k, 0.4, 0.7)
            c.rect(bx, oy, bar_w, value / top * plot_h, stroke=0, fill=1)
            c.setFillColorRGB(0, 0, 0)
            c.drawCentredString(bx + bar_w / 2, oy + value / top * plot_h + 4, str(value))
        c.drawCentredString(ox + (i + 0.5) * group_w, oy - 13, label)
    if x_title:
        c.drawCentredString(ox + plot_w / 2, oy - 30, x_title)
    if y_title:
        c.saveState()
        c.translate(ox - 30, oy + plot_h / 2 - 50)
        c.rotate(90)
        c.drawString(0, 0, y_title)
        c.restoreState()
    if title:
        c.setFont("Helvetica-Bold", 11)
        c.drawCentredString(ox + plot_w / 2, oy + plot_h + 18, title)
    if caption:
        c.setFont("Helvetica-Oblique", 10)
        c.drawString(ox, oy - 52, caption)


def build_chart_pdf(path: str | Path) -> Path:
    """Write a one-page report with two vector bar charts (see the constants above) to `path`."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    path = Path(path)
    width, height = A4
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Helvetica-Bold", 18)
    c.drawString(56, height - 70, "Traffic in charts")
    _bar_chart(c, 120, height - 380, 360, 220, 400, ROUTE_TICKS, ROUTE_BARS, CHART_TITLE, ROUTE_X_TITLE,
               ROUTE_Y_TITLE, ROUTE_CAPTION)
    _bar_chart(c, 120, height - 720, 360, 200, 35, [0, 10, 20, 30], SERIES_BARS, caption=SERIES_CAPTION)
    c.showPage()
    c.save()
    return path
