"""Layout fuzz: boxes out of the page, empty, inverted, NaN and infinite, on rotated and mixed-size pages.

Whatever boxes a page's parts come with — from a PDF's text layer and drawings, from OCR, from a broken file —
the layout that comes out has every box finite, ordered (x1 <= x2, y1 <= y2) and on its page image, and every
crop of a page image (figure OCR) is one PIL accepts. `geometry.clamp_box` is the one rule (see its doc):
non-finite boxes are dropped, inverted ones normalised, boxes clamped to the page and dropped when nothing of
them is on it.
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from PIL import Image

from search_engine.layout.compose import compose
from search_engine.layout.geometry import clamp_box, crop_box
from search_engine.layout.ocr import layout_from_ocr_lines
from search_engine.layout.parts import Block, Figure, Line, Piece, Table
from search_engine.page_layout import PageLayout
from search_engine.text_extraction import OcrLine, OcrWord

NAN, INF = float("nan"), float("inf")
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

page_sizes = st.tuples(st.floats(1.0, 5000.0), st.floats(1.0, 5000.0))
any_float = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([NAN, INF, -INF, 0.0, -0.0]),
                      st.floats(-1e4, 1e4))


@st.composite
def boxes(draw, width: float, height: float):
    """A box of one kind: on the page, partly off it, wholly off it, empty, inverted, with NaN/inf, or any floats."""
    kind = draw(st.sampled_from(["inside", "partly_off", "off", "empty", "inverted", "non_finite", "any"]))
    x1, x2 = sorted(draw(st.floats(0, width)) for _ in range(2))
    y1, y2 = sorted(draw(st.floats(0, height)) for _ in range(2))
    if kind == "inside":
        return (x1, y1, x2, y2)
    if kind == "partly_off":
        return (x1 - draw(st.floats(0, 2 * width)), y1, x2 + draw(st.floats(0, 2 * width)), y2 + height)
    if kind == "off":
        dx, dy = draw(st.sampled_from([(1, 0), (-1, 0), (0, 1), (0, -1)]))
        shift = (width * dx * draw(st.floats(1.01, 5)), height * dy * draw(st.floats(1.01, 5)))
        return (x1 + shift[0], y1 + shift[1], x2 + shift[0], y2 + shift[1])
    if kind == "empty":
        return draw(st.sampled_from([(x1, y1, x1, y2), (x1, y1, x2, y1), (x1, y1, x1, y1), (0.0, 0.0, 0.0, 0.0)]))
    if kind == "inverted":
        return (x2, y2, x1, y1)
    if kind == "non_finite":
        box = [x1, y1, x2, y2]
        box[draw(st.integers(0, 3))] = draw(st.sampled_from([NAN, INF, -INF]))
        return tuple(box)
    return tuple(draw(any_float) for _ in range(4))


def _valid(box, width: float, height: float) -> bool:
    x1, y1, x2, y2 = box
    return all(math.isfinite(v) for v in box) and 0 <= x1 <= x2 <= width and 0 <= y1 <= y2 <= height


def _assert_layout_on_page(layout: PageLayout) -> None:
    found = [r.box for r in layout.regions] + [c.box for r in layout.regions for c in r.cells] + [
        lb.box for r in layout.regions for lb in r.labels]
    for box in found:
        assert _valid(box, layout.width, layout.height), (box, layout.width, layout.height)
    json.dumps(layout.to_dict(), allow_nan=False)  # stored as strict JSON: no NaN, no inf
    assert len({r.region_id for r in layout.regions}) == len(layout.regions)


# ---- clamp_box and crop_box ---------------------------------------------------------------------------------


@FUZZ
@given(st.data(), page_sizes)
def test_clamp_box_puts_every_box_on_the_page_or_drops_it(data, size):
    width, height = size
    box = data.draw(boxes(width, height))
    clamped = clamp_box(box, width, height)
    if clamped is None:  # non-finite, or nothing of it on the page
        finite = all(math.isfinite(v) for v in box)
        if finite:
            lo_x, hi_x = sorted(box[0::2])
            lo_y, hi_y = sorted(box[1::2])
            assert hi_x <= 0 or lo_x >= width or hi_y <= 0 or lo_y >= height
        return
    assert _valid(clamped, width, height)
    assert clamp_box(clamped, width, height) == clamped  # idempotent
    assert clamp_box((box[2], box[3], box[0], box[1]), width, height) == clamped  # corners in either order
    if _valid(box, width, height):
        assert clamped == tuple(float(v) for v in box)  # a box on the page is left as it is
    had_area = box[0] != box[2] and box[1] != box[3]
    if had_area:
        assert clamped[2] > clamped[0] and clamped[3] > clamped[1]  # a box with an area keeps one, or is dropped


def test_clamp_box_documented_cases():
    assert clamp_box((10, 20, 30, 40), 100, 100) == (10, 20, 30, 40)
    assert clamp_box((30, 40, 10, 20), 100, 100) == (10, 20, 30, 40)  # inverted: normalised
    assert clamp_box((-10, 50, 150, 120), 100, 100) == (0, 50, 100, 100)  # partly off: clamped
    assert clamp_box((140, 10, 180, 20), 100, 100) is None  # wholly off (the figure past the edge of the issue)
    assert clamp_box((100, 10, 180, 20), 100, 100) is None  # touching the page with an edge only
    assert clamp_box((50, 50, 50, 50), 100, 100) == (50, 50, 50, 50)  # empty, on the page: kept
    assert clamp_box((NAN, 0, 10, 10), 100, 100) is None and clamp_box((0, 0, INF, 10), 100, 100) is None
    assert clamp_box((0, 0, 10), 100, 100) is None and clamp_box(("a", 0, 1, 1), 100, 100) is None
    with pytest.raises(ValueError):
        clamp_box((0, 0, 1, 1), 0, 100)
    with pytest.raises(ValueError):
        clamp_box((0, 0, 1, 1), NAN, 100)


@FUZZ
@given(st.data(), page_sizes, st.tuples(st.integers(1, 3000), st.integers(1, 3000)), st.integers(0, 20),
       st.integers(1, 16))
def test_crop_box_is_always_a_crop_pil_accepts(data, layout_size, image_size, pad, min_side):
    box = data.draw(boxes(*layout_size))
    scale = (image_size[0] / layout_size[0], image_size[1] / layout_size[1])
    window = crop_box(box, scale, image_size, pad=pad, min_side=min_side)
    if window is None:
        return
    left, top, right, bottom = window
    assert all(isinstance(v, int) for v in window)
    assert 0 <= left < right <= image_size[0] and 0 <= top < bottom <= image_size[1]
    assert right - left >= min_side and bottom - top >= min_side
    image = Image.new("L", image_size)
    assert image.crop(window).size == (right - left, bottom - top)


# ---- composition of parts with any boxes --------------------------------------------------------------------

WORDS = ["Revenue", "2024", "Figure 2: Sales by region", "Table 1. Ports", "• first item", "42", "12.5%",
         "Harbour Authority Annual Review", "North", "the pilot boats were renewed during the year", "Page 3", ""]


@st.composite
def pages_of_parts(draw):
    """A page size, an image size and its scale, and blocks, tables and figures with boxes of every kind."""
    width, height = draw(page_sizes)
    image_w, image_h = draw(st.integers(1, 2400)), draw(st.integers(1, 2400))

    def piece():
        return Piece(draw(st.sampled_from(WORDS)), draw(boxes(width, height)),
                     draw(st.one_of(st.floats(1, 40), st.sampled_from([NAN, INF, 0.0]))), draw(st.booleans()))

    def line():
        pieces = [piece() for _ in range(draw(st.integers(0, 3)))]
        return Line(" ".join(p.text for p in pieces) or draw(st.sampled_from(WORDS)), draw(boxes(width, height)),
                    draw(st.one_of(st.floats(1, 40), st.sampled_from([NAN, INF]))), draw(st.booleans()), pieces,
                    draw(st.sampled_from([0.0, 90.0, -90.0, 45.0, NAN])))

    blocks = [Block(k + 1, [line() for _ in range(draw(st.integers(1, 4)))]) for k in range(draw(st.integers(0, 6)))]
    tables = []
    for _ in range(draw(st.integers(0, 2))):
        cols = draw(st.integers(1, 4))
        rows = [[(draw(st.sampled_from(WORDS)), draw(boxes(width, height))) for _ in range(cols)]
                for _ in range(draw(st.integers(1, 4)))]
        tables.append(Table(draw(boxes(width, height)), rows, draw(st.integers(0, 2)), draw(st.integers(0, 1)),
                            ruled=draw(st.booleans())))
    figures = [Figure(draw(boxes(width, height)), [line() for _ in range(draw(st.integers(0, 2)))])
               for _ in range(draw(st.integers(0, 3)))]
    return width, height, (image_w, image_h), blocks, tables, figures


@FUZZ
@given(pages_of_parts(), st.sampled_from(["pdf", "ocr"]))
def test_composed_layouts_have_every_box_on_the_page_image(page, source):
    width, height, image_size, blocks, tables, figures = page
    scale = (image_size[0] / width, image_size[1] / height)
    layout = compose("doc_1", blocks, tables, figures, width, height, scale, image_size, frozenset({"page #"}), source)
    assert (layout.width, layout.height) == image_size
    _assert_layout_on_page(layout)
    for region in layout.regions:  # a table keeps its grid: every cell of a row has its place
        if region.kind == "table":
            assert {c.row for c in region.cells} == set(range(max(c.row for c in region.cells) + 1))


@pytest.mark.parametrize("size", [(0.0, 842.0), (595.0, NAN), (-595.0, 842.0), (INF, 842.0)])
def test_a_page_without_a_size_is_an_error_not_a_layout_of_nonsense(size):
    block = Block(1, [Line("text", (10, 10, 50, 20), 10.0, False)])
    with pytest.raises(ValueError, match="finite positive size"):
        compose("doc_1", [block], [], [], size[0], size[1], (1.0, 1.0), (100, 100), frozenset(), "pdf")


@FUZZ
@given(st.tuples(st.integers(1, 2000), st.integers(1, 2000)), st.lists(st.tuples(
    st.integers(-3000, 5000), st.integers(-3000, 5000), st.integers(-3000, 5000), st.integers(-3000, 5000),
    st.sampled_from(WORDS[:-1]), st.integers(0, 3), st.integers(0, 2)), max_size=12))
def test_ocr_layouts_with_lines_off_the_image_stay_on_it(size, raw):
    lines = [OcrLine(text, (x1, y1, x2, y2), 80.0, [OcrWord(w, (x1, y1, x2, y2)) for w in text.split()], block, par)
             for x1, y1, x2, y2, text, block, par in raw]
    layout = layout_from_ocr_lines(lines, "scan_1", size)
    _assert_layout_on_page(layout)


# ---- real PDF pages: rotated, of mixed sizes, with content off the page -------------------------------------


def _chart_png() -> bytes:
    import io

    from PIL import ImageDraw

    image = Image.new("RGB", (120, 80), "white")
    ImageDraw.Draw(image).rectangle((10, 10, 110, 70), outline="black", width=3)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


CHART = _chart_png()
frac = st.floats(-1.5, 2.5)


@st.composite
def pdf_pages(draw):
    """Page specs: size, /Rotate, and items (text, pictures, drawn rectangles, rules) anywhere in [-1.5, 2.5]
    times the page's size — on it, across its edges, or off it."""
    pages = []
    for _ in range(draw(st.integers(1, 3))):
        width, height = draw(st.floats(40, 2000)), draw(st.floats(40, 2000))
        items = []
        for _ in range(draw(st.integers(1, 8))):
            kind = draw(st.sampled_from(["text", "image", "rect", "rule"]))
            x1, x2 = sorted((draw(frac) * width, draw(frac) * width))
            y1, y2 = sorted((draw(frac) * height, draw(frac) * height))
            assume(x2 - x1 > 1 and y2 - y1 > 1)
            items.append((kind, x1, y1, x2, y2, draw(st.sampled_from(WORDS[:-1]))))
        pages.append((width, height, draw(st.sampled_from([0, 90, 180, 270])), items))
    return pages


