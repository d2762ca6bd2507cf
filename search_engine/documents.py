"""The document types every reader of a source file shares: `DocumentError` and `RenderedPage`.

A leaf module (no project imports) so that the PDF/image reader (`corpus`), the text layer and OCR
(`text_extraction`) and the video reader (`video`) can all use them without importing one another:
before, they lived in `corpus`, and `corpus` → `video` → `text_extraction` → `corpus` was a circle
(issue 22). `corpus` re-exports both names, so `from search_engine.corpus import DocumentError` keeps working.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from PIL import Image


class DocumentError(Exception):
    """A document that cannot be read (corrupt, encrypted, empty); the message names file and reason."""


class MissingToolError(RuntimeError):
    """A program every document needs is missing (poppler, tesseract): no page's fault, so ingestion stops
    with it instead of degrading every page one by one."""


@dataclass
class RenderedPage:
    """One page (or video segment) as the ingestion reads it: the image, its size and what the source says
    about it beyond pixels."""

    page_number: int  # 1-based, as in upstream datasets' reference_page
    image: Image.Image  # RGB
    width: int
    height: int
    text: str | None = None  # the page's text when the source supplies it (a video segment: OCR of its frames)
    extra: dict = field(default_factory=dict)  # kept on the PageRecord (a video segment: time range, frames)
