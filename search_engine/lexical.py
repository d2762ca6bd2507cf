"""BM25 over page text: exact-term matching (names, numbers, codes) that dense embedders blur.

Tokens are lowercased words of any alphabet (Latin, Greek, Cyrillic, Arabic, Hebrew...; accents and other
combining marks dropped, so "arrêté" meets "arrete" and an OCR'd "Größe" its typed twin) and numbers, and
for Chinese, Japanese and Korean text (written without spaces) overlapping character bigrams — the scheme
of Lucene's CJKAnalyzer, which needs no dictionary and matches any word of two or more characters,
including names a segmenter such as jieba has never seen. A lone CJK character between non-CJK text is
kept as a unigram. The same tokenizer serves the rule-based stand-in policy's line matching
(`vrag_rl.serving.policy_server.rule_based`).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import numpy as np

# Han (incl. extension A), kana, Hangul syllables: scripts written without spaces between words.
CJK_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
# a word of an alphabet (letters and digits, not CJK) with the decimal or thousands groups of a number
_TOKEN = re.compile(f"[^\\W_{CJK_CHARS}]+(?:[.,][0-9]+)*|[{CJK_CHARS}]+")
STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have how in is it its of on or the this to was "
    "were what when where which who why with according".split()
)
# Chinese function words and question words: dropped before bigramming so that "什么" or "多少"
# in a question does not match every page that happens to contain them.
CJK_STOP_PHRASES = ("什么", "哪些", "哪个", "哪一", "多少", "如何", "怎么", "怎样", "为什么", "是否", "是多少", "请问")
CJK_STOP_CHARS = frozenset("的了是在和与及或其吗呢么哪吧啊这那")


def has_cjk(text: str) -> bool:
    """Whether any character is Chinese, Japanese or Korean (decides tokenisation and OCR fallbacks)."""
    return bool(CJK_RUN.search(text))


def cjk_bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of one CJK run; question and function words split the run (no
    bigram spans them) and a lone character between them stays as a unigram."""
    for phrase in CJK_STOP_PHRASES:
        run = run.replace(phrase, " ")
    run = "".join(" " if c in CJK_STOP_CHARS else c for c in run)
    tokens: list[str] = []
    for part in run.split():
        if len(part) == 1:
            tokens.append(part)
        tokens.extend(part[i : i + 2] for i in range(len(part) - 1))
    return tokens


def fold_text(text: str) -> str:
    """`text` case-folded ("Größe" → "grösse"), in compatibility form (ligatures "ﬁ" as "fi", Arabic
    presentation forms as letters, full-width digits as digits) and without combining marks outside CJK
    ("é" → "e", Arabic vowel signs dropped): one spelling for the ways PDFs, OCR and people type the same
    word. Why by hand: the Unicode normalisation is the standard library's; which marks to drop, and that
    Hangul syllables must not be decomposed into letters, is a choice of this tokenizer."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if text.isascii():
        return text
    out = []
    for part in re.split(f"([{CJK_CHARS}]+)", text):
        if part and not CJK_RUN.fullmatch(part):
            part = "".join(c for c in unicodedata.normalize("NFKD", part) if not unicodedata.combining(c))
        out.append(part)
    return "".join(out)


def tokenize(text: str) -> list[str]:
    """Lowercased words (any alphabet, marks folded: `fold_text`) and numbers without stopwords, plus CJK
    character bigrams, in text order."""
    tokens: list[str] = []
    for token in _TOKEN.findall(fold_text(text)):
        if CJK_RUN.fullmatch(token):
            tokens.extend(cjk_bigrams(token))
        elif token not in STOPWORDS:
            tokens.append(token)
    return tokens


DOCUMENT_HEAD_WORDS = 24  # the first words of a document's first page: its title and authors


def with_document_head(texts: Sequence[str], doc_ids: Sequence[str], page_numbers: Sequence[int]) -> list[str]:
    """Each page's text followed by its document's head (the first DOCUMENT_HEAD_WORDS words of its first
    page), for lexical scoring: a question names its document ("in Chang and Zakhor's paper", "the NREL
    report") and the page it asks about. Printed only on the title page, the document's name makes that page
    win every question about the document; printed on all its pages, the name finds the document and the
    rest of the question the page (the title field of field-weighted retrieval). The first page, which prints
    its head already, and documents of one page are left as they are: a second copy would count the title twice
    there and give the title page back the lead on every question that names the document."""
    first: dict[str, tuple[int, str]] = {}
    count: dict[str, int] = {}
    for text, doc, number in zip(texts, doc_ids, page_numbers):
        count[doc] = count.get(doc, 0) + 1
        if doc not in first or number < first[doc][0]:
            first[doc] = (number, text)
    heads = {doc: " ".join(text.split()[:DOCUMENT_HEAD_WORDS]) for doc, (_, text) in first.items()}
    return [f"{text} {heads[doc]}" if count[doc] > 1 and heads[doc] and number != first[doc][0] else text
            for text, doc, number in zip(texts, doc_ids, page_numbers)]


class BM25Channel:
    """rank_bm25's Okapi BM25 over the pages' text, tokenised by `tokenize`."""

    def __init__(self, texts: Sequence[str]):
        from rank_bm25 import BM25Okapi

        self.num_pages = len(texts)
        tokenized = [tokenize(t) or ["\x00"] for t in texts]
        self._bm25 = BM25Okapi(tokenized) if tokenized else None
        self.has_text = any(t.strip() for t in texts)

    def score(self, queries: Sequence[str]) -> np.ndarray:
        """(queries, pages) BM25 scores."""
        if self._bm25 is None:
            return np.zeros((len(queries), 0), np.float32)
        return np.stack([np.asarray(self._bm25.get_scores(tokenize(q)), np.float32) for q in queries])
