#!/usr/bin/env python
"""Time one compressed-index build over an fp16 token store: wall, CPU, peak RSS, bytes on disk.

Why a script of its own: `bench_search.py` builds an index only as a side effect of its first query
run, and the streaming generator's build time mixes in page generation and the exact ground truth.
This measures what a user pays to index tokens already on disk: codec training (k-means + residual
quantiser) → encoding every part (`--workers` at a time) → the inverted file, i.e.
`search_engine.index.compressed_index.build_compressed`.

    python scripts/make_bench_corpus.py --pages 100000 --queries 0 --out /work/bench_data/fp16_100k
    python scripts/bench_build.py --store /work/bench_data/fp16_100k --out /work/bench_data/build_100k \\
        --codec pq32 --workers 2

The output directory must not hold a finished index (the build would return at once); a killed build
resumes there.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Annotated

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per worker: the workers are the parallelism

import typer  # noqa: E402

from search_engine.index.compressed_index import build_compressed  # noqa: E402
from search_engine.index.token_store import FlatTokenStore  # noqa: E402
from search_engine.infra.cli_exit import exit_status  # noqa: E402

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help=(__doc__ or "").splitlines()[0])
def build(
    store: Annotated[Path, typer.Option(help="an fp16 token store (make_bench_corpus.py without --stream)")],
    out: Annotated[Path, typer.Option(help="where the compressed index goes")],
    codec: Annotated[str, typer.Option(help="residual codec (see residual_codec.py)")] = "pq32",
    workers: Annotated[int, typer.Option(help="parts encoded at a time (threads; one per free core)")] = 1,
    part_pages: int = 5000,
) -> None:
    """Build, then print one JSON line of timings and sizes."""
    import torch

    torch.set_num_threads(1)
    if (out / "fast_meta.json").exists():
        raise typer.BadParameter(f"{out} already holds a finished index: nothing to time", param_hint="--out")
    source = FlatTokenStore(store)
    wall, cpu = time.perf_counter(), time.process_time()
    build_compressed(source, out, spec=codec, part_pages=part_pages, workers=workers,
                     log=lambda m: print(m, file=sys.stderr, flush=True))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(json.dumps({
        "pages": source.num_pages, "tokens": source.num_tokens, "codec": codec, "workers": workers,
        "build_wall_s": round(wall, 1), "build_cpu_s": round(cpu, 1),
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "disk_gib": round(size / 2**30, 3), "bytes_per_page": round(size / source.num_pages),
        "load_avg_1m": os.getloadavg()[0]}))


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="bench_build.py")


if __name__ == "__main__":
    sys.exit(main())
