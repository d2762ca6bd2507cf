"""The extractive page reader behind the CPU stand-in policies: reads a page by its structure.

Given a question and a page's `PageLayout` (regions with boxes: paragraphs, headings, tables with
cells, figures with their labels and caption), it gathers candidate answers from every region —

* a table cell, found by the row header and the column header the question names (terms, or the
  embedder's closest header when the question paraphrases); for "which … most/least" the label of
  the row with the extreme value in the column the question names;
* a sentence of a paragraph, and the shortest span of it of the kind asked (a value, a date, a name),
  else the sentence;
* a figure's labelled values and its caption;

— scores each by meaning (MiniLM cosine) plus the rarity-weighted share of the question's terms it
holds with its context (headers, caption, section heading), and answers from the best one only when
that share is at least half the question (`relevance.MIN_COVERAGE`); otherwise it reports nothing, and
the policy says "not found" rather than quote a fragment. Each answer carries the box of the region it
came from, so the policy can zoom there and the demo shows where the answer is.

No word lists, thresholds or rules fitted to a document set: the cues are the question's form words
(`question`), numbers and units (`values`), and the page's own structure.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from search_engine.page_layout import Box, PageLayout, Region
from vrag_rl.reader import charts, figures, lists, spans, tables
from vrag_rl.reader.geometry import intersects, union
from vrag_rl.reader.question import (
    PHRASING_VERBS,
    QuestionForm,
    asks_axis_title,
    chart_part,
    form_words,
    question_form,
    says_superlative,
    which_head,
)
from vrag_rl.reader.relevance import MIN_COVERAGE, Embedder, TermWeights, terms_of
from vrag_rl.reader.rewrite import folded, joined, periods_named, spelled_out, totals_named
from vrag_rl.reader.rows import RowValue, row_values
from vrag_rl.reader.terms import CJK_RUN, MONTH_TERMS, content_terms, fuzzy_in
from vrag_rl.reader.values import number_of

TEXT_KINDS = ("text", "heading", "list", "caption")
_YEAR = re.compile(r"(1[5-9]|20)\d\d")
TITLE_WORDS = 12  # a title is a line, not a paragraph: at most this many words
_WORD = re.compile(r"[^\W\d_]")  # a letter of any script
# A code the question quotes: letters and digits in one token, its parts joined by "-", "/" or "." ("U5",
# "FLASH-512K-X-8", "M29W040B120K6", "ERJ-3EKF1001V"); not a period ("FY2014", "Q3", "2Q", "H1", "2023E")
_CODE = re.compile(r"(?<![\w./-])(?=[\w./-]*\d)(?=[\w./-]*[A-Za-z])[A-Za-z0-9]+(?:[-/.][A-Za-z0-9]+)*(?![\w/-])")
_PERIOD_CODE = re.compile(r"(?:fy|cy|q|h)\d{1,4}|\d{1,2}[qh]|\d+(?:st|nd|rd|th)|\d{4}[a-z]", re.I)


def quoted_codes(question: str) -> set[str]:
    """The codes a question quotes (`_CODE`), lowercased: part numbers, reference designators, model names."""
    return {m.group(0).lower() for m in _CODE.finditer(question) if not _PERIOD_CODE.fullmatch(m.group(0))}


def _codes_in(text: str) -> set[str]:
    return {m.group(0).lower() for m in _CODE.finditer(text)}


@dataclass
class Reading:
    """An answer read off a page: the answer, the evidence it was read from (quoted to the user), the
    box of that evidence in the layout's pixels, the region and its kind, and how well it matched."""

    answer: str
    evidence: str
    box: Box
    region_id: str
    kind: str  # "text", "table" or "figure"
    score: float = 0.0
    coverage: float = 0.0
    legible: bool = True  # False: the right cell, but its print did not read as the kind asked (zoom in)


@dataclass
class _Candidate:
    answer: str
    evidence: str
    box: Box
    region_id: str
    kind: str
    scored_text: str  # what the embedder compares with the question
    found: set[str] = field(default_factory=set)  # terms of the evidence and its labels (headers, caption)
    own: set[str] = field(default_factory=set)  # terms of the evidence alone (for rarity)
    fits: bool = True  # the answer is of the kind asked
    pinned: bool = True  # (tables) the row and column the question names were both found
    bonus: float = 0.0
    context: set[str] = field(default_factory=set)  # terms around it (section heading): half credit
    legible: bool = True
    named: bool = False  # (tables) the question names both the cell's row and its column: supported as such
    chart_part: bool = False  # (figures) read off a part of a chart: an axis' title, a tick, the legend
    field_key: set[str] = field(default_factory=set)  # (text) a printed field's key: the question's terms it names


