"""The CPU demo's stand-in for a VLM: an extractive reader over OCR lines. It is not a VLM.

It drives every action of the agent protocol on real page images: search with the question, zoom
into the evidence on the page it is shown, read the zoomed crop, answer. What makes it a reader
and not a keyword matcher:

* The evidence is chosen by meaning: each OCR line (and each pair of adjacent lines, for sentences
  that wrap) is scored by the cosine similarity of sentence embeddings of the question and the
  line (the bundled all-MiniLM-L6-v2, or any embedder with `embed_queries`), plus the share of the
  question's terms the line contains. A line made only of the question's words (a title, a table
  header) cannot hold an answer and ranks below lines that say something more.
* The answer is a value or the whole evidence line, never a fragment with words deleted: a question
  that asks for a quantity ("how many", "what share", "what score", 多少) is answered with the
  value printed in the evidence (a number with its currency and unit), picked by its table column
  when the question names a column header, else by its closeness to the question's words; a
  "which/what is the most ..." question over a table of label/value rows is answered with the
  label of the largest (or smallest) row; anything else is answered with the whole line.
* Nothing here knows the sample corpus: the rules are about English and Chinese question forms,
  numbers and table layout.

Chinese (and other CJK) text is matched with character bigrams (`search_engine.lexical`), and the
OCR language follows `search_engine.text_extraction.resolve_ocr_lang` ("auto" by default: English,
then the installed CJK packs when English reads poorly).
"""
from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

import numpy as np

from search_engine.lexical import cjk_bigrams, has_cjk
from search_engine.text_extraction import OcrLine, ocr_lines
from vrag_rl.policy_server.protocol import ChatMessage, Generation, GenerationParams
from vrag_rl.policy_server.scripted import NOT_FOUND, _limit, question_of

log = logging.getLogger("vrag_rl.policy_server.rule_based")

DESCRIPTION = "rule-based stand-in (OCR + MiniLM extractive reader), not a VLM"

STOPWORDS = frozenset(
    "a about according after all also am an and any are as at be been being before but by can could did do does "
    "doing during each for from get got had has have having he her here his how i if in into is it its me much many "
    "my no not of on or our over she should so some than that the their them then there these they this those to "
    "under up us was we were what when where which while who whom whose why will with would you your".split()
)
_LATIN = re.compile(r"[0-9a-z]+(?:[.,'’%][0-9a-z%]+)*%?")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]+")
_BBOX = re.compile(r"<bbox>", re.IGNORECASE)
_SEARCH = re.compile(r"<search>", re.IGNORECASE)
_QUOTED_LINE = re.compile(r'The line "(.*?)" ', re.DOTALL)

# ---- question forms (English and Chinese; general language, no corpus vocabulary) -------------------------
_QUANTITY_PHRASE = re.compile(r"\bhow (many|much|long|far|old|big|large|high|tall|fast|heavy|often)\b|"
                              r"多少|几[个项家次年天人种]|多大|多高|多长|多远|多重|比例|占比|百分之|数量|规模")
QUANTITY_NOUNS = frozenset(
    "amount average budget capacity cost count debt dividend earnings figure fee growth height income length level "
    "margin number output pay percent percentage population power price profit proportion rate ratio rent revenue "
    "salary sales score share size speed spending sum tax temperature total turnover value volume wage weight "
    "width yield".split()
)
# The kind of number a quantity question wants, from its head noun: a share is a percentage, a price is money.
PERCENT_NOUNS = frozenset("share percentage percent proportion rate ratio".split())
MONEY_NOUNS = frozenset("revenue income profit cost price sales budget salary fee spending turnover dividend earnings "
                        "wage rent tax debt pay".split())
_PERCENT_CJK = re.compile(r"占比|比例|百分|比率|份额")
_MONEY_CJK = re.compile(r"收入|营收|利润|成本|价格|费用|预算|工资|股息")
_TIME_PHRASE = re.compile(r"\b(when|what year|which year|what date|which date|in what year)\b|"
                          r"哪一?年|何时|什么时候|日期")
