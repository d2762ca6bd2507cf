"""Box arithmetic shared by every step of reading a page's layout: union, area, overlap, containment, distance.

Boxes are (x1, y1, x2, y2) in one frame: page units (PDF points of the upright page, or image pixels for OCR)
while a page is read, image pixels once `compose` has scaled them; these helpers never care which.
"""
from __future__ import annotations

from collections.abc import Iterable

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
