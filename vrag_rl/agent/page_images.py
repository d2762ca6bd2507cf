"""Decoded page images and their resized views, shared by every episode of one agent.

Why: before this, every episode decoded its pages from JPEG again, converted them to RGB several
times and resized each view anew, although evaluation and RL rollouts show the same few pages
thousands of times. Here a page is decoded once, and each (page, region, size) view is resized
once, both kept in LRU caches bounded by pixels. Views are exactly the pixels the model is
shown, so their `view_key` is also the key adapters cache encodings under.
"""
from __future__ import annotations

import io
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from cachetools import LRUCache
from PIL import Image

from vrag_rl.agent.images import Box, resize_for_model


def _pixels(image: Image.Image) -> int:
    return image.width * image.height


def view_key(page_key: str, box: Box, size: tuple[int, int]) -> str:
    """A stable name for the pixels of one view: page, region in page pixels, shown size."""
    return f"{page_key}|{','.join(map(str, box))}|{size[0]}x{size[1]}"


class PageImageStore:
    """Pages by key (id + source) and resized views; thread-safe, bounded by total pixels."""

    def __init__(self, max_page_pixels: int = 400_000_000, max_view_pixels: int = 200_000_000):
        self._pages: LRUCache = LRUCache(maxsize=max_page_pixels, getsizeof=_pixels)
        self._views: LRUCache = LRUCache(maxsize=max_view_pixels, getsizeof=_pixels)
        self._lock = threading.Lock()

    def _get(self, cache: LRUCache, key: str) -> Image.Image | None:
        with self._lock:
            return cache.get(key)

    def _put(self, cache: LRUCache, key: str, image: Image.Image) -> None:
        if _pixels(image) <= cache.maxsize:
            with self._lock:
                cache[key] = image

    async def page(self, page_key: str, path: str | None, fetch: Callable[[], Awaitable[bytes]]) -> Image.Image:
        """The decoded RGB page: from `path` when it is a local file, else from `fetch()` (HTTP)."""
        cached = self._get(self._pages, page_key)
        if cached is not None:
            return cached
        import asyncio

        if path and Path(path).is_file():
            image = await asyncio.to_thread(open_rgb, path)
        else:
            data = await fetch()
            image = await asyncio.to_thread(open_rgb, io.BytesIO(data))
        self._put(self._pages, page_key, image)
        return image

    def view(self, page_key: str, page: Image.Image, box: Box, factor: int, min_pixels: int,
             max_pixels: int) -> tuple[Image.Image, str]:
        """The region `box` of `page`, resized by the model's rule; returns (image, view key)."""
        from vrag_rl.agent.images import smart_resize

        height, width = smart_resize(box[3] - box[1], box[2] - box[0], factor, min_pixels, max_pixels)
        key = view_key(page_key, box, (width, height))
        cached = self._get(self._views, key)
        if cached is not None:
            return cached, key
        region = page if box == (0, 0, page.width, page.height) else page.crop(box)
        image = resize_for_model(region, factor, min_pixels, max_pixels)
        self._put(self._views, key, image)
        return image, key


def open_rgb(source) -> Image.Image:
    """Decode an image file (or file-like) to RGB, once."""
    with Image.open(source) as image:
        image.load()
        return image if image.mode == "RGB" else image.convert("RGB")
