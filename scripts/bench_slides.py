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

import json
import subprocess
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from search_engine.infra.cli_exit import exit_status

REPO = Path(__file__).resolve().parents[1]
BENCH_REAL_DOCS = REPO / "scripts" / "bench_real_docs.py"

DEFAULT_DOCS = Path("~/.cache/vrag/slides_dev").expanduser()
DEFAULT_QUESTIONS = REPO / "scripts" / "devset" / "slides_dev.jsonl"
# 200 dpi turns a 4:3 beamer page (128 mm wide) into ~1000 x 750 pixels: the size of a deck exported
# to images at 1024 x 768, neither a thumbnail OCR cannot read nor a poster-size scan.
DEFAULT_DPI = 200


def bench_real_docs(argv: list[str]) -> int:
    """Run scripts/bench_real_docs.py on `argv` in a child process; its exit status.

    A child process rather than an import: scripts/ is no package, so importing a sibling script needs a
    sys.path edit, and each form then also gets a fresh process (its own memory, nothing cached between).
    """
    return subprocess.run([sys.executable, str(BENCH_REAL_DOCS), *argv], check=False).returncode


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


class Form(str, Enum):
    pdf = "pdf"
    images = "images"
    both = "both"


# Unknown options and their values are passed on to bench_real_docs.py (ctx.args). Click never reads an
# abbreviation, so "--out" reaches the check below instead of being read as --out-dir.
app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"], "allow_extra_args": True,
                                    "ignore_unknown_options": True})


@app.command(help=(__doc__ or "").splitlines()[0], epilog="Other options are passed on to scripts/bench_real_docs.py.")
def bench(
    ctx: typer.Context,
    docs: Annotated[Path, typer.Option(help=f"folder of slide PDFs (default {DEFAULT_DOCS})",
                                       show_default=False)] = DEFAULT_DOCS,
    questions: Annotated[Path, typer.Option(help=f"question file (default {DEFAULT_QUESTIONS.relative_to(REPO)})",
                                            show_default=False)] = DEFAULT_QUESTIONS,
    form: Annotated[Form, typer.Option(help="born-digital PDFs, rendered page images, or both (default)",
                                       show_default=False)] = Form.both,
    dpi: Annotated[int, typer.Option(help=f"render resolution of the images (default {DEFAULT_DPI})",
                                     show_default=False)] = DEFAULT_DPI,
    images_dir: Annotated[Path | None, typer.Option(
        help="keep the rendered images here (default: a temporary folder, removed afterwards)")] = None,
    out_dir: Annotated[Path, typer.Option(help="where the JSON reports go (<form>.json)")
                       ] = REPO / "runs" / "bench_slides",
) -> None:
    """Run bench_real_docs.py on each form; the exit status is its statuses or-ed."""
    passed_on: list[str] = list(ctx.args)
    bad = [a for a in passed_on if a.split("=")[0] in ("--docs", "--questions", "--out", "--sample-corpus")]
    if bad:
        print(f"bench_slides: {bad} are set by this script (use --docs/--questions/--out-dir)", file=sys.stderr)
        raise typer.Exit(2)
    docs = docs.expanduser()
    if not docs.is_dir():
        print(f"bench_slides: no folder {docs} (run scripts/fetch_dev_docs.py --set slides)", file=sys.stderr)
        raise typer.Exit(2)
    forms = ("pdf", "images") if form is Form.both else (form.value,)
    status = 0
    for name in forms:
        print(f"\n===== slides as {name} =====", flush=True)
        out = out_dir / f"{name}.json"
        if name == "pdf":
            status |= bench_real_docs(["--docs", str(docs), "--questions", str(questions),
                                       "--out", str(out), *passed_on])
            continue
        with tempfile.TemporaryDirectory(prefix="bench_slides_") as tmp:
            images = (images_dir or Path(tmp) / "images").expanduser()
            names = render_pages(docs, images, dpi)
            image_questions = Path(tmp) / f"{questions.stem}_images.jsonl"
            count = rewrite_for_images(questions, names, image_questions)
            print(f"{len(names)} pages rendered at {dpi} dpi into {images}; {count} questions", flush=True)
            status |= bench_real_docs(["--docs", str(images), "--questions", str(image_questions),
                                       "--out", str(out), *passed_on])
    raise typer.Exit(status)


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="bench_slides.py")


if __name__ == "__main__":
    sys.exit(main())
