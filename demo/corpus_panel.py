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


def list_documents(settings: DemoSettings) -> list[dict]:
    try:
        response = httpx.get(settings.search_url.rstrip("/") + "/documents", timeout=10)
        response.raise_for_status()
        return response.json()
    except httpx.HTTPError as exc:
        st.error(f"search server unreachable at {settings.search_url}: {exc}")
        return []


def ingest_uploads(settings: DemoSettings, uploads) -> bool:
    """Save the uploads, ingest them with a progress bar, make the search server reload; True when it did."""
    from search_engine.ingest import Ingestor

    settings.upload_path.mkdir(parents=True, exist_ok=True)
    paths = []
    for upload in uploads:
        target = settings.upload_path / _safe_name(upload.name)
        target.write_bytes(upload.getvalue())
        paths.append(target)
    bar = st.progress(0.0, text="ingesting ...")

    def on_progress(event: dict) -> None:
        bar.progress(min(1.0, event["page"] / max(1, event["num_pages"])),
                     text=f"{event['doc_id']}: page {event['page']}/{event['num_pages']}")

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


def show_documents(settings: DemoSettings, slot) -> None:
    """The document list, drawn into `slot` (a placeholder), so an ingest can redraw it in place."""
    documents = list_documents(settings)
    with slot.container():
        st.caption(f"{len(documents)} document(s), {sum(d['num_pages'] for d in documents)} page(s) indexed")
        st.markdown("\n".join(f"- `{doc['doc_id']}` — {doc['num_pages']} page(s)" for doc in documents) or " ")


def corpus_panel(settings: DemoSettings) -> None:
    """Upload and ingest documents; the list below the header updates as soon as the server reloads."""
    with st.expander("Corpus", expanded=False):
        slot = st.empty()
        show_documents(settings, slot)
        uploads = st.file_uploader("Add PDFs or images", type=ALLOWED, accept_multiple_files=True, key="uploads")
        if uploads and st.button("Ingest uploaded files", key="ingest"):
            if ingest_uploads(settings, uploads):
                show_documents(settings, slot)
