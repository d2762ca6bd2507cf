"""Robustness run: ingest hundreds of real PDFs of many producers and show that no page stops an ingestion.

The PDFs are the documentation PDFs of Debian packages (TeX Live package manuals made by pdfTeX, XeTeX, LuaTeX,
dvipdfm(x) and dvips+Ghostscript over twenty years, the Erlang/OTP manuals made by Apache FOP, the R manuals,
ReportLab's, Ghostscript's, DocBook's and others: downloaded with `apt-get download`, unpacked with
`dpkg-deb -x` into a cache folder, never committed) and the team's development pool `../shared/data/dev_docs/`
(36 files of nine genres from Word, PowerPoint, Keynote, QuarkXPress, scanners ...; see its SOURCES.md).
The held-out sets (`real_docs*`) are never read. A few of the selected PDFs are also written again as fuzzed
copies: each page turned (/Rotate 90/180/270) and its media box cut or grown, so pages of mixed sizes and
orientations carry text and pictures past their edges.

The PDFs are ingested in batches, one `Ingestor.add` per batch, each in a child process (a crash in a native
library then counts as an aborted run instead of ending this script) into its own index under `--out`, with
the CPU text channel (MiniLM + BM25; no visual model), OCR and figure OCR on, as `vrag-search ingest` runs by
default. Each batch's result is written to `--out/results/`, so a killed run resumes at the first batch
without one (and the ingestion inside a batch resumes from its checkpoints). `--max-pages` caps the pages
ingested per PDF (the first N; the rest of the file is still read for its running headers and title): the
pool holds 20,000+ pages and the run has 2 shared CPU cores.

Then a layout fuzz over the same real pages: each page's layout is read again with the page turned, with its
media box cut (its content past the edges) or grown, and with the parts read from its text layer given boxes
off the page, empty, inverted, NaN and infinite; every layout box must be finite, ordered and on the page
image, and every figure crop one PIL accepts.

Printed (and written to `--out/summary.json`): PDFs and pages, pages indexed, degraded pages by step and by
reason, pages not indexed (reported), documents skipped (reported), aborted runs (must be 0), pages lost
(neither indexed nor reported: must be 0), degraded pages the index does not record (must be 0), pages/s and
peak RSS of the ingesting processes, and the layout fuzz's cases, errors and boxes off the page (must be 0).

    python scripts/robustness_run.py                                # fetch, run (resumes), print
    python scripts/robustness_run.py --pdfs 320 --max-pages 8 --batch 16 --out /tmp/vrag_robustness/run
    python scripts/robustness_run.py --fresh                        # forget earlier batch results
"""
from __future__ import annotations

import collections
import hashlib
import json
import math
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from search_engine.infra.cli_exit import exit_status

REPO = Path(__file__).resolve().parents[1]

DEV_DOCS = REPO.parent / "shared" / "data" / "dev_docs" / "pdfs"
# Debian packages that ship PDFs (checked with `dpkg-deb -c`): the TeX Live collections' manuals, and manuals
# made by other producers (Apache FOP, Texinfo, dblatex, ReportLab, Ghostscript, doxygen, ...)
DEBIAN_PACKAGES = ("texlive-science-doc", "texlive-humanities-doc", "r-doc-pdf", "python-reportlab-doc",
                   "erlang-doc", "docbook-xsl-doc-pdf", "auto-multiple-choice-doc-pdf", "why3-doc-pdf",
                   "siscone-doc-pdf", "camlidl-doc", "ghostscript-doc", "gri-pdf-doc", "freefem-doc")
HELD_OUT = re.compile(r"(^|/)real_docs[^/]*(/|$)")


# ---- the corpus -----------------------------------------------------------------------------------------------