class Reader:
    """Reads answers off page layouts (see the module doc). `embedder`: an object with
    `embed_queries(texts)` (e.g. `search_engine.embedders.text.SentenceEmbedder`), or None for terms only;
    `multilingual`: one that reads CJK questions (`relevance.Embedder`), or None."""

    def __init__(self, embedder: Any | None = None, min_score: float = 0.0, multilingual: Any | None = None):
        self.embedder = Embedder(embedder, multilingual=multilingual)
        self.min_score = min_score

    def read(self, question: str, layout: PageLayout, within: Box | None = None, context: str = "") -> Reading | None:
        """The best supported answer on the page (only from regions meeting `within`, when given), or None:
        supported is at least MIN_COVERAGE of the question's terms, and a score of at least `min_score` (the
        caller's confidence threshold, `relevance.CONFIDENT_SCORE`; 0 answers whatever is supported).
        `context`: text around what `layout` shows (a crop's page title), half credit like a running header."""
        best = next((r for r in self.rank(question, layout, within, context) if r.coverage >= MIN_COVERAGE), None)
        return best if best is not None and best.score >= self.min_score else None

    def rank(self, question: str, layout: PageLayout, within: Box | None = None, context: str = "") -> list[Reading]:
        """Every candidate answer that fits the question's form, best first (supported or not)."""
        layout = joined(folded(layout))
        layout = periods_named(totals_named(spelled_out(layout, question), question), question)
        names = " ".join(r.text for r in layout.regions if r.kind in ("heading", "header", "footer", "caption"))
        names += " " + " ".join(r.caption for r in layout.regions if r.caption)
        form = question_form(question, names)
        all_terms = set(content_terms(question))
        printed = set().union(set(), *(terms_of(f"{r.text} {r.caption}") for r in layout.regions))
        # a verb that quotes the document ("does the lecture call") counts only where the page prints it, and
        # so does the noun a "which X" question asks for ("which software", 哪个命令): it says what kind of
        # thing the answer is, and a page prints the thing ("MS PowerPoint"), rarely its kind beside it
        kind_of_answer = set(content_terms(" ".join(which_head(question)))) | lists.list_words(question)
        q_terms = [t for t in content_terms(question) if t not in form_words(question) | lists.ordinal_words(question)
                   and (t not in PHRASING_VERBS or t in printed) and (t not in kind_of_answer or fuzzy_in(t, printed))]
        if not q_terms:
            return []
        # the page's running header/footer, its title, its id and the caller's context name the document:
        # half credit (see TermWeights), and they locate nothing within the page
        titles = [r for r in layout.regions if r.kind in ("header", "footer", "heading")]
        titles += [r for r in layout.regions[:1] if len(r.text.split()) <= TITLE_WORDS]  # a cover's or slide's title
        page_terms = set().union(set(), *(terms_of(r.text) for r in titles))
        page_terms |= terms_of(re.sub(r"[_\-.]+", " ", layout.page_id)) | terms_of(context)
        ignore = frozenset(page_terms)
        all_regions = list(layout.regions) + tables.stacked_tables(layout.regions)
        regions = [r for r in all_regions if within is None or intersects(r.box, within)]
        parents = _outline_parents(layout.regions)
        lead_ins = {text.strip() for texts in parents.values() for text in texts
                    if _ends_on_colon(text) and _POINTS_AHEAD.search(text)}
        position = lists.ordinal(question)
        if position is not None:  # a position in a list: only a list's item answers, or nothing
            candidates = _list_items(position, layout.regions, parents)
        else:
            candidates = self._region_candidates(all_regions, question, form, ignore,
                                                 _defined_terms(layout.regions), parents)
            candidates += _captions_named(question, form, all_regions)
            if form.wants_value and not form.time:
                candidates += self._printed_rows(layout.regions, question, form, ignore)
        if asks_axis_title(question) and not form.wants_value:  # only an axis' title says what it is labelled
            candidates = [c for c in candidates if c.chart_part]
        # an answer is a span of the type asked (a value with its unit, a date, a name), else no answer
        candidates = [c for c in candidates if c.fits and c.answer.strip()
                      and spans.span_fits(c.answer, c.evidence, question, form, c.kind, c.pinned)]
        # how rare a term is, is a property of the page, not of the part of it in view: weights over the whole
        # page's candidates, so that a zoom into a region reads it as the page did; answers from the view only
        weights = TermWeights(q_terms, [c.own for c in candidates])
        shown = {r.region_id for r in regions}
        candidates = [c for c in candidates if c.region_id in shown]
        if not candidates:
            return []
        cover = _cover(layout)
        if cover:  # a title page's lines describe each other: each reads with all of them
            cover_terms = set().union(*(terms_of(r.text) for r in cover))
            for candidate in candidates:
                if any(candidate.region_id == r.region_id for r in cover):
                    candidate.found |= cover_terms
        keys = _key_terms(question) & set(q_terms)
        aliases = {k: a for k, a in _aliased_keys(question).items() if k in keys}

        def may_answer(candidate: _Candidate) -> bool:
            if not weights.matched(candidate.found):
                return False
            printed_terms = candidate.found | candidate.context | page_terms
            if any(not fuzzy_in(k, printed_terms) and not aliases.get(k, set()) & printed_terms for k in keys):
                return False  # the question names its subject by an identifier the evidence does not print
            if candidate.answer == candidate.evidence and not terms_of(candidate.answer) - all_terms:
                return False  # only the question's own words (a title): it cannot hold an answer
            if candidate.kind == "text" and not _WORD.search(candidate.evidence):
                return False  # a number printed alone says nothing of what it counts: its row says (`rows`)
            if candidate.evidence.strip() in lead_ins:
                return False  # "run the following command:" points at the answer; the lines it heads hold it
            if candidate.answer == candidate.evidence and _ends_on_colon(candidate.evidence):
                return False  # a whole line ending in a colon is a label ("Translated by:"): what follows answers
            # a list that only names what is asked about among others says nothing of it
            return not (candidate.answer == candidate.evidence and _names_one_item(candidate.answer, all_terms))

        candidates = [c for c in candidates if may_answer(c)]  # before the embedder: it reads only these
        cosines = self.embedder.cosines(question, [c.scored_text for c in candidates])
        readings = []
        for candidate, cosine in zip(candidates, cosines):
            coverage = weights.coverage(candidate.found, page_terms | candidate.context)
            # evidence that itself states what is asked beats evidence that only sits under the right heading
            score = (coverage + 0.25 * weights.coverage(candidate.own) + 0.5 * float(cosine) + candidate.bonus
                     - (0.0 if candidate.pinned else 0.3))
            if form.figure and candidate.kind == "figure":
                score += 0.15
            if candidate.field_key and (set(q_terms) - candidate.field_key) & (
                    candidate.found | candidate.context | page_terms):
                # the page states what is asked as the question words it ("<key>: <value>"), of what the question
                # asks it about (the box, the page or the field names the rest of the question)
                score += FIELD_BONUS
            if form.entity and candidate.answer == candidate.evidence and candidate.own:
                # no name read out of it: evidence that mostly repeats the question names nothing new
                score -= 0.25 * len(candidate.own & all_terms) / len(candidate.own)
            if form.superlative:
                if says_superlative(candidate.evidence, form.superlative):
                    score += 0.15
            if not candidate.pinned:
                coverage = min(coverage, MIN_COVERAGE - 1e-6)  # a cell the question does not pin is no answer
            elif candidate.named:
                coverage = max(coverage, MIN_COVERAGE)  # the question names its row and its column
            readings.append(Reading(candidate.answer, candidate.evidence, candidate.box, candidate.region_id,
                                    candidate.kind, round(score, 6), round(coverage, 6), candidate.legible))
        readings.sort(key=lambda r: (-r.score, r.box[1], r.box[0]))
        return readings

    # ---- tables ----------------------------------------------------------------------------------------
    def _region_candidates(self, regions: list[Region], question: str, form: QuestionForm, ignore: frozenset[str],
                           terms: dict[str, str], parents: dict[str, list[str]]) -> list[_Candidate]:
        """Candidates of every region of the page (headers and footers aside), each read with what lies
        around it: its section heading, the term a definition list gives it (`terms`, `_defined_terms`), the
        lines it hangs from (`parents`, `_outline_parents`)."""
        candidates: list[_Candidate] = []
        heading = ""
        labels = _labelled_lines(regions)
        for region in regions:
            if region.kind == "heading":
                heading = region.text
            if region.kind in ("header", "footer"):  # a running title or page number answers nothing, but
                # a form's or a letterhead's footer prints fields ("SAM UEI: …", "Tel: …") that answer as printed
                candidates += _text(region, question, form, "", ignore=ignore, fields_only=True)
                continue
            around = heading if region.kind != "heading" else ""
            if region.region_id in terms:
                around = f"{around} {terms[region.region_id]}".strip()
            above = parents.get(region.region_id, [])
            around = " ".join([around, *above]).strip()
            if region.kind == "table":
                for panel in tables.panels(region):
                    candidates += self._table(panel, question, form, around, ignore)
            elif region.kind == "figure":
                candidates += _figure(region, question, form, around, ignore)
                drawn = tables.table_from_labels(region)  # a table layout analysis took for a figure
                if drawn is not None:
                    candidates += self._table(drawn, question, form, around, ignore)
            else:
                candidates += _text(region, question, form, around, ignore=ignore, before=above[-1] if above else "",
                                    label=labels.get(region.region_id, ""))
        return candidates

    def _table(self, region: Region, question: str, form: QuestionForm, context: str,
               ignore: frozenset[str]) -> list[_Candidate]:
        region = tables.unstacked_rows(tables.table_regions_from_text(region))
        grid = tables.grid_of(region)
        if grid is None:
            return _text(region, question, form, context, ignore=ignore)
        q_terms = set(content_terms(question))
        # what the table is about: its header row, and its caption, which says what every cell holds (表 1:
        # 每列非重复元素个数 over a column headed "# unique values") as its header row does
        around = " ".join([c.text for c in grid.cells.values() if c.row < grid.header_rows] + [region.caption])
        half = terms_of(context)
        rows = grid.body_rows
        cols = [c for c in grid.body_cols if any((r, c) in grid.cells for r in rows)]
        label_terms = {r: terms_of(grid.row_labels.get(r, "")) for r in rows}
        # a word printed in most labels of a long table ("list", "party", "total") tells none of its rows apart:
        # not a row's name (in a table of a few rows, a label repeated over merged cells is still a name)
        common = {t for t in q_terms
                  if len(rows) >= 5 and 2 * sum(t in terms for terms in label_terms.values()) > len(rows)}
        row_hit = {r: bool((q_terms - common) & label_terms[r]) for r in rows}
        # a code the question quotes, printed in the cells of one row only, names that row whatever its column
        # (a parts list's "FLASH-512K-X-8" or "U5": the row's label is its item number)
        for code in quoted_codes(question):
            holding = [r for r in rows if any(code in _codes_in(grid.cells[r, c].text)
                                              for c in grid.body_cols if (r, c) in grid.cells)]
            if len(holding) == 1:
                row_hit[holding[0]] = True
        col_hit = {c: bool(q_terms & terms_of(grid.col_labels.get(c, ""))) for c in cols}
        if len(cols) > 1 and not any(col_hit.values()):  # a paraphrased header: the embedder's closest one
            labels = [grid.col_labels.get(c, "") for c in cols]
            if any(labels):
                scores = self.embedder.cosines(question, labels)
                if float(scores.max()) > 0:
                    col_hit[cols[int(scores.argmax())]] = True
        # a question term printed in one body cell only is a key to that row ("mirrors.hit.edu.cn")
        cell_count: dict[str, int] = {}
        for r in rows:
            for c in cols:
                cell = grid.cell(r, c)
                if cell is not None:
                    for term in terms_of(cell.text) & q_terms:
                        cell_count[term] = cell_count.get(term, 0) + 1
        keys = {term for term, count in cell_count.items() if count == 1}
        # an identifier (an address, a file name, a code: not a plain word) printed in one cell names its row
        # as surely as a row header does
        # (a long number printed once, not a year, is as sure a key: "which column has 11014 unique values")
        ids = {term for term in keys if len(term) >= 4 and not term.isalpha() and (
            re.search(r"[^\W\d_]", term) or (sum(ch.isdigit() for ch in term) >= 4 and not _YEAR.fullmatch(term)))}
        row_texts = {r: " ".join(grid.cells[r, c].text for c in cols if (r, c) in grid.cells) for r in rows}
        out: list[_Candidate] = []
        if form.superlative and not form.quantity and grid.header_cols:
            out += _extreme_rows(region, grid, rows, cols, col_hit, form, question, around, half)
        for r in rows:
            field = _field_in_label(grid, r, question, form, ignore)
            if field is not None:
                out.append(_Candidate(field[0], grid.row_labels[r], field[1], region.region_id, "table",
                                      grid.row_labels[r], terms_of(f"{grid.row_labels[r]} {around}"),
                                      terms_of(grid.row_labels[r]), True, True, 0.2, half))
            for c in cols:
                cell = grid.cell(r, c)
                if cell is None:
                    continue
                row_label, col_label = grid.row_labels.get(r, ""), grid.col_labels.get(c, "")
                pinned = (row_hit.get(r, False) or len(rows) == 1) and (col_hit.get(c, False) or len(cols) == 1)
                answer, fit = spans.answer_span(cell.text, question, form, ignore)
                if not fit and form.wants_value and not form.needs_number:
                    answer, fit = cell.text, 1  # "the default value of fieldFlags": the cell says 'combo'
                legible = not (form.wants_value and not fit)
                if not legible and not (pinned and len(rows) > 1):
                    continue  # an unreadable cell is kept only where the question pins it: a zoom may read it
                evidence = " | ".join(t for t in (row_label, col_label) if t) + f": {cell.text}"
                # the question names the row's whole header ("what does joinAxisPos specify"): this row, not a
                # sentence that mentions it among others
                whole_row = bool(row_label) and bool(terms_of(row_label)) and terms_of(row_label) <= q_terms
                box = union([cell.box, *grid.header_boxes(r, c)])
                named = row_hit.get(r, False) and col_hit.get(c, False) and len(rows) > 1 and len(cols) > 1 \
                    and bool(q_terms & terms_of(col_label))
                # a row that prints no label of its own continues the row above (a second supplier, a merged
                # label cell): the row that prints the label the question names comes first
                continued = bool(grid.header_cols) and not any((r, k) in grid.cells for k in range(grid.header_cols))
                # a value asked of the cell named by most of the words of both its headers (a column by its own
                # name, its lowest header cell: a group header over several columns is printed over one): a lookup,
                # as sure as a field's label (a header that shares one word of three with the question,
                # "International Cargo Ton" for "international passengers", names another column; "which terminal
                # has the most berths" asks for a row, not a cell)
                looked_up = named and form.wants_value and not form.superlative \
                    and _mostly_named(_header_terms(row_label), q_terms) \
                    and _mostly_named(_header_terms(grid.col_names.get(c) or col_label), q_terms)
                out.append(_Candidate(answer, evidence.strip(": "), box, region.region_id, "table",
                                      f"{row_label} {col_label} {cell.text}".strip(),
                                      terms_of(f"{row_label} {col_label} {cell.text} {around} {row_texts[r]}"),
                                      terms_of(f"{row_label} {col_label} {cell.text}"), True, pinned,
                                      (0.1 if fit == 2 else 0.0 if legible else -0.2) + whole_row * 0.1
                                      + looked_up * 0.2 - continued * 0.05, half, legible, named))
                cell_terms = terms_of(cell.text)
                quoted = bool(cell_terms) and (len(cell_terms & q_terms) * 2 >= len(cell_terms)
                                               or bool(cell_terms & keys))
                if (form.entity and not form.superlative and row_label and quoted and _WORD.search(row_label)
                        and not terms_of(row_label) <= q_terms):  # (an item number names no row: "1")
                    # "which command is noted as 'for use with manual brackets'", "which mirror is at
                    # mirrors.hit.edu.cn": the row the question quotes, or names by a key printed in it alone
                    out.append(_Candidate(row_label, evidence.strip(": "), box, region.region_id, "table",
                                          f"{col_label} {cell.text}".strip(),
                                          terms_of(f"{row_label} {col_label} {cell.text} {around}"),
                                          terms_of(f"{col_label} {cell.text}"), True, True, 0.1, half,
                                          named=bool(cell_terms & ids)))
        return out

    def _printed_rows(self, regions: list[Region], question: str, form: QuestionForm,
                      ignore: frozenset[str]) -> list[_Candidate]:
        """Values of tables nobody found (`rows`): each value with its row's label and its column's header,
        read as a table's cell is — pinned when the question names its row and, where the row prints
        several values, its column (by a term, else the embedder's closest header of that row)."""
        q_terms = set(content_terms(question))
        asked_years = set(_years_in(question))
        found = row_values(regions)
        by_label: dict[int, list[RowValue]] = {}
        for item in found:
            by_label.setdefault(id(item.label), []).append(item)
        out: list[_Candidate] = []
        for same_row in by_label.values():
            # a row is named by its label's words; what the label adds in brackets is its unit or a note
            # ("净利润(百万元)", "Flight Operation Rate (%)"), which many rows share
            label = _without_unit(same_row[0].label.text)
            if not q_terms & (terms_of(label) - ignore):
                continue  # a row the question does not name
            # what heads every value of the row (the statement's title, its unit) locates no column: half
            # credit, like a running title; a column is named by what its header alone prints
            headers = [terms_of(item.header) - terms_of(label) - ignore for item in same_row]
            shared = set.intersection(*headers) if len(headers) > 1 else set()
            own = [h - shared for h in headers]
            # a column headed by another period than the one the question names is not the one asked
            periods = [set(_years_in(item.header)) for item in same_row]
            # a period tells columns apart only where columns are headed by different ones ("2020 | 2021"); one
            # period over some columns of the row is a title set above them ("Dec-2015" over the middle of a
            # month's table), which dates every column, not those
            by_period = len({frozenset(p) for p in periods if p}) > 1
            if not by_period:
                own = [{t for t in h if t not in MONTH_TERMS and not _years_in(t)} for h in own]
            col_hit = [bool(q_terms & h) or (by_period and bool(asked_years & p)) for h, p in zip(own, periods)]
            other = [bool(asked_years) and bool(p) and not asked_years & p for p in periods]
            if len(same_row) > 1 and not any(col_hit):
                texts = [" ".join(sorted(h)) for h in own]
                if any(texts):
                    scores = self.embedder.cosines(question, texts)
                    if float(scores.max()) > 0:
                        col_hit[int(scores.argmax())] = True
            for item, column, hit, elsewhen in zip(same_row, own, col_hit, other):
                if elsewhen:
                    continue
                answer, fit = spans.answer_span(item.value.text, question, form, ignore)
                if not fit:
                    continue
                answer = item.value.text  # the cell as printed: "(4,207)" is a negative, "¥233,512" yen
                pinned = hit or len(same_row) == 1
                evidence = " | ".join(t for t in (item.label.text, item.header) if t) + f": {item.value.text}"
                box = union([item.value.box, item.label.box, *item.header_boxes])
                mine = terms_of(item.label.text) | column  # the unit in brackets counts as what it says
                # the more of the row's label the question says, the surer the row ("Net profit", not "Net
                # changes in the fair value of cash flow hedges" for "what net profit")
                named_share = len(terms_of(label) & q_terms) / max(1, len(terms_of(label)))
                # a lookup by most of the words of the row's label and of the column's own header (as `_table`)
                looked_up = hit and len(same_row) > 1 and not form.superlative \
                    and _mostly_named(_header_terms(label), q_terms) and _mostly_named(column, q_terms | asked_years)
                out.append(_Candidate(answer, evidence, box, item.value.region_id, "table",
                                      f"{label} {' '.join(sorted(column))} {item.value.text}",
                                      mine | terms_of(item.value.text), mine, True, pinned,
                                      (0.1 if fit == 2 else 0.0) + 0.2 * named_share + 0.2 * looked_up, shared,
                                      named=hit and len(same_row) > 1))
        return out


