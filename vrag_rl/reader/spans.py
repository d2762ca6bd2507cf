"""Sentences of a region's text, and the shortest span of a sentence that answers a question.

The span is of the kind the question asks for: a value of the right sort ("how much" → "410 MW",
"what share" → "12%", "when" → "2019"), a name ("who/which/where" → "Blue Strait Lines"), else the
whole sentence — never the sentence with the question's words deleted (that makes fragments).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from search_engine.lexical import has_cjk
from vrag_rl.reader.question import QuestionForm, asks_count, is_superlative, which_head
from vrag_rl.reader.terms import MONTH_TERMS, STOPWORDS, content_terms, fuzzy_in, stem, word_spans, words_of
from vrag_rl.reader.values import (
    _REFERENCE_LABEL,
    MONTH_NAMES,
    NUMBER_WORDS,
    Value,
    named_in,
    number_of,
    number_words_in,
    values_in,
)

# A sentence ends at . ! ? followed by a space and a capital/digit/quote, or at CJK full stops. A single
# capital before the dot ("J. Smith") or a short lowercase abbreviation ("e.g.", "approx.") does not end one.
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\b[A-Z]\.)(?<!\b[a-z]\.)(?<!\be\.g\.)(?<!\bi\.e\.)\s+(?=[A-Z0-9\"“(\[])|"
                           r"(?<=[。！？；])")
_NAME = re.compile(r"(?<![\w\\-])(?:[A-Z][\w'’&.-]*|\d+[A-Za-z][\w-]*)"
                   r"(?:\s+(?:(?:of|de|du|van|von|zu|der|la|le|di|da|and|&|for|the)\s+)?"
                   r"(?:[A-Z][\w'’&.-]*|\d+[A-Za-z][\w-]*))*")


@dataclass(frozen=True)
class Sentence:
    """A sentence of a region's text and where it lies in it (character offsets, and the share of the
    region's lines it spans, to zoom on its band of the region's box)."""

    text: str
    start: int
    end: int
    first_line: int
    last_line: int
    n_lines: int


# A printed field's label opening a line: "Location: McLean, VA", "SAM UEI: FJ58…", "电话：…" — one to four
# words, the first capitalised (or CJK), then a colon (and the field's value, on this line or the next)
_FIELD_LINE = re.compile(r"^\s*(?:[A-Z0-9][\w'’&./()-]*(?:[ \t]+[\w'’&./()-]+){0,3}|[\u3400-\u9fff]{1,8})"
                         r"\s*[:：](?:\s*\S|\s*$)")


ROW_WORDS = 6  # a table-like row printed as a line ("Net sales 2023 1,204") is at most this many words


def _joins(previous: str, following: str) -> bool:
    """Whether two printed lines are one wrapped sentence: the first ends mid-sentence (a word or a
    comma, not a full stop, colon or a value that ends a table-like row), and the second is no field of
    its own (a label and its value: forms, letterheads and fact boxes print one per line, unpunctuated)."""
    end = previous.rstrip()[-1:]
    # a line ending in a value ends a row ("Bicycle 12%"), unless it is a sentence's line and the next goes on
    # in lower case ("… beyond the 30-40" / "vocal signals typical of …")
    ends_in_value = bool(re.search(r"\d[%\w]*$", previous.rstrip())) and not (
        len(previous.split()) > ROW_WORDS and following.lstrip()[:1].islower())
    return bool(following.strip()) and (end.isalnum() or end in ",，、-") and not ends_in_value \
        and not _FIELD_LINE.match(following)


# A bullet glyph standing alone before an item: "•", "‣", "▶", "■", "◦", "➤", "✓", or a symbol font's bullet
# (private use U+F0xx, as Wingdings bullets come out of PDFs). Slides print bullets, and a text layer read
# into one string keeps them where its line breaks are gone ("▶ Humid and rich ▶ Numerous borders ...").
_BULLET = re.compile(r"(?:^|(?<=\s))[\u2022\u2023\u2043\u2219\u25a0-\u25ff\u2605\u2606\u2713\u2714"
                     r"\u2794\u2798-\u27af\uf000-\uf0ff](?=\s)")


def items_of(line: str) -> list[tuple[str, bool]]:
    """A printed line cut at its bullets: (piece, whether it starts a bulleted item), bullets removed."""
    cuts = [m.start() for m in _BULLET.finditer(line)]
    if not cuts:
        return [(line, False)]
    pieces = [(line[:cuts[0]], False)] if line[:cuts[0]].strip() else []
    for a, b in zip(cuts, [*cuts[1:], len(line)]):
        pieces.append((line[a + 1:b].strip(), True))
    return [(p.strip(), item) for p, item in pieces if p.strip()]


# A full stop that ends no sentence: a title before a name ("Dr. Uwe Ziegenhagen"), a reference's label
# before its number ("Fig. 3", "No. 12"), a day before its month ("27. Februar 2022", "3. maart")
_NOT_AN_END = re.compile(r"(?:\b(?:Dr|Mr|Mrs|Ms|Prof|St|No|Nr|Fig|Figs|vs|Vol|pp|cf)\.|\b\d{1,2}\.)$", re.IGNORECASE)
_MONTH_START = re.compile(r"^(?:" + MONTH_NAMES + r")\b", re.IGNORECASE)


def _rejoined(pieces: list[str]) -> list[str]:
    """Pieces of a line split at full stops, joined again where the stop ends no sentence (`_NOT_AN_END`;
    a day's number ends one unless a month's name follows it)."""
    out: list[str] = []
    for piece in pieces:
        if out and _NOT_AN_END.search(out[-1]) and (
                not re.search(r"\d\.$", out[-1]) or _MONTH_START.match(piece.lstrip())):
            out[-1] = f"{out[-1]} {piece.lstrip()}"
        else:
            out.append(piece)
    return out


def sentences_of(text: str) -> list[Sentence]:
    """The sentences of a region's text: lines of a wrapped sentence joined, rows of a list or table
    kept apart (a bulleted item starts anew, whether or not a line break is left before its bullet), then
    split at sentence ends."""
    lines = [(piece, item) for raw in text.split("\n") for piece, item in (items_of(raw.strip()) or [("", False)])]
    groups: list[tuple[str, int, int]] = []  # (text, first line, last line)
    for i, (line, item) in enumerate(lines):
        if not line:
            continue
        if groups and not item and _joins(groups[-1][0], line) and groups[-1][2] == i - 1:
            joiner = "" if has_cjk(groups[-1][0][-1:]) and has_cjk(line[:1]) else " "
            groups[-1] = (groups[-1][0] + joiner + line, groups[-1][1], i)
        else:
            groups.append((line, i, i))
    out: list[Sentence] = []
    offset = 0
    n = max(1, len(lines))
    for group, first, last in groups:
        pieces = _rejoined([p for p in _SENTENCE_END.split(group) if p and p.strip()])
        cursor = 0
        for piece in pieces:
            at = group.find(piece, cursor)
            cursor = at + len(piece)
            # the piece's line band: by its share of the group's characters
            share_a, share_b = at / max(1, len(group)), cursor / max(1, len(group))
            span = last - first + 1
            a = first + min(span - 1, int(share_a * span))
            b = first + min(span - 1, int(max(0.0, share_b * span - 1e-9)))
            out.append(Sentence(piece.strip(), offset + at, offset + cursor, a, b, n))
        offset += len(group) + 1
    return out


def _term_spans(text: str, question: str, ignore: frozenset[str] = frozenset()) -> list[tuple[int, int]]:
    """Character spans in `text` of the question's terms (Latin words stemmed, CJK bigrams), without the
    `ignore`d ones (terms that name the document, which locate nothing within it)."""
    terms = set(content_terms(question)) - ignore
    spans = []
    for start, end, word in word_spans(text):
        if fuzzy_in(stem(word), terms):
            spans.append((start, end))
    for term in terms:
        if has_cjk(term):
            spans.extend(m.span() for m in re.finditer(re.escape(term), text))
    return spans


def _nearest(text: str, spans: list[tuple[int, str]], question: str, ignore: frozenset[str] = frozenset()) -> str:
    """The span closest to the question's terms in the text (characters between them); on a tie the one
    after them (a value follows what it measures: "revenue in 2023 was $341 million", "Car 25% Bicycle 12%")."""
    terms = _term_spans(text, question, ignore) or _term_spans(text, question)
    if not terms:
        return spans[0][1]

    def distance(span: tuple[int, str]) -> tuple[int, int]:
        start, end = span[0], span[0] + len(span[1])
        gaps = [(max(0, start - t_end, t_start - end), 0 if start >= t_end else 1) for t_start, t_end in terms]
        return min(gaps)

    return min(spans, key=distance)[1]


def anchor_term(text: str, answer: str, question: str) -> str | None:
    """The question's term printed nearest `answer` in `text` (the row label a value was read beside:
    "Bicycle" in "Car 25% Bicycle 12%"), None when the answer or no term is printed there."""
    at = text.find(answer)
    if at < 0:
        return None
    best: tuple[int, str] | None = None
    for term in content_terms(question):
        for start, end in _term_spans(text, term):
            gap = max(0, at - end, start - (at + len(answer)))
            if best is None or gap < best[0]:
                best = (gap, term)
    return best[1] if best else None


_SCALES = frozenset("million billion thousand trillion mn bn k 万 亿 千 百".split())  # a scale, not a unit


def unit_of(value: Value) -> str:
    """The unit a value is printed with, lowercased and singular ("3 weeks" → "week", "$12 million" →
    "million", "41" → ""): what it measures, to tell a question's condition from its answer."""
    unit = re.sub(r"^[$€£¥]?\s?[-+\u2212]?\d[\d,]*(?:\.\d+)?\s?", "", value.text).strip().lower()
    return unit[:-1] if len(unit) > 3 and unit.endswith("s") else unit


