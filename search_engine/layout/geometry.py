"""Box arithmetic shared by every step of reading a page's layout: union, area, overlap, containment, distance.

Boxes are (x1, y1, x2, y2) in one frame: page units (PDF points of the upright page, or image pixels for OCR)
while a page is read, image pixels once `compose` has scaled them; these helpers never care which.

`clamp_box` is the one rule for a box that does not fit its page (a picture placed past the page edge, a
broken PDF's NaN coordinates, a box given corner-reversed): every box a layout is made of, and every crop of a
page image, goes through it (see `compose` and `search_engine.figure_ocr`).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from search_engine.page_layout import Box


def union(boxes: Iterable[Box]) -> Box:
    boxes = list(boxes)
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def area(box: Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def overlap(a: Box, b: Box) -> float:
    return area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def inside(inner: Box, outer: Box, share: float = 0.6) -> bool:
    """Whether most of `inner` lies inside `outer`."""
    size = area(inner)
    return size > 0 and overlap(inner, outer) >= share * size or (
        size == 0 and outer[0] <= inner[0] <= outer[2] and outer[1] <= inner[1] <= outer[3])


def gap(a: Box, b: Box) -> float:
    """Distance between two boxes (0 when they touch or overlap)."""
    dx = max(0.0, max(a[0], b[0]) - min(a[2], b[2]))
    dy = max(0.0, max(a[1], b[1]) - min(a[3], b[3]))
    return max(dx, dy)


def grow(box: Box, by: float) -> Box:
    return (box[0] - by, box[1] - by, box[2] + by, box[3] + by)


def clamp_box(box: Sequence[float], width: float, height: float) -> Box | None:
    """The part of `box` that lies on the page `[0, width] x [0, height]`, or None when there is none.

    * a coordinate that is not a finite number (NaN, ±inf), or a box that is not four numbers: None (dropped;
      there is no telling where it is);
    * inverted (x2 < x1 or y2 < y1: the corners given in the other order): the corners are swapped;
    * out of the page: clamped to the page; None when nothing of it is on the page — wholly outside, or
      touching the page with an edge only (a box that had an area keeps one, or is dropped);
    * empty (no width or no height: a point, a rule) and on the page: kept as it is, since it has a place;
      what crops a page image asks for a minimum size on top (`crop_box`).

    `width`/`height` must be finite and positive (a page without a size has no boxes: ValueError).
    """
    if not (_finite(width) and _finite(height) and width > 0 and height > 0):
        raise ValueError(f"a page needs a finite positive size to clamp boxes to, got {width!r} x {height!r}")
    try:
        x1, y1, x2, y2 = (float(v) for v in box)
    except (TypeError, ValueError):
        return None
    if not all(map(_finite, (x1, y1, x2, y2))):
        return None
    x1, x2 = min(x1, x2), max(x1, x2)
    y1, y2 = min(y1, y2), max(y1, y2)
    if x1 > width or x2 < 0 or y1 > height or y2 < 0:
        return None
    cx1, cx2 = max(0.0, x1), min(float(width), x2)
    cy1, cy2 = max(0.0, y1), min(float(height), y2)
    if (cx2 <= cx1 and x2 > x1) or (cy2 <= cy1 and y2 > y1):
        return None
    return (cx1, cy1, cx2, cy2)


def crop_box(box: Sequence[float], scale: tuple[float, float], image_size: tuple[int, int], pad: int = 0,
             min_side: int = 1) -> tuple[int, int, int, int] | None:
    """The integer pixel box to crop from an image of `image_size` for `box` (in units that `scale` maps to the
    image's pixels), grown by `pad` pixels and clamped to the image (`clamp_box`); None when the box itself is
    not on the image (a box past the edge by less than `pad` is not), or when its crop, padding included, is
    less than `min_side` pixels a side. What `PIL.Image.crop` can always take: left < right, top < bottom,
    inside the image."""
    sx, sy = scale
    width, height = image_size
    if not (_finite(sx) and _finite(sy)) or width < 1 or height < 1:
        return None
    try:
        x1, y1, x2, y2 = (float(v) for v in box)
    except (TypeError, ValueError):
        return None
    on_image = clamp_box((x1 * sx, y1 * sy, x2 * sx, y2 * sy), width, height)  # the box itself must be on it
    if on_image is None:
        return None
    on_image = clamp_box(grow(on_image, pad), width, height) or on_image
    left, top = math.floor(on_image[0]), math.floor(on_image[1])
    right, bottom = min(width, math.ceil(on_image[2])), min(height, math.ceil(on_image[3]))
    if right - left < max(1, min_side) or bottom - top < max(1, min_side):
        return None
    return (left, top, right, bottom)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except TypeError:
        return False