def fetch_debian(cache: Path, packages: tuple[str, ...]) -> list[tuple[Path, str]]:
    """(pdf, "debian:<package>") for every PDF (or gzipped PDF, unpacked) the packages ship; downloaded and
    unpacked once into `cache`."""
    debs, tree = cache / "debs", cache / "tree"
    debs.mkdir(parents=True, exist_ok=True)
    found: list[tuple[Path, str]] = []
    for package in packages:
        have = list(debs.glob(f"{package}_*.deb"))
        if not have:
            subprocess.run(["apt-get", "download", package], cwd=debs, check=True, capture_output=True)
            have = list(debs.glob(f"{package}_*.deb"))
        target = tree / package
        if not (target / ".unpacked").exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            subprocess.run(["dpkg-deb", "-x", str(have[0]), str(target)], check=True)
            for gz in target.rglob("*.pdf.gz"):
                if gz.is_file() and not gz.is_symlink():
                    subprocess.run(["gunzip", "-kf", str(gz)], check=True)
            (target / ".unpacked").touch()
        found += [(p, f"debian:{package}") for p in sorted(target.rglob("*")) if p.suffix.lower() == ".pdf"
                  and p.is_file() and not p.is_symlink()]
    return found


def inventory(candidates: list[tuple[Path, str]]) -> list[dict[str, Any]]:
    """One entry per distinct file (by content): path, source, sha1, pages (PyMuPDF's count, -1 when it cannot
    open the file), producer."""
    import pymupdf

    seen: set[str] = set()
    out = []
    for path, source in candidates:
        if HELD_OUT.search(path.resolve().as_posix()):
            raise SystemExit(f"refusing a held-out document: {path}")
        sha1 = hashlib.sha1(path.read_bytes()).hexdigest()
        if sha1 in seen:
            continue
        seen.add(sha1)
        try:
            with pymupdf.open(path) as doc:
                pages, producer = doc.page_count, ((doc.metadata or {}).get("producer") or "").strip()
        except Exception:  # noqa: BLE001 - counted as a PDF ingestion must report, not a reason to stop
            pages, producer = -1, "unreadable"
        out.append({"path": str(path), "source": source, "sha1": sha1, "pages": pages, "producer": producer})
    return out


def producer_family(producer: str) -> str:
    """"pdfTeX-1.40.21" -> "pdftex", "GPL Ghostscript 9.05" -> "ghostscript": the tool, not its version."""
    name = producer.lower()
    for family in ("pdftex", "pdfetex", "xdvipdfmx", "dvipdfmx", "dvipdfm", "luatex", "xetex", "ghostscript", "fop",
                   "acrobat", "distiller", "word", "powerpoint", "quartz", "keynote", "reportlab", "cairo", "skia",
                   "itext", "libreoffice", "openoffice", "miktex", "dvips"):
        if family in name:
            return family
    return re.sub(r"[\d.\s-]+$", "", name)[:20] or "unknown"


def select(items: list[dict[str, Any]], total: int, seed: int) -> list[dict[str, Any]]:
    """The development pool whole, then Debian PDFs round-robin over producer families (seeded order inside
    each), up to `total`."""
    rng = random.Random(seed)
    chosen = [i for i in items if i["source"] == "dev_docs"]
    groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for item in items:
        if item["source"] != "dev_docs":
            groups[producer_family(item["producer"])].append(item)
    for group in groups.values():
        rng.shuffle(group)
    order = sorted(groups)
    while len(chosen) < total and any(groups.values()):
        for family in order:
            if groups[family] and len(chosen) < total:
                chosen.append(groups[family].pop())
    return chosen


def fuzzed_copies(items: list[dict[str, Any]], count: int, max_pages: int, folder: Path,
                  seed: int) -> list[dict[str, Any]]:
    """Copies of `count` PDFs (their first `max_pages` pages) with each page turned and its media box cut or
    grown (content past the page's edges; pages of mixed sizes and orientations)."""
    import pymupdf

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    pool = [i for i in items if i["pages"] > 0]
    for item in rng.sample(pool, min(count, len(pool))):
        target = folder / f"fuzzed_{Path(item['path']).stem}_{item['sha1'][:6]}.pdf"
        if not target.exists():
            with pymupdf.open(item["path"]) as doc:
                doc.select(list(range(min(max_pages, doc.page_count))))
                for page in doc:
                    box = page.mediabox
                    w, h = box.width, box.height
                    if rng.random() < 0.5:  # cut: what lay near the edges now lies past them
                        new = pymupdf.Rect(box.x0 + w * rng.uniform(0, .3), box.y0 + h * rng.uniform(0, .3),
                                           box.x1 - w * rng.uniform(0, .3), box.y1 - h * rng.uniform(0, .3))
                    else:  # grown: the page is larger than what is drawn on it
                        new = pymupdf.Rect(box.x0 - w * rng.uniform(0, .5), box.y0 - h * rng.uniform(0, .5),
                                           box.x1 + w * rng.uniform(0, .5), box.y1 + h * rng.uniform(0, .5))
                    page.set_mediabox(new)
                    page.set_rotation(rng.choice([0, 90, 180, 270]))
                doc.save(target, garbage=1)
        with pymupdf.open(target) as doc:
            pages = doc.page_count
        out.append({"path": str(target), "source": "fuzzed:" + item["source"],
                    "sha1": hashlib.sha1(target.read_bytes()).hexdigest(), "pages": pages,
                    "producer": item["producer"]})
    return out


