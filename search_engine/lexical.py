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
# The function words of the other languages of Latin script a question may be asked in (German, Dutch, French,
# Spanish, Italian, Portuguese), folded as `fold_text` folds them ("für" → "fur"): articles, pronouns,
# prepositions, auxiliaries and question words. In a corpus mostly in English they are rare, so BM25 gives
# them a high weight, and a Spanish question's "el", "de", "la" would rank the pages densest in Spanish first,
# whatever they say. Why by hand: the published lists (stopwords-iso, NLTK's, spaCy's) also hold content
# words ("jahr", "neu", "gross", "groot") that a question means. Left out: words that are also English words
# or acronyms a page prints and a question may mean ("war", "man", "mit", "sin", "si", "ce", "un", "door",
# "era", "come", "dove", "chi", "son", "plus", "sem", "met", "han", "esa") and the
# acronyms ("se" for Schedule SE or a standard error, "ai", "os", "im", "dem", "nas", "ha" for hectares, "y" for an
# axis).
OTHER_LANGUAGE_FUNCTION_WORDS = frozenset(
    # German
    "der die das den des ein eine einer eines einem einen und oder aber ist sind waren wird werden wurde "
    "wurden hat haben hatte sein am auf aus bei nach von vom zu zum zur fur uber unter vor durch gegen ohne um "
    "als wie wo wer wen wem wessen welche welcher welches welchem welchen wann warum nicht auch noch nur sich es "
    "sie wir ihr ich du dass dieser diese dieses diesem diesen kann konnen muss soll sollte "
    # Dutch
    "de het een en maar zijn wordt worden werd werden heeft hebben voor op aan uit naar onder tot om dan dat "
    "deze dit wat welke welk waar wanneer hoe hoeveel waarom niet ook nog zich je we ze hij zij ik moet zal "
    "zou te van "
    # French
    "le la les l du et ou mais est sont etait etaient sera ont avait au aux dans sur sous par pour avec sans chez "
    "entre que qui quoi quel quelle quels quelles quand comment combien pourquoi ne pas cet cette ces sa ses leur "
    "leurs il elle ils elles nous vous d qu "
    # Spanish
    "el los las lo una unos unas pero es fue fueron ser esta estan estaba habia del al en con por para "
    "sobre desde hasta hacia quien quienes cual cuales cuando cuanto cuanta cuantos cuantas como donde porque su "
    "sus le les este estos estas ese eso tambien muy mas "
    # Italian
    "il lo gli di da su tra fra che cui quale quali quanto quanti quando perche della dei delle dello "
    "degli alla alle nel nella nei sul sulla sono erano stato hanno essere "
    # Portuguese
    "um uma uns umas do da das nos em com ou quem qual quais onde nao seu sua seus suas ele "
    "ela eles elas foi ao aos".split()
)
STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have how in is it its of on or the this to was "
    "were what when where which who why with according".split()
)
# How much a question's words of OTHER_LANGUAGE_FUNCTION_WORDS count in BM25 beside its other words: a little,
# as a sign of the language the question is asked in (a German question's "der", "für" find German pages
# before English ones printing the same technical terms), not as what it asks about.
FUNCTION_WORD_WEIGHT = 0.5
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
    heads, first, count = document_heads(texts, doc_ids, page_numbers)
    return [f"{text} {heads[doc]}" if count[doc] > 1 and heads[doc] and number != first[doc] else text
            for text, doc, number in zip(texts, doc_ids, page_numbers)]


def document_heads(texts: Sequence[str], doc_ids: Sequence[str], page_numbers: Sequence[int]
                   ) -> tuple[dict[str, str], dict[str, int], dict[str, int]]:
    """(each document's head: the first DOCUMENT_HEAD_WORDS words of its first page, the number of that page,
    how many pages it has), from each page's text, document and page number."""
    first: dict[str, tuple[int, str]] = {}
    count: dict[str, int] = {}
    for text, doc, number in zip(texts, doc_ids, page_numbers):
        count[doc] = count.get(doc, 0) + 1
        if doc not in first or number < first[doc][0]:
            first[doc] = (number, text)
    heads = {doc: " ".join(text.split()[:DOCUMENT_HEAD_WORDS]) for doc, (_, text) in first.items()}
    return heads, {doc: number for doc, (number, _) in first.items()}, count


class BM25Channel:
    """rank_bm25's Okapi BM25 over the pages' text, tokenised by `tokenize`."""

    def __init__(self, texts: Sequence[str]):
        from rank_bm25 import BM25Okapi

        self.num_pages = len(texts)
        tokenized = [tokenize(t) or ["\x00"] for t in texts]
        self._bm25 = BM25Okapi(tokenized) if tokenized else None
        self.has_text = any(t.strip() for t in texts)

    def score(self, queries: Sequence[str], rows: np.ndarray | None = None) -> np.ndarray:
        """(queries, pages) BM25 scores; a question's function words of other languages than English count at
        FUNCTION_WORD_WEIGHT. `rows`: score only these pages (the others 0): rank_bm25 walks every page in
        Python for each term, so a search inside one document (`named_document`) reads only its pages."""
        bm25 = self._bm25
        if bm25 is None:
            return np.zeros((len(queries), 0), np.float32)

        def scores(terms: list[str]) -> np.ndarray:
            if rows is None:
                return np.asarray(bm25.get_scores(terms), np.float32)
            out = np.zeros(self.num_pages, np.float32)
            if len(rows):
                out[rows] = bm25.get_batch_scores(terms, rows.tolist())
            return out

        out = []
        for query in queries:
            tokens = tokenize(query)
            content = [t for t in tokens if t not in OTHER_LANGUAGE_FUNCTION_WORDS]
            function = [t for t in tokens if t in OTHER_LANGUAGE_FUNCTION_WORDS]
            row = scores(content)
            if function:
                row += FUNCTION_WORD_WEIGHT * scores(function)
            out.append(row)
        return np.stack(out)


class PassageBM25:
    """BM25 over passages, scored per owner: each owner (a page region) scores as its best passage (MaxP).
    The passages of all owners form one BM25 collection, so their weights and lengths compare."""

    def __init__(self, passages: Sequence[Sequence[str]]):
        flat = [text for group in passages for text in group]
        self.num_owners = len(passages)
        self._owner = np.repeat(np.arange(len(passages)), [len(group) for group in passages])
        self._bm25 = BM25Channel(flat)
        self.has_text = self._bm25.has_text

    def score(self, queries: Sequence[str], owners: np.ndarray | None = None) -> np.ndarray:
        """(queries, owners) scores: the best passage's BM25 score of each owner (-inf for an owner without
        passages, and for every owner outside `owners` when given: only their passages are read)."""
        rows = None if owners is None else np.flatnonzero(np.isin(self._owner, owners))
        flat = self._bm25.score(queries, rows)
        best = np.full((len(queries), self.num_owners), -np.inf, np.float32)
        read = slice(None) if rows is None else rows
        for q in range(len(queries)):
            np.maximum.at(best[q], self._owner[read], flat[q][read])
        return best
