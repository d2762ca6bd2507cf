"""Words inside the pictures of a text-layer PDF page are read by OCR (search_engine.figure_ocr)."""
from __future__ import annotations

import pytest
from PIL import Image

from search_engine.figure_ocr import MAX_FIGURES_READ, figure_lang, read_figures
from search_engine.layout.figures import unread_figures
from search_engine.layout.pdf import pdf_document_layouts
from testkit.raster_chart_pdf import CAPTION, CATEGORIES, build_raster_chart_pdf

pytest.importorskip("pytesseract")

def _page_with_picture(path) -> tuple[str, Image.Image]:
    import pymupdf

    built = build_raster_chart_pdf(path)
    with pymupdf.open(built) as doc:
        pixmap = doc[0].get_pixmap(dpi=144)
    return str(built), Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples)


def test_a_raster_charts_labels_become_the_figures_labels_and_text(tmp_path):
    path, image = _page_with_picture(tmp_path / "report.pdf")
    layout = pdf_document_layouts(path, ["report_1"], [image.size])[0]
    figure = next(r for r in layout.regions if r.kind == "figure")
    assert figure.caption == CAPTION and not figure.labels  # the text layer has no words
    assert unread_figures(layout) == [figure]

    added = read_figures(layout, image, "eng", "Regional sales review")
    labels = {label.text: label.box for label in figure.labels}
    for name, value in CATEGORIES:
        assert name in labels and str(value) in labels, (name, sorted(labels))
        assert name in added and name in figure.text
    # each label's box is where it is printed on the page image, inside the figure
    x1, y1, x2, y2 = figure.box
    for box in labels.values():
        assert x1 - 5 <= box[0] < box[2] <= x2 + 5 and y1 - 5 <= box[1] < box[3] <= y2 + 5
    north, south = labels["North"], labels["South"]
    assert north[0] < south[0] and abs(north[1] - south[1]) < 10  # the categories sit side by side on one row
    assert unread_figures(layout) == []  # read once


def test_a_page_without_pictures_costs_no_ocr(tmp_path):
    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((72, 90), "Only words here.", fontsize=12)
    doc.save(tmp_path / "plain.pdf")
    layout = pdf_document_layouts(str(tmp_path / "plain.pdf"), ["plain_1"], [(1191, 1684)])[0]
    assert read_figures(layout, Image.new("RGB", (1191, 1684), "white"), "eng", "Only words here.") == ""


def test_the_figure_language_follows_the_pages_script():
    assert figure_lang("deu", "anything") == "deu"
    assert figure_lang("auto", "Quarterly revenue") == "eng"
    assert MAX_FIGURES_READ >= 1