def wanted_values(text: str, question: str, form: QuestionForm) -> tuple[list[Value], bool]:
    """Values in `text` of the kind the question asks for, without the ones it names itself, and
    whether they are exactly that kind (a "$" for a money question) or only compatible with it."""
    conditions = {unit_of(v) for v in values_in(question) if not (v.is_date or v.is_money or v.is_percent)}
    conditions -= {"", *_SCALES}
    # a value in the unit of one the question states is another value of that condition ("once every 3 weeks":
    # "every 2 weeks" is the other regimen's schedule, not the dose asked), not the answer
    marks = [m.span() for m in _CITATION_MARK_ANYWHERE.finditer(text)]  # "weeks.[24]": a reference, no value
    values = [v for v in values_in(text) if not named_in(v, question) and unit_of(v) not in conditions
              and not any(a <= v.start < b for a, b in marks)]
    if form.asks_amount and not form.time:  # "how many": a count may be written as a word ("seven transitions")
        values = sorted(values + [v for v in number_words_in(text) if v.text.lower() not in question.lower()],
                        key=lambda v: v.start)
    strict = [v for v in values if form.wants(v)]
    return (strict, True) if strict else ([v for v in values if form.compatible(v)], False)


# An identifier as technical documents print them: a command (\\arcmin), an option (-sDeviceNProfile,
# --max-ppsize), a constant (PRESERVE_K_ONLY), a file (cyan_output.icc), an assignment (type="b") or a
# camel-cased name (FitR, rml2pdf), an address with its path (github.com/matze/mtheme, whole: its host alone
# names another place): a name of its own kind, whatever its capitals.
_IDENTIFIER = re.compile(r"(?<![\w\\-])(?:(?:https?://)?[A-Za-z][\w-]*(?:\.[\w-]+)+(?:/[\w.~%+-]+)+/?|"
                         r"\\[A-Za-z]+\*?(?:\{[^{}\s]*\})?|--?[A-Za-z][\w-]*[A-Za-z0-9]|"
                         r"[A-Za-z]\w*=(?:\"[^\"]*\"|'[^']*'|\w+)|[A-Za-z][\w-]*\.[a-z]{2,4}\b|"
                         r"[A-Za-z]+_[A-Za-z0-9_]+|[a-z]+[A-Z0-9]\w*|[A-Z][a-z]+[A-Z]\w*|[A-Z]{2,}[a-z]+\w*)")