def _field_in_label(grid: tables.Grid, row: int, question: str, form: QuestionForm,
                    ignore: frozenset[str]) -> tuple[str, Box] | None:
    """The value of a row label that is itself a printed field whose key the question names ("Molecular
    weight: 853.90[30]" in the left column of a two-column page read as a table), with the label's box; None
    otherwise. The cells to its right belong to the other column of the page, not to this field."""
    label = grid.row_labels.get(row, "")
    value = spans.key_value(label, question) if ":" in label else ""
    if not value:
        return None
    answer, fit = spans.answer_span(value, question, form, ignore) if form.wants_value else (value, 2)
    cell = next((c for c in grid.cells.values() if c.row == row and c.text == label), None)
    if not fit or cell is None:
        return None
    return answer, cell.box


def _without_unit(header: str) -> str:
    """A header without what it adds in brackets, its unit or a note ("净利润(百万元)", "Flight Operation Rate (%)"),
    which many rows share; the header as printed when it is nothing else."""
    return re.sub(r"[(（][^()（）]*[)）]", " ", header).strip() or header


def _header_terms(header: str) -> set[str]:
    """The terms that name a row or a column: its header's without its unit (`_without_unit`), else all of them."""
    return terms_of(_without_unit(header)) or terms_of(header)


def _mostly_named(words: set[str], asked: set[str]) -> bool:
    """Whether the question says at least half of a header's terms (`_header_terms`)."""
    return bool(words) and 2 * sum(fuzzy_in(w, asked) for w in words) >= len(words)


