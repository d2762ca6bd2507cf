#!/usr/bin/env python
"""Where the compressed path's recall goes: each miss is charged to the codec or to the candidate stage.

For every query, the pages of the exact top-10 that the compressed search (`cfast` with the given
NPROBE / CANDIDATES / RERANK) did not return are decoded and scored like the returned ones. A miss whose
decoded score is below the 10th returned score would be lost even if the candidate stage had found it:
the **codec** decided it. A miss scoring above it was never a candidate: the **candidate stage** lost it.
Also printed: the error of decoded scores on the exact top-10 (mean and std) against the exact score gap
between ranks 10 and 11 — when the error is many times the gap, no candidate setting can restore recall.

    python scripts/attribute_misses.py --corpus /work/bench_data/stream_1m/prefix-100000 --codec pq32 \\
        --nprobe 32 --candidates 512 --rerank 64
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

# A sibling script: scripts/ is first on sys.path when this file runs (`python scripts/attribute_misses.py`).
from bench_search import load_queries

from search_engine.index.compressed_index import open_compressed
from search_engine.index.fast_maxsim import FastMaxSim
from search_engine.infra.cli_exit import exit_status

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


def attribute(fast: FastMaxSim, queries: np.ndarray, exact_rows: np.ndarray, exact_scores: np.ndarray,
              nprobe: int, candidates: int, rerank: int, k: int = 10) -> dict:
    """Recall@k and the misses charged to the codec / the candidate stage, with the decoded-score error."""
    codec_misses = candidate_misses = hits = 0
    gaps, errors = [], []
    for query, exact, scores in zip(queries, exact_rows, exact_scores):
        q = np.asarray(query, np.float32)
        rows, decoded = fast.score_candidates(q, nprobe, candidates, top_k=k, rerank=rerank, exact_rerank=0)
        returned = rows[np.argsort(-decoded, kind="stable")[:k]]
        kth = np.sort(decoded)[-k] if decoded.size >= k else -np.inf
        order = np.argsort(exact[:k])
        top = exact[:k][order]  # sorted rows, as rerank takes them
        top_decoded = fast.rerank(q, top)
        errors.extend((top_decoded - scores[:k][order]).tolist())
        missed_decoded = top_decoded[~np.isin(top, returned)]
        hits += k - missed_decoded.size
        codec_misses += int((missed_decoded < kth).sum())
        candidate_misses += int((missed_decoded >= kth).sum())
        if scores.shape[0] > k:
            gaps.append(float(scores[k - 1] - scores[k]))
    return {"recall@10": hits / (k * len(queries)), "misses_codec": codec_misses,
            "misses_candidates": candidate_misses, "decoded_error_mean": float(np.mean(errors)),
            "decoded_error_std": float(np.std(errors)),
            "exact_gap_rank10_11_median": float(np.median(gaps)) if gaps else float("nan"),
            "exact_range_top1_top10_median": float(np.median(exact_scores[:, 0] - exact_scores[:, k - 1]))}


@app.command(help=(__doc__ or "").splitlines()[0])
def attribute_cmd(
    corpus: Annotated[Path, typer.Option(help="a corpus of make_bench_corpus.py with a fast-<codec>/ index")],
    codec: Annotated[str, typer.Option(help="which fast-<codec>/ index")] = "pq32",
    nprobe: Annotated[int, typer.Option(min=1)] = 32,
    candidates: Annotated[int, typer.Option(min=1)] = 512,
    rerank: Annotated[int, typer.Option(min=1)] = 64,
    query_set: Annotated[list[str], typer.Option(metavar="SET", help="query sets (repeat the option)")] = [  # noqa: B006
        "standard", "noisy", "multipage", "half-unmatched"],
    queries: Annotated[int | None, typer.Option(help="at most this many queries per set")] = None,
) -> None:
    """Print one JSON line per query set."""
    directory = corpus / f"fast-{codec}"
    if not (directory / "fast_meta.json").exists():
        raise typer.BadParameter(f"no compressed index at {directory}", param_hint="--corpus/--codec")
    fast = open_compressed(directory)
    for name in query_set:
        q, exact_rows, exact_scores, _, _ = load_queries(corpus, queries, name)
        row = attribute(fast, q, exact_rows, exact_scores, nprobe, candidates, rerank)
        print(json.dumps({"corpus": str(corpus), "pages": fast.num_pages, "query_set": name, "queries": len(q),
                          "method": f"cfast:{codec}:{nprobe}:{candidates}:{rerank}", **row}), flush=True)


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="attribute_misses.py")


if __name__ == "__main__":
    sys.exit(main())
