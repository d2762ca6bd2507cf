"""Write the bundled sample corpus (4 PDFs + rag_dataset.json) used by the demo, tests and benchmarks.

Usage: python scripts/make_sample_corpus.py [OUT_DIR]   (default: data/sample_corpus/pdf)
"""
from __future__ import annotations

import sys
from typing import Annotated

import typer

from search_engine.infra.cli_exit import exit_status
from search_engine.sample_corpus import generate_sample_corpus

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help=(__doc__ or "").splitlines()[0])
def make(
    out_dir: Annotated[str, typer.Argument()] = "data/sample_corpus/pdf",
    overwrite: Annotated[bool, typer.Option("--overwrite", help="redraw PDFs that already exist")] = False,
) -> None:
    """Generate the corpus and print each file written, then where the questions went."""
    corpus = generate_sample_corpus(out_dir, overwrite=overwrite)
    for path in corpus.files:
        print(path)
    print(f"{len(corpus.qa)} questions -> {corpus.dataset_path}")


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="make_sample_corpus.py")


if __name__ == "__main__":
    sys.exit(main())
