"""The text layer's verdict per page (`search_engine.layout.text_quality`), on real PDFs made with PyMuPDF
(`testkit.text_layer_pdfs`): garbled glyph maps and hidden layers that do not match the page are unusable, a
normal page and a hidden layer that matches its scan are not; and no page of the development PDFs is flagged."""
from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from PIL import Image

from search_engine.layout.text_quality import (
    GARBLED_SHARE,
    LayerSignals,
    agreement,
    cheap_verdict,
    check_text_layer,
    layer_signals,
)
from testkit.text_layer_pdfs import LINES, OTHER_LINES, scanned_pdf, unicode_map_pdf

pymupdf = pytest.importorskip("pymupdf")
DEV_DOCS = Path(os.environ.get("VRAG_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared")) / "data" / \
    "dev_docs" / "pdfs"


def _page_and_image(path: Path):
    doc = pymupdf.open(path)
    page = doc[0]
    image = Image.open(io.BytesIO(page.get_pixmap(dpi=144).tobytes("png"))).convert("RGB")
    return doc, page, image


def test_a_normal_page_is_usable_on_its_cheap_signals_alone(tmp_path):
    doc, page, image = _page_and_image(unicode_map_pdf(tmp_path / "plain.pdf"))
    signals = layer_signals(page)
    assert signals.characters > 150 and signals.odd == 0 and signals.unmapped == 0 and signals.invisible == 0
    verdict = check_text_layer(page, image, "eng")
    assert verdict.usable and not verdict.checked_by_ocr  # no OCR spent on a normal page


def test_glyphs_mapped_to_private_use_codepoints_are_garbled_without_ocr(tmp_path):
    doc, page, _ = _page_and_image(unicode_map_pdf(tmp_path / "pua.pdf", "private_use"))
    assert "quick" not in page.get_text() and layer_signals(page).private_use > 0.9
    verdict = check_text_layer(page, None)  # decided without an image: the cheap signal is clear
    assert not verdict.usable and verdict.signal == "private_use" and not verdict.checked_by_ocr
    assert "private-use" in verdict.reason


def test_a_font_without_a_unicode_map_is_settled_by_an_ocr_sample(tmp_path):
    doc, page, image = _page_and_image(unicode_map_pdf(tmp_path / "nomap.pdf", "none"))
    signals = layer_signals(page)
    assert signals.unmapped == 1.0 and cheap_verdict(signals) is None  # ambiguous: OCR decides
    verdict = check_text_layer(page, image, "eng")
    assert not verdict.usable and verdict.signal == "ocr_mismatch" and verdict.checked_by_ocr
    assert "without a Unicode map" in verdict.reason
    assert check_text_layer(page, None).usable  # OCR off: nothing can say the layer is wrong, it is kept


def test_a_hidden_layer_is_kept_when_it_matches_the_scan_and_flagged_when_it_does_not(tmp_path):
    doc, page, image = _page_and_image(scanned_pdf(tmp_path / "good.pdf"))
    assert layer_signals(page).invisible == 1.0
    good = check_text_layer(page, image, "auto")
    assert good.usable and good.checked_by_ocr and "matches" in good.reason

    doc, page, image = _page_and_image(scanned_pdf(tmp_path / "other.pdf", hidden=OTHER_LINES))
    other = check_text_layer(page, image, "auto")
    assert not other.usable and other.signal == "invisible_mismatch" and "does not match" in other.reason

    doc, page, image = _page_and_image(scanned_pdf(tmp_path / "under.pdf", hidden=OTHER_LINES, under_image=True))
    assert layer_signals(page).invisible == 1.0  # drawn, then covered by the scan drawn after it
    assert check_text_layer(page, image, "auto").signal == "invisible_mismatch"

    doc, page, image = _page_and_image(scanned_pdf(tmp_path / "blank.pdf", hidden=LINES, printed=()))
    blank = check_text_layer(page, image, "auto")
    assert not blank.usable and blank.signal == "invisible_mismatch" and "shows no text" in blank.reason