_ENTITY_START = re.compile(r"^\s*(which|who|whom|whose|where)\b|哪[个些家里位]|谁")
_SUPERLATIVE_MAX = re.compile(r"\b(most|largest|highest|biggest|greatest|top|maximum|best|leading)\b|"
                              r"最(多|大|高|常|主要)")
_SUPERLATIVE_MIN = re.compile(r"\b(least|lowest|smallest|fewest|minimum|worst)\b|最(少|小|低)")

# ---- values: a number with its currency, scale and unit --------------------------------------------------
_UNITS = ("%|percent|per ?cent|million|billion|thousand|trillion|mn|bn|k|[kmgt]wh?|[kmgt]w|gbps|mbps|tbps|[kmgt]b|"
          "km|cm|mm|m|kg|g|t|tonnes?|tons?|mph|km/h|°c|°f|usd|eur|gbp|cny|rmb|jpy|dollars?|euros?|pounds?|yuan|"
          "yen|years?|months?|weeks?|days?|hours?|minutes?|seconds?|people|persons?|x|times|points?|元|万|亿|千|百|"
          "个|人|年|月|日|天|次|台|家|倍|米|公里|千米|吨")
_VALUE = re.compile(
    r"(?<![A-Za-z0-9_.])(?P<value>(?:[$€£¥]\s?)?[-+]?\d[\d,]*(?:\.\d+)?(?:\s?(?:" + _UNITS + r")(?![a-z]))*)",
    re.IGNORECASE)
_YEAR = re.compile(r"^(19|20)\d\d$")


def words_of(text: str) -> list[str]:
    """Lowercased Latin words without punctuation (numbers such as 7.4, 1,870 or 47% stay whole)."""
    return _LATIN.findall(text.lower())


def _stem(word: str) -> str:
    """Crude plural/verb -s folding, so "produces" matches "produce" and "plants" matches "plant"."""
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) and not word[-2].isdigit():
        word = word[:-1]
    return word


def content_terms(text: str) -> list[str]:
    """The terms that carry meaning, in order, without repeats: stemmed Latin words that are not
    stopwords, and character bigrams of CJK text (without Chinese question and function words)."""
    seen: dict[str, None] = {}
    for word in words_of(text):
        if word not in STOPWORDS:
            seen.setdefault(_stem(word), None)
    for run in _CJK_RUN.findall(text):
        for gram in cjk_bigrams(run):
            seen.setdefault(gram, None)
    return list(seen)


@dataclass(frozen=True)
class QuestionForm:
    """What kind of answer a question wants."""

    quantity: bool  # a number ("how many", "what share", 多少)
    time: bool  # a year or date
    superlative: int  # +1 "most/largest", -1 "least/smallest", 0 neither
    entity: bool  # a name ("which", "who", "where")
    kind: str = ""  # "percent" or "money" when the question's noun says so

    def wants(self, value: Value) -> bool:
        """Whether a value is of the kind asked for (any non-year number when no kind is known)."""
        if self.time:
            return value.is_year
        if value.is_year:
            return False
        if self.kind == "percent":
            return "%" in value.text or "percent" in value.text.lower() or "百分" in value.text
        if self.kind == "money":
            return bool(re.search(r"[$€£¥]|usd|eur|gbp|cny|rmb|dollar|euro|pound|yuan|元", value.text, re.I))
        return True


def question_form(question: str) -> QuestionForm:
    """Classify the question by its form words (English and Chinese), never by its topic."""
    q = question.lower()
    entity = bool(_ENTITY_START.search(q))
    quantity = bool(_QUANTITY_PHRASE.search(q)) or (
        not entity and any(_stem(w) in QUANTITY_NOUNS or w in QUANTITY_NOUNS for w in words_of(q)))
    superlative = 1 if _SUPERLATIVE_MAX.search(q) else -1 if _SUPERLATIVE_MIN.search(q) else 0
    kind = ""
    if quantity:  # the first noun that names a kind decides ("dividend per share" is money)
        for word in words_of(q):
            if word in PERCENT_NOUNS or _stem(word) in PERCENT_NOUNS:
                kind = "percent"
                break
            if word in MONEY_NOUNS or _stem(word) in MONEY_NOUNS:
                kind = "money"
                break
        if not kind and has_cjk(q):
            kind = "percent" if _PERCENT_CJK.search(q) else "money" if _MONEY_CJK.search(q) else ""
    return QuestionForm(quantity=quantity, time=bool(_TIME_PHRASE.search(q)), superlative=superlative,
                        entity=entity, kind=kind)


