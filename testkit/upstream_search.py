"""A search server in upstream VRAG's shape, for compatibility tests: GET-only, upstream's bodies.

Upstream's `search_engine_api.py` answers `GET /search?queries=a&queries=b` with a list per query
of `{"idx": rank0, "image_file": "<path of the corpus image>"}` (10 hits, no `top_k`, no POST, no
image endpoint, no /health). This app does exactly that over a folder of page images named
`<page_id>.jpg`, ranking them with one of our engines (so the hits are real), and nothing more.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from fastapi import FastAPI, Query

UPSTREAM_TOP_K = 10


def create_upstream_app(engine, image_dir: str | Path, relative: bool = True) -> FastAPI:
    """`engine`: a `SearchEngine` whose page ids name the images in `image_dir`; `relative`: give
    `image_file` relative to the working directory, as upstream does ("./search_engine/corpus/img/...")."""
    image_dir = Path(image_dir)
    app = FastAPI(title="upstream-style VRAG search")

    def image_file(page_id: str) -> str:
        path = image_dir / f"{page_id}.jpg"
        return "./" + os.path.relpath(path) if relative else str(path)

    @app.get("/search")
    def search(queries: Annotated[list[str], Query()]) -> list[list[dict]]:
        results = engine.batch_search(queries, top_k=UPSTREAM_TOP_K)
        return [[{"idx": i, "image_file": image_file(hit.page_id)} for i, hit in enumerate(hits)] for hits in results]

    return app


def export_page_images(engine, out_dir: str | Path) -> Path:
    """Copy every page image of an index to `out_dir/<page_id>.jpg` (upstream's corpus/img layout)."""
    import shutil

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for doc in engine.documents():
        for page in range(1, doc["num_pages"] + 1):
            page_id = f"{doc['doc_id']}_{page}"
            shutil.copyfile(engine.page_image_path(page_id), out / f"{page_id}.jpg")
    return out
