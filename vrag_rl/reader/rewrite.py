"""Rewrites of a page layout before the reader reads it (`reader.Reader.rank`): the same page, its text
made plain and whole — typographic ligatures written out (`folded`), a sentence that the text layer cut
into regions of their own joined back into one region (`joined`) — and its labels said in the question's
words where they abbreviate them (`spelled_out`), name a sum in another word (`totals_named`) or head a
period the question says in words (`periods_named`). Nothing here ranks or answers."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from search_engine.lexical import has_cjk
from search_engine.page_layout import PageLayout, Region
from vrag_rl.reader import spans
from vrag_rl.reader.geometry import union
from vrag_rl.reader.terms import STOPWORDS, fold, words_of
from vrag_rl.reader.values import EN_NUMBER_WORDS


def folded(layout: PageLayout) -> PageLayout:
    """The layout with typographic ligatures written out (`terms.fold`) in every text it holds, so that
    the page's "ﬂowering" is the question's "flowering" and an answer quotes plain letters."""
    return _rewritten(layout, fold)


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


# An abbreviation as tables and slides print one: letters joined by "/", "." or "&" ("L/F", "y.o.y", "R&D",
# "P/E"), or a run of two to six capitals, possibly with lower-case letters between them ("EPS", "YoY")
_ABBREVIATION = re.compile(r"(?<![\w/&.])(?:[A-Za-z](?:[/.&][A-Za-z]){1,5}\.?|[A-Z](?:[A-Z]|[a-z](?=[A-Z])){1,5})"
                           r"(?![\w/&])")
_PAGE_WORD = re.compile(r"[^\W\d_]+")


# Dotted abbreviations of running text, which stand for no phrase of the question
_TEXT_ABBREVIATIONS = frozenset("eg ie cf vs etc al pp ca no nr vol ed eds".split())


def _letters(abbreviation: str) -> str:
    return "".join(ch for ch in abbreviation if ch.isalpha())


def _stands_for(abbreviation: str) -> bool:
    """Whether a token looks like an abbreviation that a phrase spells: three letters or more, or two
    joined by "/" ("L/F", "P/E": a table's header; "SE" or "MB" alone are too short to tell), not a dotted
    abbreviation of running text ("e.g.")."""
    letters = _letters(abbreviation)
    return (len(letters) >= 3 or "/" in abbreviation) and letters.lower() not in _TEXT_ABBREVIATIONS


def _spelled(letters: str, words: list[str]) -> list[tuple[int, int]]:
    """(start, end) of every run of `words` whose initials spell `letters`: each content word gives its
    initial; one function word may give its own or be skipped ("earnings per share" for "EPS", "year over
    year" for "y.o.y", "research and development" for "R&D"; not "hard drive does the video" for "HDTV").
    The run starts and ends on a content word."""
    found = []
    letters = letters.lower()
    for start, word in enumerate(words):
        if word in STOPWORDS or not word.startswith(letters[0]):
            continue
        ends = {(start + 1, 1, False)}  # (next word, letters spelled so far, a function word taken)
        while ends:
            nxt: set[tuple[int, int, bool]] = set()
            for position, spelled, function_taken in ends:
                if spelled == len(letters):
                    if words[position - 1] not in STOPWORDS:
                        found.append((start, position))
                    continue
                if position >= len(words):
                    continue
                word_at = words[position]
                if word_at not in STOPWORDS:
                    if word_at.startswith(letters[spelled]):
                        nxt.add((position + 1, spelled + 1, function_taken))
                elif not function_taken:
                    if word_at.startswith(letters[spelled]):
                        nxt.add((position + 1, spelled + 1, True))
                    nxt.add((position + 1, spelled, True))
            ends = nxt
    return found


LABEL_WORDS = 6  # a table's header or row label, a figure's label: where abbreviations stand for a phrase


def spelled_out(layout: PageLayout, question: str) -> PageLayout:
    """The layout with each abbreviation that the question writes out followed by the question's words
    ("L/F(%)" → "L/F(load-factor)(%)" for "what was the load factor"), and each phrase the page writes out
    for an abbreviation the question uses followed by it ("Earnings per share(EPS)" for "what is the EPS"):
    joined without spaces, so that a cell keeps its count of words (`tables.unstacked_rows` reads it).

    Why: tables, slides and data sheets head columns with abbreviations that a question spells out (or the
    other way round), and no word of one matches the other: the column the question asks for is then the one
    column whose header shares no term with it. An abbreviation is only taken as standing for question
    words that spell it in order (`_spelled`), never for a word the question already prints, and only in
    labels (a cell, a figure's label, a line of at most LABEL_WORDS words): in running text a capitalised run
    of letters is as often a name as an abbreviation, and a question's words spell one by chance."""
    q_words = words_of(question)
    q_printed = set(q_words)
    q_abbreviations = {m.group(0) for m in _ABBREVIATION.finditer(question) if _stands_for(m.group(0))}

    def expand(text: str) -> str:
        if not text or len(text.split()) > LABEL_WORDS:
            return text
        out, last = [], 0
        for m in _ABBREVIATION.finditer(text):
            letters = _letters(m.group(0))
            if not _stands_for(m.group(0)) or letters.lower() in q_printed:
                continue
            runs = _spelled(letters, q_words)
            if not runs:
                continue
            start, end = runs[0]
            out.append(text[last:m.end()] + f"({'-'.join(q_words[start:end])})")
            last = m.end()
        for abbreviation in q_abbreviations:
            letters = _letters(abbreviation)
            matches = list(_PAGE_WORD.finditer(text))
            words = [fold(w.group(0)).lower() for w in matches]
            for start, end in _spelled(letters, words):
                # the label is the phrase, or the phrase is written as a name ("... of the Gross Domestic Product")
                if start == 0 or all(matches[i].group(0)[0].isupper() for i in range(start, end)
                                     if words[i] not in STOPWORDS):
                    cut = matches[end - 1].end()
                    if cut >= last:
                        out.append(text[last:cut] + f"({abbreviation})")
                        last = cut
                    break
        return "".join(out) + text[last:] if out else text

    return _rewritten(layout, expand)


def _rewritten(layout: PageLayout, rewrite: Callable[[str], str]) -> PageLayout:
    """The layout with `rewrite` applied to every text it holds (regions, captions, cells, labels); the same
    object when nothing changes."""
    changed = False

    def apply(text: str) -> str:
        nonlocal changed
        new = rewrite(text)
        changed |= new != text
        return new

    regions = [replace(r, text=apply(r.text), caption=apply(r.caption),
                       cells=[replace(c, text=apply(c.text)) for c in r.cells],
                       labels=[replace(lb, text=apply(lb.text)) for lb in r.labels]) for r in layout.regions]
    return replace(layout, regions=regions) if changed else layout


# What a table's sum row is called, and what a question calls the sum, in the languages the reader meets: one
# concept, many words ("합계" asked, "계" printed; "sum" asked, "Total" printed; 总计 asked, 合计 printed)
_TOTAL_LATIN = frozenset("total totals sum gesamt insgesamt summe totaal totale somme suma".split())
_TOTAL_CJK = ("합계", "총계", "총합", "合计", "总计", "共计", "总数", "合計", "総計", "总和")
_TOTAL_CJK_LABELS = _TOTAL_CJK + ("계", "计", "計")  # alone in a cell, a sum row's label; in a word, not


def _total_word(question: str) -> str:
    """The question's word for a sum ("" when it asks for none)."""
    for word in words_of(question):
        if word in _TOTAL_LATIN:
            return word
    return next((w for w in _TOTAL_CJK if w in question), "")


def totals_named(layout: PageLayout, question: str) -> PageLayout:
    """The layout with each label that names a sum in other words than the question's followed by the
    question's word ("계" → "계(합계)" for "…의 합계는", "Total" → "Total(sum)" for "what is the sum of"),
    joined without a space as `spelled_out` joins.

    Why: a table's sum row is what a "total" question asks for, and its label is the one word that says so;
    printed as another word for the same thing it matches nothing and the row is not found."""
    asked = _total_word(question)
    if not asked:
        return layout

    def name(text: str) -> str:
        stripped = text.strip()
        if stripped in _TOTAL_CJK_LABELS and stripped != asked:
            return f"{stripped}({asked})"
        words = words_of(text)
        if words and words[0] in _TOTAL_LATIN and asked not in words and len(words) <= 3:
            return f"{text.rstrip()}({asked})"
        return text

    return _rewritten(layout, name)


# A period as a question says it ("3个月", "3 months", "three months", "6개월", "1年"; not the "24年" of "2024年" or
# the "one" of "phone") and as a finance table heads a column with it ("3M", "6M", "1Y", "12m")
_NUMBER_WORDS = {w: int(n) for w, n in EN_NUMBER_WORDS.items() if n <= 12}  # a period's count, zero to twelve
_PERIOD_ASKED = re.compile(r"(?<![0-9A-Za-z.])(\d{1,2}|" + "|".join(_NUMBER_WORDS) + r")\s*"
                           r"(?:(个月|個月|ヶ月|か月|カ月|개월|months?)|(年|년|years?)|(周|週|주|weeks?)|(天|日|일|days?))"
                           r"(?![a-z])", re.I)
_PERIOD_LABEL = re.compile(r"\s*(\d{1,2})\s*([MYWD])\s*", re.I)


def periods_named(layout: PageLayout, question: str) -> PageLayout:
    """The layout with each label that heads a period the question names ("3M" for "近3个月" or "three
    months") followed by the question's words for it ("3M(3个月)"), joined as `spelled_out` joins.

    Why: performance and forecast tables head their columns "1M / 3M / 12M" or "1Y / 3Y"; the question says
    the period in words, and the column it asks for then shares no term with it."""
    asked: dict[tuple[int, str], str] = {}
    for m in _PERIOD_ASKED.finditer(question):
        count = m.group(1).lower()
        number = int(count) if count.isdigit() else _NUMBER_WORDS[count]
        unit = "MYWD"[next(i for i in range(4) if m.group(i + 2))]
        asked.setdefault((number, unit), m.group(0).strip())
    if not asked:
        return layout

    def name(text: str) -> str:
        label = _PERIOD_LABEL.fullmatch(text)
        if label is None:
            return text
        phrase = asked.get((int(label.group(1)), label.group(2).upper()))
        return f"{text.strip()}({phrase.replace(' ', '-')})" if phrase else text

    return _rewritten(layout, name)
