"""Documents → page images: ids, discovery, rendering, bad files, and the pdf2images script."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from search_engine.corpus import DocumentError, count_pages, discover_documents, doc_id_for, render_pages
from search_engine.text_extraction import ocr_lines, page_text, pdf_page_texts
from search_engine.types import is_valid_id

REPO = Path(__file__).resolve().parents[2]


def test_doc_ids_are_safe_and_unique(tmp_path):
    assert doc_id_for(Path("Annual Report (2023).pdf")) == "Annual_Report__2023_"
    assert doc_id_for(Path("...hidden.pdf")) == "hidden"
    weird = doc_id_for(Path("../../etc/pa..sswd.pdf"))
    assert is_valid_id(weird) and ".." not in weird
    taken = {"report"}
    other = doc_id_for(tmp_path / "report.pdf", taken)
    assert other.startswith("report-") and len(other) == len("report-") + 8


def test_discover_documents(tmp_path, sample_corpus):
    (tmp_path / "sub").mkdir()
    Image.new("RGB", (10, 10)).save(tmp_path / "sub" / "scan.png")
    (tmp_path / "notes.txt").write_text("x")
    found = discover_documents([tmp_path, sample_corpus.files[0]])
    assert [p.name for p in found] == sorted([sample_corpus.files[0].name, "scan.png"], key=lambda n: n) or found
    assert {p.name for p in found} == {sample_corpus.files[0].name, "scan.png"}
    with pytest.raises(FileNotFoundError, match="missing.pdf"):
        discover_documents([tmp_path / "missing.pdf"])
    with pytest.raises(ValueError, match="unsupported"):
        discover_documents([tmp_path / "notes.txt"])


def test_render_pages_sizes_follow_dpi(sample_corpus):
    acme = next(f for f in sample_corpus.files if f.name.startswith("acme"))
    assert count_pages(acme) == 4
    low = list(render_pages(acme, dpi=36))
    high = list(render_pages(acme, dpi=72, first_page=2, last_page=3))
    assert [p.page_number for p in low] == [1, 2, 3, 4] and [p.page_number for p in high] == [2, 3]
    assert abs(high[0].width - 2 * low[0].width) <= 2  # A4 at 72 dpi = 595 px wide


def test_bad_files_raise_document_error(tmp_path):
    corrupt = tmp_path / "corrupt.pdf"
    corrupt.write_bytes(b"garbage")
    with pytest.raises(DocumentError, match="not a valid PDF"):
        count_pages(corrupt)
    broken_image = tmp_path / "broken.png"
    broken_image.write_bytes(b"\x89PNG nope")
    with pytest.raises(DocumentError, match="not a readable image"):
        count_pages(broken_image)


def test_text_layer_and_ocr_fallback(sample_corpus):
    acme = next(f for f in sample_corpus.files if f.name.startswith("acme"))
    assert "341" in pdf_page_texts(acme)[1]
    scan = next(f for f in sample_corpus.files if f.name.startswith("board_memo"))
    assert pdf_page_texts(scan) == [""]
    page = next(render_pages(scan, dpi=144))
    text, source = page_text("", page.image)
    assert source == "ocr" and "0.42" in text
    lines = ocr_lines(page.image)
    hit = next(line for line in lines if "0.42" in line.text)
    x1, y1, x2, y2 = hit.box
    assert 0 <= x1 < x2 <= page.width and 0 <= y1 < y2 <= page.height


def test_pdf2images_script(tmp_path, sample_corpus):
    solar = next(f for f in sample_corpus.files if f.name.startswith("solar"))
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 broken")
    out = tmp_path / "img"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "pdf2images.py"), str(solar), str(bad), "--out",
                           str(out), "--dpi", "36", "--quiet"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "bad.pdf" in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["solar_energy_brief_1.jpg", "solar_energy_brief_2.jpg",
                                                     "solar_energy_brief_3.jpg"]
