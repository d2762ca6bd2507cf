"""Image geometry: the exact resize Qwen2.5-VL applies, and crop boxes mapped back to page pixels.

The model writes bbox coordinates in the frame of the image it saw. We resize each image
ourselves with the processor's own `smart_resize` rule (28-aligned, within the pixel budget), so
the frame we record is the frame the model saw — vLLM's processor then leaves it unchanged.
Each shown image remembers its region of the original page (`page_box`), so a crop of a crop
composes exactly.
"""
from __future__ import annotations

import math

from PIL import Image

Box = tuple[int, int, int, int]


def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = 256 * 28 * 28,
                 max_pixels: int = 512 * 28 * 28) -> tuple[int, int]:
    """(height, width) both multiples of `factor`, pixels in [min, max], aspect ratio kept (Qwen2-VL's rule)."""
    if height <= 0 or width <= 0:
        raise ValueError(f"image has no area: {width}x{height}")
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"aspect ratio over 200: {width}x{height}")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def resize_for_model(image: Image.Image, factor: int, min_pixels: int, max_pixels: int) -> Image.Image:
    height, width = smart_resize(image.height, image.width, factor, min_pixels, max_pixels)
    if image.mode != "RGB":
        image = image.convert("RGB")
    if (width, height) == image.size:
        return image
    return image.resize((width, height), Image.Resampling.BICUBIC)


def map_bbox_to_page(bbox: list[float], shown_size: tuple[int, int], page_box: Box, page_size: tuple[int, int],
                     padding: int, min_side: int) -> tuple[Box, bool]:
    """Map a bbox from the shown frame of an image to page pixels, pad, and clamp to the page.

    Returns the page box and whether the model's box had to be clipped (it pointed outside the
    image it was shown). Raises ValueError when nothing of the box lies inside the image.
    """
    shown_w, shown_h = shown_size
    x1, y1, x2, y2 = bbox
    clipped = x1 < 0 or y1 < 0 or x2 > shown_w or y2 > shown_h
    x1, x2 = max(0.0, x1), min(float(shown_w), x2)
    y1, y2 = max(0.0, y1), min(float(shown_h), y2)
    if x2 - x1 < 1 or y2 - y1 < 1:
        raise ValueError(f"bbox {bbox} lies outside the {shown_w}x{shown_h} image")
    px1, py1, px2, py2 = page_box
    sx, sy = (px2 - px1) / shown_w, (py2 - py1) / shown_h
    bx1, by1 = px1 + x1 * sx, py1 + y1 * sy
    bx2, by2 = px1 + x2 * sx, py1 + y2 * sy
    page_w, page_h = page_size
    bx1, by1, bx2, by2 = bx1 - padding, by1 - padding, bx2 + padding, by2 + padding
    # widen tiny boxes around their centre so the zoom has something to show
    if bx2 - bx1 < min_side:
        centre = (bx1 + bx2) / 2
        bx1, bx2 = centre - min_side / 2, centre + min_side / 2
    if by2 - by1 < min_side:
        centre = (by1 + by2) / 2
        by1, by2 = centre - min_side / 2, centre + min_side / 2
    box = (max(0, math.floor(bx1)), max(0, math.floor(by1)), min(page_w, math.ceil(bx2)), min(page_h, math.ceil(by2)))
    return box, clipped


def draw_box(image: Image.Image, box: Box, color=(160, 32, 240), width: int = 5) -> Image.Image:
    """A copy of `image` with `box` outlined (used by UIs to show where the agent zoomed)."""
    from PIL import ImageDraw

    copy = image.convert("RGB").copy()
    ImageDraw.Draw(copy).rectangle(box, outline=color, width=width)
    return copy