def _years_in(text: str) -> list[str]:
    """The years a text names ("FY2020", "2022E", "2020年" → "2020")."""
    return re.findall(r"(?<!\d)(?:19|20)\d\d(?!\d)", text)


def _key_terms(question: str) -> set[str]:
    """The terms of the identifiers the question prints (\\gcd, acolor3, train.csv, usebeamercolortheme):
    they name its subject exactly, and evidence that does not print them is about something else however
    many other words it shares (a Chinese sentence shares many bigrams with a Chinese question)."""
    tokens = [token for _, token in spans.identifiers_in(question, "")]
    tokens += re.findall(r"\\[A-Za-z]+", question)
    return {t for token in tokens for t in content_terms(token)}


# A name and its short form in brackets: "zCore Group (zCG)", "the flash memory (U5)"
_ALIAS = re.compile(r"((?:[^\W_][\w.'’&-]*\s+){0,2}[^\W_][\w.'’&-]*)\s*\(([^()\s]{1,20})\)")


def _aliased_keys(question: str) -> dict[str, set[str]]:
    """Key terms the question gives as the bracketed short form of the words before them, each with those
    words' terms: evidence that prints either names the subject ("Location: McLean" under "zCore Group",
    asked about "zCore Group (zCG)")."""
    out: dict[str, set[str]] = {}
    for match in _ALIAS.finditer(question):
        words = set(content_terms(match.group(1)))
        for term in content_terms(match.group(2)):
            out[term] = words - {term}
    return out


