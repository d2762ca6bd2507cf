"""Words of a question or a page, language-general: words of an alphabet (lightly stemmed) and CJK character bigrams.

One place for the term helpers both CPU stand-ins use (the VRAG reader and the VimRAG policy). CJK
text is matched with the overlapping character bigrams of `search_engine.lexical` (no dictionary, so
any name a segmenter has never seen still matches); words of other alphabets are folded as BM25 folds them
(`search_engine.lexical.fold_text`: case, accents, ligatures: "Arrêté" is "arrete"), stripped of
punctuation (numbers such as 7.4, 1,870 or 47% stay whole) and folded for plural/verb -s.
"""
from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher

from search_engine.lexical import CJK_CHARS, CJK_RUN, OTHER_LANGUAGE_FUNCTION_WORDS, cjk_bigrams, fold_text

STOPWORDS = frozenset(
    "a about according after all also am an and any are as at be been being before but by can could did do does "
    "doing during each for from get got had has have having he her here his how i if in into is it its me much many "
    "my no not of on or our over she should so some than that the their them then there these they this those to "
    "under up us was we were what when where which while who whom whose why will with would you your".split()
) | OTHER_LANGUAGE_FUNCTION_WORDS  # a German, Dutch, French, Spanish, Italian or Portuguese question's too
# a word of an alphabet (letters and digits, not CJK), with what joins a number's or a word's parts
_WORD = re.compile(f"[^\\W_{CJK_CHARS}]+(?:[.,'’%][^\\W_{CJK_CHARS}%]+)*%?")


# Typographic ligatures (U+FB00–FB06: ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ) as a PDF's text layer often keeps them: "ﬂowering",
# "Paciﬁc". They are one glyph for two or three letters; unfolded, a word that holds one matches nothing.
_LIGATURES = str.maketrans({chr(c): unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)})


def fold(text: str) -> str:
    """The text with typographic ligatures written out as their letters ("ﬂowering" → "flowering")."""
    return text.translate(_LIGATURES)


def words_of(text: str) -> list[str]:
    """Folded words (`fold_text`: lowercase, no accents) without punctuation (numbers such as 7.4, 1,870 or
    47% stay whole), of every alphabet but CJK (see `content_terms`)."""
    return _WORD.findall(fold_text(text))


def word_spans(text: str) -> list[tuple[int, int, str]]:
    """Each word of `words_of` with its start and end in `text` as given (not folded)."""
    return [(m.start(), m.end(), fold_text(m.group(0))) for m in _WORD.finditer(text)]


# English month names as tables abbreviate them ("Aug-2015" for "August 2015")
_MONTHS = {m: m[:3] for m in "january february march april june july august september october november "
           "december".split()} | {"sept": "sep"}
MONTH_TERMS = frozenset(_MONTHS.values())  # a month as `content_terms` gives it, named in full or abbreviated
# The abbreviations a table's header or a form's label prints for a word a question spells out ("Pax" for
# passengers, "Qty" for quantity, "Intl" for international), each one word with one meaning in any trade.
# By hand: the published lists are of one trade (aviation, medicine) or hold abbreviations with several
# meanings ("min", "rev", "est", "no", "HR", "wt", "TTL") that would join words a question keeps apart.
_ABBREVIATIONS = {
    "pax": "passenger", "qty": "quantity", "amt": "amount", "avg": "average", "pct": "percent",
    "yr": "year", "yrs": "year", "hrs": "hour", "wk": "week", "wks": "week", "mth": "month",
    "intl": "international", "int'l": "international", "govt": "government", "dept": "department",
    "mfr": "manufacturer", "mfg": "manufacturing", "approx": "approximately", "acct": "account",
}


# A year as a financial table heads its column: estimated, actual, forecast or projected ("2024E", "2023A")
_MARKED_YEAR = re.compile(r"(?:19|20)\d\d[eafp]")


def stem(word: str) -> str:
    """Crude plural/verb -s folding, so "produces" matches "produce" and "plants" matches "plant"; a
    month's name folds to its abbreviation, a header's abbreviation to its word ("Pax" to "passenger"), a
    year column's mark away ("2024E" to "2024")."""
    if word in _MONTHS:
        return _MONTHS[word]
    if word in _ABBREVIATIONS:
        return _ABBREVIATIONS[word]
    if _MARKED_YEAR.fullmatch(word):  # a forecast's or a report's year column: "2024E" is the year 2024
        return word[:4]
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
            seen.setdefault(stem(word), None)
    for run in CJK_RUN.findall(text):
        for gram in cjk_bigrams(run):
            seen.setdefault(gram, None)
    return list(seen)


def search_terms(question: str) -> list[str]:
    """The question's key words for a reformulated search (unstemmed, so BM25 matches them as printed)."""
    words = [w for w in words_of(question) if w not in STOPWORDS]
    words += CJK_RUN.findall(question)
    return list(dict.fromkeys(words))


def fuzzy_in(term: str, terms: set[str]) -> bool:
    """A term is found when present, or for words of 5+ letters when one OCR error away ("Roverside")."""
    if term in terms:
        return True
    if len(term) < 5 or not term.isalpha():
        return False
    return any(abs(len(t) - len(term)) <= 2 and SequenceMatcher(None, term, t).ratio() >= 0.8 for t in terms)
