"""Is a PDF page's text layer what the page shows? A verdict per page (`check_text_layer`), so ingestion reads
the pages whose layer is unusable by OCR instead, and records why.

A text layer can be present and still useless:
* glyphs without a Unicode map: a font with no (or a broken) ToUnicode map gives its glyph codes, which come out
  as control characters, U+FFFD or private-use codepoints, or as runs of letters that spell nothing;
* a hidden layer: an OCR'd scan carries the words of an OCR engine as invisible text (render mode 3) or under
  the scan's image, and that engine may have read the page well or badly.

The cheap signals come from PyMuPDF without rendering anything (`layer_signals`): the share of private-use,
U+FFFD and control characters, the share of the text set in fonts without a Unicode map, and the share of the
text drawn invisibly or under a later image. Clear cases are decided on them. Only the ambiguous ones (some
odd characters, text in unmapped fonts, hidden text) are settled by OCR: tesseract reads a few of the page's
longest lines, cropped from the page image and stacked into one small image (one tesseract call), and the
reading is compared with what the layer says there (`agreement`).

The thresholds were set on 674 pages of real PDFs of many producers (the development PDFs and Debian
documentation PDFs): no page there has more than 1.2 % private-use or 5.2 % control characters (TeX math
fonts print a bracket as "\\x00"), none any U+FFFD; PDFs whose fonts lack a ToUnicode map but whose glyph
names decode well (dvips Type3 fonts, TrueType CID fonts) are the ambiguous case OCR settles.
"""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from search_engine.layout.text_layer import upright

if TYPE_CHECKING:  # pragma: no cover
    import pymupdf
    from PIL import Image

# Shares of a page's non-space characters
GARBLED_SHARE = 0.3  # this much private-use / U+FFFD / control: garbled, without asking OCR
ODD_SHARE = 0.1  # this much: ambiguous (a math page has some control characters; a garbled one many)
UNMAPPED_SHARE = 0.5  # this much of the text in fonts without a Unicode map: ambiguous
INVISIBLE_SHARE = 0.5  # this much of the text drawn invisibly or under a later image: a hidden layer, ambiguous
MIN_CHARS = 20  # a layer with fewer characters is read by OCR anyway (`text_extraction.page_reading`)
# OCR sample
SAMPLE_LINES = 3  # the longest lines of the page, read in one tesseract call
SAMPLE_LINE_HEIGHT = 40  # pixels: a sample line is enlarged to this height (tesseract misses small text)
MIN_SAMPLE_CHARS = 8  # a line with fewer characters tells too little
MIN_AGREEMENT = 0.25  # character-trigram overlap of layer and OCR under which they are taken not to match:
# a good layer agrees with OCR at 0.94-1.0 on real Latin pages and 0.44-0.57 on Japanese and Korean ones; a
# garbled layer at 0.0, another English text at 0.12 (bigrams: 0.41, common pairs like "th" are shared)
MIN_OCR_CHARS = 6  # OCR reading fewer characters than this on the sample saw no text there
SAMPLE_BLOCK = "--psm 6"  # tesseract: the sample sheet is one uniform block of text
_NONCHARACTER = re.compile(r"[\ufdd0-\ufdef\ufffe\uffff]")  # never a glyph: a producer's stand-in for a space


class UnusableTextLayer(Exception):
    """A text layer judged unusable (the verdict's reason); ingestion records it as the page's `text_layer`
    step degraded, and reads the page by OCR instead."""


@dataclass(frozen=True)
class TextLayerVerdict:
    """Whether a page's text layer can be used as its text, and if not, why.

    `signal` names what decided: "" (usable), "private_use", "replacement", "control" (glyph codes without a
    Unicode map), "ocr_mismatch" (the layer says something else than the page image), "invisible_mismatch" (a
    hidden layer that does not match the image). `reason` is one line for people ("" when usable without
    question); `checked_by_ocr` says whether an OCR sample was read to decide."""

    usable: bool
    signal: str = ""
    reason: str = ""
    checked_by_ocr: bool = False


USABLE = TextLayerVerdict(True)


@dataclass(frozen=True)
class LayerSignals:
    """The cheap signals of a page's text layer (shares of its non-space characters, except `invisible`:
    of its text drawing operations)."""

    characters: int
    private_use: float = 0.0
    replacement: float = 0.0
    control: float = 0.0
    unmapped: float = 0.0  # set in fonts without a Unicode map (Type0 Identity or Type3 without ToUnicode)
    invisible: float = 0.0  # drawn in render mode 3, or under an image drawn later
    unmapped_fonts: frozenset[str] = frozenset()  # their `_font_key`s

    @property
    def odd(self) -> float:
        """Private-use, U+FFFD and control characters together."""
        return self.private_use + self.replacement + self.control


