"""A page's structure: its regions (paragraphs, headings, tables with cells, figures with the text inside
them, running headers/footers), with boxes in page-image pixels.

This is the one contract between ingestion (which builds it from a PDF's text layer or from OCR
layout), the index (which stores it and scores regions), the search API (which returns a hit's best
regions) and the readers (which read a table cell or a figure label and zoom into the region they used).
It is a leaf module: plain dataclasses and JSON, no project imports, so every room may depend on it.

Why not a library's type: PyMuPDF's blocks/tables and Tesseract's TSV each have their own shape and
units (PDF points vs image pixels); a reader and the index must not care which one produced a page.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# Bumped whenever the stored JSON changes meaning; an index records the version it was built with.
LAYOUT_FORMAT_VERSION = 1

RegionKind = Literal["text", "heading", "list", "table", "figure", "caption", "header", "footer"]
REGION_KINDS: tuple[str, ...] = ("text", "heading", "list", "table", "figure", "caption", "header", "footer")
LayoutSource = Literal["pdf", "ocr", "none"]

Box = tuple[float, float, float, float]  # x1, y1, x2, y2 in page-image pixels (the stored page image)


@dataclass
class TableCell:
    """One table cell: 0-based row and column in the table's grid, its text, its box, and whether it is
    a header (a header row at the top or a header column at the left)."""

    row: int
    col: int
    text: str
    box: Box
    is_header: bool = False


@dataclass
class Label:
    """One piece of text printed inside a figure (a tick value, a category, a legend entry, an axis
    title, a bar's value) with its own box and the angle of its baseline. A chart is read by where its
    labels sit — a category pairs with the value printed above it, a tick column is the value axis —
    and that is lost once the labels are joined into the figure's text."""

    text: str
    box: Box
    angle: float = 0.0  # degrees counter-clockwise from horizontal (90: a y-axis title printed upwards)


@dataclass
class Region:
    """One region of a page.

    `text` is what the region says, in reading order (for a table: its rows, cells separated by " | ";
    for a figure: the labels, legend and callouts printed inside it). `caption` is a table's or figure's
    caption when one was found next to it. `cells`, `header_rows` and `header_cols` are set for tables;
    `labels` for figures: each printed label with its box (optional, additive: layouts stored before it
    load with none, and readers then fall back on `text`).
    """

    region_id: str  # unique within the page, e.g. "r3"
    kind: RegionKind
    box: Box
    text: str
    caption: str = ""
    cells: list[TableCell] = field(default_factory=list)
    header_rows: int = 0
    header_cols: int = 0
    labels: list[Label] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Region:
        cells = [TableCell(**{**c, "box": tuple(c["box"])}) for c in data.get("cells", [])]
        labels = [Label(**{**lb, "box": tuple(lb["box"])}) for lb in data.get("labels", [])]
        return cls(**{**data, "box": tuple(data["box"]), "cells": cells, "labels": labels})


@dataclass
class PageLayout:
    """All regions of one page, in reading order; `width`/`height` are the page image's pixel size the
    boxes refer to (map them to another rendering of the page by the ratio of sizes)."""

    page_id: str
    width: int
    height: int
    regions: list[Region] = field(default_factory=list)
    source: LayoutSource = "none"
    version: int = LAYOUT_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PageLayout:
        regions = [Region.from_dict(r) for r in data.get("regions", [])]
        return cls(**{**data, "regions": regions})

    def region(self, region_id: str) -> Region:
        for region in self.regions:
            if region.region_id == region_id:
                return region
        raise KeyError(f"page {self.page_id} has no region {region_id!r}")


@dataclass
class RegionHit:
    """One region that matched a query, as returned with a search hit: enough to draw the box and
    show the snippet without fetching the whole layout (`GET /pages/{page_id}/layout` has the rest)."""

    region_id: str
    kind: RegionKind
    box: Box
    snippet: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