def _names_one_item(text: str, asked: set[str]) -> bool:
    """Whether the text is a list ("acolor1 acolor2 acolor3 acolor4 acolor5") one of whose items the
    question names: quoted whole, it repeats the question's subject among its siblings and says nothing of it."""
    items = lists.items_in(text)
    return len(items) >= lists.MIN_ITEMS and sum(bool(terms_of(i)) and terms_of(i) <= asked for i in items) == 1


def _list_items(position: int, page: list[Region], parents: dict[str, list[str]]) -> list[_Candidate]:
    """"What is the last entry of the Items list", "which transition is listed last": the item at the
    `position` the question asks (`lists.ordinal`: 1-based, -1 the last) in each list the page prints
    (`lists`), supported by what names the list — its column header, the heading and lead-in above it — and
    its items."""
    names: dict[str, str] = {}
    heading = ""
    for region in page:
        heading = region.text if region.kind == "heading" else heading
        names[region.region_id] = " ".join([heading, *parents.get(region.region_id, [])]).strip()
    out = []
    for printed in lists.printed_lists(page, names):
        if not -len(printed.items) <= position <= len(printed.items) or not position:
            continue
        item = printed.items[position - 1 if position > 0 else position]
        around = f"{printed.name} {names.get(printed.region_id, '')}" if printed.name != names.get(
            printed.region_id) else printed.name
        evidence = f"{printed.name}: {'; '.join(printed.items)}".strip(": ")
        out.append(_Candidate(item, evidence, printed.box, printed.region_id, "text", evidence,
                              terms_of(f"{around} {' '.join(printed.items)}"), terms_of(printed.name), bonus=0.2))
    return out


# A reference label: "Figure 2", "Fig. 2", "Table 1.3", 图 1, 表 2 (the kind, then the number)
_LABEL = re.compile(r"(?:\b(fig(?:ure)?\.?|tab(?:le)?\.?)\s*|(图|表)\s*)(\d+(?:[.\-–]\d+)*)", re.I)


def _label_of(match: re.Match[str]) -> tuple[str, str]:
    """("figure" | "table", number) of a reference label."""
    word = (match.group(1) or match.group(2) or "").lower()
    return ("table" if word.startswith("tab") or word == "表" else "figure"), match.group(3)


def _captions_named(question: str, form: QuestionForm, regions: list[Region]) -> list[_Candidate]:
    """"What does Figure 1 show?", "图 1 的图题是什么？": the caption that starts with the label the question
    names, read without its label. The label names that caption as surely as a row header names its row;
    only for a question about the figure or table itself (no value, name or yes/no asked of it)."""
    asked = {_label_of(m) for m in _LABEL.finditer(question)}
    if not asked or form.wants_value or form.entity or form.yes_no or re.search(r"\([a-z]\)", question):
        return []  # (a question naming a panel, "(b) of Figure 4", asks for that panel's caption only)
    bodies = [r for r in regions if r.kind in ("table", "figure")]
    out = []
    for region in regions:
        for text in (region.caption, region.text if region.kind in ("caption", "heading", "text") else ""):
            match = _LABEL.match(text.strip())
            if not match or _label_of(match) not in asked:
                continue
            # a question that names something inside the figure or table ("zihao = 5 in Table 4", "panel (b)
            # of Figure 4") asks about that, not about the caption
            inside = set(content_terms(question)) - terms_of(text) - terms_of(match.group(0))
            body = [r for r in bodies if r is region] if text == region.caption else bodies
            if any(inside & terms_of(f"{r.text} {' '.join(lb.text for lb in r.labels)}") for r in body):
                continue
            rest = text.strip()[match.end():].strip(" :：.-–—")
            if rest:
                out.append(_Candidate(rest, text.strip(), region.box, region.region_id,
                                      "table" if _label_of(match)[0] == "table" else "figure", text,
                                      terms_of(text), terms_of(text), bonus=0.2, named=True))
    return out


_LIST_MARK = re.compile(r"^\s*(?:\d+[.)]|\(?[a-z][.)]|\[\d+\])\s")


def _cover(layout: PageLayout) -> list[Region]:
    """The lines of a title page (a deck's first slide, a report's cover): a page of at least three lines
    of words (titles or plain text; headers and footers aside), none of them a paragraph, a sentence
    followed by another, or a numbered or bulleted item. Such lines — title, author, affiliation, date —
    say nothing alone ("Matthias Vogelgesang"); together they say who wrote what, where and when. []
    when the page is no such page, or when its lines hang from each other as an outline's do."""
    lines = [r for r in layout.regions if r.kind not in ("header", "footer") and re.search(r"[^\W\d_]", r.text)]
    if len(lines) < 3 or any(r.kind not in ("heading", "text") for r in lines):
        return []
    if _outline_parents(lines):  # lines indented under others are an outline's items, not a cover's lines
        return []
    for region in lines:
        text = region.text.strip()
        if (len(text.split()) > TITLE_WORDS or len(CJK_RUN.sub("", text)) < len(text) - 2 * TITLE_WORDS
                or "\n" in text or _LIST_MARK.match(text) or spans.items_of(text)[-1][1]
                or len(spans.sentences_of(text)) > 1):
            return []
    return lines


