"""The scores of the real-document benchmark (`scripts/bench_real_docs.py`): per question, whether the
index ranked the reference page and whether the best region it returned holds the answer
(`score_retrieval`); the agent's end-to-end answer as the evaluation harness scored it, with honest "not
found" answers counted apart from wrong ones (`score_answer`, `is_not_found`); and per content type,
language or document, recall@1/@5, region containment, contains/EM and the not-found and wrong counts
(`summarize`, `format_table`). The script ingests, asks and runs the agent; this module counts.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vrag_rl.scoring.metrics import contains_match, normalize_answer

CONTENT_TYPES = ("text", "table", "chart", "figure")

# Phrasings of "the documents do not say": the stand-in's own fallback and common VLM ones, English and
# Chinese. The demo (demo/render.py) shows the same phrasings as a not-found result; it imports
# streamlit, so the benchmark cannot import it from there.
_NOT_FOUND = re.compile(
    r"\b(could not|couldn't|cannot|can't|unable to|did not|didn't) (find|locate|determine)\b|"
    r"\b(not|no) (found|mentioned|stated|available|information|answer)\b|"
    r"(未找到|没有找到|找不到|无法找到|无法确定|未提及|没有提到)", re.IGNORECASE)


def _compact(text: str) -> str:
    """SQuAD-normalised text without spaces, after NFKC (ligatures such as 'ﬁ', full-width forms)."""
    return normalize_answer(unicodedata.normalize("NFKC", text or "")).replace(" ", "")


def answer_in_text(text: str, references: str | Sequence[str]) -> bool:
    """Whether a region's text holds one of the reference answers.

    Whole-token containment (the harness's `contains_match`) first; then containment with spaces removed,
    because a text layer or OCR splits and joins tokens differently from the printed answer ("45
    characters" vs "45characters", CJK text that has no spaces at all). References of one or two
    characters only count as whole tokens, or "2" would be found in any page number.
    """
    refs = [references] if isinstance(references, str) else list(references)
    if not text or not refs:
        return False
    if contains_match(text, refs) > 0:
        return True
    haystack = _compact(text)
    return any(len(_compact(r)) > 2 and _compact(r) in haystack for r in refs)


def is_not_found(prediction: str | None) -> bool:
    """Whether an answer is an honest refusal ("I could not find ...") rather than an attempt."""
    if not prediction or not prediction.strip():
        return True
    from vrag_rl.vrag.prompts import NO_ANSWER_FALLBACK

    text = prediction.strip()
    return text == NO_ANSWER_FALLBACK or (len(text) < 200 and bool(_NOT_FOUND.search(text)))


@dataclass
class QuestionResult:
    """Everything measured for one question; None where a stage did not run."""

    uid: str
    query: str
    content_type: str
    language: str
    reference_page_ids: list[str]
    reference_answer: list[str]
    document: str = ""  # the reference page's document id (for per-document and held-back-half tables)
    half: str = ""  # "held-back" / "development": --held-back-docs, or the question's `split` field; else ""
    retrieved_page_ids: list[str] = field(default_factory=list)
    rank: int | None = None  # 1-based rank of the first reference page in the top-k, None when absent
    regions_returned: bool = False  # did the index return any region with the hit of the right page
    best_region_holds: bool | None = None  # None: the index returned no regions for that hit
    any_region_holds: bool | None = None
    best_snippet_holds: bool | None = None  # the same check on the hit's (cut) snippet alone
    best_region: dict[str, Any] | None = None
    prediction: str | None = None
    status: str | None = None
    em: float | None = None
    contains: float | None = None
    not_found: bool | None = None
    agent_saw_page: bool | None = None  # the reference page was among the pages the agent retrieved
    error: str | None = None


def _region_dict(region: Any) -> dict[str, Any]:
    data = region.to_dict() if hasattr(region, "to_dict") else dict(region)
    return {k: data.get(k) for k in ("region_id", "kind", "box", "snippet", "score")}


def score_retrieval(result: QuestionResult, hits: Sequence[Any],
                    region_text: Callable[[str, Any], str] | None = None) -> None:
    """Fill the retrieval fields of `result` from the engine's hits (SearchHit-like: page_id, regions).

    `region_text(page_id, region_hit)` gives a region's whole text: a hit's snippet is cut short, and a
    reader that zooms into the region sees all of it. Without it (or when it fails), the snippet counts.
    """

    def text_of(page_id: str, region: Any) -> str:
        if region_text is not None:
            try:
                return region_text(page_id, region) or region.snippet
            except (LookupError, OSError, ValueError):
                pass
        return region.snippet

    result.retrieved_page_ids = [h.page_id for h in hits]
    wanted = set(result.reference_page_ids)
    for rank, hit in enumerate(hits, start=1):
        if hit.page_id not in wanted:
            continue
        result.rank = rank
        regions = sorted(getattr(hit, "regions", None) or [], key=lambda r: -float(getattr(r, "score", 0.0)))
        result.regions_returned = bool(regions)
        if regions:
            result.best_region = _region_dict(regions[0])
            result.best_region_holds = answer_in_text(text_of(hit.page_id, regions[0]), result.reference_answer)
            result.best_snippet_holds = answer_in_text(regions[0].snippet, result.reference_answer)
            result.any_region_holds = any(answer_in_text(text_of(hit.page_id, r), result.reference_answer)
                                          for r in regions)
        break


def score_answer(result: QuestionResult, record: dict[str, Any]) -> None:
    """Fill the end-to-end fields from one evaluation-harness record (its metrics, not new ones)."""
    result.prediction = record.get("prediction")
    result.status = record.get("status")
    result.em = record.get("em")
    result.contains = record.get("contains")
    result.error = record.get("error")
    result.not_found = result.error is None and is_not_found(result.prediction)
    seen = set(record.get("retrieved_page_ids") or [])
    result.agent_saw_page = bool(seen & set(result.reference_page_ids)) if result.reference_page_ids else None


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def summarize(results: Sequence[QuestionResult], key: str = "content_type") -> dict[str, dict[str, Any]]:
    """Per group (content type or language) and overall: recall@1/@5, region containment, contains/EM,
    right (contains), not-found and wrong counts. A region score is None ("n/a") when the index returned no regions."""
    groups: dict[str, list[QuestionResult]] = {}
    for r in results:
        groups.setdefault(getattr(r, key) or "unlabelled", []).append(r)
    order = [g for g in CONTENT_TYPES if g in groups] + sorted(g for g in groups if g not in CONTENT_TYPES)
    table = {g: _group_stats(groups[g]) for g in order}
    table["overall"] = _group_stats(list(results))
    return table


def _group_stats(rows: Sequence[QuestionResult]) -> dict[str, Any]:
    with_pages = [r for r in rows if r.reference_page_ids]
    any_regions = any(r.regions_returned for r in rows)
    answered = [r for r in rows if r.contains is not None or r.error is not None]

    def region_score(attr: str) -> float | None:
        if not any_regions:
            return None
        return _mean(1.0 if (r.rank is not None and getattr(r, attr)) else 0.0 for r in with_pages)

    return {
        "n": len(rows),
        "recall@1": _mean(1.0 if r.rank == 1 else 0.0 for r in with_pages),
        "recall@5": _mean(1.0 if r.rank is not None and r.rank <= 5 else 0.0 for r in with_pages),
        "region_best": region_score("best_region_holds"),
        "region_any": region_score("any_region_holds"),
        "region_snippet": region_score("best_snippet_holds"),
        "agent_page": _mean(None if r.agent_saw_page is None else float(r.agent_saw_page) for r in answered)
        if answered else None,
        "contains": _mean(r.contains for r in answered) if answered else None,
        "em": _mean(r.em for r in answered) if answered else None,
        "right": sum(1 for r in answered if r.contains) if answered else None,
        "not_found": sum(1 for r in answered if r.not_found and not r.contains) if answered else None,
        "wrong": sum(1 for r in answered if not r.contains and not r.not_found and r.error is None)
        if answered else None,
        "errors": sum(1 for r in answered if r.error) if answered else None,
    }


def format_table(table: dict[str, dict[str, Any]], title: str = "content type") -> str:
    """A fixed-width text table of `summarize`'s output (percentages; n/a where not measured)."""
    columns = [("n", "n"), ("recall@1", "R@1"), ("recall@5", "R@5"), ("region_best", "region"),
               ("region_any", "any-reg"), ("region_snippet", "reg-snip"), ("agent_page", "agent-pg"),
               ("contains", "contains"), ("em", "EM"), ("right", "right"), ("not_found", "not-found"),
               ("wrong", "wrong"), ("errors", "errors")]

    def cell(key: str, value: Any) -> str:
        if value is None:
            return "n/a"
        if key in ("n", "right", "not_found", "wrong", "errors"):
            return str(value)
        return f"{100 * value:.1f}"

    header = [title] + [label for _, label in columns]
    lines = [[name] + [cell(k, stats.get(k)) for k, _ in columns] for name, stats in table.items()]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(row) for row in lines)])
