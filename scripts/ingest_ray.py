#!/usr/bin/env python
"""Ingest a large corpus with the visual model spread over Ray workers (GPUs or CPU cores).

Same index, same resumability as `vrag-search ingest` (re-run the same command after a crash: it
continues from the last checkpointed chunk); only the embedding runs in parallel. Joins a running
Ray cluster with `--ray-address auto`, otherwise starts a local one.

    python scripts/ingest_ray.py my_pdfs/ --index data/index/big --visual-model vidore/colqwen2-v1.0 \
        --workers 4 --gpus-per-worker 1 [--text-model minilm] [--fast-index]
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from search_engine.infra.cli_exit import exit_status

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help="\n\n".join(f"\b\n{part}" for part in (__doc__ or "").split("\n\n")))  # \b: printed as written
def ingest(
    inputs: list[Path],
    index: Annotated[Path, typer.Option()],
    visual_model: Annotated[str, typer.Option(help="ColQwen2/ColPali name or path")],
    text_model: Annotated[str | None, typer.Option(help="'minilm' for a text channel (embedded locally)")] = None,
    workers: int = 2,
    gpus_per_worker: float = 0.0,
    cpus_per_worker: float = 1.0,
    device: Annotated[str, typer.Option(help="device inside each worker")] = "auto",
    chunk_pages: Annotated[int, typer.Option(help="pages per checkpoint (split across workers)")] = 32,
    ray_address: str | None = None,
    fast_index: Annotated[bool, typer.Option("--fast-index",
                                             help="build the fast index afterwards if missing")] = False,
) -> None:
    """Embed on the Ray pool, write the index; exit 1 when a document was skipped."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    from search_engine.distributed_ingest import RayEmbedderPool
    from search_engine.embedders import load_visual_embedder
    from search_engine.index.fast_index import build_fast_index, has_fast_index
    from search_engine.ingest import Ingestor

    pool = RayEmbedderPool(functools.partial(load_visual_embedder, visual_model, device=device),
                           num_workers=workers, num_gpus_per_worker=gpus_per_worker,
                           num_cpus_per_worker=cpus_per_worker, ray_address=ray_address)
    ingestor = Ingestor(index, visual_model=None, text_model=text_model, visual_embedder=pool,
                        device=device, chunk_pages=chunk_pages)
    report = ingestor.add(inputs)
    print(report.summary())
    for source, reason in report.failed.items():
        print(f"skipped {source}: {reason}", file=sys.stderr)
    if fast_index and not has_fast_index(index):
        print(f"fast index: {build_fast_index(index, say=print)}")
    pool.shutdown()
    raise typer.Exit(1 if report.failed else 0)


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="ingest_ray.py")


if __name__ == "__main__":
    sys.exit(main())
