#!/usr/bin/env python
"""PDFs → page images named `<doc>_<page>.jpg` (upstream VRAG's corpus layout), in parallel with progress.

    python scripts/pdf2images.py docs/ more.pdf --out corpus/img --dpi 144 --workers 2
Exit code 1 when a document could not be read (it is reported and skipped; the rest are converted).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from search_engine.corpus import DocumentError, pdf_to_images


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", help="PDF or image files, or folders (searched recursively)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--dpi", type=int, default=144)
    parser.add_argument("--workers", type=int, default=2, help="documents converted in parallel")
    parser.add_argument("--max-side", type=int, default=None, help="downscale so the longer side fits")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    failed: dict[Path, str] = {}

    def report(path: Path, error: DocumentError) -> None:
        failed[path] = str(error)
        print(f"skipped {path}: {error}", file=sys.stderr)

    try:
        written = pdf_to_images(args.inputs, args.out, dpi=args.dpi, workers=args.workers,
                                progress=not args.quiet, max_side=args.max_side, on_error=report)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    pages = sum(len(paths) for paths in written.values())
    print(f"{pages} pages from {len(written)} documents written to {args.out}; {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
