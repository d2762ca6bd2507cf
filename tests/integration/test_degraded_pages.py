"""One page never stops an ingestion (issue: "ingestion never aborts on one page").

* The reported bug, on a real PDF drawn with reportlab: pictures placed past the page's edge made figure OCR
  crop outside the page image, PIL raised "Coordinate 'right' is less than 'left'" and `vrag-search ingest`
  stopped with exit 2. Boxes are now clamped to the page where they are made, so the run finishes with every
  page indexed and every region on its page.
* A page step that fails degrades that page only, and the failure is reported everywhere: the CLI's output,
  the index's record (manifest), `/health`, `vrag-search report`. The failures are those of the third-party
  libraries the steps call, simulated here because poppler, tesseract and PyMuPDF tolerate every malformed page
  these tests can generate: poppler (`pdf2image.convert_from_path`) failing on one page, tesseract
  (`pytesseract.image_to_data`) crashing on a picture, PyMuPDF's table finder (`Page.find_tables`) raising,
  the sentence-transformers model failing on one page's text.
"""
from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from search_engine.cli import app as cli
from search_engine.index.manifest import Manifest
from search_engine.page_layout import PageLayout
from testkit import structured_pdf as spdf
from testkit.raster_chart_pdf import build_raster_chart_pdf, raster_chart_png

pytest.importorskip("reportlab")