_LEAD_IN_END = ":："


def _ends_on_colon(text: str) -> bool:
    """Whether a line ends on a colon (Latin or full-width): a lead-in or a label, what follows says it."""
    return text.rstrip()[-1:] in _LEAD_IN_END
# A lead-in that points at what follows instead of saying it ("run the following command:", 以下のコマンド, 如下):
# the lines it heads hold the answer. Other lead-ins often state it ("Prosper offers seven transitions:").
_POINTS_AHEAD = re.compile(r"\b(?:following|below|as follows)\b|以下|下列|如下|下面|\bfolgende[nmrs]?\b|\bnachstehend|"
                           r"\bsuivante?s?\b|ci-dessous|\bsiguientes?\b|a continuaci[oó]n|\bvolgende\b|hieronder|"
                           r"\bseguintes?\b|\bseguenti\b|다음", re.IGNORECASE)
_SENTENCE_STOP = ".。!！?？"


def _line_height(regions: list[Region]) -> float:
    """The height of one printed line of the page's body text: the lowest text region's box (a region of one
    line), at least one pixel."""
    heights = [r.box[3] - r.box[1] for r in regions if r.kind in ("text", "list") and r.text.strip()]
    return max(1.0, min(heights, default=1.0))


def _outline_ends(parent: Region, parent_lead_in: bool, region: Region, lead_in: bool, tol: float) -> bool:
    """Whether `region` lies outside what `parent` heads: a lead-in heads what follows at its indent or
    deeper (until another lead-in at its level), an item (not a paragraph) only what is indented under it;
    lines centred on each other head nothing. `tol`: half a line."""
    (px1, _, px2, _), (x1, _, x2, _) = parent.box, region.box
    # centred: set in from the left as far as from the right (a full-width item indented by an em is not)
    centred = abs((x1 - px1) - (px2 - x2)) < tol and abs(px1 - x1) >= tol
    if parent_lead_in and not lead_in:
        # what a lead-in introduces may start left of it by a paragraph's first-line indent (about an em: a
        # one-line "run the following command:" set in, its command at the margin), not further
        return x1 < px1 - 3 * tol or centred
    # an item heads what is indented under it when it is a label, a phrase or one line; a paragraph of
    # several lines that ends its sentence is complete, and what is set in under it is a block of its own
    # (a quotation, an example)
    paragraph = parent.text.rstrip()[-1:] in _SENTENCE_STOP and parent.box[3] - parent.box[1] > 3 * tol
    return x1 < px1 + tol or centred or paragraph


def _outline_parents(regions: list[Region]) -> dict[str, list[str]]:
    """For each text or list region, the text of the lines it hangs from as an outline does: the lead-in
    above it that ends on a colon ("a different font scheme is loaded:", 由下列四部分组成：) and the item it
    is indented under ("pdfLaTeX — very old school compiler" over "Computer Modern Sans Serif is used as
    font"). A sub-item says nothing of what it is about, its parent does, as a heading does for its section.
    By position only: a parent lies above, further left by at least half a line (an indent step is about an
    em), and the outline restarts at each heading and where the next region is not the next line down (at
    most two lines below: a new block, a column, a diagram's scattered labels); lines centred on each other
    are a centred block, not an outline. Only the parent's sentence next to the child counts (the last of a
    lead-in paragraph)."""
    line = _line_height(regions)
    tol = line / 2
    out: dict[str, list[str]] = {}
    stack: list[tuple[Region, bool]] = []  # (region, is a lead-in), outermost first
    for region in regions:
        if region.kind == "heading":
            stack = []
            continue
        if region.kind not in ("text", "list") or not region.text.strip():
            continue
        if stack and not 0 <= region.box[1] - stack[-1][0].box[3] + tol <= 2 * line + tol:
            stack = []  # not the next line down (a new column or block, labels scattered over a diagram)
        lead_in = _ends_on_colon(region.text)
        while stack and _outline_ends(*stack[-1], region, lead_in, tol):
            stack.pop()
        if stack:
            out[region.region_id] = [sentences[-1].text for p, _ in stack if (sentences := spans.sentences_of(p.text))]
        stack.append((region, lead_in))
    return out


def _labelled_lines(regions: list[Region]) -> dict[str, str]:
    """For each text region printed on the line right below a one-line label ending on a colon
    ("Translated into Dutch by:" over "Stefan Becuwe, Bart Windels"), that label: a field whose key and value
    sit on two lines, as a cover or a title page sets them. By position only: the label is one line (a
    paragraph's lead-in is `_outline_parents`' work), the value starts at most two lines below it."""
    line = _line_height(regions)
    out: dict[str, str] = {}
    texts = [r for r in regions if r.kind in ("text", "list") and r.text.strip()]
    for above, below in zip(texts, texts[1:]):
        one_line = "\n" not in above.text.strip() and above.box[3] - above.box[1] <= 1.5 * line
        if one_line and _ends_on_colon(above.text) and 0 <= below.box[1] - above.box[3] <= 2 * line:
            out[below.region_id] = above.text.strip()
    return out


def _defined_terms(regions: list[Region]) -> dict[str, str]:
    """A definition list's term for each region of its description: a short line at the outer margin
    ("--max-ppsize=N", "Parameter name") followed by paragraphs indented to its right, which it names
    the way a heading names its section (a manual's options, a glossary). By position only."""
    out: dict[str, str] = {}
    term: Region | None = None
    for k, region in enumerate(regions):
        if region.kind not in ("text", "list"):
            term = None if region.kind != "figure" else term
            continue
        nxt = regions[k + 1] if k + 1 < len(regions) else None
        line = region.box[3] - region.box[1]
        if term is not None and region.box[0] > term.box[0] + 2 * (term.box[3] - term.box[1]) / max(
                1, term.text.count("\n") + 1):
            out[region.region_id] = term.text
            continue
        term = None
        if (len(region.text.split()) <= 4 and nxt is not None and nxt.kind in ("text", "list")
                and nxt.box[0] > region.box[0] + 2 * line / max(1, region.text.count("\n") + 1)
                and nxt.box[1] >= region.box[1]):
            term = region
    return out


