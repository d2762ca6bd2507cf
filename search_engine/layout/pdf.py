"""Born-digital PDF pages → layouts (`pdf_page_layout`, `pdf_document_layouts`).

PyMuPDF's blocks, lines and spans give paragraphs, and font size and weight tell headings from body text
(`text_layer`); `Page.find_tables` reads ruled tables (cells with row and column), the alignment of their text
the unruled ones (`tables`); images and clusters of vector drawings are figures, and the short text printed on
or right around them (axis labels, tick values, legends, callouts) is the figure's text (`figures`); a caption
is the block right below or above a figure or table that starts with a label and a number (`captions`). Text
repeated in the top or bottom margin band of several pages of a document, or printed in the outermost band of
a page, is a running header or footer (`margins`).

Boxes are converted from PDF points to the pixels of the stored page image (`image_size`), so every consumer
(search hits, readers, the demo's crops) uses one unit.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from search_engine.layout.compose import compose, on_page
from search_engine.layout.figures import pdf_figures
from search_engine.layout.geometry import inside, overlap
from search_engine.layout.margins import running_texts
from search_engine.layout.parts import Figure, Table
from search_engine.layout.tables import aligned_tables, has_rulings, pdf_ruled_tables, text_columns
from search_engine.layout.text_layer import pdf_blocks, upright
from search_engine.page_layout import PageLayout

if TYPE_CHECKING:  # pragma: no cover
    import pymupdf


def pdf_page_layout(page: pymupdf.Page, page_id: str, image_size: tuple[int, int],
                    running: frozenset[str] = frozenset(),
                    on_error: Callable[[str, Exception], None] | None = None) -> PageLayout:
    """The page's regions from its text layer (see the module doc), boxes in pixels of an image of the page
    rendered at `image_size` (width, height), clamped to it (`compose`). `running`: the document's
    `running_texts`, so headers and footers repeated across pages are marked even outside the outermost margin
    band. A `/Rotate` page is read as it is displayed (`upright`).

    `on_error(step, exception)`: where a failure of one finder goes — "tables" or "figures" (a malformed
    drawing, PyMuPDF's table finder raising): the page is then composed without what that finder would
    have found, and keeps its paragraphs. Without it, such a failure raises, as any other does."""
    upright(page)
    width, height = page.rect.width, page.rect.height
    blocks, _, _ = on_page(pdf_blocks(page), [], [], width, height)  # before the finders: they trust the boxes

    def found(step: str, finder: Callable[[], list[Table]] | Callable[[], list[Figure]]) -> list:
        if on_error is None:
            return finder()
        try:
            return finder()
        except Exception as exc:  # noqa: BLE001 - one finder failing costs the page what it finds, not its text
            on_error(step, exc)
            return []

    tables: list[Table] = found("tables", lambda: pdf_ruled_tables(page, blocks) if has_rulings(page) else [])
    figures: list[Figure] = found("figures", lambda: pdf_figures(page, tables))

    def unruled() -> list[Table]:
        # unruled tables among the remaining lines; labels printed on a chart (ticks, legends) are not a table
        taken = [t.box for t in tables] + [f.box for f in figures]
        free_lines = [line for b in blocks for line in b.lines if not any(inside(line.box, box) for box in taken)]
        more = aligned_tables(free_lines)
        # a table in one column of a two-column page: its rows share their height with the other column's
        # prose, which the page-wide run joins into the same printed rows; each column alone shows it
        for column in text_columns(free_lines):
            more += [t for t in aligned_tables(column) if not any(overlap(t.box, o.box) > 0 for o in tables + more)]
        return more

    tables += found("tables", unruled)
    scale = (image_size[0] / max(width, 1e-6), image_size[1] / max(height, 1e-6))
    return compose(page_id, blocks, tables, figures, width, height, scale, image_size, running, "pdf")


def pdf_document_layouts(path: str, page_ids: Sequence[str], image_sizes: Sequence[tuple[int, int]],
                         first_page: int = 1) -> list[PageLayout]:
    """Layouts of pages `first_page ..` of a PDF (one per page id), running headers found over the whole
    document."""
    import pymupdf

    with pymupdf.open(path) as doc:
        running = running_texts(doc)
        return [pdf_page_layout(doc[first_page - 1 + k], page_id, size, running)
                for k, (page_id, size) in enumerate(zip(page_ids, image_sizes, strict=True))]
