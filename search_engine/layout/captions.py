"""Captions: which block is one, and which table or figure it belongs to.

A caption starts with a label and a number ("Figure 3:", "Table 2.", "图 1", "表2") — found by that shape, not
by a list of words — and belongs to the table or figure right above or below it (`attach_captions`). A
caption-shaped block that no table or figure claims is a caption region of its own (`compose`).
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from search_engine.layout.geometry import union
from search_engine.layout.parts import Block, Figure, Table

# A caption starts with a short label word (any script) and a number: "Figure 3:", "Fig. 2.", "Table IV",
# "图 1", "表2：", "Table A.1" (an appendix's). Position decides which figure or table it belongs to.
# The label starts with a capital or a character of a caseless script (captions are set that way); a Roman
# numeral must stand apart from it ("Table IV", not the acronym "ICC"); after the number comes a separator,
# a capital or CJK text ("Figure 2: ...", "Table 3 Results", "图1 收入"), not a sentence ("Table 2 shows").
# A figure's number has at most three digits per part ("Revenue 2023: 41" is a row, not "Figure 2023");
# a Latin label is a word of two letters or more ("Q3 Results" is a quarter); a label and a number with
# nothing after them ("Dove 5.4", "Jan 30") is a row of a table or a chart's label (OCR prints those as
# lines of their own), and so is one whose text goes on with more numbers ("Car 25 Bicycle 12"), unless a
# separator says it is a caption ("Figure 2: ...").
_CAPTION_START = re.compile(
    r"^\s*(?![a-z])(?:[^\W\d_]{2,12}|[^\W\d_a-zA-Z])(?:\.?\s*(?:[A-Z][.\-])?\d{1,3}(?:[.\-]\d{1,3})*[a-z]?|\.?\s+[IVXLC]{1,6})"
    r"(?:(?P<sep>\s*(?:[:：、)|]|[.\-–—](?!\d)))|\s*(?=[\u3400-\u9fff])|\s+(?=[A-Z(\[\"“]))")
_STANDALONE_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?%?(?![\w.])")
MAX_CAPTION_WORDS = 60  # a longer block that starts "Figure 5a shows ..." is a paragraph about the figure


def is_caption(text: str) -> bool:
    """Caption-shaped text (see `_CAPTION_START`): a label, its number, then a separator or the caption's words."""
    match = _CAPTION_START.match(text)
    if match is None or len(text) > 600 or not text[match.end():].strip():
        return False
    if match.group("sep") is not None and match.group("sep").strip() not in ("-", "|"):
        return True
    rest = text[match.end():].split("\n", 1)[0]  # no separator: the rest must read as words, not as a row
    return bool(rest.strip()) and _STANDALONE_NUMBER.search(rest) is None


def attach_captions(blocks: list[Block], items: Sequence[Table | Figure], used: set[int]) -> None:
    """Give each table/figure the caption-shaped block nearest below or above it (within a few lines,
    overlapping it horizontally)."""
    for item in items:
        best, best_gap = None, None
        for block in blocks:
            if block.order in used or not is_caption(block.text) or block.words > MAX_CAPTION_WORDS:
                continue
            b = block.box
            horizontal = min(b[2], item.box[2]) - max(b[0], item.box[0]) > 0
            size = max(line.size for line in block.lines)
            gap = b[1] - item.box[3] if b[1] >= item.box[3] - size else item.box[1] - b[3]
            if horizontal and -size <= gap <= 3.5 * size and (best_gap is None or gap < best_gap):
                best, best_gap = block, gap
        if best is not None:
            item.caption = best.text
            item.box = union([item.box, best.box]) if isinstance(item, Figure) else item.box
            used.add(best.order)
