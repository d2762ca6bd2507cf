"""Where a page prints light text on a dark background, so OCR can read those areas inverted.

Tesseract binarises a page for dark text on a light background. Slides often put their titles on a
dark title bar (or a whole frame, or a side panel, on a dark background); tesseract then misses the title
outright or reads only part of it. Its own inversion check is per text line and runs only on lines it
has already found, so a bar it never segmented as text stays unread. These bands are found here from the
grey levels alone (no layout knowledge), read again inverted, and merged by `text_extraction`.

The constants are image-processing definitions, not fitted to any document: "dark" is below 40 % of
full luminance (white text on any saturated colour or grey bar qualifies, mid-grey body text does not),
a band is a run of rows (or columns) whose majority is dark, and a band must be tall enough to hold a
line of text.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

DARK_LUMINANCE = 0.4  # share of full white under which a pixel counts as dark background
DARK_MAJORITY = 0.6  # share of a row (column) that must be dark for the row to be part of a dark band
MIN_BAND_PX = 12  # thinner bands are rules and borders, not text backgrounds
WHOLE_PAGE_SHARE = 0.6  # bands covering more than this of the page: the page itself is dark


def _runs(mask: np.ndarray, min_length: int) -> list[tuple[int, int]]:
    """Half-open [start, end) runs of True at least `min_length` long."""
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(s), int(e)) for s, e in zip(starts, ends, strict=True) if e - s >= min_length]


def dark_bands(image: Image.Image) -> list[tuple[int, int, int, int]]:
    """Boxes (x1, y1, x2, y2) of the page's dark-background bands: full-width runs of dark rows (title
    bars, footers) and full-height runs of dark columns (side panels); the whole page when it is mostly dark.
    """
    gray = np.asarray(image.convert("L"), dtype=np.uint8)
    height, width = gray.shape
    if height < MIN_BAND_PX or width < MIN_BAND_PX:
        return []
    dark = gray < 255 * DARK_LUMINANCE
    rows = _runs(dark.mean(axis=1) > DARK_MAJORITY, MIN_BAND_PX)
    columns = _runs(dark.mean(axis=0) > DARK_MAJORITY, MIN_BAND_PX)
    covered = sum(end - start for start, end in rows) / height
    covered = max(covered, sum(end - start for start, end in columns) / width)
    if covered > WHOLE_PAGE_SHARE:
        return [(0, 0, width, height)]
    return [(0, start, width, end) for start, end in rows] + [(start, 0, end, height) for start, end in columns]


def inverted(image: Image.Image, box: tuple[int, int, int, int]) -> Image.Image:
    """The band cut out and inverted to dark-on-light, the polarity OCR reads."""
    from PIL import ImageOps

    return ImageOps.invert(image.crop(box).convert("RGB"))  # crop first: no copy of the whole page per band
