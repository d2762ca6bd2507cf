"""A two-page index of drawn pages whose pixels tests can check, served as if from another machine.

Why drawn pages: a test of cropping should compare the crop's pixels with where a marker was
drawn, not with the agent's own arithmetic. Why a small index of its own: it ingests in seconds
(two pages, MiniLM text channel), so the agent tests that use it stay cheap enough to run once per
mutant in mutation testing (`scripts/mutation_agent.sh`).

The "zebra" page (1000x800) has a red square on page pixels `RED` and a blue one in the
bottom-right corner (`BLUE`); the "giraffe" page is plain. `RemoteLooking` wraps the real search
app so the `image_path`s it returns do not exist on this machine, as for a search server elsewhere:
the agent then has to fetch page images over HTTP.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

MARKER_PAGE = "zebra_1"
OTHER_PAGE = "giraffe_1"
PAGE_SIZE = (1000, 800)
RED = (600, 500, 700, 600)  # page pixels, end-exclusive
BLUE = (900, 700, 1000, 800)


def draw_page(text: str, squares: bool) -> Image.Image:
    image = Image.new("RGB", PAGE_SIZE, "white")
    draw = ImageDraw.Draw(image)
    draw.text((60, 60), text, fill="black", font=ImageFont.load_default(size=48))
    if squares:
        draw.rectangle((RED[0], RED[1], RED[2] - 1, RED[3] - 1), fill=(255, 0, 0))
        draw.rectangle((BLUE[0], BLUE[1], BLUE[2] - 1, BLUE[3] - 1), fill=(0, 0, 255))
    return image


def build_marker_engine(folder: Path, text_embedder=None):
    """Ingest the two pages into `folder/index` (MiniLM text channel) and load a `SearchEngine` on it.

    An index already complete there (its manifest is written last, atomically) is reused: mutation
    testing points many short test sessions at one folder.
    """
    from search_engine.embedders import load_text_embedder
    from search_engine.engine import SearchEngine
    from search_engine.ingest import Ingestor

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    embedder = text_embedder or load_text_embedder("minilm")  # loaded once, for ingestion and queries
    if (folder / "index" / "manifest.json").exists():  # built before (a cache dir reused across sessions)
        return SearchEngine.load(folder / "index", text_embedder=embedder)
    draw_page("ZEBRA MARKER PAGE", True).save(folder / "zebra.png")
    draw_page("GIRAFFE OTHER PAGE", False).save(folder / "giraffe.png")
    report = Ingestor(folder / "index", visual_model=None, text_model="minilm", text_embedder=embedder,
                      progress=False).add([folder / "zebra.png", folder / "giraffe.png"])
    if report.failed:
        raise RuntimeError(f"marker pages failed to ingest: {report.failed}")
    return SearchEngine.load(folder / "index", text_embedder=embedder)


class RemoteLooking:
    """ASGI wrapper: rewrites `image_path` in /search answers to paths absent here; counts page-image GETs."""

    def __init__(self, app):
        self.app = app
        self.page_fetches: Counter = Counter()
        self.search_requests = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"].startswith("/pages/"):
            self.page_fetches[scope["path"]] += 1
        if scope["path"] != "/search":
            return await self.app(scope, receive, send)
        self.search_requests += 1
        start: dict = {}
        chunks: list[bytes] = []

        async def rewrite(message):
            if message["type"] == "http.response.start":
                start.update(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(chunks)
            if start["status"] == 200:
                payload = json.loads(body)
                for hits in payload["results"]:
                    for hit in hits:
                        hit["image_path"] = f"/srv/another-machine/{hit['page_id']}.jpg"
                body = json.dumps(payload).encode()
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            await send({**start, "headers": headers + [(b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, rewrite)
