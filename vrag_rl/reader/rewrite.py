"""Rewrites of a page layout before the reader reads it (`reader.Reader.rank`): the same page, its text
made plain and whole — typographic ligatures written out (`folded`), and a sentence that the text layer cut
into regions of their own joined back into one region (`joined`). Nothing here ranks or answers."""
from __future__ import annotations

from dataclasses import replace

from search_engine.lexical import has_cjk
from search_engine.page_layout import PageLayout, Region
from vrag_rl.reader import spans
from vrag_rl.reader.geometry import union
from vrag_rl.reader.terms import fold, words_of


def folded(layout: PageLayout) -> PageLayout:
    """The layout with typographic ligatures written out (`terms.fold`) in every text it holds, so that
    the page's "ﬂowering" is the question's "flowering" and an answer quotes plain letters."""
    def has(text: str) -> bool:
        return fold(text) != text

    if not any(has(r.text) or has(r.caption) or any(has(c.text) for c in r.cells)
               or any(has(lb.text) for lb in r.labels) for r in layout.regions):
        return layout
    regions = [replace(r, text=fold(r.text), caption=fold(r.caption),
                       cells=[replace(c, text=fold(c.text)) for c in r.cells],
                       labels=[replace(lb, text=fold(lb.text)) for lb in r.labels]) for r in layout.regions]
    return replace(layout, regions=regions)


_OPEN_ENDS = spans.FUNCTION_WORDS  # words a sentence does not end on
_CJK_STOP = "。！？；：.!?;:"


def continues(previous: Region, following: Region) -> bool:
    """Whether `following` is the rest of `previous`'s sentence, cut into a region of its own by the text
    layer (a slide's wrapped bullet, a CJK line that the layout made a region, a URL set on its own line
    after "from"): the first stops where no sentence stops — on a comma or a function word, or mid-way
    through CJK text — and the second lies right below it."""
    if previous.kind not in ("text", "list") or following.kind not in ("text", "list"):
        return False
    a, b = previous.text.rstrip(), following.text.lstrip()
    if not a or not b:
        return False
    px1, py1, px2, py2 = previous.box
    fx1, fy1, fx2, fy2 = following.box
    line = max(1.0, fy2 - fy1)
    if fy1 < py1 or fy1 - py2 > line or min(px2, fx2) <= max(px1, fx1):
        return False  # not right below it, or not under it
    if fx1 < px1 - line or px2 < fx2 - line:
        return False  # a wrapped line starts no further left and the line it wraps from reaches as far right
    if has_cjk(a[-1]) and has_cjk(b[0]):
        return a[-1] not in _CJK_STOP
    words = words_of(a[-40:])
    first = words_of(b[:40])
    return (a[-1] in ",，、-–" or (bool(words) and a[-1].isalnum() and words[-1] in _OPEN_ENDS)
            or (bool(first) and b[0].islower() and first[0] in _OPEN_ENDS and a[-1].isalnum()))


def joined(layout: PageLayout) -> PageLayout:
    """The layout with each region that continues the sentence of the one before it (`continues`)
    joined to it: one region, one box, the sentence whole."""
    regions: list[Region] = []
    for region in layout.regions:
        if regions and continues(regions[-1], region):
            last = regions[-1]
            joiner = "" if has_cjk(last.text.rstrip()[-1:]) and has_cjk(region.text.lstrip()[:1]) else " "
            regions[-1] = replace(last, text=last.text.rstrip() + joiner + region.text.lstrip(),
                                  box=union([last.box, region.box]))
        else:
            regions.append(region)
    return layout if len(regions) == len(layout.regions) else replace(layout, regions=regions)
