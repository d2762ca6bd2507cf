"""The OCR language per page (`search_engine.ocr_languages`, `text_extraction.ocr_page`): the script the page
shows picks the tesseract packs, on real Japanese and Korean page images (PyMuPDF's bundled CJK font: no system
font needed), the development pool's Chinese and English scans; a missing pack falls back and is named."""
from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from PIL import Image

from search_engine import text_extraction
from search_engine.ocr_languages import choose_languages, script_of_text
from search_engine.text_extraction import ocr_page, ocr_text
from testkit.text_layer_pdfs import cjk_lines_image

JAPANESE = ("東京の天気は晴れのち曇りです。", "明日は午後から雨が降るでしょう。", "会議は午前十時に始まります。")
KOREAN = ("서울의 날씨는 맑고 따뜻합니다.", "내일은 오후부터 비가 내리겠습니다.", "회의는 오전 열 시에 시작합니다.")
DEV_DOCS = Path(os.environ.get("VRAG_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared")) / "data" / \
    "dev_docs" / "pdfs"


@pytest.mark.parametrize("script, installed, lang, missing", [
    ("Latin", {"eng", "chi_sim"}, "eng", ()),
    ("Han", {"eng", "chi_sim", "chi_tra"}, "chi_sim+eng", ()),  # one Chinese pack, not both (time)
    ("Han", {"eng", "chi_tra"}, "chi_tra+eng", ()),
    ("Japanese", {"eng", "jpn"}, "jpn+eng", ()),
    ("Korean", {"eng", "kor"}, "kor+eng", ()),
    ("Japanese", {"eng", "chi_sim"}, "eng", ("jpn",)),
    ("Cyrillic", {"eng"}, "eng", ("rus",)),
])
def test_the_script_picks_its_packs_plus_english(script, installed, lang, missing):
    choice = choose_languages(script, installed)
    assert choice is not None and (choice.lang, choice.missing) == (lang, missing)


def test_a_missing_pack_says_how_to_install_it_and_an_unknown_script_has_no_choice():
    assert choose_languages("Japanese", {"eng"}).install_hint == "apt-get install tesseract-ocr-jpn"
    assert choose_languages("Han", {"eng", "chi_sim"}).install_hint == ""
    assert choose_languages("Ethiopic", {"eng"}) is None


@pytest.mark.parametrize("text, script", [
    ("Quarterly revenue rose by nine percent.", "Latin"),
    ("東京の天気は晴れのち曇りです。", "Japanese"),  # Han characters and kana: Japanese
    ("서울의 날씨는 맑고 따뜻합니다.", "Hangul"),
    ("销售额比去年同期增长了百分之十二。", "Han"),
    ("SVOLT 196Ah cell specification 电芯规格书 and its test conditions", "Han"),  # bilingual: the CJK pack + eng
    ("Съешь же ещё этих мягких булок", "Cyrillic"),
    ("12 345 — 67", None),
])
def test_script_of_text(text, script):
    assert script_of_text(text) == script


def _needs(*packs: str) -> None:
    missing = [p for p in packs if p not in text_extraction._installed_langs()]  # "osd" included
    if missing:
        pytest.skip(f"tesseract packs {missing} not installed (bash scripts/install.sh installs them)")


@pytest.mark.parametrize("lines, font, pack, expected", [
    (JAPANESE, "japan", "jpn", "天気は晴れ"),
    (KOREAN, "korea", "kor", "날씨는"),
])
def test_japanese_and_korean_pages_are_read_in_their_own_pack(lines, font, pack, expected):
    _needs("eng", pack, "osd")
    reading = ocr_page(cjk_lines_image(lines, font), "auto")
    assert reading.lang == f"{pack}+eng" and not reading.missing
    assert expected in ocr_text(reading.lines).replace(" ", "")


def test_a_chinese_slide_of_code_that_osd_takes_for_latin_is_read_in_chinese():
    """A slide of Chinese sentences between LaTeX commands: OSD names Latin (the commands outweigh the
    characters) while English reads it poorly; the CJK pack reads it clearly better and is kept."""
    _needs("eng", "chi_sim", "osd")
    lines = ("要在幻灯片中使用中文，可以添加 ctex 宏包：", r"\usepackage[UTF8, noindent]{ctex}",
             r"\usetheme{epyt} \usecolortheme{beaver}", r"\setbeamertemplate{footline}[frame number]",
             "颜色主题用这个命令设置。")
    image = cjk_lines_image(lines, "china-s")
    assert text_extraction.detect_script(image)[0] == "Latin"  # the case: OSD is wrong here
    reading = ocr_page(image, "auto")
    assert (reading.lang, reading.script) == ("chi_sim+eng", "Han")
    assert "可以添加" in ocr_text(reading.lines).replace(" ", "")


def test_a_missing_pack_falls_back_to_what_is_installed_and_is_named(monkeypatch):
    _needs("eng", "jpn", "osd")
    have = tuple(lang for lang in text_extraction._installed_langs() if lang != "jpn")
    monkeypatch.setattr(text_extraction, "_installed_langs", lambda: have)
    reading = ocr_page(cjk_lines_image(JAPANESE, "japan"), "auto")
    assert reading.script == "Japanese" and reading.missing == ("jpn",)
    assert "jpn" not in reading.lang and reading.lines  # read with what is installed


def _scan(name: str) -> Image.Image:
    pymupdf = pytest.importorskip("pymupdf")
    path = DEV_DOCS / f"{name}.pdf"
    if not path.exists():
        pytest.skip(f"{path} not found (the development PDFs are on the project's machines only)")
    with pymupdf.open(path) as doc:
        image = Image.open(io.BytesIO(doc[0].get_pixmap(dpi=144).tobytes("png"))).convert("RGB")
    image.thumbnail((1600, 1600))  # as ingestion renders a page (max_side)
    return image


@pytest.mark.shared_data
@pytest.mark.slow
def test_the_chinese_magazine_scan_is_read_in_chinese():
    _needs("eng", "chi_sim", "osd")
    reading = ocr_page(_scan("magazine_page_scan_zh"), "auto")
    assert (reading.lang, reading.script) == ("chi_sim+eng", "Han")
    assert "真情典藏" in ocr_text(reading.lines).replace(" ", "")


@pytest.mark.shared_data
@pytest.mark.parametrize("name, words", [("language_discrete_chapter_scan", "Language Origins"),
                                         ("romney_1040_2011_p15_16_scan", "Self-Employment")])
def test_english_scans_are_read_in_english_in_one_pass(name, words, monkeypatch):
    _needs("eng")
    calls: list[str] = []
    read_lines = text_extraction._read_lines
    monkeypatch.setattr(text_extraction, "_read_lines",
                        lambda image, lang, config="": calls.append(lang) or read_lines(image, lang, config))
    reading = ocr_page(_scan(name), "auto")
    assert (reading.lang, reading.script, calls) == ("eng", "Latin", ["eng"])  # no detection, no second pass
    assert words in ocr_text(reading.lines)