# ---- one batch, in a child process ----------------------------------------------------------------------------


def run_batch(spec_file: Path) -> None:
    """Ingest one batch (the spec's files, first `max_pages` pages each) into its own index and write what
    happened to the spec's result file."""
    spec = json.loads(spec_file.read_text())
    from search_engine.engine import SearchEngine
    from search_engine.index.manifest import Manifest
    from search_engine.ingest import Ingestor

    cap = spec["max_pages"]

    class CappedIngestor(Ingestor):
        """Ingestion of the first `cap` pages of each document: the original file, every step as usual."""

        def _plan(self, *args: Any, **kwargs: Any):
            return [(path, doc_id, sha1, min(pages, cap)) for path, doc_id, sha1, pages in super()._plan(*args,
                                                                                                         **kwargs)]

    index = Path(spec["index"])
    files = [Path(f["path"]) for f in spec["files"]]
    started = time.perf_counter()
    aborted, report = None, None
    injected: collections.Counter[str] = collections.Counter()
    try:
        text_embedder = None
        if spec.get("chaos"):
            text_embedder = inject_failures(spec["chaos"], spec["seed"] + spec["batch"], injected)
        ingestor = CappedIngestor(index, visual_model=None, text_model="minilm", device="cpu", ocr=True,
                                  progress=False, text_embedder=text_embedder)
        report = ingestor.add(files)
    except BaseException as exc:  # noqa: BLE001 - this is what the run counts: an ingestion that did not finish
        aborted = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    manifest = Manifest.load(index)
    by_source = {e.source_path: e for e in manifest.documents.values()}
    docs = []
    for f in spec["files"]:
        source = str(Path(f["path"]).resolve())
        entry = by_source.get(source)
        skipped = manifest.skipped.get(source)
        docs.append({**f, "doc_id": entry.doc_id if entry else (skipped or {}).get("doc_id", ""),
                     "indexed": sorted(manifest.pages[p].page_number for p in entry.page_ids) if entry else [],
                     "skipped": (skipped or {}).get("reason") if not entry else None})
    recorded = manifest.degraded_pages()
    reported = report.degraded if report else []
    key = lambda d: (d.doc_id, d.page, d.step, d.error)  # noqa: E731
    stats_count = SearchEngine.load(index, device="cpu").stats()["degraded_pages"] if manifest.documents else 0
    result = {
        "batch": spec["batch"], "aborted": aborted, "seconds": seconds,
        "pages_embedded": report.pages if report else 0, "docs": docs,
        "degraded": [d.to_dict() for d in recorded],
        "unrecorded": [d.to_dict() for d in reported if key(d) not in {key(r) for r in recorded}],
        "health_count": stats_count, "recorded_count": len({(d.doc_id, d.page) for d in recorded}),
        "peak_rss_kb": _own_peak_rss_kb(), "injected": dict(injected),
    }
    Path(spec["result"]).write_text(json.dumps(result, indent=1))


