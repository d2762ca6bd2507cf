"""The parts a page is read into before it is composed: pieces, lines and blocks of text, tables, figures.

Both readers (`text_layer` for a PDF page, `ocr` for a scan) produce them in one box convention (page units),
so the finders of tables, figures and margins and the composer work on either source alike. Also how the
parts' text reads: a paragraph's lines as one text (`join_lines`), a cell that is a number (`is_numeric`),
and an OCR line's words grouped into pieces (`ocr_pieces`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from search_engine.layout.geometry import union
from search_engine.page_layout import Box

if TYPE_CHECKING:  # pragma: no cover
    from search_engine.text_extraction import OcrLine


NUMERIC = re.compile(r"^[\s(]*[-+−–]?[$€£¥%]?\s*[\d.,]+\s*[%‰kKmMbB]?[)\s]*$")


@dataclass
class Piece:
    """A run of text on one printed line without a wide gap inside: a table-cell candidate."""

    text: str
    box: Box
    size: float
    bold: bool = False


@dataclass
class Line:
    text: str
    box: Box
    size: float  # font size (PDF) or line height (OCR), in page units
    bold: bool
    pieces: list[Piece] = field(default_factory=list)
    angle: float = 0.0  # degrees counter-clockwise of the baseline (PDF text layer; OCR lines are level)


@dataclass
class Block:
    """A paragraph-like group of lines in reading order (PyMuPDF block or Tesseract paragraph)."""

    order: int
    lines: list[Line]

    @property
    def box(self) -> Box:
        return union(line.box for line in self.lines)

    @property
    def text(self) -> str:
        return join_lines(line.text for line in self.lines)

    @property
    def words(self) -> int:
        return sum(len(line.text.split()) for line in self.lines)


@dataclass
class Table:
    box: Box
    rows: list[list[tuple[str, Box]]]  # rows of (cell text, cell box); "" for an empty cell
    header_rows: int
    header_cols: int
    order: float = 0.0
    caption: str = ""
    ruled: bool = False  # found by its rulings (PyMuPDF), not by the alignment of its text


@dataclass
class Figure:
    box: Box
    texts: list[Line] = field(default_factory=list)
    order: float = 0.0
    caption: str = ""


_CJK_END = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]$")


def join_lines(lines: Iterable[str]) -> str:
    """Lines of a paragraph as one text: hyphenated line ends are rejoined, CJK lines are joined without a space."""
    out = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if not out:
            out = line
        elif out.endswith("-") and len(out) > 1 and out[-2].isalpha() and line[:1].islower():
            out = out[:-1] + line
        elif _CJK_END.search(out) and _CJK_END.search(line[:1]):
            out += line
        else:
            out += " " + line
    return out


def is_numeric(text: str) -> bool:
    return bool(NUMERIC.match(text)) and any(c.isdigit() for c in text)


def ocr_pieces(line: OcrLine) -> list[Piece]:
    """A line's words grouped into pieces: a gap wider than the line's height starts a new piece."""
    height = max(1, line.box[3] - line.box[1])
    pieces: list[Piece] = []
    for word in line.words:
        if pieces and word.box[0] - pieces[-1].box[2] <= 1.0 * height:
            prev = pieces[-1]
            pieces[-1] = Piece(prev.text + " " + word.text, union([prev.box, word.box]), prev.size)
        else:
            pieces.append(Piece(word.text, tuple(float(v) for v in word.box), float(height)))  # type: ignore[arg-type]
    for piece in pieces:
        piece.text = re.sub(r"(?<=[\u3400-\u9fff]) (?=[\u3400-\u9fff])", "", piece.text)
    return pieces
