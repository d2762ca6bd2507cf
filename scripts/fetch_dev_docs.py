"""Fetch the real third-party PDFs of the development set (scripts/devset/) from Debian packages.

The development set must be built on documents nobody here wrote, and must not touch the held-out
measurement set (../shared/data/real_docs). Debian ships real manuals, a journal's author guide, a
technical report, a conference talk made with beamer and Chinese manuals as PDFs inside its `-doc`
packages, so a fresh Debian/Ubuntu machine can rebuild the exact corpus with its own package tool:
`apt-get download` + `dpkg-deb -x` need no root. Large PDFs are cut to the listed pages with PyMuPDF
(a benchmark on a CPU should take minutes, not hours); page numbers in the question file refer to the
cut PDF (1-based), and `DEV_DOCS` records which original pages they were.

    python scripts/fetch_dev_docs.py                       # -> ~/.cache/vrag/dev_docs/*.pdf
    python scripts/fetch_dev_docs.py --out DIR --deb-dir /tmp/debs   # reuse already downloaded .deb files
    python scripts/fetch_dev_docs.py --set slides          # -> ~/.cache/vrag/slides_dev/*.pdf (slides_dev.jsonl)

`--set slides` builds the slide development set (scripts/devset/slides_dev.jsonl): third-party slide
decks (beamer and prosper talks, theme demos and guides written as slides, two of them in Chinese) from
TeX Live's documentation packages; texlive-latex-extra-doc is a large download (~600 MB).

Each source PDF is checked against the sha256 recorded here (Debian bookworm's package versions);
another distribution's version of a package gives a clear error (or a warning with --allow-mismatch,
in which case the questions may no longer match the pages).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Literal, get_args

import typer

from search_engine.infra.cli_exit import exit_status

DEFAULT_OUT = Path("~/.cache/vrag/dev_docs").expanduser()
DEFAULT_SLIDES_OUT = Path("~/.cache/vrag/slides_dev").expanduser()


@dataclass(frozen=True)
class DevDoc:
    """One document of the development set: where it comes from and which of its pages we keep."""

    name: str  # output file stem = the index's doc id
    package: str  # Debian package holding the PDF
    version: str  # the package version the sha256 was taken from (Debian bookworm)
    path: str  # path of the PDF inside the package
    sha256: str  # of the original PDF inside the package
    pages: tuple[int, ...] | None  # 1-based original pages kept, in order; None = the whole PDF
    kind: str  # what sort of document it is (for the README)
    language: str


DEV_DOCS: tuple[DevDoc, ...] = (
    DevDoc("mnras_author_guide", "texlive-publishers-doc", "2022.20230122-4",
           "usr/share/doc/texlive-doc/latex/mnras/mnras_guide.pdf",
           "54c467301c93b3ed0662c9ed6ee23f71204219ed642dcf259b8cd9383d28cc70",
           None, "two-column journal article (MNRAS author guide) with tables", "en"),
    DevDoc("snp_block_partitioning_talk", "texlive-latex-recommended-doc", "2022.20230122-3",
           "usr/share/doc/texlive-doc/latex/beamer/beamerexample-conference-talk.pdf",
           "4b11425166212ed695a5c99506303bddd7cc1beb02b17da48565c48f51eb38d6",
           (1, 3, 5, 6, 10, 12, 16, 20, 23, 26), "beamer conference slide deck (last overlay of each frame)",
           "en"),
    DevDoc("gs9_color_management", "ghostscript-doc", "10.0.0~dfsg-11+deb12u9",
           "usr/share/doc/ghostscript/GS9_Color_Management.pdf",
           "42f7aa0dc0e0fa98d0811a631d8e665ce68ce236cdb80b4fe558a2196ff786a1",
           (1, 2, 5, 8, 10, 14, 18, 19, 21, 39), "technical report with raster figures and diagrams", "en"),
    DevDoc("reportlab_userguide", "python-reportlab-doc", "3.6.12-1+deb12u1",
           "usr/share/doc/python-reportlab-doc/reportlab-userguide.pdf",
           "91ad5429d7b2907b8efefd7b95facfe2fb01ec31b8cefb024e47b0a7ac713420",
           (7, 56, 59, 62, 84, 108, 111, 115, 119, 120), "software manual: parameter tables, bar/line/pie charts",
           "en"),
    DevDoc("pgfplots_manual", "texlive-pictures-doc", "2022.20230122-3",
           "usr/share/doc/texlive-doc/latex/pgfplots/pgfplots.pdf",
           "665e47105c8e873a806b7100f4564ac674393b943b054cfb9bde8efc7bab4846",
           (13, 19, 26, 27, 31, 38), "software manual: plots with axis labels, legends, titles", "en"),
    DevDoc("r_intro", "r-doc-pdf", "4.2.2.20221110-2",
           "usr/share/doc/r-doc-pdf/manual/R-intro.pdf",
           "337ccd0b490b1e66f7e783b45f4588d0599730b4206c0c051edfe1419c568c51",
           (8, 42, 76, 93, 100), "software manual (An Introduction to R): text and a distributions table", "en"),
    DevDoc("ctex_manual", "texlive-lang-chinese", "2022.20230122-1",
           "usr/share/doc/texlive-doc/latex/ctex/ctex.pdf",
           "372421fadf1a7cc053f129e89ab53800c80643865498e4b0b297fc180e21e5d7",
           (1, 7, 9, 12, 28), "Chinese manual (CTeX) with tables", "zh"),
    DevDoc("lshort_zh_cn", "texlive-lang-chinese", "2022.20230122-1",
           "usr/share/doc/texlive-doc/latex/lshort-chinese/lshort-zh-cn.pdf",
           "4f6b11c04054fcdbb23d6d3c8527b145d27c21abb9efa7e57f96be2b7def484c",
           (21, 26, 38, 55), "Chinese book (lshort-zh-cn) with tables", "zh"),
    DevDoc("install_latex_guide_zh_cn", "texlive-lang-chinese", "2022.20230122-1",
           "usr/share/doc/texlive-doc/latex/install-latex-guide-zh-cn/install-latex-guide-zh-cn.pdf",
           "a841ed237fb074f65b1eb3c1e71dc6243deb133931f997ea8bf2c21e97b506a3",
           (21, 46), "Chinese installation guide with a mirror table", "zh"),
    # added 2026-11-29 to the development half (the split had German, Dutch, Spanish and Japanese documents
    # in the held-back half only): the TeX Live guide's translations and the Dutch lshort
    DevDoc("texlive_guide_de", "texlive-lang-german", "2022.20230122-1",
           "usr/share/doc/texlive-doc/texlive/texlive-de/texlive-de.pdf",
           "ef9bf65bd313b48d390198215f860922641e7dc5a052d456194b8dd48d1b8837",
           (1, 6, 7, 22, 27, 28), "German installation guide (TeX Live 2022)", "de"),
    DevDoc("texlive_guide_es", "texlive-lang-spanish", "2022.20230122-1",
           "usr/share/doc/texlive-doc/texlive/texlive-es/texlive-es.pdf",
           "1173093489180091cd4a4115b47e029981e8009a8d2d3dd3394fb1153fdf69e0",
           (1, 3, 9, 17, 21, 48, 50), "Spanish installation guide (TeX Live 2022)", "es"),
    DevDoc("texlive_guide_ja", "texlive-lang-japanese", "2022.20230122-1",
           "usr/share/doc/texlive-doc/texlive/texlive-ja/texlive-ja.pdf",
           "c205f5d09825045fe0e930b13e4964b9deeb7b51ebf77f97e054cdb43fdf719c",
           (1, 4, 19, 28, 31, 68), "Japanese installation guide (TeX Live 2022)", "ja"),
    DevDoc("lshort_nl", "texlive-lang-european", "2022.20230122-1",
           "usr/share/doc/texlive-doc/latex/lshort-dutch/lshort-nl-1.3.pdf",
           "4d8faa1c334ab2d0fbfa601c19f625c06bb9fe258a5c2be8a7b63bf4d9a7a011",
           (1, 24, 25, 27, 28), "Dutch LaTeX introduction (lshort) with tables", "nl"),
)


# Slide decks for scripts/devset/slides_dev.jsonl. Beamer decks with overlays repeat a frame once per
# step; only the last step of each frame is kept, so no two kept pages hold the same slide.
SLIDE_DOCS: tuple[DevDoc, ...] = (
    DevDoc("biogeography_lecture", "texlive-latex-extra-doc", "2022.20230122-4",
           "usr/share/doc/texlive-doc/latex/shipunov/lecture-slides-ex.pdf",
           "a5416ab40fc6411aa9a8ebf3ee9aefef5e11ce933776b57e9e86a9d99d3f8fa4",
           (1, 13, 14, 16, 24, 26, 27, 37, 42, 43),
           "university lecture slides (Biogeography, Minot State University): dense text slides", "en"),
    DevDoc("metropolis_demo", "texlive-latex-extra-doc", "2022.20230122-4",
           "usr/share/doc/texlive-doc/latex/beamertheme-metropolis/demo.pdf",
           "bec3bba0a910306a19920a2ed65db2ecd51050ab727c3ea815d5d0c1241560e3",
           (1, 4, 7, 8, 14, 19, 20, 23, 24, 26, 29, 31),
           "beamer theme demo deck: a table, a line plot, a bar chart, a figure", "en"),
    DevDoc("prosper_tour", "texlive-latex-extra-doc", "2022.20230122-4",
           "usr/share/doc/texlive-doc/latex/prosper/prosper-tour.pdf",
           "588f8eb32f63fd05fb3cbe9659bc88c55f5262de9b6fbc0be628708b806233a4",
           (1, 2, 9, 11, 16, 18), "prosper talk on a dark gradient background, with a diagram", "en"),
    DevDoc("uantwerpen_beamer_guide", "texlive-publishers-doc", "2022.20230122-4",
           "usr/share/doc/texlive-doc/latex/uantwerpendocs/beamerthemeuantwerpenuserguide.pdf",
           "302444b963c2f3ccbe56781786c7c1b024d365e31f24c295fe39af9f0e9ca565",
           (7, 8, 14, 17, 18, 44), "user guide written as 16:10 slides, with an options table", "en"),
    DevDoc("thubeamer_example", "texlive-publishers-doc", "2022.20230122-4",
           "usr/share/doc/texlive-doc/latex/thubeamer/thubeamer-example.pdf",
           "37a0f86cef2c93b6eb3f75ea11a26432cf33fc41db4c2c61ce4a52959bf863f0",
           (1, 3, 7, 8, 14, 15), "Chinese thesis-defence deck (Tsinghua theme): a table, an emblem figure", "zh"),
    DevDoc("epyt_demo_cn", "texlive-latex-extra-doc", "2022.20230122-4",
           "usr/share/doc/texlive-doc/latex/beamertheme-epyt/epyt-demo-cn.pdf",
           "2139a8d8fdf5394b573e06b3061d13f28a47a53ea387c196e1c92fc74e37e758",
           (1, 6, 7, 9, 13, 16, 24, 32), "Chinese beamer theme demo deck (last overlay of each frame)", "zh"),
)

DOC_SETS: dict[str, tuple[tuple[DevDoc, ...], Path]] = {
    "dev": (DEV_DOCS, DEFAULT_OUT),
    "slides": (SLIDE_DOCS, DEFAULT_SLIDES_OUT),
}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_and_extract(packages: list[str], deb_dir: Path, root: Path) -> None:
    """`apt-get download` the packages not already in `deb_dir`, then `dpkg-deb -x` all into `root`."""
    deb_dir.mkdir(parents=True, exist_ok=True)
    missing = [p for p in packages if not list(deb_dir.glob(f"{p}_*.deb"))]
    if missing:
        if shutil.which("apt-get") is None:
            raise SystemExit(f"fetch_dev_docs: apt-get not found; download {missing} into {deb_dir} yourself")
        print(f"apt-get download {' '.join(missing)}", flush=True)
        subprocess.run(["apt-get", "download", *missing], cwd=deb_dir, check=True)
    for package in packages:
        debs = sorted(deb_dir.glob(f"{package}_*.deb"))
        if not debs:
            raise SystemExit(f"fetch_dev_docs: no .deb for {package} in {deb_dir}")
        subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(root)], check=True)


def write_subset(source: Path, pages: tuple[int, ...] | None, out: Path) -> int:
    """Copy the listed 1-based pages of `source` into `out` (the whole PDF when None); returns the count."""
    import pymupdf

    with pymupdf.open(source) as src:
        if pages is None:
            shutil.copyfile(source, out)
            return src.page_count
        bad = [p for p in pages if not 1 <= p <= src.page_count]
        if bad:
            raise SystemExit(f"fetch_dev_docs: {source.name} has {src.page_count} pages, asked for {bad}")
        with pymupdf.open() as dst:
            for page in pages:
                dst.insert_pdf(src, from_page=page - 1, to_page=page - 1)
            dst.save(out, garbage=3, deflate=True)
        return len(pages)


def fetch(out_dir: Path, deb_dir: Path | None = None, allow_mismatch: bool = False,
          docs: tuple[DevDoc, ...] = DEV_DOCS) -> list[dict]:
    """Build the corpus of `docs` in `out_dir`; returns one manifest row per document (also written as JSON)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    packages = sorted({d.package for d in docs})
    with tempfile.TemporaryDirectory(prefix="vrag_dev_docs_") as tmp:
        root = Path(tmp) / "root"
        download_and_extract(packages, deb_dir or Path(tmp) / "debs", root)
        rows = []
        for doc in docs:
            source = root / doc.path
            if not source.exists():
                raise SystemExit(f"fetch_dev_docs: {doc.path} is not in package {doc.package}")
            digest = sha256_of(source)
            if doc.sha256 and digest != doc.sha256:
                message = (f"{doc.package}:{doc.path} has sha256 {digest}, expected {doc.sha256} "
                           f"(version {doc.version}); the questions may not match its pages")
                if not allow_mismatch:
                    raise SystemExit("fetch_dev_docs: " + message + " (--allow-mismatch to go on)")
                print("WARNING: " + message, file=sys.stderr)
            target = out_dir / f"{doc.name}.pdf"
            n_pages = write_subset(source, doc.pages, target)
            rows.append({**asdict(doc), "source_sha256": digest, "n_pages": n_pages, "file": target.name})
            print(f"{target}  {n_pages} pages  ({doc.package} {doc.path})", flush=True)
    (out_dir / "manifest.json").write_text(json.dumps(rows, indent=2, ensure_ascii=False))
    print(f"{sum(r['n_pages'] for r in rows)} pages in {len(rows)} PDFs under {out_dir}")
    return rows


DocSet = Literal["dev", "slides"]  # the keys of DOC_SETS
assert set(get_args(DocSet)) == set(DOC_SETS), "DocSet must name every document set"

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help=(__doc__ or "").splitlines()[0])
def fetch_set(
    doc_set: Annotated[DocSet, typer.Option(
        "--set",
        help="which development set: the real documents (dev, default) or the slide decks")] = "dev",
    out: Annotated[Path | None, typer.Option(
        help=f"output folder (default {DEFAULT_OUT} for dev, {DEFAULT_SLIDES_OUT} for slides)")] = None,
    deb_dir: Annotated[Path | None, typer.Option(
        help="keep/reuse downloaded .deb files here (default: a temporary folder)")] = None,
    allow_mismatch: Annotated[bool, typer.Option(
        "--allow-mismatch", help="go on (with a warning) when a package's PDF differs from the recorded sha256")
    ] = False,
) -> None:
    """Download the set's packages, cut and check its PDFs, write them and their manifest."""
    docs, default_out = DOC_SETS[doc_set]
    fetch((out or default_out).expanduser(), deb_dir, allow_mismatch, docs)


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="fetch_dev_docs.py")

if __name__ == "__main__":
    sys.exit(main())
