"""Values printed in text: a number with its currency, scale and unit, or a date.

Why by hand: no library in the stack extracts "$12.5 million", "410 MW", "10万台" or "14 February 2024"
as one value with its unit while keeping the printed text (quantulum-style parsers normalise it away,
and the answer must be quoted as printed).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# units of measure as data sheets, manuals and labels print them (frequency, voltage, current, charge, energy
# density, data rate, dose, pressure, sound level), before the shorter units they begin with ("mg/m2" before "mg")
_UNITS = ("[kmgt]?hz|[kmg]?bit/s|[kmg]b/s|[kmg]?bps|vdc|vac|[mk]?v|amps?|[mk]?ah|ma|ohms?|[kmg]?Ω|dbm|db|dpi|fps|rpm|"
          "psi|wh/kg|wh/l|w/kg|"
          "[km]?pa|mg/m2|mg/m²|mg/kg|µg|μg|mcg|iu|mmol|lbs?|oz|sq ?ft|ft|"
          "%|percent|per ?cent|million|billion|thousand|trillion|mn|bn|k|[kmgt]wh?|[kmgt]w|gbps|mbps|tbps|[kmgt]b|"
          "km|cm|mm|m|kg|mg|g|t|ml|l|tonnes?|tons?|mph|km/h|°c|°f|usd|eur|gbp|cny|rmb|jpy|dollars?|euros?|pounds?|"
          "yuan|yen|years?|months?|weeks?|days?|hours?|minutes?|seconds?|people|persons?|x|times|points?|元|万|亿|"
          "千|百|个|人|年|月|日|天|次|台|家|倍|米|公里|千米|吨")
_VALUE = re.compile(
    r"(?<![A-Za-z0-9_.])(?P<value>(?:[$€£¥]\s?)?[-+\u2212]?\d[\d,]*(?:\.\d+)?(?!\.\d)"  # not "5.3" of "5.3.6"
    r"(?:\s?(?:" + _UNITS + r")(?![a-z]))*)",
    re.IGNORECASE)
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
# The month names of the other languages of Western European documents (French, German, Spanish, Italian,
# Portuguese, Dutch) as a date prints them after its day: "4 mai 2007", "4. März 2020", "4 de mayo de 2007".
_OTHER_MONTHS = ("janvier|f[ée]vrier|mars|avril|mai|juin|juillet|ao[uû]t|septembre|octobre|novembre|d[ée]cembre|"
                 "januar|j[äa]nner|februar|m[äa]rz|maerz|juni|juli|oktober|dezember|"
                 "enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre|octubre|noviembre|"
                 "diciembre|gennaio|febbraio|aprile|maggio|giugno|luglio|settembre|ottobre|dicembre|"
                 "janeiro|fevereiro|mar[çc]o|maio|junho|julho|setembro|outubro|novembro|dezembro|"
                 "januari|februari|maart|mei|augustus")
MONTH_NAMES = _MONTHS + "|" + _OTHER_MONTHS  # a regular expression's alternatives, any of the languages
_DATE = re.compile(
    r"(?<![\w])(?:\d{1,2}(?:st|nd|rd|th|er|\.)?\s+(?:de\s+)?(?:" + MONTH_NAMES +
    r")\.?,?\s+(?:de\s+)?\d{4}|(?:" + _MONTHS + r")\.?\s+\d{1,2},?\s+\d{4}|"
    r"(?:" + MONTH_NAMES + r")\.?\s+\d{4}|\d{4}-\d{2}-\d{2}|\d{1,2}([./])\d{1,2}\1\d{4}|"
    r"\d{4}\s?年\s?\d{1,2}\s?月(?:\s?\d{1,2}\s?日)?|"
    r"(?-i:(?:January|February|March|April|May|June|July|August|September|October|November|December)))(?![\w])",
    re.IGNORECASE)
_YEAR = re.compile(r"^(19|20)\d\d$")
_CURRENCY = re.compile(r"[$€£¥]|usd|eur|gbp|cny|rmb|dollar|euro|pound|yuan|元", re.IGNORECASE)
_PERCENT = re.compile(r"%|percent|per ?cent|百分", re.IGNORECASE)


@dataclass(frozen=True)
class Value:
    """A value printed in a text: its text as printed, where it starts (character offset) and what it is."""

    text: str
    start: int  # character offset in the text
    number: float
    is_year: bool = False
    is_date: bool = False

    @property
    def is_percent(self) -> bool:
        return bool(_PERCENT.search(self.text))

    @property
    def is_money(self) -> bool:
        return bool(_CURRENCY.search(self.text))


# "Figure 2:", "Table 3.", "Fig. 4 -", "Figure 11-5:" at the start of a caption: a reference label, not a value.
_REFERENCE_LABEL = re.compile(r"^\s*[A-Z][a-z]*\.?\s+\d+(?:[.\-–]\d+)*\s*(?:[:\-–—]|\.(?=\s|$))")


# A number whose thousands are set apart by spaces, as French, Arabic, Russian and ISO typesetting print them
# ("1 422", "68 795"): read as one only where it is the whole text (a table's cell), since in a line of cells
# "38 120" may as well be two numbers.
GROUPED_DIGITS = r"\d{1,3}(?:[ \u00a0\u202f]\d{3})+"
SPACE_GROUPED = re.compile(rf"[-+\u2212]?{GROUPED_DIGITS}")


def values_in(text: str) -> list[Value]:
    """Every number in the text with its currency, scale and unit ("$341 million", "410 MW", "12%"),
    and every date ("14 February 2024"), in text order; a number inside a date or a caption's
    reference label ("Figure 2:") is not one, nor a dotted version or section number ("5.3.6", "3.4.2": no
    part of it is an amount). A text that is one number grouped by spaces ("1 422") is
    that number."""
    if SPACE_GROUPED.fullmatch(text.strip()):
        grouped = text.strip()
        return [Value(grouped, text.index(grouped), float(re.sub(r"\D", "", grouped)) * (
            -1 if grouped[0] in "-\u2212" else 1))]
    values: list[Value] = []
    label = _REFERENCE_LABEL.match(text)
    spans: list[tuple[int, int]] = [label.span()] if label else []
    for match in _DATE.finditer(text):
        if any(a <= match.start() < b for a, b in spans):
            continue
        year = re.search(r"\d{4}", match.group(0))
        values.append(Value(match.group(0), match.start(), float(year.group(0)) if year else 0.0, False, True))
        spans.append(match.span())
    for match in _VALUE.finditer(text):
        if any(a <= match.start() < b for a, b in spans):
            continue
        raw = match.group("value").rstrip(" ,")
        number_match = re.search(r"\d[\d,]*(?:\.\d+)?", raw)
        assert number_match is not None, "_VALUE matches a digit, and rstrip(' ,') keeps it"
        digits = number_match.group(0).replace(",", "")
        try:
            number = float(digits)
        except ValueError:
            continue
        values.append(Value(raw, match.start("value"), number, bool(_YEAR.match(raw))))
    return sorted(values, key=lambda v: v.start)


# Counts written as words, as slides and prose print small numbers ("Prosper offers seven transitions",
# "五种强调颜色"): English one to twenty and the tens before a noun (not "one of", a pronoun), and Chinese
# numerals with a measure word.
EN_NUMBER_WORDS = {w: float(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
EN_NUMBER_WORDS.update({w: float(10 * i)
                        for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), start=3)})
# Two to twelve in German, Dutch, French, Spanish, Italian and Portuguese ("drie vooraf gedefinieerde stijlen").
# Not "one" (it is also the article: "ein", "een", "un", "uno") nor the words that are English words too
# ("due", "once", "sept", "doze", "elf", "otto").
OTHER_NUMBER_WORDS = {w: float(i) for words in (
    "zwei drei vier fünf sechs sieben acht neun zehn - zwölf",
    "twee drie vier vijf zes zeven acht negen tien - twaalf",
    "deux trois quatre cinq six - huit neuf dix onze douze",
    "dos tres cuatro cinco seis siete ocho nueve diez - doce",
    "- tre quattro cinque sei sette - nove dieci undici dodici",
    "dois três quatro cinco seis sete oito nove dez onze -",
) for i, w in enumerate(words.split(), start=2) if w != "-"} | {"duas": 2.0}
NUMBER_WORDS = EN_NUMBER_WORDS | OTHER_NUMBER_WORDS  # every spelled count the reader reads
_NUMBER_WORD = re.compile(r"(?<![\w-])(" + "|".join(NUMBER_WORDS) + r")(?=\s+(?!of\b|or\b|and\b|to\b)[^\W\d_])",
                          re.IGNORECASE)
_CJK_DIGITS = {c: float(i) for i, c in enumerate("零一二三四五六七八九")} | {"两": 2.0}
_CJK_NUMBER = re.compile(r"([零一二两三四五六七八九十]{1,3})([个种项家次台位条款类名部本倍年天])")


def cjk_number(numeral: str) -> float | None:
    """一 → 1, 十二 → 12, 二十 → 20, 二十五 → 25 (up to 99)."""
    if "十" not in numeral:
        return _CJK_DIGITS.get(numeral) if len(numeral) == 1 else None
    tens, _, ones = numeral.partition("十")
    if len(tens) > 1 or len(ones) > 1:
        return None
    return 10 * (_CJK_DIGITS.get(tens, 1.0) if tens else 1.0) + (_CJK_DIGITS.get(ones, 0.0) if ones else 0.0)


def number_words_in(text: str) -> list[Value]:
    """Counts written as words in the text ("seven transitions" → seven, "五种" → 五种), as values."""
    out = [Value(m.group(1), m.start(1), NUMBER_WORDS[m.group(1).lower()]) for m in _NUMBER_WORD.finditer(text)]
    for match in _CJK_NUMBER.finditer(text):
        number = cjk_number(match.group(1))
        if number is not None:
            out.append(Value(match.group(0), match.start(), number))
    return out


def number_of(text: str) -> float | None:
    """The first number in a cell or label ("1,240" → 1240.0, "47%" → 47.0, "−1" → -1.0: typeset
    mathematics prints the minus sign U+2212, not a hyphen; "1 422", grouped by spaces, → 1422.0), None when it
    has none."""
    if SPACE_GROUPED.fullmatch(text.strip()):
        return values_in(text)[0].number
    match = re.search(r"[-+\u2212]?\d[\d,]*(?:\.\d+)?", text)
    if not match:
        return None
    try:
        return float(match.group(0).replace(",", "").replace("\u2212", "-"))
    except ValueError:
        return None


def named_in(value: Value, question: str) -> bool:
    """The question itself names this number ("in 2023"): it is a condition, not the answer."""
    number_match = re.search(r"\d[\d,.]*", value.text)  # None for a count written as a word ("seven")
    digits = re.sub(r"[^\d.]", "", number_match.group(0)).strip(".") if number_match else ""
    if not digits:
        return False
    return re.search(r"(?<![\d.])" + re.escape(digits) + r"(?![\d.])",
                     re.sub(r"(?<=\d),(?=\d)", "", question)) is not None
