"""BM25 and the reader read words of every alphabet, folded the way people and OCR spell them
(`search_engine.lexical.fold_text`): before, only ASCII letters were words, so "arrêté" was "arr" and "t",
an Arabic or Greek question had no terms at all, and a typed "Grosse" never met a printed "Größe"."""
from __future__ import annotations

import numpy as np

from search_engine.lexical import OTHER_LANGUAGE_FUNCTION_WORDS, BM25Channel, fold_text, tokenize
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


# Pages of a corpus mostly in English, where a Spanish question's "el", "de", "la" are rare words.
_ENGLISH_PAGES = [f"Chapter {i}: the installer copies the files to the disk and writes the settings of the user."
                  for i in range(8)]
_SPANISH_PAGES = [
    "Karl Berry, editor. Guía.",
    "En la sección de la instalación se describe el uso de los programas de la colección y de las opciones de "
    "la instalación en el sistema de los usuarios de la red, de la documentación y de los archivos de la "
    "configuración del sistema de la distribución.",
]


def test_function_words_of_other_languages_weigh_little_in_bm25():
    """A Spanish question finds the page that prints what it asks about, not the page densest in "de" and "la"
    (before, those rare words outweighed "editor" and "guía" in a corpus mostly in English)."""
    channel = BM25Channel(_ENGLISH_PAGES + _SPANISH_PAGES)
    scores = channel.score(["¿Quién es el editor de la guía?"])[0]
    assert int(np.argmax(scores)) == len(_ENGLISH_PAGES)
    # they still count a little: a question of function words alone prefers the page written in that language
    only_function_words = channel.score(["de la el en los"])[0]
    assert int(np.argmax(only_function_words)) == len(_ENGLISH_PAGES) + 1
    assert only_function_words[: len(_ENGLISH_PAGES)].max() == 0.0


def test_english_words_and_acronyms_are_not_taken_for_function_words():
    for word in ("se", "ai", "os", "met", "war", "mit", "door", "son", "y", "si", "ce", "un"):
        assert word not in OTHER_LANGUAGE_FUNCTION_WORDS, word


def test_reader_terms_leave_out_function_words_of_other_languages():
    assert content_terms("Wann wurde die Anleitung zur Installation herausgegeben?") == [
        "anleitung", "installation", "herausgegeben"]
    assert content_terms("¿Cuál es el valor estándar de TEXMFHOME?") == ["valor", "estandar", "texmfhome"]
    assert content_terms("Welke documentklasse is bedoeld voor transparanten?") == [
        "documentklasse", "bedoeld", "transparanten"]
