"""Region-level search: the text channels score every region of every page, not only whole pages.

Why: a page's text vector is the mean of its windows and its BM25 score is diluted by its length, so a
short answer on a long page about six subjects ranks below a short page about the question's subject.
Scoring regions (paragraphs, table cells' rows, figure labels, each with its section heading and
caption, see `layout.search_texts.region_search_texts`) finds the paragraph; the page then ranks by
its best region too.

How a page's score combines page and regions (see `SearchEngine._rank`): each text channel (MiniLM,
BM25) contributes two rankings of pages to reciprocal-rank fusion — by the page's own score and by its
best region's score (max over regions, "MaxP": the standard aggregation of passage scores into a
document score, Dai & Callan 2019) — sharing the channel's weight (`engine.PAGE_VIEW_SHARE`: half each for
BM25; all to the regions for the dense channel, whose page vector averages the answer away). The two are
two views of one channel: the channel keeps its vote in the fusion whatever its views (the visual
channel's share is unchanged). Ranks, not scores, so no scale between cosine and BM25 or between page and
region scores needs calibrating.

Storage: regions come from the per-document layout files (`layouts/*.jsonl`); their MiniLM vectors
from `segments/text_regions/` (one row per region, in layout order).
"""
from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from search_engine.index.dense import DenseChannel
from search_engine.index.manifest import Manifest
from search_engine.layout.search_texts import SEARCHED_KINDS, region_passages, region_search_texts, snippet
from search_engine.lexical import PassageBM25
from search_engine.page_layout import PageLayout, RegionHit

log = logging.getLogger(__name__)

REGION_SUFFIX = "_regions"  # "text" -> "text_regions": the ranking of pages by their best region
REGION_SEGMENT = "text_regions"
MAX_REGIONS_PER_HIT = 3


class LayoutUnavailable(LookupError):
    """A known page without a stored layout (an index of the previous format, or a source without one)."""