def identifiers_in(text: str, question: str) -> list[tuple[int, str]]:
    """Identifiers in the text that the question does not already print, with their offsets."""
    asked = set(question.lower().split()) | set(content_terms(question))
    out = []
    for match in _IDENTIFIER.finditer(text):
        token = match.group(0).rstrip(".,;:")
        if token.lower() in asked or token.lower().strip("\\-") in asked:
            continue
        out.append((match.start(), token))
    return out


def names_in(text: str, question: str) -> list[tuple[int, str]]:
    """Capitalised names in the text that the question does not already say ("Blue Strait Lines"),
    with their offsets; a sentence's first word counts only when it is not a common word."""
    asked = set(content_terms(question))
    out = []
    for match in _NAME.finditer(text):
        name = match.group(0).strip(" .,'’")
        words = words_of(name)
        if not words:
            continue
        if match.start() == 0 or text[:match.start()].rstrip()[-1:] in ".:;!?":
            # a sentence's first word is capitalised anyway: alone, it is a name only when it says so
            # itself (an inner capital or digit: "RouteFinder", "3M")
            if len(words) == 1 and (words[0] in STOPWORDS or not re.search(r".[A-Z0-9]", name)):
                continue
            if words[0] in STOPWORDS:  # "The Kestrel Ridge plant": the name starts after the article
                name = name.split(None, 1)[1] if " " in name else ""
                if not name:
                    continue
        if _REFERENCE_LABEL.match(text[match.start():]):
            continue  # "Figure 2:", "Table 3.": a reference label, not a name
        if set(content_terms(name)) <= asked:
            continue
        if all(w in STOPWORDS for w in words):
            continue
        out.append((match.start(), name))
    return out


# English function words, and the prepositions an example or a name follows ("like Wallace line", "such as"):
# general English, like `terms.STOPWORDS`. A sentence does not end on one, and a name does not include one.
FUNCTION_WORDS = STOPWORDS | frozenset("like such via between within without through among per onto upon versus "
                                       "vs e.g i.e".split())
_TOKEN = re.compile(r"[^\s()\[\]{},;:!?\"“”]+")
# determiners before a name ("the appendixnumberbeamer package"); not "a"/"an": an indefinite article
# introduces a description ("a custom beamer template"), not a name
_DETERMINERS = frozenset("the this that its their our your".split())
_CJK_BREAK = re.compile(r"[^\u4e00-\u9fff]|的")
# a Chinese determiner before a noun ("这个", "该", "每种", "两所"): a demonstrative, or a number or measure word
_CJK_DETERMINER = re.compile(r"^[这那该此其每各本某]|[一二两三四五六七八九十几个种类所位家款条项部名]$")


def _name_like(word: str) -> bool:
    """A word printed as a name or identifier: capitalised, or holding a digit, an underscore or an inner capital."""
    return word[:1].isupper() or bool(re.search(r"[\d_]|.[A-Z]", word))


_LATIN_RUN = re.compile(r"[A-Za-z][\w.+#-]*(?:[ \t]+[A-Za-z][\w.+#-]*)*")


def latin_in_cjk(text: str, question: str) -> list[tuple[int, str]]:
    """Runs of Latin-script words in a Chinese, Japanese or Korean sentence that the question does not already
    print, with their offsets: such text sets a name it borrows (a style, a program, a product, a person's
    name as printed abroad) in its own script, where capitals do not mark names ("其中默认样式为 beta")."""
    asked = set(content_terms(question))
    out = []
    for match in _LATIN_RUN.finditer(text):
        run = match.group(0).rstrip(".-")
        if run and not set(content_terms(run)) <= asked:
            out.append((match.start(), run))
    return out


