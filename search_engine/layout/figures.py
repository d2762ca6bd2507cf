"""Figures: images and clusters of vector drawings on a PDF page (`pdf_figures`), the short text printed on or
right around them (axis labels, tick values, legends, callouts: `figure_texts`, `labels_not_tables`), and,
where a figure's words are pixels, what OCR reads of its crop (`unread_figures`, `add_figure_reading`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from search_engine.layout.captions import is_caption
from search_engine.layout.geometry import area, clamp_box, gap, grow, inside, overlap, union
from search_engine.layout.parts import Block, Figure, Line, Piece, Table, ocr_pieces
from search_engine.page_layout import Box, Label, PageLayout, Region

if TYPE_CHECKING:  # pragma: no cover
    import pymupdf

    from search_engine.text_extraction import OcrLine


# Clustering vector paths into figures is quadratic in the number of paths: past this many on one page
# (a map, a scatter plot of thousands of points) the page's drawings are taken as one figure.
MAX_CLUSTERED_PATHS = 1500
# A drawing covering at least this share of the page is its background (a slide theme's fill, a tinted
# page), not part of a figure: the same bound above which a figure candidate is taken for the page itself.
BACKGROUND_SHARE = 0.85


def _skeleton(path: Box, cluster: Box) -> bool:
    """Whether a drawn path is the frame of its cluster rather than its content: it spans (nearly) the
    whole cluster's width — a box's outline or fill, a title band, a horizontal axis — or it is a thin
    line that is long (an axis, a gridline, a table's or a block's rule) or lies on the cluster's edge
    (a frame's or a shadow's pieces). A tall filled shape is content (a column chart's highest bar).
    What is left in a chart or diagram is its bars,
    curves, markers, ticks, arrows and shapes; what is left in a framed block of text is nothing."""
    width, height = max(cluster[2] - cluster[0], 1e-6), max(cluster[3] - cluster[1], 1e-6)
    w, h = path[2] - path[0], path[3] - path[1]
    if w >= 0.9 * width:  # a band, a fill or outline behind the rest, a horizontal axis
        return True
    # a horizontal line: a long rule, or a piece of the top or bottom edge (a shadow's steps); a vertical
    # line likewise, on the left or right edge (a dot-sized piece is tested both ways)
    horizontal = h <= 2 and (w >= 0.3 * width or min(abs(path[1] - cluster[1]), abs(path[3] - cluster[3])) <= 2)
    vertical = w <= 2 and (h >= 0.3 * height or min(abs(path[0] - cluster[0]), abs(path[2] - cluster[2])) <= 2)
    return horizontal or vertical


def pdf_figures(page: pymupdf.Page, tables: list[Table]) -> list[Figure]:
    """Images and clusters of vector drawings large enough to be a picture or a chart, not a table's
    rulings, not a full-page background; each box clamped to the page (`clamp_box`), none that lies off it."""
    page_box = tuple(page.rect)
    page_area = area(page_box)
    candidates: list[Box] = []
    for info in page.get_image_info():
        box = tuple(info["bbox"])
        candidates.append(box)
    def drawn_on_the_page(found: list) -> list:
        # a fill behind most of the page (a slide's background, a coloured page) touches every drawing on
        # it, so clustering would join them all into one page-sized cluster that is no figure
        return [p for p in found if area(tuple(p["rect"])) < BACKGROUND_SHARE * page_area]

    try:
        paths = drawn_on_the_page(page.get_cdrawings())
        if len(paths) > MAX_CLUSTERED_PATHS:  # a map or a plot of many points: one picture
            clusters = [union(tuple(p["rect"]) for p in paths)]
        else:
            paths = drawn_on_the_page(page.get_drawings())
            clusters = page.cluster_drawings(drawings=paths) if paths else []
    except Exception:  # noqa: BLE001 - a malformed drawing must not cost the page its text regions
        paths, clusters = [], []
    for cluster in clusters:
        # a chart or diagram is drawn with several paths of its own; a cluster of frames, bands and rules
        # only (a beamer block around text, a banner behind a title, a table's rules) is decoration
        box = tuple(cluster)
        drawn = sum(1 for path in paths
                    if inside(tuple(path["rect"]), grow(box, 1.0), 0.9) and not _skeleton(tuple(path["rect"]), box))
        if drawn >= 3:
            candidates.append(box)
    figures: list[Figure] = []
    for candidate in candidates:
        # the part on the page: a picture placed past the page edge (slides keep off-canvas pictures, a
        # page cropped from a larger one) shows only that part, or nothing; NaN boxes of a broken file go
        on_page = clamp_box(candidate, page.rect.width, page.rect.height)
        if on_page is None:
            continue
        box = on_page
        w, h = box[2] - box[0], box[3] - box[1]
        if w < 0.08 * page_box[2] or h < 0.04 * page_box[3] or area(box) > BACKGROUND_SHARE * page_area:
            continue
        if any(overlap(box, t.box) > 0.5 * area(box) for t in tables):
            continue
        for figure in figures:
            if overlap(box, figure.box) > 0:
                figure.box = union([figure.box, box])
                break
        else:
            figures.append(Figure(box))
    return figures


def figure_texts(figures: list[Figure], blocks: list[Block], used: set[int]) -> None:
    """Short blocks printed on a figure or right beside it (labels, ticks, legend) become its text; the
    figure's box grows to hold them, and grows again for labels next to those (a rotated axis title)."""
    for figure in figures:
        changed = True
        while changed:
            changed = False
            for block in blocks:
                if block.order in used or block.words > 12 or is_caption(block.text):
                    continue
                size = max(line.size for line in block.lines)
                if inside(block.box, figure.box) or gap(block.box, figure.box) <= 2.0 * size:
                    figure.texts.extend(block.lines)
                    figure.box = union([figure.box, block.box])
                    figure.order = min(figure.order, block.order)
                    used.add(block.order)
                    changed = True


def labels_not_tables(tables: list[Table], figures: list[Figure]) -> list[Table]:
    """Tables found by alignment that lie mostly on a figure are its labels (a pie's callouts in two
    columns, a legend in a grid): their cells become the figure's labels, each with its box."""
    kept = []
    for table in tables:
        host = next((f for f in figures if not table.ruled and overlap(table.box, f.box) > 0.5 * area(table.box)),
                    None)
        if host is None:
            kept.append(table)
            continue
        for row in table.rows:
            for text, box in row:
                if text:
                    size = max(1.0, box[3] - box[1])
                    host.texts.append(Line(text, box, size, False, [Piece(text, box, size)]))
        host.box = union([host.box, table.box])
    return kept


def unread_figures(layout: PageLayout) -> list[Region]:
    """The figures of a text-layer page that carry no text of their own: pictures whose words (a raster
    chart's ticks and legend, a screenshot's labels, a scanned diagram's callouts) are pixels, which only
    OCR can read (`add_figure_reading`). Largest first, so a cap on OCR time reads the main figures."""
    if layout.source != "pdf":
        return []
    found = [r for r in layout.regions if r.kind == "figure" and not r.text.strip() and not r.labels]
    return sorted(found, key=lambda r: -area(r.box))


def add_figure_reading(region: Region, lines: Sequence[OcrLine], origin: tuple[float, float]) -> None:
    """Lines OCR read from a crop of the page image whose top-left corner is `origin` (page-image pixels)
    become the figure's labels (pieces split at wide gaps, as a chart prints them) and its text, so search
    and the chart reader see a raster figure's words as they see a vector chart's."""
    dx, dy = origin
    labels: list[Label] = []
    texts: list[str] = []
    for line in lines:
        pieces = ocr_pieces(line) if line.words else [Piece(line.text, tuple(map(float, line.box)), 1.0)]  # type: ignore[arg-type]
        for piece in pieces:
            if piece.text.strip():
                x1, y1, x2, y2 = piece.box
                labels.append(Label(piece.text.strip(), (round(x1 + dx, 1), round(y1 + dy, 1),
                                                         round(x2 + dx, 1), round(y2 + dy, 1))))
        if line.text.strip():
            texts.append(line.text.strip())
    region.labels = labels
    region.text = "\n".join(texts)
