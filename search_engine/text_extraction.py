"""Page text for the CPU text channel: the PDF text layer, or OCR (tesseract) when there is none."""
from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from PIL import Image

from search_engine.documents import DocumentError, MissingToolError
from search_engine.ocr_languages import choose_languages, script_of_text
from search_engine.ocr_polarity import dark_bands, inverted

TESSERACT_HINT = "OCR needs the tesseract binary: apt-get install tesseract-ocr tesseract-ocr-eng"
# Scripts whose packs are tried, in this order, when the OCR language is "auto", English reads poorly and
# tesseract's script detection cannot tell the script (too few characters on the page) or names one without an
# installed pack: one pack each (`ocr_languages.choose_languages`: chi_sim, else chi_tra), not every pack.
AUTO_FALLBACK_SCRIPTS = ("Han", "Japanese", "Korean")
# Mean word confidence (0-100) under which an English reading is taken for the wrong script:
# on upstream's example corpus English slides read at 69-94, Chinese slides read as English at 18-53.
AUTO_MIN_CONFIDENCE = 60.0
# Tesseract's orientation and script detection only (`--psm 0`): which script the page shows
SCRIPT_DETECTION = "--psm 0"
# Points of mean confidence by which the reading in the detected script's packs must beat the English one to
# replace it: a CJK page reads at 80-93 in its packs against 20-40 in English, while handwriting that OSD takes
# for Japanese reads at 38 in jpn+eng against 30 in English (noise either way: the English reading is kept).
AUTO_SCRIPT_MARGIN = 10.0
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af\u3000-\u303f\uff00-\uffef"
# Tesseract's page segmentation for sparse text (`--psm 11`): find as much text as possible in no particular
# order — a chart's scattered ticks, values and legend, which the default (a page of text blocks) skips.
SPARSE_TEXT = "--psm 11"
# C0 control characters other than tab and newline: what PyMuPDF returns for the glyphs of a font without a
# Unicode map (TeX math fonts in older PDFs print "\x00" for a bracket); they mean nothing to a reader
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Unicode noncharacters (U+FDD0-FDEF, U+FFFE, U+FFFF): never text; a font's Unicode map that gives one for a
# glyph gives it for the glyph it could not name, and PDFs that print them print them for the space between
# words ("LG\uffffElectronics\uffffDeutschland"): glued words to BM25's tokenizer and to the embedder's, which
# drops them
NONCHARACTERS = re.compile("[\ufdd0-\ufdef\ufffe\uffff]")


def clean_glyphs(text: str) -> str:
    """A text layer's string without the codes that stand for no character: control codes dropped,
    noncharacters read as the space they stand for (see NONCHARACTERS)."""
    return NONCHARACTERS.sub(" ", CONTROL_CHARACTERS.sub("", text))


_CJK_GAP = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")


@dataclass
class OcrWord:
    """One word tesseract read, with its box in image pixels."""

    text: str
    box: tuple[int, int, int, int]


@dataclass
class OcrLine:
    """One printed line: its text, box (x1, y1, x2, y2 in image pixels), mean confidence and words."""

    text: str
    box: tuple[int, int, int, int]  # x1, y1, x2, y2 in image pixels
    confidence: float = 0.0  # mean word confidence, 0-100
    words: list[OcrWord] = field(default_factory=list)
    block: int = 0  # tesseract's block and paragraph numbers: the page layout groups lines by them
    paragraph: int = 0


def _normalise(text: str) -> str:
    """One space between words, none between CJK characters (tesseract puts spaces between Chinese
    characters; they would break words apart for BM25 and the embedder), no control characters or
    noncharacters (`clean_glyphs`: what a PDF font without a Unicode map gives for its glyphs)."""
    return _CJK_GAP.sub("", re.sub(r"\s+", " ", clean_glyphs(text))).strip()


def installed_ocr_langs() -> list[str]:
    """The tesseract language packs installed here (`tesseract --list-langs`)."""
    return [lang for lang in _installed_langs() if lang != "osd"]


@functools.cache
def _installed_langs() -> tuple[str, ...]:
    return tuple(_checked_tesseract().get_languages(config=""))