@dataclass
class Value:
    """A value printed in a line: its text, where it starts (in words), and what it is."""

    text: str
    start: int  # index of its first word in the line's words
    number: float
    is_year: bool


def values_in(text: str) -> list[Value]:
    """Every number in the text with its currency, scale and unit ("$341 million", "410 MW", "12%")."""
    values = []
    for match in _VALUE.finditer(text):
        raw = match.group("value").strip(" ,")
        digits = re.search(r"\d[\d,]*(?:\.\d+)?", raw).group(0).replace(",", "")
        try:
            number = float(digits)
        except ValueError:
            continue
        start = len(text[: match.start()].split())
        values.append(Value(raw, start, number, bool(_YEAR.match(raw))))
    return values


def _asked(value: Value, question: str) -> bool:
    """The question itself names this number ("in 2023"): it is a condition, not the answer."""
    digits = re.sub(r"[^\d.]", "", value.text)
    return bool(digits) and re.search(r"(?<![\d.])" + re.escape(digits) + r"(?![\d.])",
                                      re.sub(r"(?<=\d),(?=\d)", "", question)) is not None


# ---- evidence ------------------------------------------------------------------------------------------------


@dataclass
class Evidence:
    """A candidate evidence unit: one line, or two adjacent lines of a wrapped sentence. A table row
    carries its column header as `context`: it is scored with it ("District Score" + "Riverside 7.4")
    but answered from the row alone."""

    lines: list[OcrLine]
    score: float = 0.0
    overlap: int = 0
    context: OcrLine | None = None

    @property
    def scored_text(self) -> str:
        return f"{self.context.text} {self.text}" if self.context is not None else self.text

    @property
    def text(self) -> str:
        joiner = "" if all(has_cjk(line.text) for line in self.lines) else " "
        return joiner.join(line.text for line in self.lines)

    @property
    def box(self) -> tuple[int, int, int, int]:
        boxes = [line.box for line in self.lines]
        return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes),
                max(b[3] for b in boxes))


def candidate_units(lines: Sequence[OcrLine]) -> list[Evidence]:
    """Each line (a table row with its column header as context), and each line joined with the next
    when they look like one wrapped sentence: the next starts just below at the same left edge, and
    the first ends mid-sentence (a word or a comma, not a full stop, colon or closing bracket)."""
    ordered = sorted(lines, key=lambda line: (line.box[1], line.box[0]))
    units = [Evidence([line], context=table_header(line, ordered)) for line in lines]
    for first, second in zip(ordered, ordered[1:]):
        height = max(1, first.box[3] - first.box[1])
        gap = second.box[1] - first.box[3]
        end = first.text.rstrip()[-1:]
        ends_in_value = bool(re.search(r"\d[%\w]*$", first.text.rstrip()))  # a table row, not a sentence
        if (0 <= gap <= 1.6 * height and abs(second.box[0] - first.box[0]) <= 0.6 * height
                and (end.isalnum() or end in ",，、") and not ends_in_value):
            units.append(Evidence([first, second]))
    return units


def _has_value(line: OcrLine) -> bool:
    return any(not v.is_year for v in values_in(line.text))