def test_the_sample_is_cut_where_poppler_draws_the_lines_when_the_media_box_exceeds_the_crop_box(tmp_path):
    """Ingestion's page images are poppler's, which draws the media box; PyMuPDF places text in the crop box. A
    good hidden layer on a page with a wider media box must still be found to match (cut in the crop box's
    frame, the sample shows other lines and the page was flagged)."""
    from search_engine.corpus import render_pages

    doc = pymupdf.open(scanned_pdf(tmp_path / "scan.pdf"))
    doc[0].set_mediabox(pymupdf.Rect(-100, -100, 695, 942))
    doc[0].set_cropbox(pymupdf.Rect(0, 100, 595, 942))  # the scan, inside a media box 100 pt wider a side
    doc.save(tmp_path / "boxes.pdf")
    image = next(iter(render_pages(tmp_path / "boxes.pdf", dpi=144, first_page=1, last_page=1))).image
    with pymupdf.open(tmp_path / "boxes.pdf") as boxes:
        assert image.width / image.height == pytest.approx(795 / 1042, abs=0.01)  # poppler: the media box
        verdict = check_text_layer(boxes[0], image, "eng")
    assert verdict.usable and verdict.checked_by_ocr, verdict.reason


@pytest.mark.parametrize("signals, expected", [
    (LayerSignals(500, control=0.05), True),  # a math page: a few brackets without a Unicode map
    (LayerSignals(500, control=0.15), None),  # some: OCR decides
    (LayerSignals(500, control=GARBLED_SHARE), False),
    (LayerSignals(500, replacement=0.4), False),
    (LayerSignals(500, unmapped=0.8), None),
    (LayerSignals(500, invisible=0.9), None),
    (LayerSignals(10, private_use=1.0), True),  # too short to be the page's text: OCR reads it anyway
])
def test_cheap_verdict_thresholds(signals, expected):
    verdict = cheap_verdict(signals)
    assert (verdict.usable if verdict is not None else None) == expected


def test_agreement_tells_the_same_lines_from_other_lines_and_garbage():
    printed = " ".join(LINES)
    misread = printed.replace("harbour", "harb0ur").replace("Dredging", "Dredqing")
    assert agreement(printed, misread) > 0.8
    assert agreement(" ".join(OTHER_LINES), printed) < 0.2  # the same language, other words
    assert agreement("5IF\x01IBSCPVS\x01QJMPUT\x01HVJEF", printed) == 0.0
    assert agreement("株式会社の決算短信", "株式会社の決算短信") == 1.0


@pytest.mark.shared_data
def test_no_page_of_the_development_pdfs_is_flagged():
    """The 36 development PDFs (born-digital in nine languages, scans, forms, slides) have usable text layers:
    a verdict that flags any of their pages is a false positive. Pages are rendered as ingestion renders them
    (poppler: one of them has a media box wider than its crop box)."""
    from search_engine.corpus import render_pages

    pdfs = sorted(DEV_DOCS.glob("*.pdf"))
    if len(pdfs) < 30:
        pytest.skip(f"the development PDFs are not at {DEV_DOCS}")
    flagged, checked = [], 0
    for path in pdfs:
        with pymupdf.open(path) as doc:
            for page in doc:
                signals = layer_signals(page)
                image = None
                if cheap_verdict(signals) is None:  # render only what OCR must look at
                    image = next(iter(render_pages(path, dpi=144, first_page=page.number + 1,
                                                   last_page=page.number + 1, max_side=1600))).image
                    checked += 1
                verdict = check_text_layer(page, image, "auto")
                if not verdict.usable:
                    flagged.append(f"{path.name} p{page.number + 1}: {verdict.reason}")
    assert flagged == []
    assert checked >= 1  # the ambiguous pages (fonts without a Unicode map, a hidden layer) were checked by OCR
