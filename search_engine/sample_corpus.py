"""Generate the project's own small sample corpus: PDFs with text, tables and charts, plus QA pairs.

Why generate instead of shipping documents: the demo and the tests need documents whose facts
we know exactly (to check that retrieval finds the right page and the agent reads the right
region), and we may not redistribute other people's PDFs. Everything here is drawn with
reportlab from the data below, deterministically, in about a second. reportlab is an optional extra
(`pip install 'vrag-rl[samples]'`; `scripts/install.sh` installs it for the demo and the tests).

The corpus covers what the system must handle: a portrait report (text, a table, a bar chart),
a 16:9 slide deck (a small table in a corner that needs a crop to read), a brief with a line of
numbers, and one image-only "scanned" page with no text layer (for the OCR path).
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from search_engine.extras import require

A4 = (595, 842)
SLIDE = (960, 540)


@dataclass
class QA:
    query: str
    answer: str
    file_name: str
    pages: list[int]
    source_type: str = "Text"
    answer_region_text: str = ""  # the text printed in the region that holds the answer


@dataclass
class SampleCorpus:
    pdf_dir: Path
    files: list[Path] = field(default_factory=list)
    qa: list[QA] = field(default_factory=list)

    @property
    def dataset_path(self) -> Path:
        return self.pdf_dir / "rag_dataset.json"


QUESTIONS: list[QA] = [
    QA("What was Acme Robotics' total revenue in 2023?", "$341 million", "acme_annual_report_2023.pdf", [2],
       "Table", "Revenue 341"),
    QA("How many employees did Acme Robotics have at the end of 2023?", "1,870", "acme_annual_report_2023.pdf",
       [4], "Text", "1,870 employees"),
    QA("Which region brought Acme Robotics the most revenue in 2023?", "North America",
       "acme_annual_report_2023.pdf", [3], "Chart", "North America"),
    QA("What is the most used travel app in the Metro Travel Survey?", "RouteFinder", "metro_travel_survey_2024.pdf",
       [2], "Table", "RouteFinder 47%"),
    QA("What share of commuters ride the bicycle according to the Metro Travel Survey?", "12%",
       "metro_travel_survey_2024.pdf", [3], "Chart", "Bicycle 12%"),
    QA("What satisfaction score did the Riverside district get?", "7.4", "metro_travel_survey_2024.pdf", [4],
       "Table", "Riverside 7.4"),
    QA("How much power does the Kestrel Ridge solar plant produce?", "410 MW", "solar_energy_brief.pdf", [3],
       "Text", "410 MW"),
    QA("What was the installed solar capacity in 2023?", "31 GW", "solar_energy_brief.pdf", [2], "Chart", "31 GW"),
    QA("What dividend per share did the board approve in the memo?", "0.42 dollars", "board_memo_scan.pdf", [1],
       "Text", "0.42 dollars per share"),
]


# --------------------------------------------------------------------------------------------- drawing


def _header(c, title: str, width: float, height: float, band: float = 70) -> None:
    from reportlab.lib import colors

    c.setFillColor(colors.HexColor("#1f3b73"))
    c.rect(0, height - band, width, band, fill=1, stroke=0)
    c.setFillColor(colors.white)
    c.setFont("Helvetica-Bold", 24)
    c.drawString(36, height - band + 26, title)
    c.setFillColor(colors.black)


def _footer(c, text: str, width: float) -> None:
    c.setFont("Helvetica", 9)
    c.drawRightString(width - 24, 16, text)


def _paragraph(c, lines: list[str], x: float, y: float, size: int = 13, leading: float = 19) -> None:
    c.setFont("Helvetica", size)
    for i, line in enumerate(lines):
        c.drawString(x, y - i * leading, line)


def _table(c, rows: list[list[str]], x: float, y: float, col_widths: list[float], row_height: float = 26,
           size: int = 13) -> None:
    from reportlab.lib import colors

    for r, row in enumerate(rows):
        top = y - r * row_height
        if r == 0:
            c.setFillColor(colors.HexColor("#dde5f2"))
            c.rect(x, top - row_height, sum(col_widths), row_height, fill=1, stroke=0)
            c.setFillColor(colors.black)
        cx = x
        c.setFont("Helvetica-Bold" if r == 0 else "Helvetica", size)
        for w, cell in zip(col_widths, row):
            c.drawString(cx + 6, top - row_height + 8, cell)
            c.setStrokeColor(colors.grey)
            c.rect(cx, top - row_height, w, row_height, fill=0, stroke=1)
            cx += w


def _bar_chart(c, title: str, labels: list[str], values: list[float], x: float, y: float, w: float, h: float,
               unit: str = "") -> None:
    from reportlab.graphics import renderPDF
    from reportlab.graphics.charts.barcharts import VerticalBarChart
    from reportlab.graphics.shapes import Drawing
    from reportlab.lib import colors

    c.setFont("Helvetica-Bold", 14)
    c.drawString(x, y + h + 12, title)
    drawing = Drawing(w, h)
    chart = VerticalBarChart()
    chart.x, chart.y, chart.width, chart.height = 40, 40, w - 60, h - 60
    chart.data = [values]
    chart.valueAxis.valueMin = 0
    chart.categoryAxis.categoryNames = labels
    chart.categoryAxis.labels.fontSize = 10
    chart.bars[0].fillColor = colors.HexColor("#e07b39")
    chart.barLabelFormat = "%g" + unit.replace("%", "%%")
    chart.barLabels.nudge = 8
    chart.barLabels.fontSize = 10
    drawing.add(chart)
    renderPDF.draw(drawing, c, x, y)


# --------------------------------------------------------------------------------------------- documents


def _acme_report(path: Path) -> None:
    from reportlab.pdfgen import canvas

    w, h = A4
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setTitle("Acme Robotics Annual Report 2023")
    _header(c, "Acme Robotics Annual Report 2023", w, h)
    _paragraph(c, [
        "Acme Robotics designs warehouse automation robots.",
        "This report covers the fiscal year ending 31 December 2023.",
        "Chief executive: Dana Whitfield. Headquarters: Lyon, France.",
        "Highlights: record revenue, three new product lines, and",
        "expansion of the Osaka engineering centre.",
    ], 48, h - 130)
    _footer(c, "Acme Robotics - page 1", w)
    c.showPage()

    _header(c, "Financial highlights", w, h)
    _paragraph(c, ["Figures in millions of US dollars."], 48, h - 120, size=12)
    _table(c, [["Metric", "2021", "2022", "2023"],
               ["Revenue", "212", "268", "341"],
               ["Net income", "18", "27", "41"],
               ["R&D spending", "35", "44", "58"]], 48, h - 150, [170, 100, 100, 100])
    _paragraph(c, ["Total revenue in 2023 was $341 million, up 27% from 2022."], 48, h - 300, size=12)
    _footer(c, "Acme Robotics - page 2", w)
    c.showPage()

    _header(c, "Revenue by region", w, h)
    _bar_chart(c, "Revenue by region, 2023 (USD millions)",
               ["North America", "Europe", "Asia Pacific", "Latin America"], [142, 97, 78, 24],
               48, h - 470, 480, 330)
    _paragraph(c, ["North America remained the largest region in 2023."], 48, h - 520, size=12)
    _footer(c, "Acme Robotics - page 3", w)
    c.showPage()

    _header(c, "Workforce", w, h)
    _paragraph(c, [
        "At the end of 2023 Acme Robotics had 1,870 employees,",
        "of whom 38% work in engineering.",
        "Offices: Lyon (headquarters), Austin and Osaka.",
        "Employee engagement survey participation: 91%.",
    ], 48, h - 130)
    _footer(c, "Acme Robotics - page 4", w)
    c.showPage()
    c.save()


def _travel_survey(path: Path) -> None:
    from reportlab.pdfgen import canvas

    w, h = SLIDE
    c = canvas.Canvas(str(path), pagesize=SLIDE)
    c.setTitle("Metro Travel Survey 2024")
    _header(c, "Metro Travel Survey 2024", w, h, band=80)
    _paragraph(c, ["A survey of 4,200 residents on how they travel in the metro area.",
                   "Fieldwork: March to May 2024."], 48, h - 150, size=18, leading=28)
    _footer(c, "1", w)
    c.showPage()

    _header(c, "Most used travel apps", w, h, band=80)
    _table(c, [["Travel app", "Share of users"],
               ["RouteFinder", "47%"],
               ["TransitGo", "31%"],
               ["CityRide", "14%"],
               ["Other apps", "8%"]], 60, h - 120, [260, 200], row_height=32, size=16)
    _paragraph(c, ["RouteFinder 47% is the most used travel app."], 560, h - 160, size=14)
    _footer(c, "2", w)
    c.showPage()

    _header(c, "Commute mode share", w, h, band=80)
    _bar_chart(c, "How residents commute (share of trips)", ["Bus", "Metro", "Car", "Bicycle"], [34, 29, 25, 12],
               60, 60, 520, 340, unit="%")
    _paragraph(c, ["Bus 34%", "Metro 29%", "Car 25%", "Bicycle 12%"], 650, h - 170, size=16, leading=30)
    _footer(c, "3", w)
    c.showPage()

    _header(c, "Satisfaction by district", w, h, band=80)
    _paragraph(c, ["Residents rated public transport in their district from 0 to 10.",
                   "The full breakdown is in the small table below."], 48, h - 130, size=16, leading=26)
    _table(c, [["District", "Score"], ["Northbank", "8.1"], ["Riverside", "7.4"], ["Old Town", "6.9"]],
           w - 250, 130, [130, 80], row_height=18, size=9)
    _footer(c, "4", w)
    c.showPage()
    c.save()


def _solar_brief(path: Path) -> None:
    from reportlab.pdfgen import canvas

    w, h = A4
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setTitle("Solar Energy Brief")
    _header(c, "Solar Energy Brief", w, h)
    _paragraph(c, ["A short brief on national solar power installations.",
                   "Prepared by the Energy Statistics Office."], 48, h - 130)
    _footer(c, "Solar brief - page 1", w)
    c.showPage()

    _header(c, "Installed capacity", w, h)
    _bar_chart(c, "Installed solar capacity (GW)", ["2019", "2020", "2021", "2022", "2023"], [12, 15, 19, 24, 31],
               48, h - 470, 480, 330)
    _paragraph(c, ["Installed solar capacity reached 31 GW in 2023."], 48, h - 520, size=12)
    _footer(c, "Solar brief - page 2", w)
    c.showPage()

    _header(c, "Major plants", w, h)
    _paragraph(c, [
        "The Kestrel Ridge plant, commissioned in 2022, produces 410 MW.",
        "The Harbour Flats plant produces 260 MW.",
        "Both plants use single-axis trackers.",
    ], 48, h - 130)
    _footer(c, "Solar brief - page 3", w)
    c.showPage()
    c.save()


def load_font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans at `size` pixels where installed (Debian's fonts-dejavu), else Pillow's built-in font: the
    pictures drawn here (and by the test kit) need a scalable font that OCR reads."""
    for name in ("DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"):
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default(size=size)