def layer_signals(page: pymupdf.Page) -> LayerSignals:
    """The page's cheap signals, from PyMuPDF alone (no rendering, no OCR)."""
    return _signals(page, _spans(page))


def _signals(page: pymupdf.Page, spans: list[dict]) -> LayerSignals:
    counts = {"Co": 0, "FFFD": 0, "Cc": 0}
    total = unmapped_chars = 0
    unmapped_fonts = _unmapped_fonts(page)
    for span in spans:
        text = _NONCHARACTER.sub(" ", span["text"])
        chars = [c for c in text if not c.isspace()]
        total += len(chars)
        if _font_key(span["font"]) in unmapped_fonts:
            unmapped_chars += len(chars)
        for char in chars:
            kind = "FFFD" if char == "\ufffd" else unicodedata.category(char)
            if kind in counts:
                counts[kind] += 1
    if not total:
        return LayerSignals(0)
    return LayerSignals(total, counts["Co"] / total, counts["FFFD"] / total, counts["Cc"] / total,
                        unmapped_chars / total, _invisible_share(page), unmapped_fonts)


def cheap_verdict(signals: LayerSignals) -> TextLayerVerdict | None:
    """The verdict the cheap signals give on their own, or None when they are ambiguous (OCR decides)."""
    if signals.characters < MIN_CHARS:
        return USABLE
    for share, signal, what in ((signals.private_use, "private_use", "private-use codepoints"),
                                (signals.replacement, "replacement", "U+FFFD (glyphs without a Unicode map)"),
                                (signals.odd, "control", "control, private-use and U+FFFD characters "
                                                         "(glyph codes without a Unicode map)")):
        if share >= GARBLED_SHARE:
            return TextLayerVerdict(False, signal, f"garbled text layer: {share:.0%} of its {signals.characters} "
                                                   f"characters are {what}")
    if signals.odd >= ODD_SHARE or signals.unmapped >= UNMAPPED_SHARE or signals.invisible >= INVISIBLE_SHARE:
        return None
    return USABLE


def check_text_layer(page: pymupdf.Page, image: Image.Image | None = None,
                     ocr_lang: str | None = None) -> TextLayerVerdict:
    """The verdict on the page's text layer: from the cheap signals, and where they are ambiguous, from an OCR
    sample of the page `image` (the rendered page; None when OCR is off: an ambiguous layer is then kept,
    since nothing can say it is wrong), read in `ocr_lang` (the OCR language setting: `sample_lang`)."""
    upright(page)  # boxes in the frame of the rendered page
    spans = _spans(page)
    signals = _signals(page, spans)
    verdict = cheap_verdict(signals)
    if verdict is not None or image is None:
        return verdict or USABLE
    lang = sample_lang(ocr_lang, " ".join(span["text"] for span in spans))
    if lang is None:
        return TextLayerVerdict(True, "", "no installed OCR pack reads the script of the layer: it is kept")
    lines = sample_lines(page, signals.unmapped_fonts if signals.unmapped >= UNMAPPED_SHARE else frozenset())
    sample, expected = _sample_image(lines, image, _image_frame(page, image))
    if sample is None:
        return USABLE
    seen = read_sample(sample, lang)
    hidden = signals.invisible >= INVISIBLE_SHARE
    if len(_letters(seen)) < MIN_OCR_CHARS:
        if hidden:  # text nobody sees, over a part of the image that shows none
            return TextLayerVerdict(False, "invisible_mismatch", "hidden text layer where the page image shows no "
                                                                 "text (OCR read nothing there)", True)
        return TextLayerVerdict(True, "", "OCR read nothing on the sample: the layer is kept", True)
    score = agreement(expected, seen)
    what = ("hidden text layer" if hidden else "text layer" + (
        f" in fonts without a Unicode map ({', '.join(sorted(signals.unmapped_fonts))[:80]})"
        if signals.unmapped >= UNMAPPED_SHARE else ""))
    if score < MIN_AGREEMENT:
        return TextLayerVerdict(False, "invisible_mismatch" if hidden else "ocr_mismatch",
                                f"{what} does not match the page image: {score:.0%} agreement with OCR on "
                                f"{len(lines)} sample lines", True)
    return TextLayerVerdict(True, "", f"{what} matches the page image ({score:.0%} agreement with OCR)", True)