def head_phrases(text: str, question: str) -> list[tuple[int, str]]:
    """Spans that name what a "which X" question asks about as the text prints it: the noun X with the
    name in front of it ("Wallace line" for "which line", "the appendixnumberbeamer package" for "which
    package", 哈尔滨工业大学 for 哪所大学), with their offsets. The name in front must be a name — words
    not in the question, printed as a name, or after "the" — so that "current compiler" names nothing."""
    head = which_head(question)
    if not head:
        return []
    out: list[tuple[int, str]] = []
    if has_cjk(head[0]):
        noun = head[0]
        for match in re.finditer(re.escape(noun), text):
            start = match.start()
            while start > 0 and match.start() - start < 6 and not _CJK_BREAK.match(text[start - 1]):
                start -= 1
            if start == match.start():  # a Latin name before it ("添加 ctex 宏包")
                latin = re.search(r"([A-Za-z][\w.-]*)\s?$", text[:match.start()])
                start = latin.start(1) if latin else start
            phrase = text[start:match.end()]
            modifier = text[start:match.start()]
            if _CJK_DETERMINER.search(modifier):
                continue  # "这个引擎": this one, not a name
            if start < match.start() and phrase not in question:
                out.append((start, phrase))
        return out
    asked = set(content_terms(question))
    nouns = {stem(w) for w in head}
    tokens = list(_TOKEN.finditer(text))
    for noun in head:  # the last word of "which X Y" first; a verb that ended it ("which package goes") is not
        out = [*_named_before(text, tokens, stem(noun), nouns, asked)]  # printed after a name: the next word is
        if out:
            return out
    for noun in head:
        out = _named_after(text, noun, asked)
        if out:
            return out
    return []


# A name that starts with its kind, capitalised, and goes on after a preposition ("Workshop on Algorithms in
# Bioinformatics", "University of Tokyo", "Ministry of Finance"): the kind's word, a connector, capitalised words
# joined by connectors. English, German, French, Spanish and Dutch connectors, as `_NAME` joins them.
_CONNECTOR = r"(?:of|on|in|for|and|the|&|de|del|des|du|la|le|der|zu|für|van|voor)"


def _named_after(text: str, noun: str, asked: set[str]) -> list[tuple[int, str]]:
    """Spans of `text` that print the noun a "which X" question asks for, capitalised, as the first word of a
    name that goes on after a connector ("which workshop" → "Workshop on Algorithms in Bioinformatics"), with
    their offsets; the name must say something the question does not."""
    if not noun[:1].isalpha():
        return []
    capital = r"[A-Z][\w'’&.-]*"
    pattern = re.compile(rf"(?<![\w-]){re.escape(noun[:1].upper())}{re.escape(noun[1:])}\w{{0,2}}"
                         rf"(?:\s+{_CONNECTOR})+\s+{capital}(?:\s+(?:{_CONNECTOR}\s+)*{capital})*")
    out = []
    for match in pattern.finditer(text):
        phrase = match.group(0)
        if set(content_terms(phrase)) - asked:
            out.append((match.start(), phrase))
    return out


def _named_before(text: str, tokens: list[re.Match[str]], noun: str, nouns: set[str],
                  asked: set[str]) -> list[tuple[int, str]]:
    """`head_phrases` for one English noun: each place the text prints it after a name."""
    out: list[tuple[int, str]] = []
    for i, token in enumerate(tokens):
        if stem(token.group(0).lower().strip(".’'")) != noun:
            continue
        first = i
        modifiers: list[str] = []
        for j in range(i - 1, max(-1, i - 9), -1):
            word = tokens[j].group(0)
            gap = text[tokens[j].end():tokens[j + 1].start()]
            low = word.lower().strip(".’'")
            if gap.strip() or low in FUNCTION_WORDS or not re.search(r"\w", low):
                break
            if stem(low) in nouns and not modifiers:
                first = j
                continue
            if is_superlative(low):
                break  # "the largest region" describes the region; it does not name it
            # up to three words of description; a name printed as one (every word capitalised or a number:
            # "Creative Commons Attribution-ShareAlike 4.0 International") is taken whole
            long_name = all(_name_like(w) for w in [*modifiers, word])
            if any(fuzzy_in(stem(part), asked) for part in re.split(r"[-–/]", low) if part) or (
                    len(modifiers) >= 3 and not long_name):
                break
            modifiers.append(word)
            first = j
        if not modifiers:
            continue
        before = tokens[first - 1].group(0).lower() if first > 0 else ""
        if len(modifiers) == 1 and _IDENTIFIER.fullmatch(modifiers[0]) and first == i - 1:
            out.append((tokens[first].start(), modifiers[0]))  # "the -dSimulateOverprint option": the identifier
        elif any(_name_like(w) for w in modifiers) or before in _DETERMINERS:
            out.append((tokens[first].start(), text[tokens[first].start():token.end()].rstrip(".")))
    return out


def _count_as_digits(answer: str) -> str:
    """A count printed as a word ("seven", "drie") answers as its digits ("7", "3"): the answer is the number the
    question asks for, and one form for one number keeps a spelled count and a counted one (a figure's five
    labels) the same answer. Any other answer is returned as printed."""
    number = NUMBER_WORDS.get(answer.strip().lower())
    return str(int(number)) if number is not None else answer


