"""What search reads of a layout: per region the text the search channels score it by (`region_search_texts`:
the document's title, the section heading above it, its caption, its text), and the start of a region's text
a hit shows (`snippet`).
"""
from __future__ import annotations

import re

from search_engine.page_layout import PageLayout

# Headings are not scored on their own: their text leads every region under them (below), so the match
# lands on the paragraph, table or figure that holds the answer rather than on its title.
SEARCHED_KINDS = frozenset({"text", "list", "table", "figure", "caption"})


def region_search_texts(layout: PageLayout, title: str = "", title_once: bool = False) -> list[str]:
    """Per region (in `layout.regions` order) the text the search channels score it by: the document's
    title, the section heading above it, its caption and its text — a paragraph alone often lacks the
    subject its heading and its document name (DPR prepends a passage's article title for the same
    reason). With the title on every region, a question naming the document ("... in the MNRAS guide")
    matches all its pages alike instead of favouring its title page. `title_once`: the title leads only
    the page's first searched region (the embedder's texts: a fifth fewer tokens, and the page vector, their
    mean, still carries it). "" for headings (carried by the regions under them) and running
    headers/footers, which say nothing about the page."""
    heading = ""
    titled = False
    texts = []
    for region in layout.regions:
        if region.kind == "heading":
            heading = region.text
            texts.append("")
            continue
        if region.kind not in SEARCHED_KINDS or not (region.text.strip() or region.caption.strip()):
            texts.append("")
            continue
        parts = ["" if title_once and titled else title, heading, region.caption,
                 region.text.replace("\n", " ; ") if region.kind != "text" else region.text]
        titled = True
        texts.append(" ".join(p for p in parts if p).strip())
    return texts


# A table or a list longer than this many lines is searched by BM25 as passages of this many lines (a table's
# passages each led by its first row, its column names), and a paragraph of more than twice WINDOW_WORDS words
# as windows of WINDOW_WORDS words, half overlapping: see `region_passages`.
PASSAGE_LINES = 4
WINDOW_WORDS = 40


def region_passages(layout: PageLayout, title: str = "", texts: list[str] | None = None) -> list[list[str]]:
    """Per region (in `layout.regions` order) the passages BM25 scores it by; the region scores as its best
    passage. A region is one passage, its `region_search_texts` text, except a table or a list of more than
    PASSAGE_LINES lines: that is cut into passages of PASSAGE_LINES lines, each led by what leads the region
    (the document's title, the heading, the caption) and, for a table, by its first row; and a paragraph of
    more than 2 × WINDOW_WORDS words, read as windows of WINDOW_WORDS words, half overlapping, each led the
    same way (the sentence that answers in a column-long paragraph of a paper). Why: BM25 divides a
    match by the length of what it scores, so the one row of a 40-row bill of materials that names the part
    asked about scored below a short paragraph that only names the table; as its own passage, the row (with
    the column names and the heading it sits under) outranks it. Passage retrieval by fixed windows is the
    standard remedy (Callan 1994; Kaszkiel & Zobel 1997); here the windows follow the printed rows.
    `texts`: the layout's `region_search_texts(layout, title)` when the caller has them already."""
    whole = texts if texts is not None else region_search_texts(layout, title)
    passages: list[list[str]] = []
    heading = ""
    for region, text in zip(layout.regions, whole, strict=True):
        if region.kind == "heading":
            heading = region.text
        lead = " ".join(p for p in (title, heading, region.caption) if p)
        words = region.text.split()
        lines = [line for line in region.text.split("\n") if line.strip()]
        if text and region.kind == "text" and len(words) > 2 * WINDOW_WORDS:
            passages.append([f"{lead} {' '.join(words[i:i + WINDOW_WORDS])}".strip()
                             for i in range(0, len(words), WINDOW_WORDS // 2)])
        elif text and region.kind in ("table", "list") and len(lines) > PASSAGE_LINES + 1:
            first, rest = (lines[0], lines[1:]) if region.kind == "table" else ("", lines)
            passages.append([" ".join(p for p in (lead, first, " ; ".join(rest[i:i + PASSAGE_LINES])) if p).strip()
                             for i in range(0, len(rest), PASSAGE_LINES)])
        else:
            passages.append([text])
    return passages


SNIPPET_CHARS = 240


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The start of a region's text, cut at a word boundary, for a search hit."""
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else text[:limit]) + "…"