def resolve_ocr_lang(lang: str | None = None) -> str:
    """The OCR language setting: `lang`, else env VRAG_OCR_LANG, else "auto".

    "auto" chooses per page (`ocr_page`): English first, and when that reads poorly (mean confidence under
    AUTO_MIN_CONFIDENCE), the packs of the script tesseract detects on the page (`ocr_languages`) plus
    English. An explicit tesseract spec ("chi_sim+eng", "deu") is used as is, and a language that is not
    installed is a clear error (tesseract's own message is obscure).
    """
    lang = (lang or os.environ.get("VRAG_OCR_LANG") or "auto").strip()
    if lang == "auto":
        return lang
    missing = [part for part in lang.split("+") if part not in _installed_langs()]
    if missing:
        packages = " ".join("tesseract-ocr-" + m.replace("_", "-").lower() for m in missing)
        raise ValueError(f"OCR language(s) {', '.join(missing)} not installed (have: "
                         f"{', '.join(installed_ocr_langs())}); apt-get install {packages}")
    return lang


def _auto_fallbacks() -> list[str]:
    """The installed language specs of AUTO_FALLBACK_SCRIPTS, each with English."""
    have = set(_installed_langs())
    choices = [choose_languages(script, have) for script in AUTO_FALLBACK_SCRIPTS]
    return [choice.lang for choice in choices if choice is not None and not choice.missing]


def pdf_page_texts(path: str | Path, on_error: Callable[[int, Exception], None] | None = None) -> list[str]:
    """The text layer of every page (empty strings for scanned pages), read in one pass.

    A file that cannot be opened is a `DocumentError`. A page whose text layer cannot be read is one too,
    unless `on_error` is given: then that page's text is "" and `on_error(page_number, exception)` is told
    (ingestion records the page as degraded and OCRs it, if OCR is on)."""
    import pymupdf

    name = Path(path).name
    try:
        with pymupdf.open(path) as doc:
            if doc.needs_pass:
                raise DocumentError(f"{name}: encrypted PDF (password required)")
            texts = []
            for number in range(1, doc.page_count + 1):
                try:
                    texts.append(_normalise(doc[number - 1].get_text()))
                except Exception as exc:  # noqa: BLE001 - pymupdf raises several types for a broken page
                    if on_error is None:
                        raise
                    on_error(number, exc)
                    texts.append("")
            return texts
    except DocumentError:
        raise
    except Exception as exc:  # noqa: BLE001 - pymupdf raises several types for broken files
        raise DocumentError(f"{name}: cannot read the text layer ({exc})") from exc


class TesseractEnvironment(Mapping[str, str]):
    """The environment tesseract runs in: this process's, live, plus `OMP_THREAD_LIMIT=1` unless set.

    Tesseract's OpenMP threads fight each other on small machines (1.5 s instead of 5 s per dense page),
    so it must run with one OpenMP thread. That limit used to be written into `os.environ` at import,
    where this process's own OpenMP runtime read it too: torch then ran every MiniLM batch of ingestion
    on one core of two (half the ingestion speed) while reporting 2 threads. pytesseract has no
    per-call environment argument; it hands its module-level `environ` to every subprocess, so that
    mapping is replaced by this overlay, which reaches tesseract and nothing else.
    """

    def _merged(self) -> dict[str, str]:
        return {"OMP_THREAD_LIMIT": "1", **os.environ}

    def __getitem__(self, key: str) -> str:
        return self._merged()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())


@functools.cache
def _checked_tesseract() -> ModuleType:
    """pytesseract once the binary is known to run (cached: the check costs a process start)."""
    import pytesseract

    pytesseract.pytesseract.environ = TesseractEnvironment()  # see TesseractEnvironment: tesseract only
    try:
        pytesseract.get_tesseract_version()
    except pytesseract.TesseractNotFoundError as exc:  # not cached: a later install is picked up
        raise MissingToolError(TESSERACT_HINT) from exc
    return pytesseract