def inject_failures(rate: float, seed: int, injected: collections.Counter[str]) -> Any:
    """Chaos mode: the third-party calls of the page steps fail at random (seeded), each call with probability
    `rate`, as those libraries fail on real files: poppler (`pdf2image.convert_from_path`), tesseract
    (`pytesseract.image_to_data`: page and figure OCR), PyMuPDF's table finder (`Page.find_tables`), the
    sentence-transformers text model (MiniLM's `embed_texts`). Returns the text embedder to ingest with."""
    import pdf2image
    import pymupdf
    import pytesseract
    from pdf2image.exceptions import PDFSyntaxError

    from search_engine.embedders import load_text_embedder

    rng = random.Random(seed)

    def failing(name: str, call: Any, error: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if rng.random() < rate:
                injected[name] += 1
                raise error(f"injected: {name} failed")
            return call(*args, **kwargs)
        return wrapper

    pdf2image.convert_from_path = failing("poppler", pdf2image.convert_from_path, PDFSyntaxError)
    pytesseract.image_to_data = failing("tesseract", pytesseract.image_to_data,
                                        lambda message: pytesseract.TesseractError(1, message))
    pymupdf.Page.find_tables = failing("table_finder", pymupdf.Page.find_tables, RuntimeError)
    embedder = load_text_embedder("minilm", device="cpu")
    embedder.embed_texts = failing("text_model", embedder.embed_texts, RuntimeError)  # type: ignore[method-assign]
    return embedder


def _own_peak_rss_kb() -> int:
    """This process's own peak RSS (VmHWM): ru_maxrss of the children also carries the parent's."""
    try:
        status = Path("/proc/self/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]
    except (OSError, AttributeError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# ---- the layout fuzz over real pages ----------------------------------------------------------------------------


def layout_fuzz(items: list[dict[str, Any]], pages_per_pdf: int, seed: int) -> dict[str, Any]:
    """Layouts of real pages turned, cut, grown, and with their parts' boxes broken (see the module doc)."""
    import pymupdf
    from PIL import Image

    from search_engine.layout.compose import compose, on_page
    from search_engine.layout.figures import pdf_figures
    from search_engine.layout.geometry import crop_box
    from search_engine.layout.pdf import pdf_page_layout
    from search_engine.layout.text_layer import pdf_blocks, upright

    rng = random.Random(seed)
    counts: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    nan, inf = float("nan"), float("inf")

    def valid(box: tuple[float, ...], w: float, h: float) -> bool:
        return all(math.isfinite(v) for v in box) and 0 <= box[0] <= box[2] <= w and 0 <= box[1] <= box[3] <= h

    def check(layout: Any, where: str) -> None:
        counts["layouts"] += 1
        boxes = [r.box for r in layout.regions] + [c.box for r in layout.regions for c in r.cells] + [
            lb.box for r in layout.regions for lb in r.labels]
        counts["boxes"] += len(boxes)
        bad = [b for b in boxes if not valid(b, layout.width, layout.height)]
        counts["boxes_off_page"] += len(bad)
        if bad:
            failures.append(f"{where}: {bad[:3]}")
        for region in layout.regions:
            if region.kind == "figure":
                counts["figure_crops"] += 1
                window = crop_box(region.box, (1.0, 1.0), (layout.width, layout.height), pad=4, min_side=8)
                if window is not None:
                    Image.new("L", (layout.width, layout.height)).crop(window)

    def fuzz_page(page: Any, variant: str, page_id: str) -> Any:
        box = page.mediabox
        w, h = box.width, box.height
        if variant == "rotate":
            page.set_rotation(rng.choice([90, 180, 270]))
        elif variant == "cut":  # what lay near the edges now lies past them
            page.set_mediabox(pymupdf.Rect(box.x0 + w * .2, box.y0 + h * .2, box.x1 - w * .25, box.y1 - h * .3))
        elif variant == "grow":
            page.set_mediabox(pymupdf.Rect(box.x0 - w * .3, box.y0, box.x1 + w * .1, box.y1 + h * .4))
        upright(page)
        pw, ph = page.rect.width, page.rect.height
        size = (max(1, round(pw * rng.uniform(0.5, 2.5))), max(1, round(ph * rng.uniform(0.5, 2.5))))
        if variant != "broken_parts":
            return pdf_page_layout(page, page_id, size)
        blocks = pdf_blocks(page)
        for block in blocks:
            for line in block.lines:
                line.box = broken(line.box, pw, ph)  # type: ignore[assignment]
                for piece in line.pieces:
                    piece.box = broken(piece.box, pw, ph)  # type: ignore[assignment]
        figures = pdf_figures(page, [])
        for figure in figures:
            figure.box = broken(figure.box, pw, ph)  # type: ignore[assignment]
        if rng.random() < .5:  # half the cases as a reader hands them on (`on_page`), half straight into compose
            blocks, _, figures = on_page(blocks, [], figures, pw, ph)
        return compose(page_id, blocks, [], figures, pw, ph, (size[0] / pw, size[1] / ph), size, frozenset(), "pdf")

    def broken(box: tuple[float, ...], w: float, h: float) -> tuple[float, ...]:
        kind = rng.choice(["off", "partly", "empty", "inverted", "nan", "inf", "same"])
        x1, y1, x2, y2 = box
        return {"off": (x1 + 2 * w, y1, x2 + 2 * w, y2), "partly": (x1 - w, y1 - h, x2 + w, y2 + h),
                "empty": (x1, y1, x1, y2), "inverted": (x2, y2, x1, y1), "nan": (nan, y1, x2, y2),
                "inf": (x1, y1, inf, y2), "same": box}[kind]

    for item in items:
        if item["pages"] <= 0:
            continue
        data = Path(item["path"]).read_bytes()
        for number in range(min(pages_per_pdf, item["pages"])):
            where = f"{Path(item['path']).name} p{number + 1}"
            for variant in ("rotate", "cut", "grow", "broken_parts"):
                counts["cases"] += 1
                try:  # each variant on a fresh copy: turning and cutting a page change the document in memory
                    with pymupdf.open(stream=data, filetype="pdf") as doc:
                        layout = fuzz_page(doc[number], variant, f"fuzz_{number + 1}")
                    check(layout, f"{where} {variant}")
                except Exception as exc:  # noqa: BLE001 - counted: the layout of any page must not raise
                    counts["errors"] += 1
                    failures.append(f"{where} {variant}: {type(exc).__name__}: {exc}")
    return {**counts, "failures": failures[:20]}


# ---- the run ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSettings:
    """The run's options, as the summary names them."""

    out: Path
    cache: Path
    pdfs: int
    fuzz_pdfs: int
    max_pages: int
    batch: int
    layout_fuzz_pages: int
    seed: int
    fresh: bool
    chaos: float


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help=(__doc__ or "").splitlines()[0])
def robustness(
    out: Path = Path("/tmp/vrag_robustness/run"),
    cache: Annotated[Path, typer.Option(help="downloaded .debs, their unpacked trees, fuzzed copies")] = Path(
        "/tmp/vrag_robustness/cache"),
    pdfs: Annotated[int, typer.Option(help="PDFs to ingest (dev_docs whole, then Debian)")] = 320,
    fuzz_pdfs: Annotated[int, typer.Option(help="fuzzed copies (turned, cut, grown pages) on top")] = 24,
    max_pages: Annotated[int, typer.Option(help="pages ingested per PDF: the first N")] = 8,
    batch: Annotated[int, typer.Option(help="PDFs per ingestion run (one child process each)")] = 16,
    layout_fuzz_pages: Annotated[int, typer.Option(help="pages per PDF of the layout fuzz")] = 3,
    seed: int = 13,
    fresh: Annotated[bool, typer.Option("--fresh", help="forget earlier batch results and indexes")] = False,
    chaos: Annotated[float, typer.Option(
        help="make each call of poppler, tesseract, PyMuPDF's table finder and the text model fail with this "
             "probability (third-party failures, simulated): every one must be reported")] = 0.0,
    worker: Annotated[Path | None, typer.Option(
        hidden=True, help="run one batch from this spec file (the run starts itself with it)")] = None,
) -> None:
    """Fetch, ingest batch by batch (resuming), fuzz layouts, print and write the summary."""
    if worker is not None:
        run_batch(worker)
        return
    run(RunSettings(out=out, cache=cache, pdfs=pdfs, fuzz_pdfs=fuzz_pdfs, max_pages=max_pages, batch=batch,
                    layout_fuzz_pages=layout_fuzz_pages, seed=seed, fresh=fresh, chaos=chaos))


def run(args: RunSettings) -> None:
    """The whole run (see the module doc); each batch in a child process of this script."""
    from tqdm.auto import tqdm

    if args.fresh:
        shutil.rmtree(args.out, ignore_errors=True)
    (args.out / "results").mkdir(parents=True, exist_ok=True)
    (args.out / "specs").mkdir(parents=True, exist_ok=True)
    candidates = [(p, "dev_docs") for p in sorted(DEV_DOCS.glob("*.pdf"))]
    candidates += fetch_debian(args.cache, DEBIAN_PACKAGES)
    items = inventory(candidates)
    chosen = select(items, args.pdfs, args.seed)
    chosen += fuzzed_copies(chosen, args.fuzz_pdfs, args.max_pages, args.cache / "fuzzed", args.seed)
    batches = [chosen[k:k + args.batch] for k in range(0, len(chosen), args.batch)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    bar = tqdm(total=len(chosen), unit="pdf", desc="robustness run")
    results = []
    for number, batch in enumerate(batches):
        result_file = args.out / "results" / f"batch_{number:03d}.json"
        if not result_file.exists():
            spec = {"batch": number, "files": batch, "max_pages": args.max_pages, "chaos": args.chaos,
                    "seed": args.seed, "index": str(args.out / "indexes" / f"batch_{number:03d}"),
                    "result": str(result_file)}
            spec_file = args.out / "specs" / f"batch_{number:03d}.json"
            spec_file.write_text(json.dumps(spec, indent=1))
            child = subprocess.run([sys.executable, __file__, "--worker", str(spec_file)], env=env, cwd=REPO,
                                   capture_output=True, text=True)
            (args.out / "results" / f"batch_{number:03d}.log").write_text(child.stdout + child.stderr)
            if not result_file.exists():  # the child died: an aborted run all the same
                result_file.write_text(json.dumps({
                    "batch": number, "aborted": f"child exited {child.returncode}: {child.stderr[-500:]}",
                    "seconds": 0.0, "pages_embedded": 0, "docs": [{**f, "indexed": [], "skipped": None}
                                                                   for f in batch],
                    "degraded": [], "unrecorded": [], "health_count": 0, "recorded_count": 0, "peak_rss_kb": 0,
                    "injected": {}}))
        results.append(json.loads(result_file.read_text()))
        done = sum(r["seconds"] for r in results)
        bar.update(len(batch))
        bar.set_postfix(aborted=sum(1 for r in results if r["aborted"]),
                        degraded=sum(r["recorded_count"] for r in results),
                        pages_per_s=f"{sum(r['pages_embedded'] for r in results) / max(done, 1e-9):.2f}")
    bar.close()
    fuzz = layout_fuzz([i for i in chosen if not i["source"].startswith("fuzzed")], args.layout_fuzz_pages,
                       args.seed) if args.layout_fuzz_pages else {}
    summary = summarize(results, args, fuzz)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print_summary(summary)


def summarize(results: list[dict[str, Any]], args: RunSettings, fuzz: dict[str, Any]) -> dict[str, Any]:
    docs = [d for r in results for d in r["docs"]]
    degraded = [d for r in results for d in r["degraded"]]
    lost, unexpected = 0, 0
    not_indexed_by_doc: dict[str, set[int]] = collections.defaultdict(set)
    for d in degraded:
        if not d["indexed"]:
            not_indexed_by_doc[d["doc_id"]].add(d["page"])
    attempted = 0
    for doc in docs:
        expected = min(doc["pages"], args.max_pages) if doc["pages"] > 0 else 0
        attempted += expected
        indexed = set(doc["indexed"])
        unexpected += len(indexed - set(range(1, expected + 1)))
        accounted = indexed | not_indexed_by_doc.get(doc["doc_id"], set())
        if doc.get("skipped"):  # the document itself was reported, with why
            accounted = set(range(1, expected + 1))
        lost += len(set(range(1, expected + 1)) - accounted)
    seconds = sum(r["seconds"] for r in results)
    embedded = sum(r["pages_embedded"] for r in results)
    pages = {(d["doc_id"], d["page"]) for d in degraded}
    return {
        "command": "python scripts/robustness_run.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in (("pdfs", args.pdfs), ("fuzz_pdfs", args.fuzz_pdfs),
                                                       ("max_pages", args.max_pages), ("batch", args.batch),
                                                       ("layout_fuzz_pages", args.layout_fuzz_pages),
                                                       ("seed", args.seed), ("chaos", args.chaos))),
        "injected_failures": dict(sum((collections.Counter(r.get("injected", {})) for r in results),
                                      collections.Counter())),
        "pdfs": len(docs),
        "pdfs_by_source": dict(collections.Counter(d["source"].split(":")[0] + (
            ":" + d["source"].split(":")[1] if d["source"].startswith("debian") else "") for d in docs)),
        "producers": dict(collections.Counter(producer_family(d["producer"]) for d in docs).most_common()),
        "pages_in_files": sum(max(d["pages"], 0) for d in docs),
        "pages_attempted": attempted,
        "pages_indexed": sum(len(d["indexed"]) for d in docs),
        "ingestion_runs": len(results),
        "aborted_runs": sum(1 for r in results if r["aborted"]),
        "aborted": [r["aborted"] for r in results if r["aborted"]],
        "documents_skipped": {Path(d["path"]).name: d["skipped"] for d in docs if d.get("skipped")},
        "degraded_pages": len(pages),
        "pages_not_indexed": len({(d["doc_id"], d["page"]) for d in degraded if not d["indexed"]}),
        "degraded_by_step": dict(collections.Counter(d["step"] for d in degraded).most_common()),
        "degraded_by_reason": dict(collections.Counter(f"{d['step']}: {d['error']}" for d in degraded).most_common()),
        "degraded_examples": [f"{d['source']} p{d['page']} [{d['step']}] {d['error']}: {d['message'][:160]}"
                              for d in degraded[:15]],
        "unrecorded_degraded": sum(len(r["unrecorded"]) for r in results),
        "health_mismatches": sum(1 for r in results if r["health_count"] != r["recorded_count"]),
        "pages_lost": lost,
        "unexpected_pages": unexpected,
        "ingest_seconds": round(seconds, 1),
        "pages_per_s": round(embedded / max(seconds, 1e-9), 3),
        "peak_rss_mb": round(max((r["peak_rss_kb"] for r in results), default=0) / 1024, 1),
        "layout_fuzz": fuzz,
    }


def print_summary(s: dict[str, Any]) -> None:
    print(f"\ncommand: {s['command']}")
    print(f"PDFs: {s['pdfs']} ({', '.join(f'{k} {v}' for k, v in s['pdfs_by_source'].items())})")
    print(f"producers: {', '.join(f'{k} {v}' for k, v in s['producers'].items())}")
    print(f"pages: {s['pages_in_files']} in the files, {s['pages_attempted']} attempted (cap per PDF), "
          f"{s['pages_indexed']} indexed")
    if s["injected_failures"]:
        print(f"injected third-party failures (--chaos): {s['injected_failures']}")
    print(f"ingestion runs: {s['ingestion_runs']}, aborted: {s['aborted_runs']}")
    for reason in s["aborted"]:
        print(f"  aborted: {reason}")
    print(f"degraded pages: {s['degraded_pages']} ({s['pages_not_indexed']} not indexed: could not be rendered)")
    for step, count in s["degraded_by_step"].items():
        print(f"  step {step}: {count}")
    for reason, count in s["degraded_by_reason"].items():
        print(f"  reason {reason}: {count}")
    for line in s["degraded_examples"]:
        print(f"    e.g. {line}")
    print(f"documents skipped (reported): {len(s['documents_skipped'])}")
    for name, reason in s["documents_skipped"].items():
        print(f"  {name}: {reason}")
    print(f"degraded pages the index does not record: {s['unrecorded_degraded']}; /health count mismatches: "
          f"{s['health_mismatches']}")
    print(f"pages lost (neither indexed nor reported): {s['pages_lost']}; unexpected pages: {s['unexpected_pages']}")
    print(f"speed: {s['pages_per_s']} pages/s ({s['ingest_seconds']} s ingesting); peak RSS {s['peak_rss_mb']} MB")
    fuzz = s["layout_fuzz"]
    print(f"layout fuzz: {fuzz.get('cases', 0)} cases, {fuzz.get('layouts', 0)} layouts, {fuzz.get('boxes', 0)} boxes, "
          f"{fuzz.get('figure_crops', 0)} figure crops; errors {fuzz.get('errors', 0)}, boxes off the page "
          f"{fuzz.get('boxes_off_page', 0)}")
    for failure in fuzz.get("failures", []):
        print(f"  fuzz failure: {failure}")


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="robustness_run.py")


if __name__ == "__main__":
    sys.exit(main())