def _extreme_rows(region: Region, grid: tables.Grid, rows: list[int], cols: list[int], col_hit: dict[int, bool],
                  form: QuestionForm, question: str, around: str, half: set[str]) -> list[_Candidate]:
    """"Which … has the most …": per value column the question names (or the only one), the label of
    the row with the largest (smallest) number."""
    out = []
    value_cols = [c for c in cols if sum((r, c) in grid.cells and number_of(grid.cells[r, c].text) is not None
                                         for r in rows) >= 2]
    for c in value_cols:
        if len(value_cols) > 1 and not col_hit.get(c):
            continue
        # (every row in `numbered` has a cell in column c: indexed below)
        numbered = [(number_of(grid.cells[r, c].text), r) for r in rows
                    if (r, c) in grid.cells and number_of(grid.cells[r, c].text) is not None
                    and grid.row_labels.get(r)]
        if len(numbered) < 2:
            continue
        number, r = (max if form.superlative > 0 else min)(numbered)
        label, col_label = grid.row_labels[r], grid.col_labels.get(c, "")
        cell_text = grid.cells[r, c].text
        evidence = f"{label} | {col_label}: {cell_text}" if col_label else f"{label}: {cell_text}"
        column_box = union([grid.cells[rr, c].box for _, rr in numbered] + grid.header_boxes(r, c))
        labels = " ".join(grid.row_labels.get(rr, "") for _, rr in numbered)
        out.append(_Candidate(label, evidence, column_box, region.region_id, "table", f"{col_label} {around}",
                              terms_of(f"{col_label} {labels} {around}"), terms_of(f"{col_label} {label}"),
                              True, True, bonus=0.2, context=half))
    return out


def _band(region: Region, sentence: spans.Sentence) -> Box:
    """The part of a region's box that holds a sentence: its band of lines, with a quarter line of margin."""
    x1, y1, x2, y2 = region.box
    if sentence.n_lines <= 1:
        return region.box
    step = (y2 - y1) / sentence.n_lines
    return (x1, max(y1, y1 + (sentence.first_line - 0.25) * step), x2,
            min(y2, y1 + (sentence.last_line + 1.25) * step))


FIELD_BONUS = 0.25  # a printed field whose key the question names, over sentences that only share its words
FACT_LINE_WORDS = 8  # a fact box's line: a field, a name, a list of codes — no sentence


def _fact_box(text: str) -> bool:
    """Whether a region is a fact box (a letterhead, a form's block, a "company data" panel): three lines or
    more, each a short field or name, no running sentence."""
    lines = [line for line in text.split("\n") if line.strip()]
    return len(lines) >= 3 and all(len(line.split()) <= FACT_LINE_WORDS for line in lines)


def _text(region: Region, question: str, form: QuestionForm, context: str, kind: str = "text",
          ignore: frozenset[str] = frozenset(), before: str = "", fields_only: bool = False,
          label: str = "") -> list[_Candidate]:
    """Candidates of a text region: each sentence, and the span of it that answers. `context`: text around
    the region (its heading, the lines it hangs from) whose terms count as the sentence's own; `before`: the
    sentence the region follows from (the item it is indented under), which a pronoun opening it refers to;
    `label`: the line above that labels it ("Translated by:"), its first line's key as a field's;
    `fields_only`: only printed fields the question names ("SAM UEI: FJ58…" in a page's footer)."""
    out = []
    around = f"{context} {region.caption}"
    previous = before
    box_terms = terms_of(region.text) if _fact_box(region.text) else set()
    label = label or (before.strip() if _ends_on_colon(before) else "")
    for index, sentence in enumerate(spans.sentences_of(region.text)):
        # a printed field whose key the question names by another ending ("Location:" for "located") has it;
        # so does the line a label heads ("Translated by:" over the translators' names)
        field_value, field_terms = spans.printed_field(sentence.text, question)
        if not field_value and label and index == 0:
            field_value, field_terms = spans.labelled_value(label, sentence.text, question)
        if fields_only and not field_value:
            continue
        answer, fit = spans.answer_span(sentence.text, question, form, ignore)
        if fields_only and answer != field_value:
            continue
        # a field of a fact box reads with the box, as a cell with its row and column: its fields are about
        # what the box names ("COMPANY DATA / CEO zCore Group / Location: …"); a field in running text only
        # with its own words
        is_field = bool(field_value) and answer == field_value
        named = field_terms | box_terms if is_field else set()
        if form.superlative and not form.wants_value:  # "which is highest": only a sentence that says so
            fit = fit if says_superlative(sentence.text, form.superlative) else 0
        bonus = 0.1 if fit == 2 else -0.1 if form.entity and answer == sentence.text else 0.0
        # a sentence is about what the sentence before it names: half credit for that sentence's terms, as for
        # a running title — "One recommended regimen is paclitaxel 135 mg/m2 …" after "For patients with
        # AIDS-related KS that has failed to respond to first-line chemotherapy, there are two regimens", and
        # a sentence that opens on a pronoun ("It will typeset your content in red." after "You can use
        # \alert to ..."), which also quotes it whole when no span is read out of it
        anaphor = bool(previous) and bool(_ANAPHOR.match(sentence.text))
        referent = terms_of(previous) if previous else set()
        evidence = sentence.text
        if anaphor and answer == sentence.text:  # no span read out: what the pronoun stands for is part of
            answer = evidence = f"{previous} {sentence.text}"  # the answer ("Data may be missing. This makes…")
        out.append(_Candidate(answer, evidence, _band(region, sentence), region.region_id, kind,
                              _with_heading(sentence.text, context), terms_of(f"{sentence.text} {around}") | named,
                              terms_of(sentence.text) | named, fit > 0, True, bonus, referent,
                              field_key=field_terms if is_field else set()))
        previous = sentence.text
    return out


SHORT_LINE = 4  # words: a line this short ("Bicycle 12%") means what its heading says it is


def _with_heading(text: str, context: str) -> str:
    """What the embedder compares with the question: a sentence says what it means itself, a short line
    ("Bicycle 12%", "Net sales 1,204") only under its heading ("Commute mode share"), as a table's cell is
    compared with its row and column headers."""
    return f"{context}: {text}" if context and len(text.split()) <= SHORT_LINE else text


# A sentence that opens on a pronoun or a demonstrative refers back (English and Chinese, general language)
_ANAPHOR = re.compile(r"^\s*(?:(?:it|its|this|these|those|they|their|them|he|she|his|her)\b|[它这该其此])",
                      re.IGNORECASE)


