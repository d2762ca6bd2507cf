#!/usr/bin/env python
"""PDFs → page images named `<doc>_<page>.jpg` (upstream VRAG's corpus layout), in parallel with progress.

    python scripts/pdf2images.py docs/ more.pdf --out corpus/img --dpi 144 --workers 2
Exit code 1 when a document could not be read (it is reported and skipped; the rest are converted).
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search_engine.corpus import pdf_to_images  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", help="PDF files or folders")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--dpi", type=int, default=144)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-side", type=int, default=None, help="downscale so the longer side fits")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    pdfs = [p for p in args.inputs]
    written, failed = pdf_to_images(pdfs, args.out, dpi=args.dpi, workers=args.workers, progress=not args.quiet,
                                    max_side=args.max_side)
    for source, reason in failed.items():
        print(f"skipped {source}: {reason}", file=sys.stderr)
    print(f"{sum(len(v) for v in written.values())} pages from {len(written)} documents; {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
