"""Text layer survey: how many pages of a set of PDFs the text-layer check flags, and why (false positives).

Runs ingestion's verdict (`search_engine.layout.text_quality.check_text_layer`) on every page of the PDFs found
under the given paths: the cheap signals on each page, and on the ambiguous ones an OCR sample of the page image
as ingestion renders it (poppler, `--dpi`, at most 1600 pixels a side). Prints the pages, the
ambiguous pages (settled by OCR) and the flagged ones, each with its reason, and the check's CPU time per page.
On PDFs whose text layers are known to be good, every flagged page is a false positive.

    python scripts/text_layer_survey.py ../shared/data/dev_docs/pdfs
    python scripts/text_layer_survey.py /tmp/vrag_robustness/cache/tree --limit 50 --seed 1
    python scripts/text_layer_survey.py /tmp/vrag_robustness/cache/tree --max-pages 8
"""
from __future__ import annotations

import random
import re
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from search_engine.infra.cli_exit import exit_status

HELD_OUT = re.compile(r"(^|/)real_docs[^/]*(/|$)")

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


def pdfs_under(paths: list[Path], limit: int | None, seed: int) -> list[Path]:
    """The PDF files under `paths` (no symlinks), sorted; with `limit`, that many picked at random (seeded)."""
    found = sorted({p for path in paths for p in ([path] if path.is_file() else path.rglob("*"))
                    if p.suffix.lower() == ".pdf" and p.is_file() and not p.is_symlink()})
    if any(HELD_OUT.search(p.resolve().as_posix()) for p in found):
        raise SystemExit("refusing the held-out documents (real_docs*)")
    if limit is not None:
        random.Random(seed).shuffle(found)
        found = found[:limit]
    return found


@app.command(help=(__doc__ or "").splitlines()[0])
def survey(
    paths: Annotated[list[Path], typer.Argument(help="PDF files or folders (searched recursively)")],
    limit: Annotated[int | None, typer.Option(help="survey this many PDFs, picked at random (seeded)")] = None,
    seed: int = 1,
    max_pages: Annotated[int | None, typer.Option(help="the first N pages of each PDF")] = None,
    dpi: Annotated[int, typer.Option(help="rendering of the ambiguous pages for the OCR sample")] = 144,
    ocr_lang: Annotated[str, typer.Option(help="OCR language setting of the sample (as ingestion's)")] = "auto",
) -> None:
    """Check every page, print the ambiguous and flagged ones and the counts."""
    import pymupdf

    from search_engine.corpus import render_pages
    from search_engine.layout.text_quality import cheap_verdict, check_text_layer, layer_signals, upright

    files = pdfs_under(paths, limit, seed)
    pages = ambiguous = flagged = unreadable = 0
    cpu = 0.0
    for path in files:
        try:
            doc = pymupdf.open(path)
        except Exception as exc:  # noqa: BLE001 - counted, as ingestion would report it
            unreadable += 1
            print(f"unreadable {path.name}: {exc}")
            continue
        with doc:
            for number in range(doc.page_count if max_pages is None else min(max_pages, doc.page_count)):
                page = doc[number]
                pages += 1
                started = time.process_time()
                verdict = cheap_verdict(layer_signals(upright(page)))  # what a normal page costs ingestion
                cpu += time.process_time() - started
                image = None
                if verdict is None:  # ambiguous: rendered for the OCR sample, and checked as ingestion does
                    ambiguous += 1
                    image = next(iter(render_pages(path, dpi=dpi, first_page=number + 1, last_page=number + 1,
                                                   max_side=1600))).image
                    verdict = check_text_layer(page, image, ocr_lang)
                flagged += not verdict.usable
                if image is not None or not verdict.usable:
                    print(f"{'FLAGGED' if not verdict.usable else 'kept'} {path.name} p{number + 1}: "
                          f"{verdict.reason}")
    print(f"PDFs {len(files)} ({unreadable} unreadable), pages {pages}, ambiguous (OCR sample) {ambiguous}, "
          f"flagged {flagged}; cheap signals {1000 * cpu / max(pages, 1):.1f} ms CPU per page")


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="text_layer_survey.py")


if __name__ == "__main__":
    sys.exit(main())
