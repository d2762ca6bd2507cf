"""Benchmark the slide development set twice: as born-digital PDFs and as exported page images.

Slides reach users in two forms: the PDF the talk was made as (a text layer the ingestion reads
directly) and pictures of its pages (an export to PNG, a screenshot, a scan of a handout), where only
OCR (Tesseract) can read the words. This script runs `scripts/bench_real_docs.py` on both forms of the
same decks and the same questions (scripts/devset/slides_dev.jsonl), so the two can be compared
question by question:

- `pdf`: the decks as fetched by `python scripts/fetch_dev_docs.py --set slides`;
- `images`: every page rendered with PyMuPDF to `<doc>-p<NN>.png` (one image = one document of one
  page for the index, so its page id is `<doc>-p<NN>_1`), and the question file rewritten to point at
  those images (same uid, query, answers, content type and language).

    python scripts/fetch_dev_docs.py --set slides                    # the decks, once
    python scripts/bench_slides.py                                   # both forms, e2e with the stand-in
    python scripts/bench_slides.py --form images --dpi 150 --no-e2e  # OCR path, retrieval + regions only

Every option this script does not know is passed on to bench_real_docs.py (--no-e2e, --verbose,
--policy-url, --limit, ...). Reports go to runs/bench_slides/<form>.json unless --out-dir says otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import bench_real_docs  # noqa: E402  (a sibling script, importable once scripts/ is on the path)

DEFAULT_DOCS = Path("~/.cache/vrag/slides_dev").expanduser()
DEFAULT_QUESTIONS = REPO / "scripts" / "devset" / "slides_dev.jsonl"
# 200 dpi turns a 4:3 beamer page (128 mm wide) into ~1000 x 750 pixels: the size of a deck exported
# to images at 1024 x 768, neither a thumbnail OCR cannot read nor a poster-size scan.
DEFAULT_DPI = 200


def image_name(doc: str, page: int) -> str:
    """File name of one rendered page; its index page id is `<stem>_1` (an image is a one-page document)."""
    return f"{doc}-p{page:02d}.png"


def render_pages(pdf_dir: Path, out_dir: Path, dpi: int) -> dict[tuple[str, int], str]:
    """Render every page of every PDF in `pdf_dir` to PNG in `out_dir`; returns (doc, page) -> file name."""
    import pymupdf

    pdfs = sorted(pdf_dir.glob("*.pdf"))
    if not pdfs:
        raise SystemExit(f"bench_slides: no PDFs in {pdf_dir} (run scripts/fetch_dev_docs.py --set slides)")
    out_dir.mkdir(parents=True, exist_ok=True)
    names: dict[tuple[str, int], str] = {}
    for pdf in pdfs:
        with pymupdf.open(pdf) as doc:
            for number, page in enumerate(doc, start=1):
                name = image_name(pdf.stem, number)
                page.get_pixmap(dpi=dpi).save(out_dir / name)
                names[(pdf.stem, number)] = name
    return names


def rewrite_for_images(questions: Path, names: dict[tuple[str, int], str], out: Path) -> int:
    """Write `questions` with each reference page replaced by its rendered image; returns the count.

    A question whose page was not rendered is an error: the benchmark would count it as a retrieval
    miss and hide a mismatch between the question file and the decks.
    """
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(questions.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        doc = Path(row["meta_info"]["file_name"]).stem
        page = int(row["meta_info"]["reference_page"])
        name = names.get((doc, page))
        if name is None:
            raise SystemExit(f"bench_slides: {questions}:{number} asks about {doc} page {page}, which was not "
                             "rendered (is the deck in --docs?)")
        stem = Path(name).stem
        row["meta_info"] = {**row["meta_info"], "file_name": name, "reference_page": 1}
        row.update(page_id=f"{stem}_1", source_page_id=row.get("page_id"), form="image")
        rows.append(row)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return len(rows)


def build_parser() -> argparse.ArgumentParser:
    # no abbreviations: "--out" must reach the check below, not be read as --out-dir
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False,
                                epilog="Other options are passed on to scripts/bench_real_docs.py.")
    p.add_argument("--docs", type=Path, default=DEFAULT_DOCS, help=f"folder of slide PDFs (default {DEFAULT_DOCS})")
    p.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS,
                   help=f"question file (default {DEFAULT_QUESTIONS.relative_to(REPO)})")
    p.add_argument("--form", choices=("pdf", "images", "both"), default="both",
                   help="born-digital PDFs, rendered page images, or both (default)")
    p.add_argument("--dpi", type=int, default=DEFAULT_DPI,
                   help=f"render resolution of the images (default {DEFAULT_DPI})")
    p.add_argument("--images-dir", type=Path, default=None,
                   help="keep the rendered images here (default: a temporary folder, removed afterwards)")
    p.add_argument("--out-dir", type=Path, default=REPO / "runs" / "bench_slides",
                   help="where the JSON reports go (<form>.json)")
    return p


def main(argv: list[str] | None = None) -> int:
    args, passed_on = build_parser().parse_known_args(argv)
    bad = [a for a in passed_on if a.split("=")[0] in ("--docs", "--questions", "--out", "--sample-corpus")]
    if bad:
        print(f"bench_slides: {bad} are set by this script (use --docs/--questions/--out-dir)", file=sys.stderr)
        return 2
    docs = args.docs.expanduser()
    if not docs.is_dir():
        print(f"bench_slides: no folder {docs} (run scripts/fetch_dev_docs.py --set slides)", file=sys.stderr)
        return 2
    forms = ("pdf", "images") if args.form == "both" else (args.form,)
    status = 0
    for form in forms:
        print(f"\n===== slides as {form} =====", flush=True)
        out = args.out_dir / f"{form}.json"
        if form == "pdf":
            status |= bench_real_docs.main(["--docs", str(docs), "--questions", str(args.questions),
                                            "--out", str(out), *passed_on])
            continue
        with tempfile.TemporaryDirectory(prefix="bench_slides_") as tmp:
            images = (args.images_dir or Path(tmp) / "images").expanduser()
            names = render_pages(docs, images, args.dpi)
            questions = Path(tmp) / f"{args.questions.stem}_images.jsonl"
            count = rewrite_for_images(args.questions, names, questions)
            print(f"{len(names)} pages rendered at {args.dpi} dpi into {images}; {count} questions", flush=True)
            status |= bench_real_docs.main(["--docs", str(images), "--questions", str(questions),
                                            "--out", str(out), *passed_on])
    return status


if __name__ == "__main__":
    raise SystemExit(main())
