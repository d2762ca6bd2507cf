"""A born-digital PDF page whose chart is a picture: the categories and values exist only as pixels.

Real reports paste charts as images (exported from a spreadsheet, a screenshot); their text layer holds
the page's paragraphs and caption but none of the chart's words. Drawn with PIL and PyMuPDF, offline.
"""
from __future__ import annotations

import io
from pathlib import Path

from PIL import Image, ImageDraw

from search_engine.sample_corpus import load_font

CATEGORIES = (("North", 42), ("South", 17), ("East", 29))
CAPTION = "Figure 1: Units sold by region"


def raster_chart_png() -> bytes:
    """A bar chart as a PNG: a baseline, one bar per category, its value above it and its name below."""
    image = Image.new("RGB", (900, 520), "white")
    draw = ImageDraw.Draw(image)
    font = load_font(30)
    draw.line((80, 440, 860, 440), fill="black", width=3)
    for k, (name, value) in enumerate(CATEGORIES):
        x = 140 + 250 * k
        draw.rectangle((x, 440 - 8 * value, x + 120, 440), fill=(70, 110, 200))
        draw.text((x + 10, 440 - 8 * value - 42), str(value), fill="black", font=font)
        draw.text((x, 455), name, fill="black", font=font)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def build_raster_chart_pdf(path: str | Path) -> Path:
    """One A4 page: a heading, a paragraph, the chart as an image and its caption (text layer)."""
    import pymupdf

    path = Path(path)
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 90), "Regional sales review", fontsize=16)
    page.insert_textbox(pymupdf.Rect(72, 110, 523, 200), "Sales by region in the last quarter are shown in the "
                        "chart below; the figures are thousands of units.", fontsize=11)
    page.insert_image(pymupdf.Rect(72, 220, 523, 480), stream=raster_chart_png())
    page.insert_text((72, 500), CAPTION, fontsize=10)
    doc.save(path)
    doc.close()
    return path