def _figure(region: Region, question: str, form: QuestionForm, context: str,
            ignore: frozenset[str] = frozenset()) -> list[_Candidate]:
    """Candidates of a figure: its caption's sentences, its labelled values (paired by where the labels
    sit when the figure has them: `charts`), the label of its extreme value, its axes' and title's labels."""
    caption = region.caption
    out = []
    if caption:
        captioned = Region(region.region_id, "caption", region.box, caption)
        out += _text(captioned, question, form, f"{context} {region.text}", kind="figure", ignore=ignore)
    chart = charts.read_chart(region)
    if region.labels:  # positions known: pair by geometry only (a category with its bar's value), never by order
        pairs = [figures.LabelValue(p.category.text, p.value.text, p.number, union([p.category.box, p.value.box]))
                 for p in chart.pairs] + figures.line_pairs(region)
    else:  # a layout stored without label boxes: the labels' reading order
        pairs = figures.label_values(region)
    around, half = caption, terms_of(context)
    for pair in pairs:
        text = f"{pair.label} {pair.value}"
        if form.wants_value:
            answer, fit = spans.answer_span(pair.value, question, form, ignore)
        else:
            answer, fit = (pair.label if form.entity else text), 1
        # a value answers only for the category the question names (like a table's cell for its row)
        pinned = len(pairs) == 1 or _names_label(question, pair.label)
        out.append(_Candidate(answer, text, pair.box or region.box, region.region_id, "figure",
                              f"{text} {caption}".strip(), terms_of(f"{text} {around}"), terms_of(text), fit > 0,
                              pinned, 0.1 if fit == 2 else 0.0, half))
    if form.superlative and not form.quantity and len(pairs) >= 2:
        best = (max if form.superlative > 0 else min)(pairs, key=lambda p: p.number)
        labels = " ".join(p.label for p in pairs)
        out.append(_Candidate(best.label, f"{best.label} {best.value}", region.box, region.region_id, "figure",
                              f"{caption} {labels}".strip(), terms_of(f"{labels} {around} {region.text}"),
                              terms_of(f"{caption} {best.label}"), True, True, bonus=0.2, context=half))
    out += _chart_parts(region, chart, question, form, caption, half)
    if not pairs:  # labels without values: read them as lines too (a diagram's labels may line up like a chart's)
        # a lone number among labels with boxes is a tick or a bar's value no category claimed, and a category
        # of a recognised chart is structure (answered by its value or its extreme): neither answers alone
        structure = {id(lb) for lb in chart.categories} if chart.value_axis else set()  # a diagram's row of words
        # without a value axis is labels, not a chart's categories; an axis' title says what the axis measures
        # ("Maximum Eliminated Speed (mph)"), never which category: it answers only when asked (`_chart_parts`)
        # (a chart's: a diagram's label that sits where an axis title would is a label like any other)
        if chart.value_axis:
            structure |= {id(lb) for lb in (chart.x_title, chart.y_title) if lb is not None}
        lines = "\n".join(lb.text for lb in region.labels if charts.number(lb) is None and id(lb) not in structure) \
            if region.labels else region.text
        # a span read out of them answers (a value, a name, a code), and so does a short label whole; a longer run
        # of a picture's words read whole is no answer (a slide's title banner, a diagram's labels in a row)
        out += [c for c in _text(Region(region.region_id, "text", region.box, lines), question, form,
                                 f"{context} {caption}", kind="figure", ignore=ignore)
                if c.answer != c.evidence or len(c.answer.split()) <= SHORT_LINE]
    return out


def _names_label(question: str, label: str) -> bool:
    """Whether the question names a chart's category label: one of its terms, or a word of the question
    that the label abbreviates (a chart prints "Apr" for April, "Q3" as is)."""
    label_terms = terms_of(label)
    if label_terms & terms_of(question):
        return True
    words = set(re.findall(r"[^\W\d_]+", question.lower()))
    return any(len(t) >= 3 and t.isalpha() and any(w.startswith(t) for w in words) for t in label_terms)


def _chart_parts(region: Region, chart: charts.Chart, question: str, form: QuestionForm, caption: str,
                 half: set[str]) -> list[_Candidate]:
    """Answers a chart's structure gives: an axis' or the chart's title ("what is the x-axis label"), the
    highest/lowest tick of its value axis ("the largest value on the y axis"), how many categories it
    shows. Each only when the question names that part (`question.chart_part`)."""
    part = chart_part(question)
    out: list[_Candidate] = []
    # a question names a chart by its caption or by the title printed over it ("the 'Eliminate Stops and Near
    # Stops' chart"): both say which chart every part of it belongs to
    named = f"{caption} {chart.title.text}" if chart.title is not None else caption

    def add(answer: str, what: str, boxes: list[Box], bonus: float = 0.2) -> None:
        evidence = f"{what}: {answer}"
        out.append(_Candidate(answer, evidence, union(boxes), region.region_id, "figure", f"{evidence} {caption}",
                              terms_of(f"{evidence} {named}"), terms_of(evidence), True, True, bonus, half,
                              chart_part=True))

    titles = {"x": (chart.x_title, "x-axis (horizontal axis) label title"),
              "y": (chart.y_title, "y-axis (vertical axis) label title"),
              "title": (chart.title, "chart title")}
    if part in titles and not form.wants_value:
        label, what = titles[part]
        if label is not None:
            add(label.text, what, [label.box])
    # the axis asked about: the one its letter names (a line plot numbers both), else the value axis
    side = part if part in ("x", "y") else chart.value_axis_side
    ticks = chart.axis(side) if part in ("axis", "x", "y", "value") else []
    if ticks and form.superlative:
        best = (max if form.superlative > 0 else min)(ticks, key=lambda lb: charts.number(lb) or 0.0)
        extreme = "highest" if form.superlative > 0 else "lowest"
        axis = "value axis" if side == chart.value_axis_side else "axis"
        what = f"{extreme} tick label on the {axis} ({side})"
        add(best.text, what, [lb.box for lb in ticks])
    if part == "legend" and chart.legend and not form.wants_value:
        # "which series are in the legend": its entries, top to bottom
        add(", ".join(lb.text for lb in chart.legend), "legend entries", [lb.box for lb in chart.legend])
    labels = [lb for lb in region.labels if lb.text.strip()]
    if (form.quantity and part == "count" and len(labels) >= 2
            and not any(charts.number(lb) is not None for lb in labels)
            and not any(terms_of(lb.text) & terms_of(question) for lb in labels)):
        # "how many slices": a figure of labels only (a pie's or a diagram's parts), none of which the question
        # names (a question naming one asks about that one, and a chart with values answers with a value)
        names = list(dict.fromkeys(lb.text for lb in labels))
        add(str(len(names)), f"number of labelled parts ({', '.join(names)})", [lb.box for lb in labels], 0.1)
    return out