def _scanned_memo(path: Path) -> None:
    """An image-only page: no text layer, so only OCR can read it (like a scan)."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    image = Image.new("RGB", (1240, 1754), "white")
    draw = ImageDraw.Draw(image)
    font, big = load_font(34), load_font(48)
    draw.text((100, 120), "MEMO - Board of Directors", fill="black", font=big)
    lines = ["Date: 14 February 2024", "", "The board approved a dividend of",
             "0.42 dollars per share, payable in April.", "", "Signed: the Company Secretary"]
    for i, line in enumerate(lines):
        draw.text((100, 260 + 60 * i), line, fill="black", font=font)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    buffer.seek(0)
    c = canvas.Canvas(str(path), pagesize=A4)
    c.drawImage(ImageReader(buffer), 0, 0, width=A4[0], height=A4[1])
    c.showPage()
    c.save()


DOCUMENTS = {
    "acme_annual_report_2023.pdf": _acme_report,
    "metro_travel_survey_2024.pdf": _travel_survey,
    "solar_energy_brief.pdf": _solar_brief,
    "board_memo_scan.pdf": _scanned_memo,
}


def write_rag_dataset(path: Path, questions: list[QA]) -> None:
    """Upstream VRAG's `rag_dataset.json` layout, so our evaluation reads upstream data too."""
    examples = [
        {
            "uid": str(i),
            "query": qa.query,
            "reference_answer": qa.answer,
            "meta_info": {"file_name": qa.file_name, "reference_page": qa.pages, "source_type": qa.source_type},
        }
        for i, qa in enumerate(questions)
    ]
    path.write_text(json.dumps({"examples": examples}, indent=2))


def generate_sample_corpus(out_dir: str | Path, overwrite: bool = False) -> SampleCorpus:
    """Write the sample PDFs and `rag_dataset.json` into `out_dir` (idempotent unless overwrite).

    Raises `MissingExtraError` (before writing anything) when reportlab is not installed.
    """
    require("reportlab", feature="the sample corpus", package="reportlab", extra="samples")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    corpus = SampleCorpus(pdf_dir=out, qa=list(QUESTIONS))
    for name, draw in DOCUMENTS.items():
        target = out / name
        if overwrite or not target.exists():
            partial = target.with_suffix(".pdf.part")
            draw(partial)
            partial.replace(target)
        corpus.files.append(target)
    write_rag_dataset(corpus.dataset_path, corpus.qa)
    return corpus


if __name__ == "__main__":  # pragma: no cover
    import sys

    result = generate_sample_corpus(sys.argv[1] if len(sys.argv) > 1 else "data/sample_corpus/pdf")
    print("\n".join(str(f) for f in result.files))
