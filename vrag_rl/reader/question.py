"""What kind of answer a question wants, from its form words (English and Chinese), never its topic.

The cues are general language — "how many", "which", "when", 多少, 哪个, "most", "figure" — not the
vocabulary of any document collection: they decide the *kind* of span to extract (a value, a date,
a name, a table row's label, a figure's caption), while what the span is about comes from the page.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from search_engine.lexical import has_cjk
from vrag_rl.reader.terms import stem, words_of
from vrag_rl.reader.values import Value

_QUANTITY_PHRASE = re.compile(r"\bhow (many|much|long|far|old|big|large|high|tall|fast|heavy|often|wide|deep)\b|"
                              r"多少|几[个项家次年天人种台倍]|多大|多高|多长|多远|多重|比例|占比|百分之|数量|规模|"
                              # the same form words in the other languages the reader meets (fr, es, de, nl, ko, ja,
                              # ar, he, ru)
                              r"\bcombien\b|\bcu[aá]nt[oa]s?\b|\bwie (viele?|hoch|lang|gro[sß])\b|\bhoeveel\b|"
                              r"몇|얼마|며칠|いくら|いくつ|何[個人回年日件台枚本]|\bكم\b|\bכמה\b|\bсколько\b")
QUANTITY_NOUNS = frozenset(
    "amount average budget capacity cost count debt dividend earnings fee growth height income length level "
    "margin number output pay percent percentage population power price profit proportion rate ratio rent revenue "
    "salary sales score share size speed spending sum tax temperature total turnover value volume wage weight "
    "width yield dose duration frequency distance".split()
)
PERCENT_NOUNS = frozenset("share percentage percent proportion rate ratio".split())
MONEY_NOUNS = frozenset("revenue income profit cost price sales budget salary fee spending turnover dividend earnings "
                        "wage rent tax debt pay".split())
_PERCENT_CJK = re.compile(r"占比|比例|百分|比率|份额")
_MONEY_CJK = re.compile(r"收入|营收|利润|成本|价格|费用|预算|工资|股息")
# "when" asks for a time at the start of a question or of its clause ("In 2020, when did ..."); inside
# one it is a condition ("what is the result when only the user password is set")
_TIME_PHRASE = re.compile(r"(?:^|[,;:]\s*)(?:since |until )?when\b|"
                          r"\b(what year|which year|what date|which date|in what year|what month)\b|"
                          r"哪一?年|何时|什么时候|日期|"
                          r"\bquand\b|\bquelle (?:date|ann[ée]e)\b|\bcu[aá]ndo\b|\bqu[eé] (?:fecha|a[nñ]o)\b|"
                          r"\bwann\b|\bwelche[mr]? (?:datum|jahr)\b|\bwanneer\b|\bwelk jaar\b|언제|날짜|いつ|"
                          # "quelle est la date", "welches Datum hat", "cuál es la fecha de"
                          r"^\W*(?:quel(?:le)?|cu[aá]l|welche[smr]?|welke?|wat|was|qu[eé]|qual|quale)\b[^?]{0,16}"
                          r"\b(?:date|datum|fecha|jahr|jaar|a[nñ]o|ann[ée]e)\b")
# "When X happened, what speed was set?": the "when" clause sets the scene; the question asks what follows it
_WHEN_CLAUSE = re.compile(r"^\s*when\b[^?,;]*,\s*(?=(?:what|which|who|how|where)\b)", re.I)
_ENTITY_START = re.compile(r"^\s*(which|who|whom|whose|where)\b|\b(which|who|whom|whose)\b|"
                           r"哪一?[个些家里位所种类款条项列行部本名]|谁")
_SUPERLATIVE_MAX = re.compile(r"\b(most|largest|highest|biggest|greatest|top|maximum|best|leading)\b|"
                              r"最(多|大|高|常|主要)")
_SUPERLATIVE_MIN = re.compile(r"\b(least|lowest|smallest|fewest|minimum|worst)\b|最(少|小|低)")
_FIGURE = re.compile(r"\b(figure|fig|chart|graph|diagram|plot|picture|image|illustration|map|legend|axis)\b|"
                     r"图|图表|示意")


def is_superlative(word: str) -> bool:
    """One word that ranks ("largest", "least"): it describes a thing by its rank and never names it."""
    return bool(_SUPERLATIVE_MAX.fullmatch(word.lower()) or _SUPERLATIVE_MIN.fullmatch(word.lower()))


_REASON = re.compile(r"^\s*(why|how)\b|为什么|为何|如何|怎么", re.IGNORECASE)  # a reason or a manner, not an amount
_YES_NO = re.compile(r"^\s*(is|are|was|were|does|do|did|can|could|has|have|had|will|should)\b", re.IGNORECASE)


@dataclass(frozen=True)
class QuestionForm:
    """What kind of answer a question wants."""

    quantity: bool  # a number ("how many", "what share", 多少)
    time: bool  # a year or date
    superlative: int  # +1 "most/largest", -1 "least/smallest", 0 neither
    entity: bool  # a name ("which", "who", "where")
    kind: str = ""  # "percent" or "money" when the question's noun says so
    figure: bool = False  # the question points at a figure or chart
    yes_no: bool = False  # "Is/Does/Did ...?"
    asks_amount: bool = False  # "how many / how much / 多少": a number for sure, not only a noun that may name one
    identifier: str = ""  # "what is the invoice number" → "invoice": a code printed after that word, not an amount

    @property
    def needs_number(self) -> bool:
        """A value is required: a date for "when", a number for "how many". A question that only names a
        quantity noun ("what is the default value of fieldFlags") may be answered by a word ("combo")."""
        return self.time or self.asks_amount

    @property
    def wants_value(self) -> bool:
        return self.quantity or self.time

    def wants(self, value: Value) -> bool:
        """Whether a value is of the kind asked for (any non-year number when no kind is known)."""
        if self.time:
            return value.is_year or value.is_date
        if value.is_year or value.is_date:
            return False
        if self.kind == "percent":
            return value.is_percent
        if self.kind == "money":
            return value.is_money
        return True

    def compatible(self, value: Value) -> bool:
        """Whether a value could answer at all: a date for "when", else any number whose own unit does
        not contradict the kind asked (a table cell "27" under "in USD millions" answers "what income")."""
        if self.time:
            return value.is_year or value.is_date
        if value.is_year or value.is_date:
            return False
        if self.kind == "percent":
            return not value.is_money
        if self.kind == "money":
            return not value.is_percent
        return True


# A question about how much a quantity changed: a report prints the change as an amount or as a rate ("(5)%",
# "up 10%"), whatever the quantity's own kind ("income" is money, its change may be a percentage)
_CHANGE = re.compile(r"\bby how much\b|\bhow much (?:did|has|have|does|do|will|would)\b.*\b(?:chang|increas|decreas|"
                     r"ris|rose|fall|fell|grow|grew|declin|drop|jump|gain|los)", re.IGNORECASE)


_X_AXIS = re.compile(r"\b(x|horizontal|category|categories)[- ]?axis\b|横轴|横坐标|[xX]\s?轴", re.I)
_Y_AXIS = re.compile(r"\b(y|vertical)[- ]?axis\b|纵轴|纵坐标|[yY]\s?轴", re.I)
_VALUE_AXIS = re.compile(r"\bvalue[- ]?axis\b|\bticks?\b|\bscale\b|刻度", re.I)
_AXIS = re.compile(r"\baxis\b|\baxes\b|坐标轴", re.I)
_CHART_TITLE = re.compile(r"\btitle\b|标题", re.I)
_LEGEND = re.compile(r"\blegends?\b|图例", re.I)
_COUNT = re.compile(r"\bhow many\b|多少个|几个", re.I)
_COUNT_NOUN = re.compile(r"\bnumber\b|数量", re.I)


def asks_count(question: str) -> bool:
    """Whether the question asks for a count: "how many", "the number of", "the total flight number", 多少个."""
    return bool(_COUNT.search(question) or _COUNT_NOUN.search(question))


def chart_part(question: str) -> str:
    """Which part of a chart the question names, by the general vocabulary of charts: "x" / "y" (an
    axis named by letter or direction), "value" (the value axis, its ticks or scale), "axis" (an axis,
    unnamed), "legend" (its legend), "title" (the chart's title), "count" ("how many"), or "" for none."""
    if _X_AXIS.search(question):
        return "x"
    if _Y_AXIS.search(question):
        return "y"
    if _VALUE_AXIS.search(question):
        return "value"
    if _AXIS.search(question):
        return "axis"
    if _LEGEND.search(question):
        return "legend"
    if _CHART_TITLE.search(question):
        return "title"
    if _COUNT.search(question):
        return "count"
    return ""


_PART_NAME = re.compile(r"\b(label(?:l?ed)?|title[sd]?|name[sd]?|called)\b|标题|名称|标签|标注", re.I)


def asks_axis_title(question: str) -> bool:
    """Whether the question asks what an axis is labelled ("what is the x-axis label of Fig. 7", 纵轴的标题):
    only the chart's axis title answers that, never its caption or a sentence about the chart."""
    return chart_part(question) in ("x", "y") and bool(_PART_NAME.search(question))


# Verbs by which a question quotes the document rather than saying what it is about ("which plant does the
# lecture *call* the most primitive", "which software does the slide *mention*", "what is *listed* last").
# General English, like the stopwords: a page rarely prints them, and a term the page does not print weighs
# most (`relevance.TermWeights`), so counted they would make a page that answers look like one that does not.
PHRASING_VERBS = frozenset(
    "call called calling describe described describes mention mentioned mentions stated say says said give gives "
    "given gave list listed lists name named names refer refers referred note noted notes according "
    # verbs of where the page puts it ("is printed on its receipt", "is written on the form"); not those of how
    # a picture shows it ("drawn with open circles"): the text does not say that, and the reader should not guess
    "print printed prints written reported".split()
)


def says_superlative(text: str, sign: int) -> bool:
    """Whether a text states a superlative of the sign asked (+1 "largest", "best", 最高; -1 "least")."""
    return bool((_SUPERLATIVE_MAX if sign > 0 else _SUPERLATIVE_MIN).search(text.lower()))


def superlative_phrase(question: str) -> str:
    """The question's superlative with the word after it ("largest cities"), lowercased; "" for none."""
    q = question.lower()
    marker = _SUPERLATIVE_MAX.search(q) or _SUPERLATIVE_MIN.search(q)
    if marker is None:
        return ""
    following = re.match(r"\s*([^\W\d_]+)", q[marker.end():])
    return f"{marker.group(0)} {following.group(1)}" if following and not has_cjk(marker.group(0)) else marker.group(0)


def names_superlative(question: str, titles: str) -> bool:
    """Whether the page's titles or captions print the question's superlative phrase ("Table 1: Largest
    cities in the world" for "the population of Peking in the largest cities table"): there it is the
    name of what the question points at, not what it asks for (the largest one)."""
    phrase = superlative_phrase(question)
    if not phrase or not titles:
        return False
    q = question.lower()
    marker = _SUPERLATIVE_MAX.search(q) or _SUPERLATIVE_MIN.search(q)
    if marker is not None and _ASKS_WHAT_FOLLOWS.search(q[:marker.start()]):
        return False  # "what is the most used app": the superlative is what is asked, whatever the page calls it
    printed = " ".join(stem(w) for w in words_of(titles)) if " " in phrase else titles.lower()
    wanted = " ".join(stem(w) for w in phrase.split()) if " " in phrase else phrase
    return re.search(r"(?<![\w])" + re.escape(wanted) + r"(?![\w])", printed) is not None


# The superlative is the question's object ("what is the most used app", "which city has the largest
# population"), not a name inside one of its phrases ("the population of Peking in the largest cities table")
_ASKS_WHAT_FOLLOWS = re.compile(r"^\s*(?:what|which)\b(?:\s+[\w’'-]+){0,3}?\s+"
                                r"(?:is|are|was|were|has|have|had)\s+the\s*$")
_WHICH_LATIN = re.compile(r"\b(?:which|what)\s+((?:[\w’'-]+\s+){0,3}[\w’'-]+)", re.I)
_WHICH_CJK = re.compile(r"哪一?[个些家里位所种类款条项列行部本名]([\u4e00-\u9fff]{1,2})|什么([\u4e00-\u9fff]{1,2})")


def which_head(question: str) -> list[str]:
    """The noun a "which/what X" question asks about, as the document would print it after the answer's
    own name ("which line" → the page's "Wallace line", "which package" → "the appendixnumberbeamer
    package", 哪所大学 → 哈尔滨工业大学): the words after "which"/"what" up to the first function word,
    last first (the head noun ends an English noun phrase); for Chinese the one or two characters after
    哪 and its measure word (or after 什么). [] when the question has no such phrase."""
    from vrag_rl.reader.terms import STOPWORDS  # (terms imports nothing from here: no cycle)

    for match in _WHICH_LATIN.finditer(question):
        words = []
        for word in match.group(1).split():
            if word.lower() in STOPWORDS:
                break
            words.append(word.lower().strip("’'"))
        if words:
            return list(reversed(words))
    cjk = _WHICH_CJK.search(question)
    if cjk:
        return [cjk.group(1) or cjk.group(2)]
    return []


# The nouns of a time question that only say a time is asked ("what date", 日期是哪一天): a page prints the
# date, rarely the word "date" beside it (a title slide's "2021 年 11 月 15 日").
_TIME_NOUNS = frozenset("date year day month time 日期 时间 年份 天".split())


def form_words(question: str) -> set[str]:
    """The question's words that say what kind of answer it wants ("most", "largest", a time question's
    "date"), not its topic."""
    words = {w for w in re.findall(r"[a-z]+", question.lower()) if _SUPERLATIVE_MAX.fullmatch(w)
             or _SUPERLATIVE_MIN.fullmatch(w)}
    if _TIME_PHRASE.search(question.lower()):
        from vrag_rl.reader.terms import content_terms

        words |= {t for t in content_terms(question) if t in _TIME_NOUNS}
    return words


# Words that say how a number is counted, not what it identifies: "the total number of", "the average number".
_COUNTING_MODIFIERS = frozenset("total average mean median overall combined maximum minimum max min approximate "
                                "estimated exact actual expected net gross annual daily weekly monthly yearly "
                                "same final new current".split())


def identifier_noun(q: str) -> str:
    """The noun before "number" where the number names an identifier — "the invoice number" → "invoice",
    "CAS number" → "cas", "phone number" → "phone", also before "of" ("the CAS number of paclitaxel") —
    else "". A page prints a code there ("87B37C9-0152", "33069-62-4"), not an amount. "The number of",
    "the total number", "the total flight number", "the largest number" are counts."""
    from vrag_rl.reader.terms import STOPWORDS  # (terms imports nothing from here: no cycle)

    words = words_of(q)
    for k, (before, word) in enumerate(zip(words, words[1:])):
        counted = k > 0 and (words[k - 1] in _COUNTING_MODIFIERS or is_superlative(words[k - 1]))
        if word == "number" and before not in STOPWORDS and before not in _COUNTING_MODIFIERS and not counted \
                and stem(before) not in QUANTITY_NOUNS and not is_superlative(before) and not before.isdigit():
            return before  # ("the total flight number", "the highest page number": a count, a modifier away)
    return ""


# What a question quotes ('Two isolated axes', "Net sales", 「…」) and the caption it gives after a figure's or
# a table's label ("Fig. 7 (maximum bit rates for VCR scanning)"): names of things, not the question's form
_QUOTED = re.compile(r"(?<!\w)'[^']{2,}'(?!\w)|\"[^\"]{2,}\"|‘[^’]{2,}’|“[^”]{2,}”|「[^」]+」|『[^』]+』")
_LABEL_CAPTION = re.compile(r"\b((?:fig(?:ure)?|table|tab)\.?\s*[\w.\-–]+)\s*\([^()]*\)", re.IGNORECASE)


def without_names(question: str) -> str:
    """The question without the names it quotes and the captions it gives (see _QUOTED, _LABEL_CAPTION):
    "maximum" in "Fig. 7 (maximum bit rates …)" names the figure and asks for no extreme."""
    return _QUOTED.sub(" ", _LABEL_CAPTION.sub(r"\1", question))


def question_form(question: str, titles: str = "") -> QuestionForm:
    """Classify the question by its form words (English and Chinese), never by its topic; what it quotes or
    gives as a caption names a thing and is left out (`without_names`). `titles`: the page's headings and
    captions, which may print the question's superlative as a name (`names_superlative`)."""
    q = without_names(question).lower()
    entity = bool(_ENTITY_START.search(q))
    superlative = 1 if _SUPERLATIVE_MAX.search(q) else -1 if _SUPERLATIVE_MIN.search(q) else 0
    if superlative and names_superlative(question, titles):
        superlative = 0
    if superlative and re.match(r"^\s*what\b", q) and not _QUANTITY_PHRASE.search(q):
        # "what is the most used app": a name, unless it asks for the amount ("what share ... most", "what is
        # the maximum value / the highest price": the superlative's own noun is a quantity)
        marker = (_SUPERLATIVE_MAX if superlative > 0 else _SUPERLATIVE_MIN).search(q)
        measured = marker is not None and any(stem(w) in QUANTITY_NOUNS for w in words_of(q[marker.end():])[:2])
        entity = entity or not (measured or any(stem(w) in QUANTITY_NOUNS for w in words_of(q.split(" the ", 1)[0])))
    identifier = identifier_noun(q)
    quantity = bool(_QUANTITY_PHRASE.search(q)) or (not entity and not _REASON.match(q) and any(
        stem(w) in QUANTITY_NOUNS or w in QUANTITY_NOUNS for w in words_of(q) if not (identifier and w == "number")))
    clause = _WHEN_CLAUSE.match(q)
    time = bool(_TIME_PHRASE.search(q[clause.end():] if clause else q))
    if time:
        quantity = quantity and bool(_QUANTITY_PHRASE.search(q))
    kind = ""
    if quantity:  # the first noun that names a kind decides ("dividend per share" is money)
        for word in words_of(q):
            if word in PERCENT_NOUNS or stem(word) in PERCENT_NOUNS:
                kind = "percent"
                break
            if word in MONEY_NOUNS or stem(word) in MONEY_NOUNS:
                kind = "money"
                break
        if not kind and has_cjk(q):
            kind = "percent" if _PERCENT_CJK.search(q) else "money" if _MONEY_CJK.search(q) else ""
        if kind == "money" and _CHANGE.search(q):  # "by how much did income change": by an amount or a rate
            kind = ""
    return QuestionForm(quantity=quantity, time=time, superlative=superlative, entity=entity, kind=kind,
                        figure=bool(_FIGURE.search(q)), yes_no=bool(_YES_NO.match(q)),
                        asks_amount=bool(_QUANTITY_PHRASE.search(q)), identifier="" if time or quantity else identifier)

