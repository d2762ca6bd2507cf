"""BM25 and the reader read words of every alphabet, folded the way people and OCR spell them
(`search_engine.lexical.fold_text`): before, only ASCII letters were words, so "arrêté" was "arr" and "t",
an Arabic or Greek question had no terms at all, and a typed "Grosse" never met a printed "Größe"."""
from __future__ import annotations

import numpy as np

from search_engine.lexical import BM25Channel, fold_text, tokenize
from vrag_rl.reader.spans import _term_spans
from vrag_rl.reader.terms import content_terms


def test_words_of_any_alphabet_are_tokens_with_accents_and_case_folded():
    assert tokenize("Arrêté du 4 mai 2007") == ["arrete", "du", "4", "mai", "2007"]
    assert tokenize("Größe: 1,870.5 m") == ["grosse", "1,870.5", "m"]
    assert tokenize("ﬁnal") == ["final"]  # a ligature written out
    assert tokenize("ΔΗΜΟΣ") == tokenize("Δήμος") == ["δημοσ"]  # Greek case-folded (final sigma too), tonos dropped
    assert tokenize("قائمة حركة") == ["قايمة", "حركة"]  # hamza on a seat is a combining mark: dropped
    # CJK keeps its bigrams; Hangul syllables are not decomposed into letters by the folding
    assert tokenize("금감원에") == ["금감", "감원", "원에"]
    assert tokenize("高测股份2024年") == ["高测", "测股", "股份", "2024", "年"]


def test_fold_text_leaves_ascii_alone_and_does_not_decompose_cjk():
    assert fold_text("Net Profit 2020") == "net profit 2020"
    assert fold_text("Ölpreis 가격 価格") == "olpreis 가격 価格"


def test_bm25_finds_an_accented_page_from_a_question_typed_without_accents():
    pages = ["Arrêté du 4 mai 2007 relatif au rattachement des ayants droit",
             "La loi relative à l'informatique, aux fichiers et aux libertés",
             "Formulaire de demande: état civil de l'assuré"]
    scores = BM25Channel(pages).score(["arrete relatif au rattachement", "Quel arrêté ?"])
    assert int(np.argmax(scores[0])) == 0 and int(np.argmax(scores[1])) == 0


def test_reader_terms_and_their_spans_fold_accents():
    assert content_terms("l'arrêté cité") == ["l'arrete", "cite"]
    assert content_terms("حصلت عليها قائمة") == ["حصلت", "عليها", "قايمة"]
    text = "Arrêté du 4 mai 2007 relatif"
    assert [text[a:b] for a, b in _term_spans(text, "arrete relatif")] == ["Arrêté", "relatif"]
