"""Documents → page images and page text: ids, discovery, rendering, bad files, OCR, the pdf2images script."""
from __future__ import annotations

import hashlib
import logging
import subprocess
import sys
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from search_engine import text_extraction
from search_engine.corpus import (
    DocumentError,
    RenderedPage,
    count_pages,
    discover_documents,
    doc_id_for,
    pdf_to_images,
    render_pages,
)
from search_engine.text_extraction import OcrLine, ocr_lines, page_text, pdf_page_texts
from search_engine.types import is_valid_id, make_page_id

REPO = Path(__file__).resolve().parents[2]


def _sample(sample_corpus, prefix: str) -> Path:
    return next(f for f in sample_corpus.files if f.name.startswith(prefix))


@pytest.fixture(scope="module")
def memo_page(sample_corpus) -> RenderedPage:
    """The scanned memo rendered once: OCR is the slow part of this file."""
    return next(render_pages(_sample(sample_corpus, "board_memo"), dpi=144))


@pytest.fixture()
def encrypted_pdf(tmp_path, sample_corpus) -> Path:
    path = tmp_path / "secret.pdf"
    with pymupdf.open(_sample(sample_corpus, "solar")) as doc:
        doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    return path


@pytest.fixture()
def corrupt_pdf(tmp_path) -> Path:
    path = tmp_path / "x.pdf"
    path.write_bytes(bytes(range(256)) * 8)
    return path


# --------------------------------------------------------------------------------------------- ids


@pytest.mark.parametrize("name, expected", [
    ("acme_annual_report_2023.pdf", "acme_annual_report_2023"),
    ("Annual Report (2023).pdf", "Annual_Report__2023_"),
    ("...hidden.pdf", "hidden"),
    ("a...b.v2.pdf", "a.b.v2"),
    ("été 2024.pdf", "t__2024"),
    ("___.pdf", "doc"),
])
def test_doc_id_sanitises_the_stem(name, expected):
    assert doc_id_for(Path(name)) == expected
    assert is_valid_id(expected) and is_valid_id(make_page_id(expected, 12))


def test_doc_id_is_safe_for_hostile_and_long_names():
    for name in ["../../etc/pa..sswd.pdf", "-" * 5 + "x" * 300 + ".pdf", "a/b\\c:d*e?.pdf", "..pdf"]:
        doc_id = doc_id_for(Path(name))
        assert is_valid_id(doc_id) and ".." not in doc_id and len(doc_id) <= 120, name


def test_doc_id_collision_gets_a_stable_path_hash(tmp_path):
    path = tmp_path / "b" / "report.pdf"
    suffix = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    assert doc_id_for(path, {"other"}) == "report"
    assert doc_id_for(path, {"report"}) == f"report-{suffix}" == doc_id_for(path, {"report"})
    assert doc_id_for(tmp_path / "a" / "report.pdf", {"report"}) != f"report-{suffix}"
    assert is_valid_id(f"report-{suffix}")


# --------------------------------------------------------------------------------------------- discovery


def test_discover_documents_walks_folders(tmp_path, sample_corpus):
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    Image.new("RGB", (10, 10)).save(tmp_path / "sub" / "scan.PNG")
    Image.new("RGB", (10, 10)).save(tmp_path / "sub" / "deeper" / "photo.jpg")
    Image.new("RGB", (10, 10)).save(tmp_path / "sub" / ".hidden.png")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "doc.pdf").write_bytes(_sample(sample_corpus, "solar").read_bytes())
    found = discover_documents([tmp_path, tmp_path / "doc.pdf", _sample(sample_corpus, "acme")])
    assert found == sorted(found) and len(found) == len(set(found)) == 4
    assert {p.name for p in found} == {"doc.pdf", "scan.PNG", "photo.jpg", "acme_annual_report_2023.pdf"}
    assert all(p.is_absolute() for p in found)


def test_discover_documents_rejects_missing_and_unsupported(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.pdf"):
        discover_documents([tmp_path / "missing.pdf"])
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="unsupported"):
        discover_documents([tmp_path / "notes.txt"])
    assert discover_documents([tmp_path]) == []


# --------------------------------------------------------------------------------------------- rendering


