"""Compare table extractors on the table pages of the development sets: PyMuPDF, pdfplumber, the engine.

Issue 18 asks for pdfplumber "only if it clearly does better — measure it". This script measures it on
every question labelled `table` in scripts/devset/real_docs_dev.jsonl and slides_dev.jsonl, on that
question's reference page, for each extractor:

- `pymupdf-lines` / `pymupdf-text`: `Page.find_tables` with the default (ruling lines) and the "text"
  strategy (`use_layout=False`, as the engine calls it);
- `pdfplumber-lines` / `pdfplumber-text`: `Page.find_tables` with the same two strategies;
- `engine`: `search_engine.layout.pdf.pdf_page_layout` (PyMuPDF's ruled tables plus the engine's own
  aligned-columns finder, header rows/columns marked), the tables the index stores today. Its time is
  the whole page layout (blocks, figures, tables), not tables alone.

Per question it checks, in that extractor's tables: `found` — a cell holds the answer; `clean` — that cell
is mostly the answer (not a whole row or column glued into one cell); `row` — another cell of the same row
holds the question's row key (the label that picks the row, e.g. "α Cen A"); `col` — a cell above it in
the same column holds the column key (the column header, e.g. "Luminosity"), in a row of at least two
filled cells (a row glued into one cell has no columns). The keys below were read off
the rendered pages by a person; a question without a row or column key (the answer is itself a header,
or the table has none) does not count for that check. Times are CPU seconds per page (process time, so a
busy shared machine does not inflate them), the median of --repeat runs.

pdfplumber is not a project dependency; run this in a virtual environment that has it (and typer, this
script's command line, as every command line of the project):

    python3 -m venv /tmp/plumber && /tmp/plumber/bin/pip install pdfplumber pymupdf typer
    /tmp/plumber/bin/python scripts/bench_table_extractors.py            # JSON to runs/bench_tables.json
    /tmp/plumber/bin/python scripts/bench_table_extractors.py --verbose  # one line per question and extractor

Extractors whose library is missing are reported as skipped. The documents come from
scripts/fetch_dev_docs.py (`--set dev` and `--set slides`).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the engine's extractor and the scores, without installing the project into this venv

from search_engine.infra.cli_exit import exit_status  # noqa: E402
from vrag_rl.evaluation.table_extractor_bench import Grid, check_tables  # noqa: E402

QUESTION_SETS = (
    (REPO / "scripts" / "devset" / "real_docs_dev.jsonl", Path("~/.cache/vrag/dev_docs").expanduser()),
    (REPO / "scripts" / "devset" / "slides_dev.jsonl", Path("~/.cache/vrag/slides_dev").expanduser()),
)

# uid -> (row key, column key), read off the rendered pages. None: no such key for that question.
KEYS: dict[str, tuple[str | None, str | None]] = {
    "dev002": ("α Cen A", "Luminosity"),
    "dev003": ("arcminutes", "Command"),
    "dev004": ("\\ga", "Meaning"),
    "dev005": ("δ Pav", "Mass"),
    "dev009": ("For use with manual brackets", "Command"),
    "dev010": ("Monthly Notes of the Astronomical Society of Southern Africa", None),
    "dev020": (None, None),  # the answer is a whole row of a matrix
    "dev042": ("joinAxisPos", "Meaning"),
    "dev043": ("fieldFlags", "Default"),
    "dev044": ("maxlen", "Default"),
    "dev045": (None, "Result"),  # the row is picked by "Y" / "-" flags, not by a label
    "dev050": ("Angle of the label", "Property"),
    "dev061": ("hypergeometric", "R name"),
    "dev062": ("Poisson", "additional arguments"),
    "dev067": ("XƎLATEX", "Windows"),
    "dev069": ("\\large", "zihao = 5"),
    "dev070": ("初号", "大小(bp)"),
    "dev073": ("PDF", "plain"),
    "dev077": (None, None),  # the answer is the header of the column holding \gcd
    "dev078": ("mirrors.hit.edu.cn", None),
    "sl026": ("Shanghai", "Population"),
    "sl027": ("14,160,467", "City"),
    "sl028": ("Peking", "Population"),
    "sl044": (None, "option"),
    "sl058": ("title", "# unique values"),
    "sl059": ("11014", "column"),
    "sl066": ("delta", None),
    "sl067": ("白色文字，红色背景", None),
}


# ------------------------------------------------------------------------------------------ extractors


def _cells(rows: list[list[Any]]) -> Grid:
    return [[str(v) if v is not None else "" for v in row] for row in rows]


def pymupdf_extractor(strategy: str) -> Callable[[Path, int], list[Grid]]:
    import pymupdf

    def run(path: Path, page_number: int) -> list[Grid]:
        with pymupdf.open(path) as doc:
            page = doc[page_number - 1]
            try:
                found = page.find_tables(strategy=strategy, use_layout=False).tables
            except TypeError:  # PyMuPDF < 2.0 has no use_layout
                found = page.find_tables(strategy=strategy).tables
            return [_cells(t.extract()) for t in found]

    return run


def pdfplumber_extractor(strategy: str) -> Callable[[Path, int], list[Grid]]:
    import pdfplumber

    settings = {"vertical_strategy": strategy, "horizontal_strategy": strategy}

    def run(path: Path, page_number: int) -> list[Grid]:
        with pdfplumber.open(path) as pdf:
            page = pdf.pages[page_number - 1]
            return [_cells(t.extract()) for t in page.find_tables(settings)]

    return run


def engine_extractor() -> Callable[[Path, int], list[Grid]]:
    import pymupdf

    from search_engine.layout.pdf import pdf_page_layout

    def run(path: Path, page_number: int) -> list[Grid]:
        with pymupdf.open(path) as doc:
            page = doc[page_number - 1]
            size = (int(page.rect.width * 2), int(page.rect.height * 2))
            layout = pdf_page_layout(page, f"p{page_number}", size)
        grids = []
        for region in layout.regions:
            if region.kind != "table" or not region.cells:
                continue
            rows = 1 + max(cell.row for cell in region.cells)
            cols = 1 + max(cell.col for cell in region.cells)
            grid = [["" for _ in range(cols)] for _ in range(rows)]
            for cell in region.cells:
                grid[cell.row][cell.col] = cell.text
            grids.append(grid)
        return grids

    return run


EXTRACTORS: dict[str, Callable[[], Callable[[Path, int], list[Grid]]]] = {
    "pymupdf-lines": lambda: pymupdf_extractor("lines"),
    "pymupdf-text": lambda: pymupdf_extractor("text"),
    "pdfplumber-lines": lambda: pdfplumber_extractor("lines"),
    "pdfplumber-text": lambda: pdfplumber_extractor("text"),
    "engine": engine_extractor,
}


# ------------------------------------------------------------------------------------------ driver


@dataclass
class Question:
    uid: str
    path: Path
    page: int
    refs: list[str]
    row_key: str | None
    col_key: str | None
    language: str


@dataclass
class Summary:
    extractor: str
    n: int = 0
    pages: int = 0
    found: int = 0
    clean: int = 0
    row_ok: int = 0
    row_n: int = 0
    col_ok: int = 0
    col_n: int = 0
    tables_per_page: float = 0.0
    cpu_ms_per_page: float = 0.0
    skipped: str | None = None
    detail: list[dict[str, Any]] = field(default_factory=list)


def load_questions() -> list[Question]:
    questions = []
    for path, docs in QUESTION_SETS:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else None
            if not row or row.get("content_type") != "table":
                continue
            if row["uid"] not in KEYS:
                raise SystemExit(f"bench_table_extractors: table question {row['uid']} has no KEYS entry")
            pdf = docs / row["meta_info"]["file_name"]
            if not pdf.exists():
                raise SystemExit(f"bench_table_extractors: {pdf} missing (run scripts/fetch_dev_docs.py)")
            refs = row["reference_answer"] if isinstance(row["reference_answer"], list) else [row["reference_answer"]]
            questions.append(Question(row["uid"], pdf, int(row["meta_info"]["reference_page"]), refs,
                                      *KEYS[row["uid"]], row.get("language", "")))
    return questions


def measure(name: str, make: Callable[[], Callable[[Path, int], list[Grid]]], questions: list[Question],
            repeat: int, verbose: bool) -> Summary:
    summary = Summary(name)
    try:
        extract = make()
    except ImportError as exc:
        summary.skipped = f"not installed: {exc}"
        return summary
    pages = sorted({(q.path, q.page) for q in questions})
    grids: dict[tuple[Path, int], list[Grid]] = {}
    times = []
    for key in pages:
        runs = []
        for _ in range(repeat):
            start = time.process_time()
            grids[key] = extract(*key)
            runs.append(time.process_time() - start)
        times.append(statistics.median(runs))
    for q in questions:
        check = check_tables(grids[(q.path, q.page)], q.refs, q.row_key, q.col_key)
        summary.n += 1
        summary.found += check.found
        summary.clean += check.clean
        if check.row is not None:
            summary.row_n += 1
            summary.row_ok += check.row
        if check.col is not None:
            summary.col_n += 1
            summary.col_ok += check.col
        summary.detail.append({"uid": q.uid, "language": q.language, **asdict(check)})
        if verbose:
            print(f"{name:17s} {q.uid:7s} tables={check.tables} found={check.found!s:5s} clean={check.clean!s:5s} "
                  f"row={check.row!s:5s} col={check.col}")
    summary.pages = len(pages)
    summary.tables_per_page = round(sum(len(g) for g in grids.values()) / max(len(pages), 1), 2)
    summary.cpu_ms_per_page = round(1000 * statistics.mean(times), 1) if times else 0.0
    return summary


def format_summaries(summaries: list[Summary]) -> str:
    header = f"{'extractor':17s} {'n':>3s} {'found':>7s} {'clean':>7s} {'row key':>9s} {'col key':>9s} " \
             f"{'tables/pg':>9s} {'CPU ms/pg':>9s}"
    lines = [header, "-" * len(header)]
    for s in summaries:
        if s.skipped:
            lines.append(f"{s.extractor:17s} skipped ({s.skipped})")
            continue
        lines.append(f"{s.extractor:17s} {s.n:3d} {s.found:3d}/{s.n:<3d} {s.clean:3d}/{s.n:<3d} "
                     f"{s.row_ok:4d}/{s.row_n:<4d} {s.col_ok:4d}/{s.col_n:<4d} {s.tables_per_page:9.2f} "
                     f"{s.cpu_ms_per_page:9.1f}")
    return "\n".join(lines)


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"],
                                    # `--only a b` (argparse's nargs="*", which click options lack): the values
                                    # after the first arrive as extra arguments, see `_extractors`
                                    "allow_extra_args": True})


@app.command(help=(__doc__ or "").splitlines()[0])
def bench(
    ctx: typer.Context,
    only: Annotated[list[str] | None, typer.Option(
        metavar="{" + ",".join(sorted(EXTRACTORS)) + "}", help="run only these extractors")] = None,
    repeat: Annotated[int, typer.Option(help="timing runs per page (median; default 3)", show_default=False)] = 3,
    verbose: Annotated[bool, typer.Option("--verbose", help="one line per question and extractor")] = False,
    out: Path = REPO / "runs" / "bench_tables.json",
) -> None:
    """Run each extractor over the table questions' pages; print the table and write the JSON report."""
    names = _extractors(only, ctx.args) or list(EXTRACTORS)
    questions = load_questions()
    summaries = [measure(name, EXTRACTORS[name], questions, max(repeat, 1), verbose) for name in names]
    pages = len({(q.path, q.page) for q in questions})
    print(f"{len(questions)} table questions on {pages} pages "
          f"({sum(q.language == 'zh' for q in questions)} Chinese)\n")
    print(format_summaries(summaries))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([asdict(s) for s in summaries], indent=2, ensure_ascii=False, default=str))
    print(f"\nreport written to {out}")


def _extractors(options: list[str] | None, extra: list[str]) -> list[str]:
    """`--only a --only b` and argparse's `--only a b` (b arrives among the extra arguments), names checked."""
    if not options and extra:
        raise typer.BadParameter(f"unexpected argument {extra[0]!r}")
    names = [*(options or []), *extra]
    for name in names:
        if name not in EXTRACTORS:
            raise typer.BadParameter(f"{name!r} is not one of {', '.join(sorted(EXTRACTORS))}",
                                     param_hint="'--only'")
    return names


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="bench_table_extractors.py")

if __name__ == "__main__":
    sys.exit(main())
