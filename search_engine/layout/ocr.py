"""Scans, slides and photos → layouts from one OCR reading (`layout_from_ocr_lines`, `ocr_page_layout`).

Tesseract's blocks and paragraphs are regions, lines printed markedly larger than the page's body lines are
headings, and tables are found by the alignment of their text, as on a PDF page (`tables.aligned_tables`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from search_engine.layout.compose import compose, on_page
from search_engine.layout.parts import Block, Line, Piece, ocr_pieces
from search_engine.layout.tables import aligned_tables
from search_engine.page_layout import PageLayout

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

    from search_engine.text_extraction import OcrLine


def layout_from_ocr_lines(lines: Sequence[OcrLine], page_id: str, image_size: tuple[int, int]) -> PageLayout:
    """The page's regions from one OCR reading (`text_extraction.ocr_reading`): paragraphs by Tesseract's
    block and paragraph, headings by line height, tables by column alignment, margins by position."""
    blocks: list[Block] = []
    index: dict[tuple[int, int], Block] = {}
    for line in lines:
        if not line.text.strip():
            continue
        key = (line.block, line.paragraph)
        height = float(max(1, line.box[3] - line.box[1]))
        pieces = ocr_pieces(line) if line.words else [Piece(line.text, tuple(map(float, line.box)), height)]  # type: ignore[arg-type]
        entry = Line(line.text, tuple(float(v) for v in line.box), height, False, pieces)  # type: ignore[arg-type]
        if key not in index:
            index[key] = Block(len(blocks) + 1, [])
            blocks.append(index[key])
        index[key].lines.append(entry)
    width, height = image_size
    # on the image before the table finder, which trusts the boxes (a line read past the edge, a box mapped back
    # from a crop: `compose.on_page`)
    blocks, _, _ = on_page(blocks, [], [], float(width), float(height))
    for block in blocks:
        block.lines.sort(key=lambda ln: (ln.box[1], ln.box[0]))
    tables = aligned_tables([line for b in blocks for line in b.lines])
    return compose(page_id, blocks, tables, [], float(width), float(height), (1.0, 1.0), image_size,
                   frozenset(), "ocr")


def ocr_page_layout(image: Image.Image, page_id: str, lang: str | None = None) -> PageLayout:
    """OCR the image once (`lang` as `text_extraction.resolve_ocr_lang`) and return its layout."""
    from search_engine.text_extraction import ocr_reading

    return layout_from_ocr_lines(ocr_reading(image, lang), page_id, image.size)
