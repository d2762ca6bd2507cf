"""Where the reader gets a page's structure: from the search server, or from the image it was shown.

With the search server's URL (the demo passes it; `--search-url` / env `VRAG_SEARCH_URL`), the layout
built at ingestion is fetched by page id (`SearchClient.page_layout`): a born-digital PDF's exact text
layer, tables with their cells. Without it, or when the fetch fails or the page has no structure, the
image itself is OCR'd — at its size and enlarged (small print reads only then), keeping the reading
with more confidently read text — and laid out by `search_engine.layout.ocr`. Either way the
boxes come back in the pixels of the image the reader was shown (`geometry.Frame`).

Layouts are cached (by page id, and by image content for OCR): the reader reads the same page again on
the zoom turn, and concurrent episodes ask about the same pages.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections import OrderedDict

from PIL import Image

from search_engine.page_layout import PageLayout
from vrag_rl.reader.geometry import Frame, map_layout

log = logging.getLogger(__name__)
ENLARGE_TO = 2500  # px on the long side for the second OCR reading (tesseract misses text under ~10 px)


class _Cache:
    def __init__(self, size: int):
        self._items: OrderedDict[str, PageLayout] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: str) -> PageLayout | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: str, layout: PageLayout) -> None:
        with self._lock:
            self._items[key] = layout
            if len(self._items) > self._size:
                self._items.popitem(last=False)


def image_key(image: Image.Image) -> str:
    """A content key for an image (same pixels, same key), for the OCR cache."""
    digest = hashlib.sha1(image.tobytes())
    digest.update(f"{image.size}{image.mode}".encode())
    return digest.hexdigest()


class PageLayouts:
    """Page layouts for the reader, in the pixels of the image it was shown.

    `search_url`: the search server to fetch ingested layouts from (None: OCR only). `lang`: OCR
    languages (tesseract spec or "auto"; default env VRAG_OCR_LANG, else "auto").
    """

    def __init__(self, search_url: str | None = None, lang: str | None = None, cache_size: int = 128,
                 timeout: float = 10.0):
        self.search_url = search_url or None
        self.lang = lang
        self.timeout = timeout
        self._server = _Cache(cache_size)
        self._ocr = _Cache(cache_size)

    def page(self, page_id: str | None, image: Image.Image) -> tuple[PageLayout, Frame, bool]:
        """The page's layout (in its own pixels), the frame that maps it onto `image`, and whether it came
        from the server: the server's when it has one with regions, else the OCR of `image` (identity)."""
        if page_id and self.search_url:
            layout = self.fetch(page_id)
            if layout is not None and layout.regions and layout.width > 0 and layout.height > 0:
                return layout, Frame.fit((layout.width, layout.height), image.size), True
        return self.ocr(image, page_id or ""), Frame(), False

    def shown(self, page_id: str | None, image: Image.Image) -> PageLayout:
        """The page's layout with every box in `image`'s pixels."""
        layout, frame, _ = self.page(page_id, image)
        return map_layout(layout, frame, image.size)

    def fetch(self, page_id: str) -> PageLayout | None:
        """The ingested layout from the search server, None when it cannot give one (logged, not raised:
        the reader then reads the image itself)."""
        cached = self._server.get(page_id)
        if cached is not None:
            return cached
        from search_engine.client import SearchClient

        async def get() -> PageLayout:
            if self.search_url is None:  # `page` asks only with a URL; without one this fails, logged, as before
                raise ValueError("no search server URL")
            client = SearchClient(self.search_url, timeout=self.timeout, max_retries=1)
            try:
                return await client.page_layout(page_id)
            finally:
                await client.aclose()

        try:
            layout = asyncio.run(get())
        except Exception as exc:  # noqa: BLE001 - any failure means: read the image instead
            log.warning("no layout for page %s from %s (%s: %s); reading the image instead", page_id,
                        self.search_url, exc.__class__.__name__, exc)
            return None
        self._server.put(page_id, layout)
        return layout

    def ocr_lines_layout(self, image: Image.Image, page_id: str = "") -> PageLayout:
        """A plain layout of `image` for reading a zoomed crop: one text region per OCR paragraph, its lines
        kept apart by newlines (a crop holds a few lines or a piece of a table: their lines matter more
        than the page's block structure, which a crop cuts through)."""
        key = "lines:" + image_key(image)
        cached = self._ocr.get(key)
        if cached is not None:
            return cached
        from search_engine.page_layout import Region
        from search_engine.text_extraction import ocr_lines

        groups: dict[tuple[int, int], list] = {}
        for line in ocr_lines(image, self.lang):
            if line.text.strip():
                groups.setdefault((line.block, line.paragraph), []).append(line)
        regions = []
        for i, group in enumerate(groups.values()):
            group.sort(key=lambda ln: (ln.box[1], ln.box[0]))
            box = (min(ln.box[0] for ln in group), min(ln.box[1] for ln in group), max(ln.box[2] for ln in group),
                   max(ln.box[3] for ln in group))
            regions.append(Region(f"l{i + 1}", "text", (float(box[0]), float(box[1]), float(box[2]), float(box[3])),
                                  "\n".join(ln.text for ln in group)))
        layout = PageLayout(page_id, image.width, image.height, regions, "ocr")
        self._ocr.put(key, layout)
        return layout

    def ocr(self, image: Image.Image, page_id: str = "") -> PageLayout:
        """The layout of `image` from OCR (the better of a reading at its size and one enlarged)."""
        key = image_key(image)
        cached = self._ocr.get(key)
        if cached is not None:
            return cached
        from search_engine.layout.ocr import layout_from_ocr_lines
        from search_engine.text_extraction import ocr_lines

        readings = [ocr_lines(image, self.lang)]
        scale = min(3.0, ENLARGE_TO / max(image.size))
        if scale >= 1.5:
            readings.append(ocr_lines(image, self.lang, scale=scale))
        lines = max(readings, key=lambda ls: sum(len(line.text) for line in ls if line.confidence >= 60))
        layout = layout_from_ocr_lines(lines, page_id, image.size)
        self._ocr.put(key, layout)
        return layout