def sample_lang(ocr_lang: str | None, layer_text: str) -> str | None:
    """The language to read the OCR sample in: the configured one, or for "auto" the packs of the script the
    page's layer is written in plus English (`ocr_languages`): a hidden Chinese layer is checked in Chinese; a
    garbled one, whose script means nothing, in whatever it looks like, and then does not match. None when
    no installed pack reads that script (an Arabic layer without the ara pack): OCR could not judge it."""
    from search_engine.ocr_languages import choose_languages, script_of_text
    from search_engine.text_extraction import installed_ocr_langs, resolve_ocr_lang

    lang = resolve_ocr_lang(ocr_lang)
    if lang != "auto":
        return lang
    choice = choose_languages(script_of_text(layer_text) or "Latin", installed_ocr_langs())
    if choice is None:  # a script the table does not know
        return None
    return None if choice.missing or not choice.lang else choice.lang


def read_sample(sample: Image.Image, lang: str) -> str:
    """OCR of a sample sheet (lines stacked: one block of text, tesseract's `--psm 6`) in `lang`."""
    from search_engine.text_extraction import ocr_page, ocr_text

    return ocr_text(ocr_page(sample, lang, SAMPLE_BLOCK).lines)


def agreement(layer: str, ocr: str) -> float:
    """How much two readings of the same lines agree: the overlap (Dice) of their character trigrams, letters
    and digits only, case and compatibility forms folded. Independent of line order and spacing (OCR and PDF
    layers split words differently, CJK has no spaces); one misread letter costs three trigrams, not the line;
    trigrams, not bigrams, since two texts of one language share many bigrams by chance."""
    a, b = _trigrams(_letters(layer)), _trigrams(_letters(ocr))
    if not a or not b:
        return 0.0
    common = sum(min(count, b.get(gram, 0)) for gram, count in a.items())
    return 2 * common / (sum(a.values()) + sum(b.values()))


