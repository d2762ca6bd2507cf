#!/usr/bin/env python
"""Ingest a large corpus with the visual model spread over Ray workers (GPUs or CPU cores).

Same index, same resumability as `vrag-search ingest` (re-run the same command after a crash: it
continues from the last checkpointed chunk); only the embedding runs in parallel. Joins a running
Ray cluster with `--ray-address auto`, otherwise starts a local one.

    python scripts/ingest_ray.py my_pdfs/ --index data/index/big --visual-model vidore/colqwen2-v1.0 \
        --workers 4 --gpus-per-worker 1 [--text-model minilm] [--fast-index]
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", type=Path)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--visual-model", required=True, help="ColQwen2/ColPali name or path")
    parser.add_argument("--text-model", default=None, help="'minilm' for a text channel (embedded locally)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--gpus-per-worker", type=float, default=0.0)
    parser.add_argument("--cpus-per-worker", type=float, default=1.0)
    parser.add_argument("--device", default="auto", help="device inside each worker")
    parser.add_argument("--chunk-pages", type=int, default=32, help="pages per checkpoint (split across workers)")
    parser.add_argument("--ray-address", default=None)
    parser.add_argument("--fast-index", action="store_true", help="build the fast index afterwards if missing")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    from search_engine.distributed_ingest import RayEmbedderPool
    from search_engine.embedders import load_visual_embedder
    from search_engine.index.fast_index import build_fast_index, has_fast_index
    from search_engine.ingest import Ingestor

    pool = RayEmbedderPool(functools.partial(load_visual_embedder, args.visual_model, device=args.device),
                           num_workers=args.workers, num_gpus_per_worker=args.gpus_per_worker,
                           num_cpus_per_worker=args.cpus_per_worker, ray_address=args.ray_address)
    ingestor = Ingestor(args.index, visual_model=None, text_model=args.text_model, visual_embedder=pool,
                        device=args.device, chunk_pages=args.chunk_pages)
    report = ingestor.add(args.inputs)
    print(report.summary())
    for source, reason in report.failed.items():
        print(f"skipped {source}: {reason}", file=sys.stderr)
    if args.fast_index and not has_fast_index(args.index):
        print(f"fast index: {build_fast_index(args.index, say=print)}")
    pool.shutdown()
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
