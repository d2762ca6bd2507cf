"""Sentences of a region's text, and the shortest span of a sentence that answers a question.

The span is of the kind the question asks for: a value of the right sort ("how much" → "410 MW",
"what share" → "12%", "when" → "2019"), a name ("who/which/where" → "Blue Strait Lines"), else the
whole sentence — never the sentence with the question's words deleted (that makes fragments).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from search_engine.lexical import has_cjk
from vrag_rl.reader.question import QuestionForm
from vrag_rl.reader.terms import STOPWORDS, content_terms, fuzzy_in, stem, words_of
from vrag_rl.reader.values import _REFERENCE_LABEL, Value, named_in, values_in

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


def _joins(previous: str, following: str) -> bool:
    """Whether two printed lines are one wrapped sentence: the first ends mid-sentence (a word or a
    comma, not a full stop, colon or a value that ends a table-like row)."""
    end = previous.rstrip()[-1:]
    ends_in_value = bool(re.search(r"\d[%\w]*$", previous.rstrip()))
    return bool(following.strip()) and (end.isalnum() or end in ",，、-") and not ends_in_value


def sentences_of(text: str) -> list[Sentence]:
    """The sentences of a region's text: lines of a wrapped sentence joined, rows of a list or table
    kept apart, then split at sentence ends."""
    lines = [line.strip() for line in text.split("\n")]
    groups: list[tuple[str, int, int]] = []  # (text, first line, last line)
    for i, line in enumerate(lines):
        if not line:
            continue
        if groups and _joins(groups[-1][0], line) and groups[-1][2] == i - 1:
            joiner = "" if has_cjk(groups[-1][0][-1:]) and has_cjk(line[:1]) else " "
            groups[-1] = (groups[-1][0] + joiner + line, groups[-1][1], i)
        else:
            groups.append((line, i, i))
    out: list[Sentence] = []
    offset = 0
    n = max(1, len(lines))
    for group, first, last in groups:
        pieces = [p for p in _SENTENCE_END.split(group) if p and p.strip()]
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
    for match in re.finditer(r"[0-9A-Za-z][0-9A-Za-z.,'’%]*", text):
        word = match.group(0).lower().strip(".,")
        if word and fuzzy_in(stem(word), terms):
            spans.append(match.span())
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


def wanted_values(text: str, question: str, form: QuestionForm) -> tuple[list[Value], bool]:
    """Values in `text` of the kind the question asks for, without the ones it names itself, and
    whether they are exactly that kind (a "$" for a money question) or only compatible with it."""
    values = [v for v in values_in(text) if not named_in(v, question)]
    strict = [v for v in values if form.wants(v)]
    return (strict, True) if strict else ([v for v in values if form.compatible(v)], False)


# An identifier as technical documents print them: a command (\\arcmin), an option (-sDeviceNProfile,
# --max-ppsize), a constant (PRESERVE_K_ONLY), a file (cyan_output.icc), an assignment (type="b") or a
# camel-cased name (FitR, rml2pdf): a name of its own kind, whatever its capitals.
_IDENTIFIER = re.compile(r"(?<![\w\\-])(?:\\[A-Za-z]+\*?(?:\{[^{}\s]*\})?|--?[A-Za-z][\w-]*[A-Za-z0-9]|"
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


def answer_span(text: str, question: str, form: QuestionForm,
                ignore: frozenset[str] = frozenset()) -> tuple[str, int]:
    """(answer, fit): the shortest span of `text` of the kind asked and how well it fits — 2 exactly
    the kind asked, 1 compatible (or the whole text, when no span of a kind is asked), 0 none (a
    question that wants a value, a text holding none: the text itself is returned)."""
    if form.wants_value:
        values, exact = wanted_values(text, question, form)
        if values:
            fit = 2 if exact else 1
            if len(values) == 1:
                return values[0].text, fit
            return _nearest(text, [(v.start, v.text) for v in values], question, ignore), fit
        if form.needs_number:
            return text, 0
        # only a quantity noun ("the default value of X"): a printed field's value or an identifier answers
        # as well; a whole sentence does not
        keyed = key_value(text, question)
        named = identifiers_in(text, question)
        if keyed:
            return keyed, 1
        return (_nearest(text, sorted(named), question, ignore), 1) if named else (text, 0)
    keyed = key_value(text, question) if not (form.yes_no or form.superlative) else ""
    if keyed and not (form.entity and not re.search(r"[^\W\d_]", keyed)):  # "who/where" wants words
        return keyed, 2
    if form.entity:
        names = identifiers_in(text, question) + ([] if has_cjk(text) else names_in(text, question))
        if names:
            return _nearest(text, sorted(names), question, ignore), 2
    return text, 1


_KEY_VALUE = re.compile(r"^\s*(?P<key>[^:：]{1,60}?)\s*[:：]\s*(?P<value>\S.{0,80}?)\s*[.。]?\s*$")


def key_value(text: str, question: str) -> str:
    """The value of a key/value line whose key the question names: "Headquarters: Lyon, France" or
    "Kestrel code 4711" (a short line ending in one value) for "what/where is the headquarters/code" —
    a printed field, read as one. "" when the line is no such field or the question names another key."""
    asked = set(content_terms(question))
    match = _KEY_VALUE.match(text)
    if match:
        key, value = match.group("key"), match.group("value")
    else:
        values = [v for v in values_in(text) if not v.is_date]
        if len(text.split()) > 8 or len(values) != 1 or not text.rstrip(" .").endswith(values[0].text):
            return ""
        key, value = text[:values[0].start], values[0].text
    key_terms = set(content_terms(key))
    if not key_terms or not key_terms <= asked or not set(content_terms(value)) - asked:
        return ""
    return value.strip()
