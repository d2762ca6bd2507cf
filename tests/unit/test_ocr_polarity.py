"""Light text on dark bands (slide title bars, dark frames) is read, once, in its place on the page."""

import shutil

import pytest
from PIL import Image, ImageDraw, ImageFont

from search_engine.ocr_polarity import dark_bands
from search_engine.text_extraction import ocr_reading

needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs the tesseract binary")


def _slide(title: str = "Results", title_bar: str = "#23373b", background: str = "#fafafa") -> Image.Image:
    """A frame with a one-word title on a dark title bar and one caption line: tesseract 5.3 alone does
    not read that title at all (it reads the caption)."""
    image = Image.new("RGB", (1000, 750), background)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 999, 80), fill=title_bar)
    draw.text((28, 20), title, fill="white", font=ImageFont.load_default(size=30))
    draw.text((260, 580), "Figure 1: Rotated square from an example.", fill="black",
              font=ImageFont.load_default(size=24))
    return image


def test_a_title_bar_is_a_dark_band_and_a_white_page_has_none():
    assert dark_bands(_slide()) == [(0, 0, 1000, 81)]
    assert dark_bands(Image.new("RGB", (800, 600), "white")) == []


def test_a_dark_page_is_one_band_and_a_side_panel_is_a_column_band():
    assert dark_bands(Image.new("RGB", (800, 600), "#101010")) == [(0, 0, 800, 600)]
    page = Image.new("RGB", (800, 600), "white")
    ImageDraw.Draw(page).rectangle((0, 0, 149, 599), fill="navy")
    assert dark_bands(page) == [(0, 0, 150, 600)]


def test_thin_rules_are_not_bands():
    page = Image.new("RGB", (800, 600), "white")
    ImageDraw.Draw(page).rectangle((0, 100, 799, 104), fill="black")
    assert dark_bands(page) == []


@needs_tesseract
def test_the_title_on_a_dark_bar_is_read_once_and_first():
    texts = [line.text for line in ocr_reading(_slide(), "eng")]
    assert texts[0] == "Results"
    assert sum("Results" in text for text in texts) == 1
    assert any("Rotated square" in text for text in texts)


@needs_tesseract
def test_a_title_the_normal_pass_reads_is_not_read_twice():
    texts = [line.text for line in ocr_reading(_slide(title="Quarterly Figures Overview"), "eng")]
    assert sum("Quarterly" in text for text in texts) == 1


@needs_tesseract
def test_light_text_on_a_dark_page_is_read():
    texts = " ".join(line.text for line in ocr_reading(_slide(title_bar="#0b0b0b", background="#151515"), "eng"))
    assert "Results" in texts