def ocr_image(image: Image.Image, lang: str | None = None) -> str:
    """All text tesseract reads on the image in reading order, whitespace-normalised (`lang`: see
    `resolve_ocr_lang`)."""
    return ocr_text(ocr_reading(image, lang))


def ocr_reading(image: Image.Image, lang: str | None = None) -> list[OcrLine]:
    """One OCR pass: the lines in tesseract's reading order (block by block), each with its block and
    paragraph number and its words' boxes — enough for both the page text (`ocr_text`) and the page
    layout (`search_engine.layout.ocr.layout_from_ocr_lines`), so ingestion reads a page once."""
    return _ocr(image, lang)


@dataclass
class OcrReading:
    """A page read by OCR: its lines (as `ocr_reading`), the tesseract language spec that read them, the script
    that spec was chosen for ("" when the language was given, not chosen), and the packs that script wanted
    but that are not installed (the page was then read with what is)."""

    lines: list[OcrLine]
    lang: str
    script: str = ""
    missing: tuple[str, ...] = ()


def detect_script(image: Image.Image) -> tuple[str, float] | None:
    """(script, confidence) of tesseract's script detection (OSD) on the image, e.g. ("Han", 1.4); None when it
    cannot tell (too few characters, or no `osd` pack)."""
    pytesseract = _checked_tesseract()
    if "osd" not in _installed_langs():
        return None
    try:
        found = pytesseract.image_to_osd(image, config=SCRIPT_DETECTION, output_type=pytesseract.Output.DICT)
    except pytesseract.TesseractError:  # "Too few characters. Skipping this page"
        return None
    script = str(found.get("script", ""))
    return (script, float(found.get("script_conf", 0.0))) if script else None


def ocr_page(image: Image.Image, lang: str | None = None, config: str = "") -> OcrReading:
    """The page's OCR reading and the language that read it (`lang`: see `resolve_ocr_lang`).

    "auto" chooses per page. English first: a page it reads well is Latin script and is done (no extra pass on
    the common case). Otherwise tesseract's script detection (OSD) names the script and the page is read again
    with that script's packs plus English (`ocr_languages.choose_languages`), and that reading replaces the
    English one when it is clearly more confident (AUTO_SCRIPT_MARGIN). When OSD names Latin though English
    reads poorly (a Chinese slide full of code), the packs of AUTO_FALLBACK_SCRIPTS each read it once and one
    replaces English only by that same margin. When OSD cannot tell, names a script
    without an installed pack, or a script the table does not know, the installed packs of
    AUTO_FALLBACK_SCRIPTS are tried and the most confident reading kept (what "auto" always did); a missing
    pack is named in the result."""
    lang = resolve_ocr_lang(lang)
    rgb = image.convert("RGB")
    if lang != "auto":
        return OcrReading(_read_lines(rgb, lang, config), lang)
    have = set(_installed_langs())
    best = _read_lines(rgb, "eng", config) if "eng" in have else []
    best_lang, best_confidence = "eng", mean_confidence(best)
    if best and best_confidence >= AUTO_MIN_CONFIDENCE:
        return OcrReading(best, best_lang, "Latin")
    detected = detect_script(rgb)
    choice = choose_languages(detected[0], have) if detected else None
    if choice is not None and not choice.missing and choice.lang != best_lang:
        lines = _read_lines(rgb, choice.lang, config)
        if mean_confidence(lines) >= best_confidence + AUTO_SCRIPT_MARGIN or not best:
            return OcrReading(lines, choice.lang, choice.script)
        return OcrReading(best, best_lang, choice.script)
    if choice is not None and not choice.missing:
        # OSD names the script English reads (Latin) though English reads the page poorly: a CJK slide
        # whose code and product names outweigh its characters for OSD. The fallback packs each get one
        # reading, and one replaces the English reading only when clearly more confident (a poor Latin
        # scan stays English)
        for fallback in _auto_fallbacks():
            lines = _read_lines(rgb, fallback, config)
            confidence = mean_confidence(lines)
            if confidence >= best_confidence + AUTO_SCRIPT_MARGIN:
                best, best_lang, best_confidence = lines, fallback, confidence
        return OcrReading(best, best_lang, choice.script if best_lang == "eng" else script_of_text(
            ocr_text(best)) or choice.script)
    for fallback in _auto_fallbacks():
        lines = _read_lines(rgb, fallback, config)
        confidence = mean_confidence(lines)
        if confidence > best_confidence:
            best, best_lang, best_confidence = lines, fallback, confidence
    return OcrReading(best, best_lang, detected[0] if detected else "", choice.missing if choice else ())