def _off_page_pdf(path: Path) -> Path:
    """Four A4 pages (reportlab): text; a raster chart whose right part lies past the page's right edge; two
    pictures wholly off the page (past the right edge, below the bottom); text again."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    width, height = A4
    chart = ImageReader(io.BytesIO(raster_chart_png()))
    c = canvas.Canvas(str(path), pagesize=A4)
    for number in range(1, 5):
        c.setFont("Helvetica", 12)
        c.drawString(72, height - 72, f"Harbour report, page {number}: the pilot boats and the dredging programme.")
        if number == 2:
            c.drawImage(chart, width - 300, 400, 450, 260)  # 150 pt of its 450 past the right edge
            c.drawString(72, 380, "Figure 1: Units sold by region")
        if number == 3:
            c.drawImage(chart, width + 40, 300, 200, 150)  # wholly past the right edge: the crash of the issue
            c.drawImage(chart, 100, -200, 200, 150)  # wholly below the page
        c.showPage()
    c.save()
    return path


def _assert_on_page(layout: PageLayout) -> None:
    """Every box of the layout is finite, ordered and inside its page image."""
    boxes = [r.box for r in layout.regions]
    boxes += [c.box for r in layout.regions for c in r.cells] + [lb.box for r in layout.regions for lb in r.labels]
    for x1, y1, x2, y2 in boxes:
        assert all(math.isfinite(v) for v in (x1, y1, x2, y2)), boxes
        assert 0 <= x1 <= x2 <= layout.width and 0 <= y1 <= y2 <= layout.height, ((x1, y1, x2, y2), layout.width)


def _layouts(index: Path, doc_id: str) -> dict[int, PageLayout]:
    entry = Manifest.load(index).documents[doc_id]
    lines = (index / entry.segments["layout"]["file"]).read_text(encoding="utf-8").splitlines()
    layouts = [PageLayout.from_dict(json.loads(line)) for line in lines]
    return {int(layout.page_id.rsplit("_", 1)[1]): layout for layout in layouts}


def test_pictures_past_the_page_edge_no_longer_stop_the_ingestion(tmp_path):
    pdf = _off_page_pdf(tmp_path / "harbour.pdf")
    index = tmp_path / "index"
    result = CliRunner().invoke(cli, ["ingest", str(pdf), "--index", str(index), "--quiet", "--ocr-lang", "eng"])
    assert result.exit_code == 0, result.output  # it was 2: "error: Coordinate 'right' is less than 'left'"
    assert "1 added" in result.stdout and "4 pages embedded" in result.stdout
    manifest = Manifest.load(index)
    assert manifest.documents["harbour"].page_ids == [f"harbour_{n}" for n in range(1, 5)]
    layouts = _layouts(index, "harbour")
    for layout in layouts.values():
        _assert_on_page(layout)
    figures = [r for r in layouts[2].regions if r.kind == "figure"]
    assert len(figures) == 1 and figures[0].box[2] == layouts[2].width  # cut at the page's right edge
    assert "North" in figures[0].text  # figure OCR read the part of the chart that is on the page
    assert not [r for r in layouts[3].regions if r.kind == "figure"]  # nothing of those pictures is on the page
    # nothing failed: nothing is reported
    assert manifest.degraded_pages() == []
    report = CliRunner().invoke(cli, ["report", "--index", str(index)])
    assert report.exit_code == 0 and "no degraded pages, no skipped documents" in report.stdout


def _five_page_pdf(path: Path) -> Path:
    """Structured pages (text; ruled table; vector chart), a raster chart page, and a plain page."""
    import pymupdf

    built = spdf.build_structured_pdf(path.parent / "structured.pdf")
    raster = build_raster_chart_pdf(path.parent / "raster.pdf")
    doc = pymupdf.open(built.path)
    with pymupdf.open(raster) as other:
        doc.insert_pdf(other)
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 90), "Appendix: contacts of the harbour master's office and the pilot station.",
                     fontsize=11)
    doc.save(path)
    doc.close()
    return path


@pytest.fixture
def third_party_failures(monkeypatch):
    """poppler fails on page 5, tesseract crashes on every picture, PyMuPDF's table finder raises (simulated:
    see the module doc); the rest of each library works as usual."""
    import pdf2image
    import pymupdf
    import pytesseract
    from pdf2image.exceptions import PDFSyntaxError

    render = pdf2image.convert_from_path

    def poppler(path, *args, first_page=None, last_page=None, **kwargs):
        if first_page is not None and first_page <= 5 <= last_page:
            raise PDFSyntaxError("simulated: poppler cannot draw page 5")
        return render(path, *args, first_page=first_page, last_page=last_page, **kwargs)

    def tesseract(*args, **kwargs):
        raise pytesseract.TesseractError(1, "simulated: tesseract crashed on a picture")

    def table_finder(self, *args, **kwargs):
        raise RuntimeError("simulated: PyMuPDF's table finder failed")

    monkeypatch.setattr(pdf2image, "convert_from_path", poppler)
    monkeypatch.setattr(pytesseract, "image_to_data", tesseract)
    monkeypatch.setattr(pymupdf.Page, "find_tables", table_finder)


def test_a_failing_page_step_degrades_that_page_and_is_reported_everywhere(tmp_path, third_party_failures):
    pdf = _five_page_pdf(tmp_path / "annual.pdf")
    index = tmp_path / "index"
    result = CliRunner().invoke(cli, ["ingest", str(pdf), "--index", str(index), "--quiet", "--ocr-lang", "eng"])
    # the run finishes; exit 1 because one page could not be rendered and so is not indexed
    assert result.exit_code == 1, result.output
    assert "error" not in result.stderr.lower().split("degraded")[0]
    assert "degraded annual page 5 [render]: DocumentError" in result.stderr
    assert "page not indexed" in result.stderr and "cannot be searched" in result.stderr
    assert "degraded annual page 2 [tables]: RuntimeError: simulated: PyMuPDF's table finder failed" in result.stderr
    assert "degraded annual page 4 [figure_ocr]: TesseractError" in result.stderr
    assert "degraded pages: 3 (1 not indexed" in result.stdout
    for line in ("1  render: DocumentError", "1  tables: RuntimeError", "1  figure_ocr: TesseractError"):
        assert line in result.stdout, result.stdout
    assert "4 pages embedded" in result.stdout and "3 pages degraded (1 not indexed)" in result.stdout

    # every other page is indexed, with what its other steps gave
    manifest = Manifest.load(index)
    assert manifest.documents["annual"].page_ids == [f"annual_{n}" for n in range(1, 5)]
    layouts = _layouts(index, "annual")
    assert not [r for r in layouts[2].regions if r.kind == "table"]  # no tables on page 2 ...
    assert "Traffic by terminal" in [r.text for r in layouts[2].regions if r.kind == "heading"]  # ... its text stays
    assert [r.kind for r in layouts[4].regions].count("figure") == 1  # the picture stays, without OCR words
    assert "Regional sales review" in manifest.pages["annual_4"].text

    # the index records each failure: document, page, step, reason, and whether the page is indexed
    recorded = {(d.page, d.step): d for d in manifest.degraded_pages()}
    assert set(recorded) == {(2, "tables"), (4, "figure_ocr"), (5, "render")}
    assert not recorded[(5, "render")].indexed and recorded[(2, "tables")].indexed
    assert "poppler cannot draw page 5" in recorded[(5, "render")].message
    assert all(d.doc_id == "annual" and d.source == "annual.pdf" for d in recorded.values())

    # /health counts them, /stats too
    from fastapi.testclient import TestClient

    from search_engine.api import create_app

    with TestClient(create_app(index_dir=str(index), device="cpu")) as client:
        health = client.get("/health").json()
        assert health == {"status": "ok", "pages": 4, "degraded_pages": 3}
        assert client.get("/stats").json()["degraded_pages"] == 3

    # `vrag-search report` lists them
    report = CliRunner().invoke(cli, ["report", "--index", str(index)])
    assert report.exit_code == 0, report.output
    assert "degraded annual page 5 [render]" in report.stdout and "page not indexed" in report.stdout
    assert "degraded annual page 4 [figure_ocr]" in report.stdout
    assert "degraded pages: 3 (1 not indexed); skipped documents: 0" in report.stdout
    as_json = json.loads(CliRunner().invoke(cli, ["report", "--index", str(index), "--json"]).stdout)
    assert as_json["degraded_pages"] == 3 and as_json["not_indexed"] == 1 and as_json["pages"] == 4
    assert as_json["by_step"] == {"tables": 1, "figure_ocr": 1, "render": 1}


def test_a_document_none_of_whose_pages_render_is_skipped_and_recorded(tmp_path, monkeypatch):
    """poppler failing on every page of one document (simulated): that document is skipped, recorded with each
    page's reason, and the next document is indexed."""
    import pdf2image
    from pdf2image.exceptions import PDFSyntaxError

    render = pdf2image.convert_from_path

    def poppler(path, *args, **kwargs):
        if Path(path).name == "broken.pdf":
            raise PDFSyntaxError("simulated: poppler cannot draw this file")
        return render(path, *args, **kwargs)

    monkeypatch.setattr(pdf2image, "convert_from_path", poppler)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("broken", "fine"):
        import pymupdf

        doc = pymupdf.open()
        for number in (1, 2):
            doc.new_page().insert_text((72, 90), f"{name} page {number} of the harbour report", fontsize=12)
        doc.save(docs / f"{name}.pdf")
    index = tmp_path / "index"
    result = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(index), "--quiet", "--no-ocr"])
    assert result.exit_code == 1, result.output
    assert "none of its 2 pages could be rendered" in result.stderr
    manifest = Manifest.load(index)
    assert list(manifest.documents) == ["fine"] and len(manifest.pages) == 2
    (skipped,) = manifest.skipped.values()
    assert skipped["doc_id"] == "broken" and [d["page"] for d in skipped["degraded"]] == [1, 2]
    report = CliRunner().invoke(cli, ["report", "--index", str(index)]).stdout
    assert "skipped " in report and "broken.pdf" in report and "degraded broken page 2 [render]" in report
    # once it can be read, it is indexed and no longer skipped
    monkeypatch.setattr(pdf2image, "convert_from_path", render)
    again = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(index), "--quiet", "--no-ocr"])
    assert again.exit_code == 0, again.output
    manifest = Manifest.load(index)
    assert sorted(manifest.documents) == ["broken", "fine"] and manifest.skipped == {} and not manifest.degraded_pages()


