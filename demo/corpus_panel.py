"""Corpus management in the UI: upload PDFs/images, ingest them with progress, list documents."""
from __future__ import annotations

import re
from pathlib import Path

import httpx
import streamlit as st

from demo.settings import DemoSettings

ALLOWED = ["pdf", "png", "jpg", "jpeg", "webp", "tif", "tiff", "bmp"]


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", Path(name).name).lstrip(".") or "upload"


def list_documents(settings: DemoSettings) -> list[dict] | None:
    """The indexed documents, or None (with an error shown) when the search server cannot say."""
    try:
        response = httpx.get(settings.search_url.rstrip("/") + "/documents", timeout=10)
        response.raise_for_status()
        return response.json()
    except httpx.HTTPError as exc:
        st.error(f"search server unreachable at {settings.search_url}: {exc}")
        return None


def progress_text(event: dict, position: dict[str, int], total: int) -> tuple[float, str]:
    """(fraction done, "document i of n · name: page p/m") of an ingestion progress event, for the bar;
    `position` maps each document's resolved source path to its 1-based place among the `total` files."""
    i = position.get(event.get("source", ""), 0)
    pages = max(1, event["num_pages"])
    done = (max(0, i - 1) + min(1.0, event["page"] / pages)) / max(1, total)
    where = f"document {i} of {total} · " if i else ""
    return min(1.0, done), f"{where}{Path(event.get('source') or event['doc_id']).name}: page {event['page']}/{pages}"


def ingest_uploads(settings: DemoSettings, uploads) -> bool:
    """Save the uploads, ingest them with a progress bar, make the search server reload; True when it did."""
    from search_engine.ingest import Ingestor

    settings.upload_path.mkdir(parents=True, exist_ok=True)
    paths = []
    for upload in uploads:
        target = settings.upload_path / _safe_name(upload.name)
        target.write_bytes(upload.getvalue())
        paths.append(target)
    position = {str(path.resolve()): i for i, path in enumerate(paths, 1)}
    bar = st.progress(0.0, text=f"document 1 of {len(paths)} · {paths[0].name}: starting ..." if paths else "")

    def on_progress(event: dict) -> None:
        fraction, text = progress_text(event, position, len(paths))
        bar.progress(fraction, text=text)

    try:
        report = Ingestor(settings.index_dir, progress=False, progress_callback=on_progress).add(paths)
    except Exception as exc:  # noqa: BLE001 - shown to the user, not a stack trace
        st.error(f"ingestion failed: {exc}")
        return False
    bar.progress(1.0, text=report.summary())
    for source, reason in report.failed.items():
        st.warning(f"skipped {Path(source).name}: {reason}")
    try:
        httpx.post(settings.search_url.rstrip("/") + "/reload", timeout=120).raise_for_status()
        st.success(f"indexed: {report.summary()}")
        return True
    except httpx.HTTPError as exc:
        st.warning(f"ingested, but the search server did not reload: {exc}")
        return False


def show_documents(settings: DemoSettings, slot) -> list[dict] | None:
    """The document list, drawn into `slot` (a placeholder), so an ingest can redraw it in place; returns
    it (None when the search server could not be asked)."""
    documents = list_documents(settings)
    shown = documents or []
    with slot.container():
        st.caption(f"{len(shown)} document(s), {sum(d['num_pages'] for d in shown)} page(s) indexed")
        st.markdown("\n".join(f"- `{doc['doc_id']}` — {doc['num_pages']} page(s)" for doc in shown) or " ")
    return documents


def corpus_panel(settings: DemoSettings) -> list[dict] | None:
    """Upload and ingest documents; the list below the header updates as soon as the server reloads.
    Open when the page loads, so a new user sees what is indexed and where to add documents.
    Returns the indexed documents (None when the search server could not be asked)."""
    with st.expander("Corpus", expanded=True):
        slot = st.empty()
        documents = show_documents(settings, slot)
        uploads = st.file_uploader("Add PDFs or images", type=ALLOWED, accept_multiple_files=True, key="uploads")
        if uploads and st.button("Ingest uploaded files", key="ingest"):
            if ingest_uploads(settings, uploads):
                documents = show_documents(settings, slot)
    return documents