def test_render_pages_numbers_and_sizes_follow_dpi(sample_corpus):
    acme = _sample(sample_corpus, "acme")
    assert count_pages(acme) == 4
    low = list(render_pages(acme, dpi=36))
    high = list(render_pages(acme, dpi=72, first_page=2, last_page=3))
    assert [p.page_number for p in low] == [1, 2, 3, 4] and [p.page_number for p in high] == [2, 3]
    assert (high[0].width, high[0].height) == (595, 842)  # A4 at 72 dpi
    assert abs(high[0].width - 2 * low[0].width) <= 2
    assert all(p.image.mode == "RGB" and p.image.size == (p.width, p.height) for p in low + high)
    capped = next(render_pages(acme, dpi=72, max_side=400))
    assert max(capped.width, capped.height) == 400


def test_image_file_is_a_one_page_document(tmp_path):
    path = tmp_path / "photo.png"
    Image.new("RGBA", (300, 120), (255, 0, 0, 128)).save(path)
    assert count_pages(path) == 1
    pages = list(render_pages(path, max_side=150))
    assert len(pages) == 1 and pages[0].page_number == 1
    assert pages[0].image.mode == "RGB" and (pages[0].width, pages[0].height) == (150, 60)


def test_exif_rotation_is_applied(tmp_path):
    path = tmp_path / "phone.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    Image.new("RGB", (200, 100)).save(path, exif=exif)
    page = next(render_pages(path))
    assert (page.width, page.height) == (100, 200)


# --------------------------------------------------------------------------------------------- bad files


def test_corrupt_pdf_raises_document_error(corrupt_pdf):
    with pytest.raises(DocumentError, match=r"x\.pdf: not a valid PDF"):
        count_pages(corrupt_pdf)
    with pytest.raises(DocumentError, match=r"x\.pdf"):
        list(render_pages(corrupt_pdf, first_page=1, last_page=1))
    with pytest.raises(DocumentError, match=r"x\.pdf"):
        pdf_page_texts(corrupt_pdf)


def test_encrypted_pdf_raises_document_error(encrypted_pdf):
    for read in (count_pages, lambda p: list(render_pages(p, last_page=1)), pdf_page_texts):
        with pytest.raises(DocumentError, match=r"secret\.pdf: encrypted PDF \(password required\)"):
            read(encrypted_pdf)