class _FailsOn:
    """The MiniLM embedder whose model fails on texts holding `marker` (simulated: a sentence-transformers
    failure on one input), or on everything."""

    def __init__(self, inner, marker: str | None):
        self.inner, self.marker, self.spec = inner, marker, inner.spec

    def embed_texts(self, texts):
        if self.marker is None or any(self.marker in t for t in texts):
            raise RuntimeError("simulated: the text model failed on this input")
        return self.inner.embed_texts(texts)

    def embed_queries(self, queries):
        return self.inner.embed_queries(queries)


def test_a_page_the_embedder_fails_on_is_kept_and_found_by_bm25(tmp_path):
    from search_engine.embedders import load_text_embedder
    from search_engine.engine import SearchEngine
    from search_engine.ingest import EmbedderFailure, Ingestor

    built = spdf.build_structured_pdf(tmp_path / "review.pdf")
    minilm = load_text_embedder("minilm", device="cpu")
    index = tmp_path / "index"
    ingestor = Ingestor(index, visual_model=None, text_embedder=_FailsOn(minilm, "Quillfeather"), ocr=False,
                        progress=False)
    report = ingestor.add([built.path])
    assert report.added == ["review"] and report.pages == 3
    assert [(d.page, d.step) for d in report.degraded] == [(built.fact_page, "embed_text")]
    engine = SearchEngine.load(index, device="cpu")
    hits = engine.search("Quillfeather tide gauge", top_k=3, channels=["bm25"])
    assert hits[0].page_id == f"review_{built.fact_page}"  # the page is in the index, BM25 reads it

    # an embedder that fails on every page is no page's fault: the run stops, the index keeps what it had
    broken = Ingestor(tmp_path / "other", visual_model=None, text_embedder=_FailsOn(minilm, None), ocr=False,
                      progress=False)
    with pytest.raises(EmbedderFailure, match="it is the embedder, not the pages"):
        broken.add([built.path])
    assert not Manifest.load(tmp_path / "other").documents