def ocr_text(lines: list[OcrLine]) -> str:
    """The page text of a reading (what `ocr_image` returns)."""
    return " ".join(line.text for line in lines)


def _group_words(data: dict[str, list]) -> dict[tuple[int, int, int], list[int]]:
    """Word indices per (block, paragraph, line): tesseract's own notion of a printed line. Table
    rules that tesseract reads as a lone "|" are not words."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, word in enumerate(data["text"]):
        if not str(word).strip(" |") or float(data["conf"][i]) < 0:
            continue
        groups.setdefault((data["block_num"][i], data["par_num"][i], data["line_num"][i]), []).append(i)
    return groups


def _line(data: dict[str, list], indices: list[int]) -> OcrLine:
    indices = sorted(indices, key=lambda i: data["left"][i])  # words left to right
    words = [OcrWord(str(data["text"][i]).strip(), (int(data["left"][i]), int(data["top"][i]),
                                                   int(data["left"][i] + data["width"][i]),
                                                   int(data["top"][i] + data["height"][i]))) for i in indices]
    x1 = min(w.box[0] for w in words)
    y1 = min(w.box[1] for w in words)
    x2 = max(w.box[2] for w in words)
    y2 = max(w.box[3] for w in words)
    text = _normalise(" ".join(w.text for w in words))
    confidence = sum(float(data["conf"][i]) for i in indices) / len(indices)
    first = indices[0]
    return OcrLine(text, (x1, y1, x2, y2), confidence, words, int(data["block_num"][first]),
                   int(data["par_num"][first]))


def _read_lines(image: Image.Image, lang: str, config: str = "") -> list[OcrLine]:
    """Lines in tesseract's reading order (block by block, so columns stay apart), plus the light-on-dark
    text of dark bands (title bars, dark frames) read inverted and placed by their height on the page.
    `config`: tesseract options (e.g. `SPARSE_TEXT`)."""
    pytesseract = _checked_tesseract()
    data = pytesseract.image_to_data(image, lang=lang, config=config, output_type=pytesseract.Output.DICT)
    lines = [_line(data, indices) for indices in _group_words(data).values()]
    extra = _read_dark_bands(image, lang, lines, config)
    return _merged_by_height(lines, extra) if extra else lines


def _read_dark_bands(image: Image.Image, lang: str, read: list[OcrLine], config: str = "") -> list[OcrLine]:
    """Lines of the page's dark bands (`search_engine.ocr_polarity`) read inverted; words the normal pass
    already read (their centre inside one of its word boxes) are dropped, so nothing is read twice."""
    pytesseract = _checked_tesseract()
    known = [word.box for line in read for word in line.words]
    first_block = max((line.block for line in read), default=0) + 1
    lines: list[OcrLine] = []
    for number, box in enumerate(dark_bands(image)):
        data = pytesseract.image_to_data(inverted(image, box), lang=lang, config=config,
                                         output_type=pytesseract.Output.DICT)
        for i in range(len(data["text"])):
            data["left"][i] += box[0]
            data["top"][i] += box[1]
            data["block_num"][i] += (first_block + number) * 1000  # apart from the normal pass's blocks
            centre = (data["left"][i] + data["width"][i] / 2, data["top"][i] + data["height"][i] / 2)
            if any(x1 <= centre[0] <= x2 and y1 <= centre[1] <= y2 for x1, y1, x2, y2 in known):
                data["conf"][i] = -1  # already read: `_group_words` skips it
        lines.extend(_line(data, indices) for indices in _group_words(data).values())
    return lines


def _merged_by_height(lines: list[OcrLine], extra: list[OcrLine]) -> list[OcrLine]:
    """`lines` in their reading order with each extra line placed before the first line that starts lower
    on the page (a title bar's title before the body it heads)."""
    merged = list(lines)
    for line in sorted(extra, key=lambda item: (item.box[1], item.box[0])):
        position = next((i for i, other in enumerate(merged) if other.box[1] > line.box[1]), len(merged))
        merged.insert(position, line)
    return merged


def mean_confidence(lines: list[OcrLine]) -> float:
    """Word-weighted mean confidence of a reading (0 when nothing was read)."""
    words = sum(len(line.words) or 1 for line in lines)
    return sum(line.confidence * (len(line.words) or 1) for line in lines) / words if words else 0.0


def ocr_lines(image: Image.Image, lang: str | None = None, scale: float = 1.0, config: str = "") -> list[OcrLine]:
    """Text lines with their boxes, top to bottom, so callers can find *where* something is printed.

    `lang` is a tesseract language spec or "auto" (see `resolve_ocr_lang`; default env VRAG_OCR_LANG,
    else "auto"). `scale` > 1 reads an enlarged copy (tesseract misses text under ~10 px high) and
    maps the boxes back to `image`'s pixels. `config`: tesseract options (`SPARSE_TEXT` for a chart).
    """
    if scale != 1.0:
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        lines = _ocr(image.convert("RGB").resize(size, Image.Resampling.LANCZOS), lang, config)
        for line in lines:
            line.box = _scaled(line.box, 1 / scale)
            for word in line.words:
                word.box = _scaled(word.box, 1 / scale)
    else:
        lines = _ocr(image, lang, config)
    return sorted(lines, key=lambda line: (line.box[1], line.box[0]))


def _scaled(box: tuple[int, int, int, int], factor: float) -> tuple[int, int, int, int]:
    return (int(box[0] * factor), int(box[1] * factor), int(round(box[2] * factor)), int(round(box[3] * factor)))


def _ocr(image: Image.Image, lang: str | None, config: str = "") -> list[OcrLine]:
    """Lines in reading order, in the configured language or the one chosen for the page (`ocr_page`)."""
    return ocr_page(image, lang, config).lines


@dataclass
class PageReading:
    """What `page_reading` read: the page text, its source ("pdf", "ocr" or "" for none), and, when OCR read the
    page, that reading (its lines give the page layout without a second OCR pass; its language and the packs
    it missed are recorded with the page)."""

    text: str
    source: str
    ocr: OcrReading | None = None

    @property
    def lines(self) -> list[OcrLine] | None:
        """The OCR lines, or None when the page text is not OCR's."""
        return self.ocr.lines if self.ocr is not None else None


def page_text(pdf_text: str, image: Image.Image | None, ocr: bool = True, min_chars: int = 20,
              ocr_lang: str | None = None) -> tuple[str, str]:
    """(text, source) of `page_reading` (see there)."""
    reading = page_reading(pdf_text, image, ocr, min_chars, ocr_lang)
    return reading.text, reading.source


def page_reading(pdf_text: str, image: Image.Image | None, ocr: bool = True, min_chars: int = 20,
                 ocr_lang: str | None = None, layer_usable: bool = True) -> PageReading:
    """The page's text: the text layer when it has real content and is usable, else OCR of the page image.

    A layer under `min_chars` non-space characters is usually a scan with a page number or a stray
    header, so OCR reads the page instead; so does a layer judged unusable (`layer_usable=False`: garbled
    glyphs or a hidden layer that does not match the image, `layout.text_quality`). When OCR is off or finds
    nothing, whatever layer text there is still beats nothing ("pdf"); with no text at all the source is "".
    """
    layer = _normalise(pdf_text or "")
    if layer_usable and len(layer.replace(" ", "")) >= min_chars:
        return PageReading(layer, "pdf")
    if ocr and image is not None:
        reading = ocr_page(image, ocr_lang)
        text = ocr_text(reading.lines)
        if text:
            return PageReading(text, "ocr", reading)
    return PageReading(layer, "pdf") if layer else PageReading("", "")