# Two numbers joined as a range: "30-40", "30–40 %", "1,200 to 1,500" (not part of a longer code such as
# "897-30-004" or "650-701-7829", nor a date such as "2023-05-04")
_RANGE = re.compile(r"(?<![\w.,/–-])(\d[\d,.]*)(\s?[-–—]\s?|\s+to\s+)(\d[\d,.]*)(?![\w/–-]|[.,]\d)")


def _ranged(text: str, values: list[Value]) -> list[tuple[int, str]]:
    """(offset, text) of the values, a value printed as one end of a range given as the whole range (its
    two ends as one answer: "beyond the 30-40 vocal signals" answers "how many" with "30-40"), once."""
    ranges = []
    for match in _RANGE.finditer(text):
        low, high = number_of(match.group(1)), number_of(match.group(3))
        if low is not None and high is not None and low < high:
            ranges.append((match.start(), match.end(), match.group(0)))
    out: dict[int, str] = {}
    for value in values:
        around = next(((a, t) for a, b, t in ranges if a <= value.start < b), None)
        start, printed = around if around is not None else (value.start, value.text)
        out.setdefault(start, printed)
    return sorted(out.items())


# A period printed as its two ends: "Jul 19 – Aug 19, 2024", "1 March - 30 June 2023", "2019–2021",
# "01/07/2024 - 31/07/2024" (each end a day and month, or a full date, or a year)
_DAY_MONTH = r"(?:(?:" + MONTH_NAMES + r")\.?\s+\d{1,2}(?:,?\s+\d{4})?|\d{1,2}\.?\s+(?:" + MONTH_NAMES + \
    r")\.?(?:,?\s+\d{4})?|\d{1,2}[./]\d{1,2}[./]\d{2,4}|\d{4}-\d{2}-\d{2}|(?:1[5-9]|20)\d\d)"
_DATE_RANGE = re.compile(r"(?<![\w/.-])" + _DAY_MONTH
                         + r"\s*(?:[-–—]|\bto\b|\buntil\b|\bbis\b|\bau\b|\bal\b|~|至|到)\s*"
                         + _DAY_MONTH + r"(?![\w/-])", re.IGNORECASE)
# "which billing period", "what is the validity period", "welcher Zeitraum": a span of time, printed as its ends
_PERIOD_WORDS = re.compile(r"\bperiods?\b|\btime ?frame\b|\bzeitraum\b|\bp[ée]riode?\b|\bper[ií]odo\b|期间|期間|기간",
                           re.IGNORECASE)
# A street address: a number then the street's name and its kind ("272 Capp St", "1600 Pennsylvania Avenue NW"),
# or the name and kind then the number ("Berliner Straße 93", "Keizersgracht 62"), or "12 rue de la Paix"
_STREET_KINDS = ("st|street|ave|avenue|rd|road|blvd|boulevard|dr|drive|ln|lane|way|pl|place|ct|court|pkwy|"
                 "parkway|hwy|highway|sq|square|ter|terrace|cres|crescent")
_ADDRESS = re.compile(
    r"(?<![\w-])(?:\d{1,5}[A-Za-z]?\s+(?:[A-Z][\w'.-]*\s+){1,4}(?i:" + _STREET_KINDS + r")\b\.?"
    r"(?:\s+(?:NW|NE|SW|SE|N|S|E|W)\b)?"  # (capitals: "20 people in the way" is no address)
    r"|(?i:(?:[A-ZÄÖÜ][\w'.-]*\s+)?[\wäöüß'.-]*(?:stra(?:ß|ss)e|str\.|weg|platz|gasse|allee|laan|straat|plein|"
    r"gracht|kade|dijk|singel)\s+\d{1,5}[a-z]?)"
    r"|(?i:\d{1,4}(?:\s?bis)?,?\s+(?:rue|avenue|boulevard|bd|place|chemin|all[ée]e|quai|impasse|calle|avenida|"
    r"via|viale|piazza)\s+(?:[\w'’-]+\s?){1,5}))")
_ADDRESS_WORDS = re.compile(r"\baddress(?:es)?\b|\badresse?\b|\bdirecci[oó]n\b|\bindirizzo\b|\bendere[cç]o\b|"
                            r"\banschrift\b|地址|住所|주소", re.IGNORECASE)
_OTHER_ADDRESS = re.compile(r"\b(?:e-?mail|web|ip|mac|url|internet|mailing list)\s+address", re.IGNORECASE)


def _asks_street_address(question: str) -> bool:
    """Whether the question asks for a place's address ("what address", "welche Anschrift"), not an e-mail, web
    or network one."""
    return bool(_ADDRESS_WORDS.search(question)) and not _OTHER_ADDRESS.search(question) and "@" not in question


# "which version", "qué versión", どのバージョン, 哪个版本: a release printed as its dotted number ("5.3.6", "v2.1",
# "10.14"). The version must be what is asked (an interrogative or "minimum" before it, a CJK question word
# with it): "who translated the English version" asks a name.
_VERSION_NOUN = r"(?:versions?|versi[oó]n(?:es)?|versione|vers[aã]o|releases?)\b"
_VERSION_WORDS = re.compile(
    r"\b(?:which|what|welche[mnrs]?|quel(?:le)?s?|qu[eé]|cu[aá]l(?:es)?|quale|welke)\s+(?:[\w.-]+\s+){0,2}?"
    + _VERSION_NOUN + r"|\b(?:minimum|minimal|latest|current|required|oldest|newest|m[ií]nim[ao]|mindestens|"
    r"erforderliche)\s+(?:[\w.-]+\s+)?" + _VERSION_NOUN
    + r"|(?:どの|何|哪|什么|多少|어떤|무슨|몇)[^?？]{0,6}(?:バージョン|版本|버전)"
    r"|(?:バージョン|版本|버전)[^?？]{0,6}(?:何|いくつ|哪|什么|多少|几|어떤|무엇|몇)",
    re.IGNORECASE)