@dataclass
class RegionIndex:
    """Every searchable region of the index: its page row, id, kind, box, snippet, and its scorers."""

    page_start: np.ndarray  # (pages + 1,) offsets: the regions of page row p are page_start[p]:page_start[p+1]
    page_row: np.ndarray  # (regions,) page row of each region
    ids: list[str]
    kinds: list[str]
    boxes: np.ndarray  # (regions, 4) float32, page-image pixels
    snippets: list[str]
    searchable: np.ndarray  # (regions,) bool: has text and is not a running header/footer
    dense: DenseChannel | None = None
    bm25: PassageBM25 | None = None

    @property
    def size(self) -> int:
        return len(self.ids)

    # ---- loading ---------------------------------------------------------------------------------------
    @classmethod
    def load(cls, index_dir: Path, manifest: Manifest, page_ids: Sequence[str], use_dense: bool,
             use_bm25: bool) -> RegionIndex | None:
        """The regions of every document that has a layout segment (None when none has): documents of an
        older format simply contribute no regions."""
        page_index = {pid: i for i, pid in enumerate(page_ids)}
        per_page: dict[int, tuple[list[dict[str, Any]], list[str], list[list[str]]]] = {}
        vectors: dict[int, np.ndarray] = {}
        for entry in manifest.documents.values():
            seg = entry.segments.get("layout")
            if seg is None:
                continue
            try:
                layouts = read_layout_file(index_dir / seg["file"])
            except (OSError, ValueError) as exc:
                log.error("document %s: page layouts unreadable (%s); searched page by page", entry.doc_id, exc)
                continue
            region_seg = entry.segments.get(REGION_SEGMENT) if use_dense else None
            rows = None
            if region_seg is not None:
                rows = np.load(index_dir / region_seg["file"], mmap_mode="r")
                if list(region_seg["counts"]) != [len(layout.get("regions", [])) for layout in layouts]:
                    log.error("document %s: region vectors do not match its layouts; regions scored by BM25 only",
                              entry.doc_id)
                    rows = None
            offset = 0
            for layout in layouts:
                row = page_index.get(layout["page_id"])
                count = len(layout.get("regions", []))
                if row is not None:
                    page_layout = PageLayout.from_dict(layout)
                    texts = region_search_texts(page_layout, seg.get("title", ""))
                    per_page[row] = (layout["regions"], texts,
                                     region_passages(page_layout, seg.get("title", ""), texts))
                    if rows is not None:
                        vectors[row] = np.asarray(rows[offset:offset + count], np.float32)
                offset += count
        if not per_page:
            return None
        starts, page_row, ids, kinds, boxes, snippets, searchable, texts_all = [0], [], [], [], [], [], [], []
        passages_all: list[list[str]] = []
        dense_rows: list[np.ndarray] = []
        dim = next((v.shape[1] for v in vectors.values() if v.ndim == 2 and v.shape[0]), 0)
        for row in range(len(page_ids)):
            regions, texts, passages = per_page.get(row, ([], [], []))
            for region, text, passage in zip(regions, texts, passages, strict=True):
                page_row.append(row)
                ids.append(region["region_id"])
                kinds.append(region["kind"])
                boxes.append(region["box"])
                body = " ".join(p for p in (region.get("caption", ""), region.get("text", "")) if p)
                snippets.append(snippet(body.replace("\n", " ; ")))
                searchable.append(bool(text) and region["kind"] in SEARCHED_KINDS)
                texts_all.append(text)
                passages_all.append(passage)
            if dim and regions:
                block = vectors.get(row)
                dense_rows.append(block if block is not None else np.zeros((len(regions), dim), np.float32))
            starts.append(len(ids))
        index = cls(np.asarray(starts, np.int64), np.asarray(page_row, np.int64), ids, kinds,
                    np.asarray(boxes, np.float32).reshape(-1, 4), snippets, np.asarray(searchable, bool))
        if dim and dense_rows:
            index.dense = DenseChannel(np.concatenate(dense_rows))
        if use_bm25 and any(texts_all):
            index.bm25 = PassageBM25(passages_all)
        return index

    # ---- scoring ---------------------------------------------------------------------------------------
    def region_mask(self, valid_pages: np.ndarray) -> np.ndarray:
        """Regions that may match: searchable, on a page the query may return."""
        return self.searchable & valid_pages[self.page_row]

    def best_per_page(self, scores: np.ndarray, mask: np.ndarray, num_pages: int) -> np.ndarray:
        """Each page's best region score (MaxP), -inf for pages without a candidate region."""
        best = np.full(num_pages, -np.inf, np.float64)
        np.maximum.at(best, self.page_row[mask], scores[mask].astype(np.float64))
        return best

    def hits(self, page_row: int, ranks: dict[str, np.ndarray], weights: dict[str, float], k: int,
             limit: int = MAX_REGIONS_PER_HIT) -> list[RegionHit]:
        """The page's best regions: each scored by reciprocal rank over the region rankings (global ranks,
        so scores compare across pages), best first; regions no channel ranked are left out."""
        start, end = int(self.page_start[page_row]), int(self.page_start[page_row + 1])
        if start == end or not ranks:
            return []
        scored = []
        for r in range(start, end):
            if not self.searchable[r]:
                continue
            score = sum(weights.get(name, 1.0) / (k + 1 + rank[r]) for name, rank in ranks.items() if rank[r] >= 0)
            if score > 0:
                scored.append((score, r))
        scored.sort(key=lambda item: -item[0])
        return [RegionHit(self.ids[r], self.kinds[r], tuple(round(float(v), 1) for v in self.boxes[r]),  # type: ignore[arg-type]
                          self.snippets[r], round(float(score), 6)) for score, r in scored[:limit]]


def global_ranks(scores: np.ndarray, mask: np.ndarray, positive_only: bool) -> np.ndarray:
    """0-based rank of every region among the candidates (-1 for regions that are not ranked)."""
    candidates = mask & (scores > 0) if positive_only else mask & np.isfinite(scores)
    ranks = np.full(scores.shape[0], -1, np.int64)
    idx = np.flatnonzero(candidates)
    order = idx[np.argsort(-scores[idx], kind="stable")]
    ranks[order] = np.arange(order.size)
    return ranks


_LAYOUT_CACHE: OrderedDict[Path, list[dict[str, Any]]] = OrderedDict()
_LAYOUT_CACHE_SIZE = 32
_LAYOUT_LOCK = threading.Lock()


def read_layout_file(path: Path) -> list[dict[str, Any]]:
    """The page layouts of one document (JSON lines), the last few documents' kept in memory (file names
    carry the document's content hash, so a cached entry never goes stale)."""
    path = Path(path)
    with _LAYOUT_LOCK:
        if path in _LAYOUT_CACHE:
            _LAYOUT_CACHE.move_to_end(path)
            return _LAYOUT_CACHE[path]
    with open(path, encoding="utf-8") as fh:
        layouts = [json.loads(line) for line in fh if line.strip()]
    with _LAYOUT_LOCK:
        _LAYOUT_CACHE[path] = layouts
        while len(_LAYOUT_CACHE) > _LAYOUT_CACHE_SIZE:
            _LAYOUT_CACHE.popitem(last=False)
    return layouts
