"""Real PDF pages whose text layer says something other than what the page shows, made with PyMuPDF offline.

Each is built the way such files come about, not by faking the extraction:
* `unicode_map_pdf(..., "private_use")`: the font's ToUnicode CMap maps every glyph to a private-use codepoint
  (producers that subset symbol-encoded fonts do this); the page shows the words, the layer gives U+E0xx.
* `unicode_map_pdf(..., "none")`: the ToUnicode CMap is removed from a font whose codes are glyph ids (Type0,
  Identity-H); the layer gives the glyph ids as characters ("5IF\\x01RVJDL" for "The quick").
* `scanned_pdf`: a page that is an image of printed lines with an invisible text layer (render mode 3) over
  it, or text under it, as an OCR'd scan carries; the hidden words are the printed ones or others.
* `unicode_map_pdf(..., "keep")`: the same page with its map intact, which no check may flag.
Images of CJK lines (`cjk_lines_image`) use PyMuPDF's bundled CJK font (Droid Sans Fallback), so no system font
is needed.
"""
from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

LINES = ("The harbour pilots guide every cargo ship into the port.",
         "Dredging keeps the channel twelve metres deep all year.",
         "Quarterly tonnage rose by nine percent over last year.",
         "Night arrivals need two pilots and a tug on standby.")
OTHER_LINES = ("Volcanic soils favour the vineyards of the eastern slopes.",
               "The orchestra rehearses on Tuesdays in the old library.",
               "Migrating cranes rest at the lake before crossing the hills.",
               "Copper wiring was replaced throughout the north wing.")
_PUA_CMAP = b"""/CIDInit /ProcSet findresource begin 12 dict begin begincmap
/CIDSystemInfo <</Registry(Adobe)/Ordering(UCS)/Supplement 0>> def /CMapName /Private-UCS def /CMapType 2 def
1 begincodespacerange <0000> <FFFF> endcodespacerange
1 beginbfrange <0000> <00FF> <E000> endbfrange
endcmap CMapName currentdict /CMap defineresource pop end end"""


def _text_page(doc, lines: tuple[str, ...], fontname: str = "F0", fontsize: float = 14) -> None:
    import pymupdf

    page = doc.new_page(width=595, height=842)
    page.insert_font(fontname=fontname, fontbuffer=pymupdf.Font("tiro").buffer)
    for k, line in enumerate(lines):
        page.insert_text((60, 100 + 28 * k), line, fontname=fontname, fontsize=fontsize)


def unicode_map_pdf(path: Path, unicode_map: str = "keep", lines: tuple[str, ...] = LINES) -> Path:
    """A one-page PDF of `lines` set in an embedded font (Type0, Identity-H) whose ToUnicode map is kept
    ("keep"), replaced by one onto private-use codepoints ("private_use"), or removed ("none")."""
    import pymupdf

    doc = pymupdf.open()
    _text_page(doc, lines)
    font = doc[0].get_fonts()[0][0]
    if unicode_map == "private_use":
        cmap = int(doc.xref_get_key(font, "ToUnicode")[1].split()[0])
        doc.update_stream(cmap, _PUA_CMAP)
    elif unicode_map == "none":
        doc.xref_set_key(font, "ToUnicode", "null")
    elif unicode_map != "keep":
        raise ValueError(f"unicode_map: keep, private_use or none, not {unicode_map!r}")
    doc.save(path)
    return path


def scanned_pdf(path: Path, hidden: tuple[str, ...] | None = LINES, printed: tuple[str, ...] = LINES,
                under_image: bool = False) -> Path:
    """A one-page 'scan': an image of `printed` lines filling the page, and `hidden` at the printed lines' places
    as invisible text (render mode 3) over it, or with `under_image` as ordinary text drawn before the image,
    which covers it (None: no text layer; `printed=()`: hidden text over an empty image)."""
    import pymupdf

    source = pymupdf.open()
    _text_page(source, printed)
    picture = source[0].get_pixmap(dpi=150, colorspace=pymupdf.csGRAY).tobytes("png")
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    if not under_image:
        page.insert_image(page.rect, stream=picture)
    for k, line in enumerate(hidden or ()):
        page.insert_text((60, 100 + 28 * k), line, fontname="tiro", fontsize=14, render_mode=0 if under_image else 3)
    if under_image:
        page.insert_image(page.rect, stream=picture)
    doc.save(path)
    return path


def cjk_lines_image(lines: tuple[str, ...], font: str, dpi: int = 144) -> Image.Image:
    """An A4 page image of `lines` (repeated three times: a page of text) set in PyMuPDF's bundled CJK font
    (`font`: "japan", "korea", "china-s", "china-t")."""
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_font(fontname="F0", fontbuffer=pymupdf.Font(font).buffer)
    y = 80.0
    for _ in range(3):
        for line in lines:
            page.insert_text((50, y), line, fontname="F0", fontsize=16)
            y += 30
    return Image.open(io.BytesIO(page.get_pixmap(dpi=dpi).tobytes("png"))).convert("RGB")