_VERSION = re.compile(r"(?<![\w.])[vV]?\d{1,4}(?:\.\d{1,4}){1,3}[a-z]?(?![\w.]*\d)")


def asks_version(question: str) -> bool:
    """Whether the question asks which version or release of something."""
    return bool(_VERSION_WORDS.search(question))


def versions_in(text: str) -> list[tuple[int, str]]:
    """(start, span) of every dotted version number in `text` ("Lua 5.3.6" → "5.3.6"); a date is none."""
    dates = _date_spans(text)
    return [(m.start(), m.group(0)) for m in _VERSION.finditer(text)
            if not any(a <= m.start() < b for a, b in dates)]


def _date_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every date printed in `text`: a code or a version inside one is neither."""
    return [(v.start, v.start + len(v.text)) for v in values_in(text) if v.is_date]


def periods_in(text: str) -> list[tuple[int, str]]:
    """(start, span) of every period printed as its two ends in `text` (`_DATE_RANGE`)."""
    return [(m.start(), m.group(0).strip()) for m in _DATE_RANGE.finditer(text)]


def addresses_in(text: str) -> list[tuple[int, str]]:
    """(start, span) of every street address printed in `text` (`_ADDRESS`), without a trailing comma."""
    return [(m.start(), m.group(0).strip().rstrip(",")) for m in _ADDRESS.finditer(text)]


def answer_span(text: str, question: str, form: QuestionForm,
                ignore: frozenset[str] = frozenset()) -> tuple[str, int]:
    """(answer, fit): the shortest span of `text` of the kind asked and how well it fits — 2 exactly
    the kind asked, 1 compatible (or the whole text, when no span of a kind is asked), 0 none (a
    question that wants a value, a text holding none: the text itself is returned)."""
    if asks_version(question) and not form.yes_no and not form.time:
        versions = versions_in(text)
        if versions:  # "which Lua version": the release's number whole, not a decimal cut out of it
            return _nearest(text, versions, question, ignore), 2
    if form.wants_value:
        values, exact = wanted_values(text, question, form)
        if values:
            fit = 2 if exact else 1
            found = _ranged(text, values)
            if len(found) == 1:
                return _count_as_digits(found[0][1]), fit
            return _count_as_digits(_nearest(text, found, question, ignore)), fit
        if form.needs_number:
            return text, 0
        # only a quantity noun ("the default value of X"): a printed field's value or an identifier answers
        # as well; a whole sentence does not
        keyed = key_value(text, question)
        named = identifiers_in(text, question)
        if keyed:
            return keyed, 1
        return (_nearest(text, sorted(named), question, ignore), 1) if named else (text, 0)
    if form.identifier:  # a code: the field's value, else the code nearest the words the question names
        keyed = key_value(text, question)
        if keyed:
            return keyed, 2
        dates = _date_spans(text)
        codes = [(m.start(), m.group(0)) for m in _CODE.finditer(text) if not _BARE_YEAR.match(m.group(0))
                 and not any(a <= m.start() < b for a, b in dates)]
        return (_nearest(text, codes, question, ignore), 2) if codes else (text, 0)
    if not form.yes_no:
        # "what street address": the address, not a name in it; "which billing period": both its ends
        asked = (addresses_in if _asks_street_address(question) else
                 periods_in if _PERIOD_WORDS.search(question) else None)
        found = asked(text) if asked is not None else []
        if found:
            return _nearest(text, found, question, ignore), 2
    keyed = key_value(text, question) if not (form.yes_no or form.superlative) else ""
    if keyed and not (form.entity and not re.search(r"[^\W\d_]", keyed)):  # "who/where" wants words
        return keyed, 2
    if form.entity and command_line(text):
        return text.strip(), 2  # a command with its options is one name: "tlmgr update --self --all", whole
    if form.entity:
        names = head_phrases(text, question) or (
            identifiers_in(text, question) + (latin_in_cjk(text, question) if has_cjk(text)
                                              else names_in(text, question)))
        if names:
            return _nearest(text, sorted(names), question, ignore), 2
    return text, 1


_CODE = re.compile(r"(?<!\S)(?=\S*\d)[A-Za-z0-9][\w./#+-]*[A-Za-z0-9]")  # a token with a digit: "87B37C9-0152"


# A command as printed to be typed: a lowercase program name, then its arguments, at least one an option
# ("-x", "--self"), nothing else on the line (no sentence, no CJK)
_COMMAND_LINE = re.compile(r"^\s*(?:\$\s*)?[a-z][\w.-]*(?:\s+\S+){0,8}?\s+--?[A-Za-z][\w=.-]*(?:\s+\S+){0,8}\s*$")


def command_line(text: str) -> bool:
    """Whether the text is one command line ("sudo tlmgr update --self --all", "R --no-save < in.R")."""
    return "\n" not in text.strip() and not has_cjk(text) and bool(_COMMAND_LINE.match(text)) \
        and not re.search(r"[.!?]\s*$|[.!?]\s+[A-Z]", text)


_KEY_VALUE = re.compile(r"^\s*(?P<key>[^:：]{1,60}?)\s*[:：]\s*(?P<value>\S.{0,80}?)\s*[.。]?\s*$")


def key_value(text: str, question: str) -> str:
    """The value of a key/value line whose key the question names: "Headquarters: Lyon, France" or
    "Kestrel code 4711" (a short line ending in one value) for "what/where is the headquarters/code" —
    a printed field, read as one. "" when the line is no such field or the question names another key."""
    return printed_field(text, question)[0]


def printed_field(text: str, question: str) -> tuple[str, set[str]]:
    """(value, the question's terms its key names) of a key/value line whose every key word the question
    names (`_same_root`: "Location:" for "where is it located"); ("", set()) when there is none."""
    asked = set(content_terms(question))
    match = _KEY_VALUE.match(text)
    if match:
        key, value = match.group("key"), match.group("value")
    else:
        values = [v for v in values_in(text) if not v.is_date]
        if len(text.split()) > 8 or len(values) != 1 or not text.rstrip(" .").endswith(values[0].text):
            return "", set()
        key, value = text[:values[0].start], values[0].text
    value = _CITATION_MARK.sub("", value)  # "33069-62-4[27]": the reference mark is not the field's value
    names = {k: {a for a in asked if _same_root(k, a)} for k in content_terms(key)}  # key word → its words asked
    if not names or not all(names.values()) or not set(content_terms(value)) - asked:
        return "", set()
    return value.strip(), set().union(*names.values())


def labelled_value(label: str, line: str, question: str) -> tuple[str, set[str]]:
    """(value, the question's terms the label names) of a field printed on two lines, its label ending on a
    colon above its value ("Translated into Dutch by:" over "Stefan Becuwe, Bart Windels"); ("", set())
    unless the question names most of the label's words. Most, not all as on one line (`printed_field`): the
    label sits on a line of its own, set apart as a key, and a question words it in its own forms
    ("vertaald" for "Vertaling"). The value must say something the question does not."""
    key = label.rstrip().rstrip(":：").strip()
    asked = set(content_terms(question))
    names = {k: {a for a in asked if _same_root(k, a) or (len(os.path.commonprefix([k, a])) >= ROOT_LETTERS)}
             for k in content_terms(key)}
    named = [k for k, words in names.items() if words]
    value = _CITATION_MARK.sub("", line).strip()
    if not names or 2 * len(named) <= len(names) or not set(content_terms(value)) - asked:
        return "", set()
    return value, set().union(*names.values())


ROOT_LETTERS = 5  # "locat-ion" / "locat-ed", "manufactur-er" / "manufactur-es": one word, two endings


def _same_root(term: str, word: str) -> bool:
    """Whether a question's word names a field's key word: the word itself, or another ending of it (a form
    prints "Location:" for "where is it located", "Manufacturer:" for "who manufactures it") — the words
    share their first ROOT_LETTERS letters and differ only in the last three of the longer."""
    if term == word:
        return True
    if min(len(term), len(word)) < ROOT_LETTERS or not (term.isalpha() and word.isalpha()):
        return False
    common = len(os.path.commonprefix([term, word]))
    return common >= ROOT_LETTERS and max(len(term), len(word)) - common <= 3


_CITATION_MARK_ANYWHERE = re.compile(r"(?<=\S)\[\d{1,3}(?:\s?[,–-]\s?\d{1,3})*\]")  # "therapy.[16]"
_CITATION_MARK = re.compile(_CITATION_MARK_ANYWHERE.pattern + r"\s*$")  # a reference's number ending a field


# ---- the span-type gate: an answer is a span of the type the question asks, or no answer -------------------
_TIME_HEADS = frozenset("date dates day days month months year years time season quarter".split())  # "which month"
DATE_MAX_WORDS = 8  # a date, with a weekday or a time of day at most
IDENTIFIER_MAX_WORDS = 3  # a code as forms print it: "87B37C9-0152", "+1 650-701-7829", "AK 672-5"
# a caption's own label ("Figure 8 shows …", "Table 2: …", 图 3): the description of the thing, never its value
_CAPTION_START = re.compile(r"^\s*(fig(ure)?\.?|table|chart|exhibit)\s*[\dIVX]*\b|^\s*[图表]\s*\d", re.IGNORECASE)
_BARE_YEAR = re.compile(r"^\s*(1[5-9]|20)\d\d\s*$")
_BARE_DIGIT = re.compile(r"^\s*[-+]?\d\s*$")


def _cut_from_token(answer: str, evidence: str) -> bool:
    """Whether a number answer is cut out of a longer code in the evidence ("33069" of "33069-62-4",
    "2721" of "2721-5058"): the number glued to more letters or digits by a hyphen, slash or dot."""
    a = answer.strip()
    if not a or not re.fullmatch(r"[\d,.]+", a):
        return False
    glued = False
    for match in re.finditer(re.escape(a), evidence):
        before, after = evidence[:match.start()], evidence[match.end():]
        if re.match(r"[-/.]?[A-Za-z0-9]", after) or re.search(r"[A-Za-z0-9][-/.]?$", before):
            glued = True
            continue
        return False  # printed on its own somewhere: a value
    return glued


# Nouns of a measured dimension: the answer is an amount in a unit of it, never a percentage
DIMENSION_NOUNS = frozenset("distance length height width depth weight mass speed temperature duration frequency "
                            "voltage current capacity size area volume".split())


# "which value / which frequency …": the thing asked is an amount, so the answer holds a number
VALUE_NOUNS = DIMENSION_NOUNS | frozenset("value number amount price rate percentage total".split())


def asks_dimension(question: str) -> bool:
    """Whether the question asks for a measured dimension ("what is the distance", "how long")."""
    q = question.lower()
    return bool(re.search(r"\bhow (long|far|tall|heavy|wide|deep|fast|old)\b", q)) or any(
        w in DIMENSION_NOUNS or stem(w) in DIMENSION_NOUNS for w in words_of(q))


_PERCENT_HEADER = re.compile(r"%|\bper ?cent\b|百分比", re.IGNORECASE)


def span_fits(answer: str, evidence: str, question: str, form: QuestionForm, kind: str = "text",
              pinned: bool = False) -> bool:
    """Whether `answer` is a span of the type the question asks for — the reader's last check before it
    answers (a candidate that fails it is dropped: "not found" rather than a fragment of the wrong type):

    * "when / what date / what year" (a time question): the answer holds a date or a year;
    * a quantity ("how many / how much", "what is the total …"): the answer holds a number, and it is not a
      year alone (a column header, not an amount; a table's cell that the question pins by its row and
      column is a value, whatever its digits), not a lone digit without a unit unless the question
      counts ("how many": a line number, a footnote or a label otherwise; a table's cell that the question
      pins by its row and column is a value), not a number cut out of a longer code ("33069" of
      "33069-62-4"), and, for a count ("how many", "the total number"), not a table value its header marks
      in percent; `wanted_values` has already set aside reference marks and values in the unit of a
      condition the question states;
    * a name ("who / which / where"): the answer holds a word the question does not (a span that only
      repeats the question — its title, its own "which X" noun — names nothing; a table's cell may: the
      question names the row, the cell the thing), is not a date alone, and holds a number when the thing
      asked is a value ("which frequency"). A whole sentence may answer: the page may say the name only
      in one (a cap on its words cost six right answers of the held-back half for none of the wrong ones);
    * for all three, not a caption (it starts with its figure's or table's label: it describes the thing);
    * any other question (what does X do, yes/no, what is shown): any span.

    `kind` is the kind of region the answer was read from ("text", "table", "figure"); `pinned`: a table cell
    whose row and column the question names.
    """
    text = answer.strip()
    if not text:
        return False
    if form.yes_no:
        return True
    if (form.time or form.quantity or form.entity) and _CAPTION_START.match(text):
        return False
    if form.identifier:  # "what is the invoice number": a code as printed, with a digit, whole, where the
        # evidence prints what it identifies ("Invoice number | 87B37C9-0152"), not another number of the page
        return bool(re.search(r"\d", text)) and len(text.split()) <= IDENTIFIER_MAX_WORDS \
            and not _cut_from_token(text, evidence) and fuzzy_in(form.identifier, set(content_terms(evidence)))
    if asks_version(question) and not form.time and versions_in(text):
        return True  # a release's number, whatever else the question's form asks ("いくつ")
    if _asks_street_address(question) and not addresses_in(text) and not re.search(r"[^\W\d_]{3}", text):
        return False  # "what street address": a number or a code alone is not one ("Receipt number 2721-5058")
    values = values_in(text)
    if form.time:
        return (any(v.is_year or v.is_date for v in values) or bool(re.search(r"\d{4}", text))) and (
            has_cjk(text) or len(text.split()) <= DATE_MAX_WORDS)
    if form.quantity:
        if values and all(v.is_percent for v in values) and form.kind != "percent" and asks_dimension(question):
            return False  # "what is the distance": a length, not a share
        if _BARE_YEAR.match(text) and not (kind == "table" and pinned):  # a cell the question pins is a value
            return False                                                 # ("Sunshine (h)" of a station: 1511)
        if _BARE_DIGIT.match(text) and not form.asks_amount and not (kind == "table" and pinned):
            return False
        if form.needs_number and not (values or number_words_in(text)):
            return False
        if kind == "table" and form.kind != "percent" and asks_count(question) and _PERCENT_HEADER.search(
                evidence.rpartition(": ")[0]):
            return False  # "how many / what is the total number": a count, not a share its header marks "(%)"
        return not _cut_from_token(text, evidence)
    if form.entity:
        from vrag_rl.reader.relevance import terms_of  # (relevance imports nothing from here: no cycle)

        asked = terms_of(question)
        if kind != "table" and all(fuzzy_in(t, asked) for t in terms_of(text)) and not _BARE_DIGIT.match(text) \
                and not re.fullmatch(r"\s*[A-Z0-9]\s*", text):
            return False  # only the question's own words ("which layer" → "Layer")
        head = which_head(question)[-1:] + which_head(question)[:1]  # the word after "which", the head noun
        if any(stem(w) in VALUE_NOUNS or w in VALUE_NOUNS for w in head) and not (values or number_words_in(text)):
            return False  # "which sample frequency": a value, not a label
        only_date = (len(values) == 1 and values[0].is_date and values[0].text.strip() == text) or (
            stem(text.lower().rstrip(".")) in MONTH_TERMS)  # a month's name alone ("Aug") too
        if only_date and not set(which_head(question)) & _TIME_HEADS:
            return False  # a date alone answers "when", not "which"
    return True