def _build(pages) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    for width, height, rotation, items in pages:
        page = doc.new_page(width=width, height=height)
        for kind, x1, y1, x2, y2, text in items:
            rect = pymupdf.Rect(x1, y1, x2, y2)
            if kind == "text":
                page.insert_text((x1, y1), text, fontsize=max(4.0, min(30.0, (y2 - y1) / 4)))
            elif kind == "image":
                page.insert_image(rect, stream=CHART)
            elif kind == "rect":
                for k in range(4):  # a small cluster of drawn shapes: a figure candidate
                    page.draw_rect(pymupdf.Rect(x1 + k, y1 + k, x1 + (x2 - x1) * (k + 1) / 4, y2), fill=(0.2, 0.4, 0.7))
            else:
                page.draw_line((x1, y1), (x2, y1))
                page.draw_line((x1, y1), (x1, y2))
        page.set_rotation(rotation)
    return doc.tobytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(pdf_pages(), st.sampled_from([72, 144]))
def test_pdf_layouts_of_rotated_mixed_size_pages_stay_on_their_images(monkeypatch_session, pages, dpi):
    """Every page's layout, and every figure crop OCR would read of its rendering, is on the page image."""
    import pymupdf

    from search_engine import figure_ocr
    from search_engine.layout.margins import running_texts
    from search_engine.layout.pdf import pdf_page_layout

    crops: list[tuple[int, int]] = []

    def ocr_lines(crop, *args, **kwargs):  # reads one line across the whole crop and past it (no tesseract: speed)
        crops.append(crop.size)
        w, h = crop.size
        return [OcrLine("North 42", (-5, -5, w + 9, h + 9), 90.0, [OcrWord("North", (-5, -5, w // 2, h + 9)),
                                                                OcrWord("42", (w // 2 + 40, -5, w + 9, h + 9))])]

    monkeypatch_session.setattr(figure_ocr, "ocr_lines", ocr_lines)
    with pymupdf.open(stream=_build(pages), filetype="pdf") as doc:
        running = running_texts(doc)
        for number in range(doc.page_count):
            pixmap = doc[number].get_pixmap(dpi=dpi)  # as rendered: /Rotate applied
            image = Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples)
            layout = pdf_page_layout(doc[number], f"doc_{number + 1}", image.size, running)
            _assert_layout_on_page(layout)
            figure_ocr.read_figures(layout, image, "eng", "")
            _assert_layout_on_page(layout)


@pytest.fixture(scope="module")
def monkeypatch_session():
    """A monkeypatch that hypothesis' repeated examples may share (the function-scoped one may not)."""
    patcher = pytest.MonkeyPatch()
    yield patcher
    patcher.undo()