def test_broken_image_and_missing_file_raise_document_error(tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG nope")
    with pytest.raises(DocumentError, match=r"broken\.png: not a readable image"):
        count_pages(broken)
    with pytest.raises(DocumentError, match="not found"):
        count_pages(tmp_path / "gone.pdf")


def test_pdf_to_images_skips_bad_documents(tmp_path, sample_corpus, corrupt_pdf, caplog):
    solar = _sample(sample_corpus, "solar")
    out = tmp_path / "img"
    with caplog.at_level(logging.WARNING, logger="search_engine.corpus"):
        written = pdf_to_images([corrupt_pdf, solar], out, dpi=36, progress=False)
    assert list(written) == ["solar_energy_brief"]
    assert [p.name for p in written["solar_energy_brief"]] == [f"solar_energy_brief_{i}.jpg" for i in (1, 2, 3)]
    assert sorted(p.name for p in out.iterdir()) == [p.name for p in written["solar_energy_brief"]]  # no temp files
    assert "x.pdf" in caplog.text and "not a valid PDF" in caplog.text
    with Image.open(out / "solar_energy_brief_1.jpg") as image:
        assert image.format == "JPEG" and image.width == round(595 / 2)

    errors = []
    pdf_to_images([corrupt_pdf], out, progress=False, on_error=lambda path, exc: errors.append((path.name, exc)))
    assert [name for name, _ in errors] == ["x.pdf"] and isinstance(errors[0][1], DocumentError)


# --------------------------------------------------------------------------------------------- text


def test_pdf_text_layer(sample_corpus):
    texts = pdf_page_texts(_sample(sample_corpus, "acme"))
    assert len(texts) == 4 and "341" in texts[1] and "1,870 employees" in texts[3]
    assert all("\n" not in t and "  " not in t for t in texts)
    assert pdf_page_texts(_sample(sample_corpus, "board_memo")) == [""]


def test_page_text_prefers_the_text_layer_without_ocr():
    layer = "Total revenue in 2023 was $341 million."
    assert page_text(f"  {layer}\n", None) == (layer, "pdf")
    assert page_text("", None) == ("", "")
    assert page_text("", Image.new("RGB", (10, 10)), ocr=False) == ("", "")
    assert page_text("Page 3", None) == ("Page 3", "pdf")  # short, but better than nothing


def test_scanned_page_falls_back_to_ocr(memo_page):
    text, source = page_text("", memo_page.image)
    assert source == "ocr" and "0.42 dollars per share" in text


def test_ocr_lines_locate_printed_text(memo_page):
    lines = ocr_lines(memo_page.image)
    assert all(isinstance(line, OcrLine) and line.text for line in lines)
    hit = next(line for line in lines if "0.42" in line.text)
    x1, y1, x2, y2 = hit.box
    assert 0 <= x1 < x2 <= memo_page.width and 0 <= y1 < y2 <= memo_page.height
    assert 0 <= hit.confidence <= 100
    # the memo draws this line at y=440 of 1754 px; the page is rendered at 1654 px
    assert abs((y1 + y2) / 2 / memo_page.height - 457 / 1754) < 0.03
    assert [line.box[1] for line in lines] == sorted(line.box[1] for line in lines)


def test_missing_tesseract_says_how_to_install(monkeypatch):
    import pytesseract

    def missing(*args, **kwargs):
        raise pytesseract.TesseractNotFoundError()

    text_extraction._checked_tesseract.cache_clear()
    monkeypatch.setattr(pytesseract, "get_tesseract_version", missing)
    try:
        with pytest.raises(RuntimeError, match="apt-get install tesseract-ocr tesseract-ocr-eng"):
            text_extraction.ocr_image(Image.new("RGB", (10, 10)))
    finally:
        text_extraction._checked_tesseract.cache_clear()


# --------------------------------------------------------------------------------------------- script


def _run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "pdf2images.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_pdf2images_script(tmp_path, sample_corpus, corrupt_pdf):
    solar, out = _sample(sample_corpus, "solar"), tmp_path / "img"
    ok = _run_script(str(solar), "--out", str(out), "--dpi", "36", "--quiet")
    assert ok.returncode == 0, ok.stderr
    assert "3 pages from 1 documents" in ok.stdout and "0 failed" in ok.stdout
    assert sorted(p.name for p in out.iterdir()) == [f"solar_energy_brief_{i}.jpg" for i in (1, 2, 3)]

    bad = _run_script(str(solar), str(corrupt_pdf), "--out", str(tmp_path / "img2"), "--dpi", "36", "--quiet")
    assert bad.returncode == 1 and "x.pdf" in bad.stderr and "1 failed" in bad.stdout
    assert len(list((tmp_path / "img2").iterdir())) == 3

    missing = _run_script(str(tmp_path / "nope.pdf"), "--out", str(out), "--quiet")
    assert missing.returncode == 2 and "nope.pdf" in missing.stderr


def test_control_characters_of_unmapped_glyphs_are_dropped_from_the_text_layer():
    """A font without a Unicode map (TeX math in older PDFs) gives control codes for its glyphs."""
    from search_engine.text_extraction import page_reading

    read = page_reading("x\x00 k+1 = x\x01 k - f(x)\x0b / f'(x) for the Newton step", None, ocr=False)
    assert read.source == "pdf" and read.text == "x k+1 = x k - f(x) / f'(x) for the Newton step"


def test_noncharacters_of_a_text_layer_read_as_the_spaces_they_stand_for():
    """A font map that gives U+FFFF for the space between words glues every line into one word for BM25 and
    for the embedder (whose tokenizer drops the code): the text layer, its layout spans and its table cells
    read it as a space."""
    from search_engine.text_extraction import clean_glyphs, page_reading

    layer = "LG\uffffElectronics\uffffDeutschland\uffffGmbH l Berliner\ufffeStraße\ufdd093"
    read = page_reading(layer, None, ocr=False)
    assert read.text == "LG Electronics Deutschland GmbH l Berliner Straße 93"
    assert clean_glyphs("Akku\uffff3000\x00 mAh") == "Akku 3000 mAh"
    assert clean_glyphs("ein Text \ufffd bleibt") == "ein Text \ufffd bleibt"  # an unknown glyph is no space


@pytest.mark.parametrize("name, title", [
    ("quarterly_report-p07.png", "quarterly report"),  # a page number is not part of the title
    ("annual-report-2023.pdf", "annual report 2023"),  # a year is
    ("会议纪要-3.png", "会议纪要"),
    ("Slide12.PNG", ""),  # no word: nothing to add
    ("0042.jpg", ""),
])
def test_a_documents_file_name_is_its_title_when_it_prints_none(name, title):
    from search_engine.ingest import title_from_file_name

    assert title_from_file_name(Path(name)) == title
