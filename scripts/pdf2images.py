#!/usr/bin/env python
"""PDFs → page images named `<doc>_<page>.jpg` (upstream VRAG's corpus layout), in parallel with progress.

    python scripts/pdf2images.py docs/ more.pdf --out corpus/img --dpi 144 --workers 2
Exit code 1 when a document could not be read (it is reported and skipped; the rest are converted).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from search_engine.corpus import DocumentError, pdf_to_images
from search_engine.infra.cli_exit import exit_status

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help="\n\n".join(f"\b\n{part}" for part in (__doc__ or "").split("\n\n")))  # \b: printed as written
def convert(
    inputs: Annotated[list[str], typer.Argument(help="PDF or image files, or folders (searched recursively)")],
    out: Annotated[str, typer.Option(help="output folder")],
    dpi: int = 144,
    workers: Annotated[int, typer.Option(help="documents converted in parallel")] = 2,
    max_side: Annotated[int | None, typer.Option(help="downscale so the longer side fits")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="no progress bar")] = False,
) -> None:
    """Convert every document; exit 1 when one was skipped, 2 when the inputs or settings are unusable."""
    failed: dict[Path, str] = {}

    def report(path: Path, error: DocumentError) -> None:
        failed[path] = str(error)
        print(f"skipped {path}: {error}", file=sys.stderr)

    try:
        written = pdf_to_images(inputs, out, dpi=dpi, workers=workers,
                                progress=not quiet, max_side=max_side, on_error=report)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from exc
    pages = sum(len(paths) for paths in written.values())
    print(f"{pages} pages from {len(written)} documents written to {out}; {len(failed)} failed")
    raise typer.Exit(1 if failed else 0)


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="pdf2images.py")


if __name__ == "__main__":
    sys.exit(main())