def table_block(row: OcrLine, ordered: Sequence[OcrLine], max_rows: int = 12) -> list[OcrLine]:
    """The lines stacked with `row` at about the same left edge with row spacing (its table), top to bottom."""
    height = max(1, row.box[3] - row.box[1])

    def aligned(line: OcrLine) -> bool:
        return line is not row and abs(line.box[0] - row.box[0]) <= 1.5 * height

    block = [row]
    for direction in (-1, 1):
        edge = row.box[1] if direction < 0 else row.box[3]
        side = [line for line in ordered if aligned(line) and
                (line.box[3] <= row.box[1] + height // 2 if direction < 0 else line.box[1] >= row.box[3] - height // 2)]
        side.sort(key=lambda line: -line.box[1] * direction)  # nearest first
        for steps, line in enumerate(side):
            gap = edge - line.box[3] if direction < 0 else line.box[1] - edge
            if steps >= max_rows or gap > 2.5 * height:
                break
            block.append(line)
            edge = line.box[1] if direction < 0 else line.box[3]
    return sorted(block, key=lambda line: line.box[1])


def table_header(row: OcrLine, ordered: Sequence[OcrLine]) -> OcrLine | None:
    """The column header of a table row: the top line of its block when that line holds no value.
    None when `row` is no table row. (The top of the block rather than the first line without a
    value above: OCR garbles some rows.)"""
    if not _has_value(row):
        return None
    top = table_block(row, ordered)[0]
    return top if top is not row and not _has_value(top) else None


def _fuzzy_in(term: str, terms: set[str]) -> bool:
    """A term is found when present, or for words of 5+ letters when one OCR error away ("Roverside")."""
    if term in terms:
        return True
    if len(term) < 5 or not term.isalpha():
        return False
    return any(abs(len(t) - len(term)) <= 2 and SequenceMatcher(None, term, t).ratio() >= 0.8 for t in terms)


_NAME_PHRASE = re.compile(r"(?:[A-Z][\w'’&-]*\s+){1,5}[A-Z][\w'’&-]*")  # "Metro Travel Survey", "Kestrel Ridge"
_PROPER = re.compile(r"(?<=[\w,;:)] )[A-Z][a-z]+(?:[A-Z][a-z]+)*")


class LineScorer:
    """Scores evidence units against a question: meaning (embedder cosine) plus shared terms, the
    terms weighted by how rare they are among the page's lines (a word on every line picks none)."""

    def __init__(self, embedder: Any | None):
        self.embedder = embedder

    def _cosines(self, question: str, texts: list[str]) -> np.ndarray:
        if self.embedder is None or not texts:
            return np.zeros(len(texts), np.float32)
        vectors = self.embedder.embed_queries([question, *texts])
        matrix = np.concatenate([np.asarray(v, np.float32).reshape(1, -1) for v in vectors])
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
        return matrix[1:] @ matrix[0]

    def rank(self, question: str, units: list[Evidence]) -> list[Evidence]:
        """Units that share a term with the question or are close in meaning, best first."""
        terms = content_terms(question)
        form = question_form(question)
        if not units or not terms:
            return []
        line_terms = {id(line): set(content_terms(line.text)) for u in units for line in u.lines}
        for u in units:
            if u.context is not None:
                line_terms[id(u.context)] = set(content_terms(u.context.text))
        n_lines = max(1, len(line_terms))
        weights = {}
        for term in terms:
            df = sum(1 for found in line_terms.values() if _fuzzy_in(term, found))
            weights[term] = float(np.log(1 + n_lines / df)) if df else 0.0
        total = sum(weights.values())
        cosines = self._cosines(question, [u.scored_text for u in units])
        # an English embedder sees Chinese text as little more than characters: trust the terms more there
        semantic_weight = 0.35 if has_cjk(question) else 1.0
        asked_names = {w for w in _PROPER.findall(question)}
        names = [set(content_terms(m)) for m in _NAME_PHRASE.findall(question)]
        names = [name for name in names if len(name) > 1]
        same_direction = _SUPERLATIVE_MAX if form.superlative > 0 else _SUPERLATIVE_MIN
        ranked = []
        for unit, cosine in zip(units, cosines):
            found = set().union(*(line_terms[id(line)] for line in unit.lines))
            if unit.context is not None:
                found |= line_terms[id(unit.context)]
            matched = [t for t in terms if _fuzzy_in(t, found)]
            for name in names:  # a multi-word name counts whole or not at all ("Metro" is not "Metro Travel Survey")
                if not all(t in matched for t in name):
                    matched = [t for t in matched if t not in name]
            if not matched and cosine < 0.5:
                continue
            lexical = sum(weights[t] for t in matched) / total if total else 0.0
            score = semantic_weight * float(cosine) + 0.6 * lexical
            if not set(content_terms(unit.text)) - set(terms):  # only the question's own words: a title
                score -= 0.5
            if form.quantity or form.time:  # the line must hold a number of the kind asked for
                fresh = [v for v in values_in(unit.text) if not _asked(v, question)]
                score += (0.3 if form.kind else 0.2) if any(form.wants(v) for v in fresh) else -0.1
            if form.superlative and same_direction.search(unit.text.lower()):
                score += 0.2  # the question asks for the extreme; this line states one
            if form.entity and set(_PROPER.findall(unit.text)) - asked_names:
                score += 0.15  # "which/who/where" wants a name; this line has one the question has not
            if len(unit.lines) > 1:
                score -= 0.05  # a single line that says it all is the tighter evidence
            unit.score, unit.overlap = score, len(matched)
            ranked.append(unit)
        ranked.sort(key=lambda u: (-u.score, u.box[1]))
        return ranked


# ---- answers -------------------------------------------------------------------------------------------------


def _column_header_value(unit: Evidence, values: list[Value], lines: Sequence[OcrLine],
                         question: str) -> Value | None:
    """With several values in a table row, the one under the column whose header the question names."""
    if len(unit.lines) != 1 or not unit.lines[0].words:
        return None
    row = unit.lines[0]
    terms = set(content_terms(question)) | {w for w in words_of(question) if w.isdigit()}
    above = [line for line in lines if line.box[3] <= row.box[1] and line.words]
    for header in sorted(above, key=lambda line: -line.box[1]):
        named = [w for w in header.words if {_stem(x) for x in words_of(w.text)} & terms]
        if not named:
            continue
        centre = (named[-1].box[0] + named[-1].box[2]) / 2
        row_words = row.words
        best, best_distance = None, None
        for value in values:
            if value.start >= len(row_words):
                continue
            word = row_words[value.start]
            distance = abs((word.box[0] + word.box[2]) / 2 - centre)
            if best_distance is None or distance < best_distance:
                best, best_distance = value, distance
        width = max(1, row.box[2] - row.box[0])
        if best is not None and best_distance is not None and best_distance < 0.2 * width:
            return best
    return None


def _nearest_value(text: str, values: list[Value], question: str) -> Value:
    """The value closest (in words) to the question's terms in the line; ties go to the later one
    ("revenue in 2023 was $341 million": the value follows what it measures)."""
    terms = set(content_terms(question))
    words = text.split()
    positions = [i for i, w in enumerate(words) if {_stem(x) for x in words_of(w)} & terms]
    if not positions:
        return values[0]

    def distance(value: Value) -> tuple[int, int]:
        gaps = [value.start - p for p in positions]
        return (min(abs(g) for g in gaps), 0 if any(g > 0 for g in gaps) else 1)

    return min(values, key=distance)


def _label_of(line: OcrLine, value: Value) -> str:
    """A table row's label: the row's text without its value (the row's other cell, not a fragment)."""
    words = line.text.split()
    n = len(value.text.split())
    return " ".join(words[: value.start] + words[value.start + n:]).strip(" :|-–")


def _superlative_row(lines: Sequence[OcrLine], question: str, direction: int) -> str | None:
    """For "which ... the most/least": the label of the largest/smallest row of a label/value table.

    Needs at least two rows that each hold exactly one value and a label (the table's body)."""
    rows = []
    for line in lines:
        values = [v for v in values_in(line.text) if not v.is_year and not _asked(v, question)]
        if len(values) != 1:
            continue
        words, value = line.text.split(), values[0]
        at_edge = value.start == 0 or value.start + len(value.text.split()) == len(words)
        label = _label_of(line, value)
        # a row is two cells, label and value, side by side: a sentence with a number in it is no row
        if at_edge and label and len(label.split()) <= 5 and re.search(r"[A-Za-z\u3400-\u9fff]", label):
            rows.append((value.number, label))
    if len(rows) < 2:
        return None
    number, label = (max if direction > 0 else min)(rows, key=lambda row: row[0])
    return label


def extract_answer(unit: Evidence, question: str, lines: Sequence[OcrLine] = ()) -> str:
    """The answer the evidence gives: a value, a table cell, or the whole evidence line."""
    text = unit.text.strip()
    form = question_form(question)
    if form.superlative and not form.quantity:
        label = _superlative_row(lines or unit.lines, question, form.superlative)
        if label:
            return label
    if form.quantity or form.time:
        values = [v for v in values_in(text) if not _asked(v, question)]
        values = [v for v in values if form.wants(v)] or [v for v in values if not v.is_year or form.time] or values
        if len(values) == 1:
            return values[0].text
        if values:
            chosen = _column_header_value(unit, values, lines, question) or _nearest_value(text, values, question)
            return chosen.text
    return text


def _clean(text: str) -> str:
    """OCR text inside our reply must not open or close an action tag."""
    return text.replace("<", "(").replace(">", ")").replace('"', "'")


class RuleBasedBackend:
    """The CPU stand-in policy (see the module doc): search → zoom on the evidence → answer from the crop.

    `embedder`: "minilm" (the bundled all-MiniLM-L6-v2, loaded on first use), a model name or path for
    `SentenceEmbedder`, an object with `embed_queries(texts)`, or None for term overlap only.
    `lang`: OCR languages (tesseract spec or "auto"; default env VRAG_OCR_LANG, else "auto").
    """

    description = DESCRIPTION

    def __init__(self, padding: int = 40, lang: str | None = None, max_searches: int = 2,
                 embedder: Any | None = "minilm"):
        # one tesseract process per core at most: more only makes every request slower
        self.max_concurrency = max(1, os.cpu_count() or 1)
        self.padding = padding
        self.lang = lang
        self.max_searches = max_searches  # the question, then one reformulation
        self._embedder_spec = embedder
        self._scorer: LineScorer | None = None
        self._lock = threading.Lock()

    @property
    def scorer(self) -> LineScorer:
        """Built on first use, so importing and constructing stay cheap (no torch until a page is read)."""
        with self._lock:
            if self._scorer is None:
                spec = self._embedder_spec
                if isinstance(spec, str):
                    from search_engine.embedders.text import SentenceEmbedder

                    spec = SentenceEmbedder(spec, device="cpu")
                self._scorer = LineScorer(spec)
            return self._scorer

    def generate(self, messages: list[ChatMessage], params: GenerationParams) -> Generation:
        return _limit(self.decide(messages), messages, params)

    def decide(self, messages: Sequence[ChatMessage]) -> str:
        """The next reply for this conversation (stateless: everything is in the messages)."""
        question = question_of(messages)
        assistant = [m for m in messages if m.role == "assistant"]
        searches = sum(1 for m in assistant if _SEARCH.search(m.text()))
        last_assistant = assistant[-1].text() if assistant else ""
        last_user = messages[-1] if messages and messages[-1].role == "user" else None
        images = last_user.image_parts() if last_user else []

        if not images:
            seen_image = any(m.image_parts() for m in messages if m.role == "user")
            if not seen_image and searches == 0:
                return f"<think>I need to find a page that answers this.</think><search>{question}</search>"
            if last_user is not None and "final answer" in last_user.text().lower():
                return f"<think>I must answer now and have nothing reliable.</think><answer>{NOT_FOUND}</answer>"
            return self._give_up(question, searches)

        image = images[-1].image()
        lines = self.read(image)
        ranked = self.scorer.rank(question, candidate_units(lines))
        if _BBOX.search(last_assistant):  # this image is the crop we asked for
            if ranked:
                unit = ranked[0]
            else:
                quoted = _quoted_line(last_assistant)
                if not quoted:
                    return f"<think>The zoomed region does not say.</think><answer>{NOT_FOUND}</answer>"
                unit = Evidence([OcrLine(quoted, (0, 0, image.width, image.height))])
            text = _clean(unit.text)
            answer = _clean(extract_answer(unit, question, lines))
            return f'<think>The zoomed region reads "{text}".</think><answer>{answer}</answer>'
        if not ranked:
            return self._give_up(question, searches)
        form = question_form(question)
        if form.kind and searches < self.max_searches and not any(
                form.wants(v) for u in ranked[:3] for v in values_in(u.text) if not _asked(v, question)):
            return self._give_up(question, searches)  # no value of the kind asked for on this page: look further
        unit = ranked[0]
        x1, y1, x2, y2 = self._zoom_box(unit, lines, question)
        p = self.padding
        box = [max(0, x1 - p), max(0, y1 - p), min(image.width, x2 + p), min(image.height, y2 + p)]
        return (f'<think>The line "{_clean(unit.text)}" matches the question; I will zoom in to read it.</think>'
                f"<bbox>[{box[0]}, {box[1]}, {box[2]}, {box[3]}]</bbox>")

    def read(self, image) -> list[OcrLine]:
        """OCR lines of the image as sent, and of a copy enlarged to ~2,500 px (small print, a table in
        a corner of a page, reads at all only then; large print reads worse), keeping the reading with
        more confidently read text."""
        readings = [ocr_lines(image, self.lang)]
        scale = min(3.0, 2500 / max(image.size))
        if scale >= 1.5:
            readings.append(ocr_lines(image, self.lang, scale=scale))
        return max(readings, key=_confident_chars)

    def _zoom_box(self, unit: Evidence, lines: Sequence[OcrLine], question: str) -> tuple[int, int, int, int]:
        """The evidence's box; for a superlative question the whole label/value table around it, and for
        a table row with several values the column header the question names, so the crop holds them."""
        box = unit.box
        form = question_form(question)
        related: list[OcrLine] = []
        if unit.context is not None:  # a table row: zoom on the whole table, header to last row
            related = table_block(unit.lines[0], sorted(lines, key=lambda line: (line.box[1], line.box[0])))
        if form.superlative and not form.quantity:
            height = max(1, box[3] - box[1])
            related = [line for line in lines if len([v for v in values_in(line.text) if not v.is_year]) == 1
                       and abs(line.box[0] - box[0]) <= 3 * height and abs(line.box[1] - box[1]) <= 12 * height]
        values = [v for v in values_in(unit.text) if not _asked(v, question)]
        if (form.quantity or form.time) and len(values) > 1 and len(unit.lines) == 1:
            terms = set(content_terms(question)) | {w for w in words_of(question) if w.isdigit()}
            headers = [line for line in lines if line.box[3] <= box[1]
                       and {_stem(x) for x in words_of(line.text)} & terms]
            if headers:
                related.append(max(headers, key=lambda line: line.box[1]))
        for line in related:
            box = (min(box[0], line.box[0]), min(box[1], line.box[1]), max(box[2], line.box[2]),
                   max(box[3], line.box[3]))
        return box

    def _give_up(self, question: str, searches: int) -> str:
        query = " ".join(content_terms_for_search(question))
        if searches < self.max_searches and query:
            return f"<think>Nothing useful yet; the key words may find another page.</think><search>{query}</search>"
        return f"<think>The pages I saw do not answer this.</think><answer>{NOT_FOUND}</answer>"


def content_terms_for_search(question: str) -> list[str]:
    """The question's key words for a reformulated search (unstemmed, so BM25 matches them as printed)."""
    words = [w for w in words_of(question) if w not in STOPWORDS]
    words += [run for run in _CJK_RUN.findall(question)]
    return list(dict.fromkeys(words))


def _confident_chars(lines: Sequence[OcrLine]) -> int:
    """How much text a reading got right, roughly: characters of lines read with confidence >= 60."""
    return sum(len(line.text) for line in lines if line.confidence >= 60)


def _quoted_line(reply: str) -> str:
    """The line our previous turn chose, when OCR of the crop finds nothing matching (a tight crop reads worse)."""
    match = _QUOTED_LINE.search(reply)
    return match.group(1) if match else ""