def _letters(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


def _trigrams(text: str) -> dict[str, int]:
    grams: dict[str, int] = {}
    for i in range(len(text) - 2):
        grams[text[i:i + 3]] = grams.get(text[i:i + 3], 0) + 1
    return grams


def sample_lines(page: pymupdf.Page, fonts: frozenset[str] = frozenset()) -> list[tuple[str, tuple[float, ...]]]:
    """(text, box) of the page's longest horizontal lines (up to SAMPLE_LINES; in `fonts` when given and some
    lines are set in them), boxes in the page's points."""
    candidates = []
    width, height = page.rect.width, page.rect.height
    for block in page.get_text("dict")["blocks"]:
        for line in block.get("lines", []):
            if abs(line["dir"][1]) > 0.05:
                continue
            spans = [s for s in line["spans"] if s["text"].strip()]
            text = "".join(s["text"] for s in spans)
            box = tuple(line["bbox"])
            if (len(text.strip()) < MIN_SAMPLE_CHARS or not all(map(math.isfinite, box)) or box[0] < 0 or box[1] < 0
                    or box[2] > width or box[3] > height or box[3] - box[1] < 3):
                continue
            in_fonts = any(_font_key(s["font"]) in fonts for s in spans)
            candidates.append((in_fonts, len(text.strip()), text, box))
    if fonts and any(c[0] for c in candidates):
        candidates = [c for c in candidates if c[0]]
    candidates.sort(key=lambda c: -c[1])
    return [(text, box) for _, _, text, box in candidates[:SAMPLE_LINES]]


def _image_frame(page: pymupdf.Page, image: Image.Image) -> tuple[float, float, float, float]:
    """(sx, sy, dx, dy): a point (x, y) of the page (PyMuPDF: the crop box, top left origin) lies at
    ((x + dx) * sx, (y + dy) * sy) on `image`. Poppler renders the media box (ingestion's page images),
    PyMuPDF the crop box; where the two differ, the image's shape tells which one it shows."""
    rect, media, crop = page.rect, page.mediabox, page.cropbox
    aspect = image.width / max(image.height, 1)
    if (abs(media.width - rect.width) > 0.5 or abs(media.height - rect.height) > 0.5) and media.height > 0 and \
            abs(aspect - media.width / media.height) < abs(aspect - rect.width / max(rect.height, 1e-6)):
        # PyMuPDF gives the crop box with y measured down from the media box's top, x as in the file
        return image.width / media.width, image.height / media.height, crop.x0 - media.x0, crop.y0
    return image.width / max(rect.width, 1e-6), image.height / max(rect.height, 1e-6), 0.0, 0.0


def _sample_image(lines: list[tuple[str, tuple[float, ...]]], image: Image.Image,
                  frame: tuple[float, float, float, float]) -> tuple[Image.Image | None, str]:
    """The sample lines cropped from the page image (`frame`: `_image_frame`), each enlarged to
    SAMPLE_LINE_HEIGHT, stacked top to bottom on white; and the layer's text of those lines."""
    from PIL import Image as PILImage

    sx, sy, dx, dy = frame
    crops = []
    for _, (x1, y1, x2, y2) in lines:
        pad = (y2 - y1) * 0.15
        x1, y1, x2, y2 = x1 + dx, y1 + dy, x2 + dx, y2 + dy
        box = (max(0, int((x1 - pad) * sx)), max(0, int((y1 - pad) * sy)), min(image.width, math.ceil((x2 + pad) * sx)),
               min(image.height, math.ceil((y2 + pad) * sy)))
        if box[2] - box[0] < 4 or box[3] - box[1] < 4:
            continue
        crop = image.crop(box).convert("L")
        scale = max(1.0, SAMPLE_LINE_HEIGHT / crop.height)
        crops.append(crop.resize((round(crop.width * scale), round(crop.height * scale))) if scale > 1 else crop)
    if not crops:
        return None, ""
    gap = SAMPLE_LINE_HEIGHT // 2
    sheet = PILImage.new("L", (max(c.width for c in crops) + 2 * gap, sum(c.height + gap for c in crops) + gap), 255)
    y = gap
    for crop in crops:
        sheet.paste(crop, (gap, y))
        y += crop.height + gap
    return sheet, " ".join(text for text, _ in lines)


def _spans(page: pymupdf.Page) -> list[dict]:
    import pymupdf

    flags = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES
    return [span for block in page.get_text("dict", flags=flags)["blocks"] for line in block.get("lines", [])
            for span in line["spans"]]


def _unmapped_fonts(page: pymupdf.Page) -> frozenset[str]:
    """Names (`_font_key`, without the subset prefix) of the page's fonts whose glyphs have no Unicode map:
    a Type0 font with an Identity encoding (its codes are glyph ids) or a Type3 font, either without ToUnicode.
    Their text decodes only as far as the glyph names or the embedded font's own tables allow."""
    doc = page.parent
    names = set()
    for xref, _ext, kind, basefont, _name, encoding in page.get_fonts():
        if not xref or (kind != "Type3" and not (kind == "Type0" and encoding.startswith("Identity"))):
            continue
        if doc.xref_get_key(xref, "ToUnicode")[0] == "null":
            names.add(_font_key(basefont.split("+", 1)[-1]))
    return frozenset(names)


def _font_key(name: str) -> str:
    """A font's name as both PyMuPDF's font list ("Nimbus Roman Regular") and its text spans
    ("NimbusRoman-Regular") spell it: letters and digits, case folded."""
    return "".join(c for c in name.casefold() if c.isalnum())


def _invisible_share(page: pymupdf.Page) -> float:
    """Share of the page's text drawing operations that show nothing: render mode 3 ("ignore-text"), or text
    that an image drawn later covers (an OCR'd scan's words under the scan). Vectorised: a map page draws
    thousands of words and hundreds of pictures."""
    import numpy as np

    log = page.get_bboxlog()
    kinds = [kind for kind, _ in log]
    text = np.asarray([i for i, kind in enumerate(kinds) if kind.endswith("-text")], dtype=np.int64)
    if not len(text):
        return 0.0
    hidden = np.asarray([kinds[i] == "ignore-text" for i in text])
    pictures = np.asarray([i for i, kind in enumerate(kinds) if kind in ("fill-image", "fill-imgmask")], dtype=np.int64)
    if len(pictures):
        boxes = np.asarray([log[i][1] for i in range(len(log))], dtype=np.float64)
        t, p = boxes[text][:, None, :], boxes[pictures][None, :, :]
        covers = ((pictures[None, :] > text[:, None]) & (p[..., 0] <= t[..., 0] + 1) & (p[..., 1] <= t[..., 1] + 1)
                  & (p[..., 2] >= t[..., 2] - 1) & (p[..., 3] >= t[..., 3] - 1))
        hidden |= covers.any(axis=1)
    return float(hidden.mean())
