"""Which tesseract language packs read a page: the ones for the script the page shows, plus English.

Why per page: a corpus mixes scripts (a Korean report with an English appendix, a Japanese filing among
English slides), and one global language reads every other script as noise. Tesseract reads a script only
with a pack trained on it, and reading with every pack at once is slow (each pack is one more recognition
pass: chi_sim+chi_tra+eng took 12.7 s where chi_sim+eng took 8.5 s on a scanned Chinese page) and no better.
So the script is found first (tesseract's own script detection, OSD, on a page image: `text_extraction`;
or the characters of a text layer: `script_of_text`) and mapped to its packs here.

Where a pack is not installed, the page is read with what is (English, or another pack of the same script)
and the choice says which pack was missing, so ingestion can record it for that page.
"""
from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

# Tesseract OSD's script names -> the packs that read it, in order of preference: the first installed one is
# used. Han: OSD cannot tell simplified from traditional; chi_sim alone (chi_tra where chi_sim is missing),
# since both together cost half as much time again for the same reading of simplified text.
SCRIPT_LANGUAGES: dict[str, tuple[str, ...]] = {
    "Latin": ("eng",),
    "Han": ("chi_sim", "chi_tra"),
    "Japanese": ("jpn",), "Hiragana": ("jpn",), "Katakana": ("jpn",),
    "Korean": ("kor",), "Hangul": ("kor",),
    "Cyrillic": ("rus", "ukr", "bul", "srp"),
    "Greek": ("ell",),
    "Arabic": ("ara", "fas", "urd"),
    "Hebrew": ("heb",),
    "Devanagari": ("hin", "mar", "nep"),
    "Thai": ("tha",),
}
# Tesseract's package names: tesseract-ocr-<pack with "_" as "-">
APT_PREFIX = "tesseract-ocr-"


class MissingLanguagePack(Exception):
    """A page in a script whose tesseract pack is not installed: it was read with the packs that are; ingestion
    records this as the page's `ocr` step degraded, with the apt-get line that installs the pack."""


@dataclass(frozen=True)
class LanguageChoice:
    """The tesseract language spec to read a page with (`lang`, e.g. "jpn+eng"), the script it was chosen for,
    and the packs that script wanted but that are not installed (empty when nothing is missing)."""

    lang: str
    script: str
    missing: tuple[str, ...] = ()

    @property
    def install_hint(self) -> str:
        """The apt-get line that installs the missing packs ("" when none is missing)."""
        return "apt-get install " + " ".join(APT_PREFIX + m.replace("_", "-") for m in self.missing) if self.missing \
            else ""


def choose_languages(script: str, installed: Collection[str]) -> LanguageChoice | None:
    """The packs for `script` (an OSD script name) among `installed`, plus English; None for a script this
    table does not know (the caller then falls back to trying its packs). When none of the script's packs is
    installed, the choice is English alone (or "" without English) with the script's first pack as missing."""
    wanted = SCRIPT_LANGUAGES.get(script)
    if wanted is None:
        return None
    have = [lang for lang in wanted if lang in installed][:1]
    missing: tuple[str, ...] = () if have else (wanted[0],)
    if "eng" in installed and "eng" not in have:
        have.append("eng")
    return LanguageChoice("+".join(have), script, missing)


# Unicode blocks of the scripts `script_of_text` tells apart (letters only; punctuation and digits are shared)
_SCRIPT_CHARS = {
    "Hangul": re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]"),
    "Japanese": re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]"),  # kana: only Japanese writes them
    "Han": re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"),
    "Cyrillic": re.compile(r"[\u0400-\u04ff]"),
    "Greek": re.compile(r"[\u0370-\u03ff]"),
    "Arabic": re.compile(r"[\u0600-\u06ff\u0750-\u077f]"),
    "Hebrew": re.compile(r"[\u0590-\u05ff]"),
    "Devanagari": re.compile(r"[\u0900-\u097f]"),
    "Thai": re.compile(r"[\u0e00-\u0e7f]"),
    "Latin": re.compile(r"[A-Za-z\u00c0-\u024f]"),
}
# Share of a text's script letters from which a CJK script decides: Korean and Japanese pages carry Han
# characters and Latin words, a Chinese page Latin words; one CJK character is a word where a Latin word is
# five letters, so a small share already means a bilingual page, which the CJK pack plus English reads whole.
_CJK_SHARE = {"Hangul": 0.05, "Japanese": 0.05, "Han": 0.05}


def script_of_text(text: str) -> str | None:
    """The script a text is written in (an OSD script name), from its letters: Hangul or kana when they make a
    fair share of them (Korean and Japanese also write Han characters), then Han, else the most frequent
    script; None for a text without letters."""
    counts = {script: len(pattern.findall(text)) for script, pattern in _SCRIPT_CHARS.items()}
    total = sum(counts.values())
    if not total:
        return None
    for script, share in _CJK_SHARE.items():
        if counts[script] >= share * total:
            return script
    return max(counts, key=lambda script: counts[script])
