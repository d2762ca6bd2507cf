"""Lists on a page and the item at a position in one: "what is the last entry of the Items list", "which
transition is listed last", 列表中的第二项.

A question about a position asks for an item by where it stands, not by what it says, so no term of the
question is printed in the answer; the list is found by what names it (a table column's first cell, the
heading or lead-in above a run of lines) and the item read off by its index. A list is what the page
prints as one: a table column, a line whose parts are separated by semicolons or commas ("Split; Blinds;
Box; ... Replace."), bulleted items, or a column of short words ("be fbd ggw" over "lw ow re ... iob");
consecutive regions set at the same indent under the same heading continue one list.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from search_engine.lexical import has_cjk
from search_engine.page_layout import Box, Region
from vrag_rl.reader import spans
from vrag_rl.reader.geometry import union
from vrag_rl.reader.terms import STOPWORDS, stem
from vrag_rl.reader.values import cjk_number

_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
             "eighth": 8, "ninth": 9, "tenth": 10, "last": -1, "final": -1}
_ORDINAL = re.compile(r"\b(" + "|".join(_ORDINALS) + r")\b", re.IGNORECASE)
_CJK_ORDINAL = re.compile(r"第\s*([一二三四五六七八九十]|\d+)\s*[个项条种行列]?|最后一?[个项条种]?")
# The question points at a list: it names one, its entries, or that something is listed (general English
# and Chinese)
_LIST_WORDS = re.compile(r"\b(lists?|listed|entry|entries|items?|bullets?|enumerat\w*|order)\b|列表|列出|所列|哪一?项",
                         re.IGNORECASE)
MIN_ITEMS = 3  # two parts may be a phrase ("Paris and London"); a list the question counts into has more


def ordinal(question: str) -> int | None:
    """The position the question asks for in a list: 1 for "first", 2 for "second", -1 for "last", None when
    it asks for no position or names no list (then "first" is a rank — "the first to have OTF support")."""
    if not _LIST_WORDS.search(question):
        return None
    match = _ORDINAL.search(question)
    if match:
        return _ORDINALS[match.group(1).lower()]
    match = _CJK_ORDINAL.search(question)
    if match is None:
        return None
    if match.group(0).startswith("最后"):
        return -1
    number = match.group(1)
    return int(number) if number.isdigit() else int(cjk_number(number) or 0)


def ordinal_words(question: str) -> set[str]:
    """The question's words that only say which position is asked ("last", "first"): not its topic."""
    return {m.group(1).lower() for m in _ORDINAL.finditer(question)} if ordinal(question) is not None else set()


def list_words(question: str) -> set[str]:
    """The words by which a position question says that it asks about a list ("entry", "items"): like the
    noun of a "which X" question they say what kind of answer is wanted, and count only where printed."""
    if ordinal(question) is None:
        return set()
    return {stem(m.group(0).lower()) for m in _LIST_WORDS.finditer(question) if not has_cjk(m.group(0))}


@dataclass(frozen=True)
class PrintedList:
    """A list as the page prints it: its items in order, what names it (a column's first cell, the heading
    or lead-in above it), its box and the region it came from."""

    items: list[str]
    name: str
    box: Box
    region_id: str


def _clean(item: str) -> str:
    return spans.items_of(item.strip())[0][0].strip(" .。;；,，") if item.strip() else ""


def items_in(text: str) -> list[str]:
    """The items of a text printed as a list: bulleted items, else lines, else parts separated by
    semicolons (or commas, when every part is short: a list, not a sentence's clauses), else short words
    alone in a column ("be fbd ggw"; capitalised words are a name, not a list). [] when the text is no
    list of at least MIN_ITEMS items."""
    bulleted = [piece for line in text.split("\n") for piece, item in spans.items_of(line.strip()) if item]
    if len(bulleted) >= MIN_ITEMS:
        return [_clean(p) for p in bulleted]
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if len(lines) >= MIN_ITEMS:
        return [_clean(line) for line in lines]
    one = " ".join(lines)
    for separator in (r"\s*[;；]\s*", r"\s*[,，、]\s*"):
        parts = [p for p in re.split(separator, one.rstrip(" .。")) if p.strip()]
        if len(parts) >= MIN_ITEMS and all(len(p.split()) <= 4 for p in parts):
            return [_clean(p) for p in parts]
    words = one.split()
    if (len(words) >= MIN_ITEMS and not has_cjk(one) and not re.search(r"[.:;!?]", one)
            and all(len(w) <= 12 and re.fullmatch(r"\w+", w) and w.lower() not in STOPWORDS for w in words)
            and not any(w[:1].isupper() and w[1:].islower() for w in words)):  # "Minot State University": a name
        return words
    return []


def printed_lists(regions: list[Region], names: dict[str, str]) -> list[PrintedList]:
    """The lists of the page's regions (see the module doc). `names`: what names each region as a list
    (its heading and the lead-in it hangs from), by region id."""
    out: list[PrintedList] = []
    run: list[Region] = []

    def close() -> None:
        items = [item for region in run for item in items_in(region.text)]
        if run and len(items) >= MIN_ITEMS:
            out.append(PrintedList(items, names.get(run[0].region_id, ""), union([r.box for r in run]),
                                   run[0].region_id))

    for region in regions:
        if region.kind == "table":
            out += _columns(region)
            continue
        listed = region.kind in ("text", "list") and bool(items_in(region.text))
        continues = (listed and bool(run) and abs(region.box[0] - run[-1].box[0]) < 1.0
                     and names.get(region.region_id, "") == names.get(run[-1].region_id, ""))
        if not continues:
            close()
            run = []
        if listed:
            run.append(region)
    close()
    return out


def _columns(table: Region) -> list[PrintedList]:
    """Each column of a table as a list: its first cell names it (a header row or not), the cells below
    are its items, top to bottom."""
    by_col: dict[int, list[tuple[int, str, Box]]] = {}
    for cell in table.cells:
        if cell.text.strip():
            by_col.setdefault(cell.col, []).append((cell.row, cell.text, cell.box))
    out = []
    for _, cells in sorted(by_col.items()):
        cells.sort()
        if len(cells) < 3:  # a name and at least two items: a table's column is a list by how it is drawn
            continue
        items = [_clean(text) for _, text, _ in cells[1:]]
        out.append(PrintedList(items, cells[0][1], union([box for *_, box in cells]), table.region_id))
    return out