def test_degraded_records_survive_a_resumed_ingestion(tmp_path, monkeypatch):
    """The failures of a chunk live in its checkpoint: a run killed before the commit and resumed (the pages
    not rendered again) still records them."""
    import pdf2image
    from pdf2image.exceptions import PDFSyntaxError

    from search_engine.ingest import Ingestor

    render = pdf2image.convert_from_path

    def poppler(path, *args, first_page=None, last_page=None, **kwargs):  # simulated: poppler fails on page 2
        if first_page is not None and first_page <= 2 <= last_page:
            raise PDFSyntaxError("simulated: poppler cannot draw page 2")
        return render(path, *args, first_page=first_page, last_page=last_page, **kwargs)

    class Killed(BaseException):
        pass

    def killed(*args, **kwargs):
        raise Killed

    import pymupdf

    doc = pymupdf.open()
    for number in range(1, 5):
        doc.new_page().insert_text((72, 90), f"page {number} of the pilot station log", fontsize=12)
    doc.save(tmp_path / "log.pdf")
    index = tmp_path / "index"
    monkeypatch.setattr(pdf2image, "convert_from_path", poppler)
    monkeypatch.setattr(Ingestor, "_commit_document", killed)
    with pytest.raises(Killed):
        Ingestor(index, visual_model=None, text_model="minilm", ocr=False, progress=False,
                 chunk_pages=2).add([tmp_path / "log.pdf"])
    monkeypatch.undo()
    report = Ingestor(index, visual_model=None, text_model="minilm", ocr=False, progress=False,
                      chunk_pages=2).add([tmp_path / "log.pdf"])
    assert report.pages == 0  # every chunk came from its checkpoint
    manifest = Manifest.load(index)
    assert manifest.documents["log"].page_ids == ["log_1", "log_3", "log_4"]
    assert [(d.page, d.step, d.indexed) for d in manifest.degraded_pages()] == [(2, "render", False)]


def test_page_images_of_rotated_and_mixed_size_pages_match_their_layouts(tmp_path):
    """Portrait, landscape, /Rotate 90 and 270 and a tiny page, with text and pictures partly off each page:
    every page indexed, nothing degraded, every layout box on its page image."""
    import pymupdf

    doc = pymupdf.open()
    png = raster_chart_png()
    for width, height, rotation in ((595, 842, 0), (842, 595, 0), (612, 792, 90), (400, 300, 270), (90, 60, 0)):
        page = doc.new_page(width=width, height=height)
        page.insert_text((20, 30), "Tide table for the north pier and the pilot launches", fontsize=9)
        page.insert_image(pymupdf.Rect(width * 0.6, height * 0.5, width * 1.4, height * 1.2), stream=png)
        page.insert_image(pymupdf.Rect(-width * 0.5, -height * 0.5, -5, -5), stream=png)  # wholly off the page
        page.set_rotation(rotation)
    doc.save(tmp_path / "mixed.pdf")
    index = tmp_path / "index"
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "mixed.pdf"), "--index", str(index), "--quiet",
                                      "--ocr-lang", "eng"])
    assert result.exit_code == 0, result.output
    manifest = Manifest.load(index)
    assert len(manifest.documents["mixed"].page_ids) == 5 and not manifest.degraded_pages()
    for number, layout in _layouts(index, "mixed").items():
        record = manifest.pages[f"mixed_{number}"]
        with Image.open(index / record.image_path) as image:
            assert image.size == (layout.width, layout.height) == (record.width, record.height)
        _assert_on_page(layout)
