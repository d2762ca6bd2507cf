"""Where a layout's boxes lie in the image the reader was actually shown.

A page's layout is in the pixels of the page image it was built from (the index's rendering, or the
image the reader OCR'd, maybe enlarged). The agent shows the model a resized copy, and after a <bbox>
a crop of it, resized again. A `Frame` is the axis-aligned map from layout pixels to shown pixels;
crops compose onto it, so a region's box can be drawn, or zoomed into, in whatever image is on screen.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from search_engine.page_layout import Box, PageLayout, Region, TableCell


@dataclass(frozen=True)
class Frame:
    """shown = layout * scale + offset, per axis."""

    sx: float = 1.0
    sy: float = 1.0
    dx: float = 0.0
    dy: float = 0.0

    @classmethod
    def fit(cls, layout_size: tuple[float, float], shown_size: tuple[float, float]) -> Frame:
        """The frame of a whole page rendered at `layout_size` and shown at `shown_size` (width, height)."""
        lw, lh = layout_size
        w, h = shown_size
        if lw <= 0 or lh <= 0:
            raise ValueError(f"a layout needs a positive size, got {lw}x{lh}")
        return cls(w / lw, h / lh)

    def box(self, box: Box) -> Box:
        """A layout box in shown pixels."""
        x1, y1, x2, y2 = box
        return (x1 * self.sx + self.dx, y1 * self.sy + self.dy, x2 * self.sx + self.dx, y2 * self.sy + self.dy)

    def inverse_box(self, box: Box) -> Box:
        """A shown box in layout pixels."""
        x1, y1, x2, y2 = box
        return ((x1 - self.dx) / self.sx, (y1 - self.dy) / self.sy, (x2 - self.dx) / self.sx, (y2 - self.dy) / self.sy)

    def then_crop(self, crop_box: Box, crop_size: tuple[float, float]) -> Frame:
        """This frame followed by cropping `crop_box` (in this frame's pixels) and resizing it to `crop_size`."""
        x1, y1, x2, y2 = crop_box
        if x2 <= x1 or y2 <= y1:
            raise ValueError(f"an empty crop box {crop_box}")
        kx, ky = crop_size[0] / (x2 - x1), crop_size[1] / (y2 - y1)
        return Frame(self.sx * kx, self.sy * ky, (self.dx - x1) * kx, (self.dy - y1) * ky)


def crop_box_of(bbox: Box, shown_size: tuple[float, float], crop_size: tuple[float, float]) -> Box:
    """The region of the shown image that a crop shows: the model's `bbox`, widened by the margin the
    agent added around it (unknown here: the agent pads in page pixels and clamps at the page's edges),
    estimated as the margin whose clamped box has the crop image's aspect ratio."""
    w, h = shown_size
    x1, y1, x2, y2 = max(0.0, bbox[0]), max(0.0, bbox[1]), min(w, bbox[2]), min(h, bbox[3])
    target = crop_size[0] / max(1e-9, crop_size[1])
    best, best_error = (x1, y1, x2, y2), None
    limit = int(max(w, h) / 2)
    for margin in range(0, limit + 1, max(1, limit // 200)):
        box = (max(0.0, x1 - margin), max(0.0, y1 - margin), min(w, x2 + margin), min(h, y2 + margin))
        if box[2] <= box[0] or box[3] <= box[1]:
            continue
        error = abs((box[2] - box[0]) / (box[3] - box[1]) - target)
        if best_error is None or error < best_error - 1e-9:
            best, best_error = box, error
    return best


def map_layout(layout: PageLayout, frame: Frame, size: tuple[int, int]) -> PageLayout:
    """A copy of `layout` with every box in the frame's pixels and `size` as its width/height."""
    def cell(c: TableCell) -> TableCell:
        return replace(c, box=frame.box(c.box))

    def region(r: Region) -> Region:
        return replace(r, box=frame.box(r.box), cells=[cell(c) for c in r.cells],
                       labels=[replace(lb, box=frame.box(lb.box)) for lb in r.labels])

    return replace(layout, width=int(size[0]), height=int(size[1]), regions=[region(r) for r in layout.regions])


def union(boxes: list[Box]) -> Box:
    """The smallest box holding all `boxes` but the empty ones (a point: a table cell not printed on the page,
    as a header carried over from the page before), unless all are."""
    boxes = [b for b in boxes if b[2] > b[0] or b[3] > b[1]] or boxes
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def intersects(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
