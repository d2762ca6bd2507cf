"""Ingestion reads what the text layer hides: a page whose layer is unusable is read by OCR, and why is recorded
where degraded pages are (the manifest, `vrag-search report`); a page in a script without an installed OCR pack
is read with what is installed, and that is recorded too. Real PDFs made with PyMuPDF (`testkit.text_layer_pdfs`),
driven through the CLI."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from search_engine import text_extraction
from search_engine.cli import app as cli
from search_engine.engine import SearchEngine
from search_engine.index.manifest import Manifest
from testkit.text_layer_pdfs import OTHER_LINES, cjk_lines_image, scanned_pdf, unicode_map_pdf

pymupdf = pytest.importorskip("pymupdf")


def _four_pages(folder: Path) -> Path:
    """Page 1 normal (other words than the rest); page 2 glyphs mapped to private-use codepoints; page 3 a font
    without a Unicode map; page 4 a scan whose hidden layer holds other words than it shows."""
    parts = [unicode_map_pdf(folder / "p1.pdf", lines=OTHER_LINES), unicode_map_pdf(folder / "p2.pdf", "private_use"),
             unicode_map_pdf(folder / "p3.pdf", "none"), scanned_pdf(folder / "p4.pdf", hidden=OTHER_LINES)]
    out = pymupdf.open()
    for part in parts:
        with pymupdf.open(part) as doc:
            out.insert_pdf(doc)
    out.save(folder / "harbour_notes.pdf")
    return folder / "harbour_notes.pdf"


def test_unusable_text_layers_are_read_by_ocr_and_recorded(tmp_path):
    pdf = _four_pages(tmp_path)
    index = tmp_path / "index"
    result = CliRunner().invoke(cli, ["ingest", str(pdf), "--index", str(index), "--quiet", "--text-model", "minilm"])
    assert result.exit_code == 0, result.output
    manifest = Manifest.load(index)
    flagged = {d.page: d for d in manifest.degraded_pages()}
    assert sorted(flagged) == [2, 3, 4]  # never the normal page
    assert {d.step for d in flagged.values()} == {"text_layer"}
    assert {d.error for d in flagged.values()} == {"UnusableTextLayer"}
    assert "private-use" in flagged[2].message and "without a Unicode map" in flagged[3].message
    assert "hidden text layer does not match" in flagged[4].message
    assert all(d.indexed and "read by OCR" in d.message for d in flagged.values())

    pages = {p.page_number: p for p in manifest.pages.values()}
    assert pages[1].text_source == "pdf"
    for number in (2, 3, 4):  # the words the page shows, from OCR, not the layer's
        assert pages[number].text_source == "ocr", number
        assert "harbour pilots" in pages[number].text, (number, pages[number].text[:80])
        assert pages[number].extra.get("ocr_lang") == "eng"
    assert "Volcanic" not in pages[4].text  # the hidden layer's words are gone
    hits = SearchEngine.load(index).search("how deep is the dredged channel for cargo ships", top_k=3)
    assert {h.page_id for h in hits} == {pages[n].page_id for n in (2, 3, 4)}  # found by the words they show

    report = CliRunner().invoke(cli, ["report", "--index", str(index)])
    assert report.exit_code == 0
    assert "[text_layer]: UnusableTextLayer: garbled text layer" in report.output
    assert "text layer set aside" in report.output  # what it cost the page
    counts = json.loads(CliRunner().invoke(cli, ["report", "--index", str(index), "--json"]).output)
    assert counts["by_reason"] == {"text_layer: UnusableTextLayer": 3}


def test_ocr_off_keeps_an_unusable_layer_and_says_so(tmp_path):
    pdf = unicode_map_pdf(tmp_path / "pua.pdf", "private_use")
    index = tmp_path / "index"
    result = CliRunner().invoke(cli, ["ingest", str(pdf), "--index", str(index), "--quiet", "--no-ocr"])
    assert result.exit_code == 0, result.output
    (record,) = Manifest.load(index).degraded_pages()
    assert record.error == "UnusableTextLayer" and "OCR is off: the layer is kept" in record.message


def test_a_page_in_a_script_without_its_pack_is_read_with_what_is_installed_and_recorded(tmp_path, monkeypatch):
    have = text_extraction._installed_langs()
    if not {"eng", "osd", "jpn"} <= set(have):
        pytest.skip("needs the eng, osd and jpn tesseract packs (bash scripts/install.sh)")
    monkeypatch.setattr(text_extraction, "_installed_langs", lambda: tuple(lang for lang in have if lang != "jpn"))
    image = cjk_lines_image(("東京の天気は晴れのち曇りです。", "明日は午後から雨が降るでしょう。"), "japan")
    image.save(tmp_path / "tenki.png")
    index = tmp_path / "index"
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "tenki.png"), "--index", str(index), "--quiet"])
    assert result.exit_code == 0, result.output
    (record,) = Manifest.load(index).degraded_pages()
    assert (record.step, record.error) == ("ocr", "MissingLanguagePack")
    assert "Japanese" in record.message and "apt-get install tesseract-ocr-jpn" in record.message
    assert "installed language packs" in record.consequence
    report = CliRunner().invoke(cli, ["report", "--index", str(index)])
    assert "MissingLanguagePack" in report.output
