"""`SearchEngine`: the read side of an index — load it, embed queries, rank pages, fuse channels.

Channels: `visual` (MaxSim over ColQwen2/ColPali tokens, or FAISS for single-vector visual
models), `text` (FAISS over page-text embeddings) and `bm25` (lexical). With more than one,
rankings are combined by reciprocal rank, so no score scale has to be calibrated. Where the index
holds page layouts, the text channels also score every region of every page, and a page ranks by its
own score and by its best region's (see `search_engine.regions`); each hit carries its best regions.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from search_engine.backends.base import open_visual_backend
from search_engine.embedders import Embedder, load_from_spec
from search_engine.fusion import RRF_K, fused_order, ranks_from_scores, reciprocal_rank_fusion, score_tiebreak
from search_engine.index.dense import DenseChannel
from search_engine.index.fast_maxsim import FastParams
from search_engine.index.manifest import Manifest, upgrade_message
from search_engine.index.maxsim import MaxSimScorer
from search_engine.lexical import BM25Channel, with_document_head
from search_engine.named_document import SECOND_LOOK_DEPTH, fuse_looks, head_terms, residual_query
from search_engine.page_layout import PageLayout
from search_engine.regions import REGION_SUFFIX, LayoutUnavailable, RegionIndex, global_ranks, read_layout_file
from search_engine.settings import EngineSettings
from search_engine.types import PageRecord, SearchHit, page_image_url

log = logging.getLogger(__name__)

MAX_TOP_K = 50

# Each channel's vote in the fusion (the weight its rankings share; `channel_weights` overrides it). The two text
# channels keep the two votes they had beside the visual channel's one, BM25 taking four fifths of them: fitted
# on the development halves of the world set and of the slide decks (docs/search.md, "Fusion weights"), every
# split that gave BM25 the larger vote found the page first more often than equal votes (world set 106 ->
# 108-112 of 136), this one most over the three sets.
DEFAULT_CHANNEL_WEIGHTS = {"bm25": 1.6, "text": 0.4}
# The share of a channel's weight its page view gets when it also ranks pages by their best region (the rest
# goes to the region view: search_engine.regions). A dense text channel votes through its regions only: its
# page vector is the mean of its windows, so the paragraph that answers is averaged with everything else on
# the page, and that view mostly favours short pages about the document's subject (title pages, covers);
# BM25's page score keeps every exact term, and its two views share the vote.
PAGE_VIEW_SHARE = {"text": 0.0}


@dataclass
class _State:
    """Everything a query needs, built off to the side and swapped in whole on reload."""

    manifest: Manifest
    page_ids: list[str]
    page_index: dict[str, int]
    doc_of_page: np.ndarray  # doc id per page row
    channels: dict[str, Any] = field(default_factory=dict)
    mtime: float = 0.0
    regions: RegionIndex | None = None  # every region of pages with a stored layout (None: no layouts)
    heads: dict[str, frozenset[str]] = field(default_factory=dict)  # tokens that name each document


class SearchEngine:
    """Page search over one index directory: load it once, then `search` / `batch_search` from any thread.

    Why one object: the embedders (ColQwen2, MiniLM) and the page-token matrix are loaded once and
    shared by every query; `reload()` picks up documents another process ingested, swapping the whole
    state at once so a query never sees half an index. Channels (visual, text, bm25) are whatever the
    index holds, fused by reciprocal rank; `load_models=False` opens an index without its embedders
    (for `search_by_vectors`), `visual_backend` picks exact MaxSim or a fast index.
    """

    def __init__(self, index_dir: str | Path, *, device: str = "auto", load_models: bool = True,
                 visual_embedder: Embedder | None = None, text_embedder: Embedder | None = None,
                 use_bm25: bool = True, rrf_k: int = RRF_K, channel_weights: dict[str, float] | None = None,
                 settings: EngineSettings | None = None, visual_backend: str | None = None,
                 fast_params: FastParams | None = None, qdrant: dict[str, Any] | None = None,
                 second_look: bool = True):
        """`settings`: the deployment's visual backend and Qdrant options (default: "auto", none; the entry
        points pass `EngineSettings.from_env()`: this class never reads the environment). `visual_backend`
        ("auto", "exact", "fast" or "qdrant") and `qdrant` (QdrantBackend options: location, collection,
        api_key, ...) given here win over them. Multi-vector visual channels only. `second_look`: ask a
        question that names a document again of its pages without the naming words (`named_document`)."""
        settings = settings or EngineSettings()
        self.index_dir = Path(index_dir).resolve()
        self.visual_backend = visual_backend or settings.visual_backend
        self.fast_params = fast_params
        self.qdrant_options = dict(qdrant or settings.qdrant_options)
        if not Manifest.exists(self.index_dir):
            raise FileNotFoundError(f"no index at {self.index_dir} (manifest.json missing); ingest documents first")
        self.device = device
        self.use_bm25 = use_bm25
        self.rrf_k = rrf_k
        self.second_look = second_look
        self.channel_weights = {**DEFAULT_CHANNEL_WEIGHTS, **(channel_weights or {})}
        self._lock = threading.Lock()
        self._state = self._build_state()
        self.embedders: dict[str, Embedder | None] = {"visual": visual_embedder, "text": text_embedder}
        if load_models:
            for channel in ("visual", "text"):
                spec = self._state.manifest.spec(channel)
                if spec is not None and self.embedders[channel] is None:
                    self.embedders[channel] = load_from_spec(spec, device=device)

    @classmethod
    def load(cls, index_dir: str | Path, **kwargs) -> SearchEngine:
        """Open the index at `index_dir` (keyword arguments as the constructor's)."""
        return cls(index_dir, **kwargs)

    # ---- loading ---------------------------------------------------------------------------------
    def _scorer_device(self) -> str:
        if self.device == "auto":
            try:
                import torch

                return "cuda" if torch.cuda.is_available() else "cpu"
            except ImportError:  # pragma: no cover
                return "cpu"
        return self.device

    def _build_state(self) -> _State:
        started = time.perf_counter()
        manifest_path = self.index_dir / "manifest.json"
        mtime = manifest_path.stat().st_mtime
        manifest = Manifest.load(self.index_dir)
        page_ids: list[str] = []
        vectors: dict[str, list[np.ndarray]] = {"visual": [], "text": []}
        counts: dict[str, list[int]] = {"visual": [], "text": []}
        for entry in manifest.documents.values():
            page_ids.extend(entry.page_ids)
            for channel in ("visual", "text"):
                seg = entry.segments.get(channel)
                spec = manifest.spec(channel)
                if spec is None:
                    continue
                if seg is None:
                    raise RuntimeError(f"document {entry.doc_id} has no {channel} segment")
                if channel == "text" or not spec.multi_vector:
                    vectors[channel].append(np.load(self.index_dir / seg["file"], mmap_mode="r"))
                counts[channel].extend(seg["counts"])
        page_index = {pid: i for i, pid in enumerate(page_ids)}
        doc_of_page = np.asarray([manifest.pages[p].doc_id for p in page_ids], dtype=object)
        state = _State(manifest=manifest, page_ids=page_ids, page_index=page_index, doc_of_page=doc_of_page,
                       mtime=mtime)
        for channel in ("visual", "text"):
            spec = manifest.spec(channel)
            if spec is None:
                continue
            dim = spec.dim
            if spec.multi_vector:
                state.channels[channel] = open_visual_backend(
                    self.visual_backend, self.index_dir, manifest, page_ids, page_index,
                    lambda c=counts[channel], d=dim: self._exact_scorer(manifest, c, d),
                    device=self._scorer_device(), fast_params=self.fast_params, qdrant=self.qdrant_options,
                    previous=getattr(getattr(self, "_state", None), "channels", {}).get(channel))
            else:
                flat = np.concatenate(vectors[channel]) if vectors[channel] else np.zeros((0, dim), np.float32)
                state.channels[channel] = DenseChannel(flat)
        records = [manifest.pages[p] for p in page_ids]
        texts, docs, numbers = [r.text for r in records], [r.doc_id for r in records], [r.page_number for r in records]
        state.heads = head_terms(texts, docs, numbers)
        if self.use_bm25 and any(t.strip() for t in texts):
            state.channels["bm25"] = BM25Channel(with_document_head(texts, docs, numbers))
        if not manifest.has_layouts and manifest.documents:
            log.warning(upgrade_message(self.index_dir))
        text_spec = manifest.spec("text")
        state.regions = RegionIndex.load(self.index_dir, manifest, page_ids,
                                         use_dense=text_spec is not None and not text_spec.multi_vector,
                                         use_bm25="bm25" in state.channels)
        log.info("loaded %d pages (%s) in %.2fs", len(page_ids), ", ".join(state.channels),
                 time.perf_counter() - started)
        return state

    def _exact_scorer(self, manifest: Manifest, counts: list[int], dim: int) -> MaxSimScorer:
        """Every visual page token in RAM (fp32 on CPU while it fits): the exact reference path."""
        need = sum(counts) * dim * 2  # at least the fp16 tokens stay in RAM
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if need > 0.6 * total:
            raise RuntimeError(f"exact search would hold {need / 2**30:.1f} GiB of page vectors in RAM "
                               f"({total / 2**30:.0f} GiB here): build a fast index (`vrag-search build-fast-index "
                               f"--index {self.index_dir}`) or serve with --backend qdrant")
        parts = [np.load(self.index_dir / e.segments["visual"]["file"], mmap_mode="r")
                 for e in manifest.documents.values()]
        flat = np.concatenate(parts) if parts else np.zeros((0, dim), np.float16)
        return MaxSimScorer(flat, counts, device=self._scorer_device())

    @property
    def visual_backend_name(self) -> str:
        """The backend actually serving the visual channel (auto resolved), or "" without one."""
        channel = self._state.channels.get("visual")
        names = {"ExactBackend": "exact", "FastVisualIndex": "fast", "QdrantBackend": "qdrant"}
        return names.get(type(channel).__name__, "dense" if channel is not None else "")

    def reload(self, force: bool = False) -> bool:
        """Re-read the index if another process changed it; returns whether anything changed."""
        mtime = (self.index_dir / "manifest.json").stat().st_mtime
        if not force and mtime == self._state.mtime:
            return False
        new_state = self._build_state()
        with self._lock:
            self._state = new_state
        for channel in ("visual", "text"):
            spec = new_state.manifest.spec(channel)
            if spec is not None and self.embedders.get(channel) is None:
                self.embedders[channel] = load_from_spec(spec, device=self.device)
        return True

    # ---- queries ------------------------------------------------------------------------------------
    def search(self, query: str, top_k: int = 5, doc_ids: Sequence[str] | None = None,
               channels: Sequence[str] | None = None) -> list[SearchHit]:
        """The `top_k` best pages for one query (see `batch_search`)."""
        return self.batch_search([query], top_k=top_k, doc_ids=doc_ids, channels=channels)[0]

    def batch_search(self, queries: Sequence[str], top_k: int = 5, doc_ids: Sequence[str] | None = None,
                     channels: Sequence[str] | None = None) -> list[list[SearchHit]]:
        """`channels` picks a subset of visual / text / bm25 (default: all the index has). With `second_look`
        (the default), a query that names the document of its best page is asked again of that document's
        pages without the naming words, and the two rankings fused (`search_engine.named_document`)."""
        queries = [_check_query(q) for q in queries]
        if not 1 <= top_k <= MAX_TOP_K:
            raise ValueError(f"top_k must be between 1 and {MAX_TOP_K}")
        if not self.second_look:
            return self._search_once(queries, top_k, doc_ids, channels)
        state = self._state
        results = self._search_once(queries, max(top_k, SECOND_LOOK_DEPTH), doc_ids, channels)
        for i, (query, hits) in enumerate(zip(queries, results)):
            entry = state.manifest.documents.get(hits[0].doc_id) if hits else None
            pages = len(entry.page_ids) if entry is not None else 0
            rest = residual_query(query, state.heads.get(entry.doc_id, frozenset())) if entry and pages > 1 else None
            second = self._search_once([rest], min(SECOND_LOOK_DEPTH, pages), [entry.doc_id],
                                       channels)[0] if entry and rest else []
            results[i] = fuse_looks(hits, second, top_k, self.rrf_k)
        return results

    def _search_once(self, queries: list[str], top_k: int, doc_ids: Sequence[str] | None,
                     channels: Sequence[str] | None) -> list[list[SearchHit]]:
        """The channels' fused ranking of each query (no second look)."""
        state = self._state
        wanted = set(channels) if channels else set(state.channels)
        unknown = wanted - set(state.channels)
        if unknown:
            raise ValueError(f"unknown channel(s) {sorted(unknown)}; this index has {sorted(state.channels)}")
        allowed = self._allowed(state, doc_ids)
        channel_scores: dict[str, np.ndarray] = {}
        region_scores: dict[str, np.ndarray] = {}
        regions = state.regions
        for channel in ("visual", "text"):
            if channel not in wanted:
                continue
            scorer = state.channels.get(channel)
            embedder = self.embedders.get(channel)
            if scorer is None:
                continue
            if embedder is None:
                raise RuntimeError(f"the {channel} channel needs its query embedder (loaded with load_models=False?)")
            query_vectors = embedder.embed_queries(queries)
            channel_scores[channel] = self._score(scorer, query_vectors, allowed)
            if channel == "text" and regions is not None and regions.dense is not None:
                region_scores["text"] = regions.dense.score(query_vectors)
        if "bm25" in wanted:
            pages = None if allowed is None else np.flatnonzero(allowed)  # a search inside documents reads theirs
            channel_scores["bm25"] = state.channels["bm25"].score(queries, pages)
            if regions is not None and regions.bm25 is not None:
                owners = None if allowed is None else np.flatnonzero(regions.region_mask(allowed))
                region_scores["bm25"] = regions.bm25.score(queries, owners)
        return self._rank(state, channel_scores, len(queries), top_k, doc_ids, self._blind_channels(queries),
                          region_scores)

    def _blind_channels(self, queries: Sequence[str]) -> list[set[str]]:
        """Per query, the channels that cannot read it: the English-only MiniLM text channel for a Chinese,
        Japanese or Korean query (it sees such text as little more than characters, and fused by rank its
        guesses drown BM25's bigram matches: on upstream's Chinese slides 3/8 top-1 fused, 7/8 BM25 alone).
        Left out only where BM25 has an opinion (see `_rank`)."""
        from search_engine.lexical import has_cjk

        spec = self._state.manifest.spec("text")
        english_only = spec is not None and spec.kind == "minilm"
        return [{"text"} if english_only and has_cjk(q) else set() for q in queries]

    def search_by_vectors(self, query_vectors: Sequence[np.ndarray], top_k: int = 5, channel: str = "visual",
                          doc_ids: Sequence[str] | None = None) -> list[list[SearchHit]]:
        """Rank with precomputed query embeddings (benchmarks, callers that embed elsewhere)."""
        state = self._state
        if channel not in state.channels:
            raise ValueError(f"the index has no {channel} channel")
        scores = {channel: self._score(state.channels[channel], list(query_vectors), self._allowed(state, doc_ids))}
        return self._rank(state, scores, len(query_vectors), top_k, doc_ids)

    @staticmethod
    def _allowed(state: _State, doc_ids: Sequence[str] | None) -> np.ndarray | None:
        """Page mask of the doc_ids filter (None = all); approximate backends choose candidates inside it."""
        if not doc_ids:
            return None
        return np.isin(state.doc_of_page, list(doc_ids))

    @staticmethod
    def _score(scorer: Any, query_vectors: list[np.ndarray], allowed: np.ndarray | None) -> np.ndarray:
        if hasattr(scorer, "num_pages") and hasattr(scorer, "score") and not isinstance(scorer, DenseChannel):
            return scorer.score(query_vectors, allowed=allowed)
        return scorer.score(query_vectors)

    def _rank(self, state: _State, channel_scores: dict[str, np.ndarray], num_queries: int, top_k: int,
              doc_ids: Sequence[str] | None, blind: list[set[str]] | None = None,
              region_scores: dict[str, np.ndarray] | None = None) -> list[list[SearchHit]]:
        """Fuse the channels' page rankings (and, per text channel, the ranking of pages by their best
        region, at half the channel's weight each: see search_engine.regions) into the top_k hits."""
        num_pages = len(state.page_ids)
        valid = np.ones(num_pages, bool)
        if doc_ids:
            unknown = [d for d in doc_ids if d not in state.manifest.documents]
            if len(unknown) == len(doc_ids):
                raise KeyError(f"unknown document id(s): {', '.join(unknown)}")
            valid = np.isin(state.doc_of_page, list(doc_ids))
        results: list[list[SearchHit]] = []
        depth = max(top_k * 4, 50)
        regions = state.regions
        region_scores = region_scores or {}
        region_mask = regions.region_mask(valid) if regions is not None and region_scores else None
        # A page with no searchable region (no layout, a video frame, a blank OCR) is its own single region
        # in the region view: without this it would get only half its channel's vote and sink below pages
        # that have regions, whatever it says.
        regionless = None
        if regions is not None and region_mask is not None:  # (region_mask is only set when regions is)
            regionless = np.ones(num_pages, bool)
            regionless[regions.page_row[region_mask]] = False
        for qi in range(num_queries):
            rankings: dict[str, np.ndarray] = {}
            raw_scores: dict[str, np.ndarray] = {}  # each ranking's own scores, for breaking fusion ties
            channel_rank: dict[str, dict[int, int]] = {}
            region_ranks: dict[str, np.ndarray] = {}
            for name, scores in channel_scores.items():
                row = scores[qi]
                if name == "bm25" and not np.any(row[valid] > 0):
                    continue  # no query term occurs anywhere: BM25 has no opinion
                order = ranks_from_scores(row, valid & (row > 0) if name == "bm25" else valid, depth)
                rankings[name] = order
                raw_scores[name] = row
                channel_rank[name] = {int(p): r + 1 for r, p in enumerate(order)}
                if name in region_scores and regions is not None and region_mask is not None:
                    region_row = region_scores[name][qi]
                    best = regions.best_per_page(region_row, region_mask, num_pages)
                    best[regionless] = row[regionless]
                    has_region = np.isfinite(best) & (best > 0 if name == "bm25" else True)
                    if np.any(has_region & valid):
                        region_order = ranks_from_scores(best, valid & has_region, depth)
                        rankings[name + REGION_SUFFIX] = region_order
                        raw_scores[name + REGION_SUFFIX] = best
                        channel_rank[name + REGION_SUFFIX] = {int(p): r + 1 for r, p in enumerate(region_order)}
                        region_ranks[name + REGION_SUFFIX] = global_ranks(region_row, region_mask, name == "bm25")
            if not rankings:
                results.append([])
                continue
            if blind and "bm25" in rankings:
                rankings = {n: r for n, r in rankings.items() if n.removesuffix(REGION_SUFFIX) not in blind[qi]}
                region_ranks = {n: r for n, r in region_ranks.items() if n in rankings}
            weights = self._fusion_weights(rankings)
            if len(rankings) == 1:
                (name, order), = rankings.items()
                top = order[:top_k]
                fused_scores = channel_scores[name][qi]
            else:
                fused_scores = reciprocal_rank_fusion(rankings, num_pages, k=self.rrf_k, weights=weights)
                tiebreak = score_tiebreak(rankings, raw_scores, num_pages, weights)
                top = fused_order(fused_scores, tiebreak, valid & (fused_scores > 0), top_k)
            hits = []
            for rank, page_row in enumerate(top, start=1):
                record = state.manifest.pages[state.page_ids[page_row]]
                hit = self._hit(record, rank, float(fused_scores[page_row]),
                                {n: r[int(page_row)] for n, r in channel_rank.items() if int(page_row) in r})
                if regions is not None and region_ranks:
                    hit.regions = regions.hits(int(page_row), region_ranks, weights, self.rrf_k)
                hits.append(hit)
            results.append(hits)
        return results

    def _fusion_weights(self, rankings: dict[str, np.ndarray]) -> dict[str, float]:
        """Weights of the rankings in the fusion: each channel's weight (`channel_weights`), split between its
        page view and its region view (PAGE_VIEW_SHARE, half each by default) when it ranks pages both ways,
        so that it keeps one vote however many views it has (see search_engine.regions)."""
        weights = {}
        for name in rankings:
            base = name.removesuffix(REGION_SUFFIX)
            weight = self.channel_weights.get(base, 1.0)
            if base in rankings and base + REGION_SUFFIX in rankings:
                share = PAGE_VIEW_SHARE.get(base, 0.5)
                weight *= share if name == base else 1.0 - share
            weights[name] = weight
        return weights

    def _hit(self, record: PageRecord, rank: int, score: float, channel_ranks: dict[str, int]) -> SearchHit:
        metadata = {"source_path": record.source_path, "width": record.width, "height": record.height,
                    "text_source": record.text_source, "channel_ranks": channel_ranks, **record.extra}
        return SearchHit(rank=rank, page_id=record.page_id, doc_id=record.doc_id, page_number=record.page_number,
                         score=score, image_path=str(self.index_dir / record.image_path), metadata=metadata,
                         image_url=page_image_url(record.page_id), **SearchHit.item_fields(metadata))

    # ---- pages and documents ----------------------------------------------------------------------------
    def page(self, page_id: str) -> PageRecord | None:
        """The record of a page (size, text, source), or None for an unknown id."""
        return self._state.manifest.pages.get(page_id)

    def page_layout(self, page_id: str) -> PageLayout:
        """The page's structure (regions with boxes in page-image pixels: paragraphs, headings, tables with
        cells, figures with their labels and captions, running headers/footers).

        KeyError for an unknown page id; `LayoutUnavailable` (a LookupError) with the reason for a page
        without a stored layout — an index built before layouts names the command that upgrades it.
        """
        state = self._state
        record = state.manifest.pages.get(page_id)
        if record is None:
            raise KeyError(f"unknown page id {page_id!r}")
        entry = state.manifest.documents.get(record.doc_id)
        seg = entry.segments.get("layout") if entry is not None else None
        if seg is None:
            if not state.manifest.has_layouts:
                raise LayoutUnavailable(upgrade_message(self.index_dir))
            raise LayoutUnavailable(f"page {page_id!r} has no stored layout (its document was added without one; "
                                    "re-ingest it to read its structure)")
        path = (self.index_dir / seg["file"]).resolve()
        if not path.is_relative_to(self.index_dir):
            raise LayoutUnavailable(f"page {page_id!r}: its layout file points outside the index")
        try:
            layouts = read_layout_file(path)
        except (OSError, ValueError) as exc:
            raise LayoutUnavailable(f"page {page_id!r}: its document's layout file is unreadable ({exc})") from None
        for layout in layouts:
            if layout.get("page_id") == page_id:
                return PageLayout.from_dict(layout)
        raise LayoutUnavailable(f"page {page_id!r} has no stored layout")

    def page_image_path(self, page_id: str) -> Path:
        """The image file of a known page; never a path outside the index, whatever the id."""
        record = self.page(page_id)
        if record is None:
            raise KeyError(f"unknown page id {page_id!r}")
        path = (self.index_dir / record.image_path).resolve()
        if not path.is_relative_to(self.index_dir):
            raise PermissionError(f"page {page_id!r} points outside the index")
        return path

    def documents(self) -> list[dict[str, Any]]:
        """Every document of the index: doc_id, source_path, num_pages, kind, added_at."""
        return [{"doc_id": e.doc_id, "source_path": e.source_path, "num_pages": e.num_pages, "kind": e.kind,
                 "added_at": e.added_at} for e in self._state.manifest.documents.values()]

    def stats(self) -> dict[str, Any]:
        """Counts, channels and embedders of the loaded index (the /stats body); `degraded_pages`: pages a step of
        ingestion failed on (`Manifest.degraded_pages`)."""
        state = self._state
        return {
            "index_dir": str(self.index_dir),
            "documents": len(state.manifest.documents),
            "pages": len(state.page_ids),
            "channels": sorted(state.channels),
            "embedders": state.manifest.embedders,
            "visual_backend": self.visual_backend_name,
            "updated_at": state.manifest.updated_at,
            "degraded_pages": len({(d.doc_id, d.page) for d in state.manifest.degraded_pages()}),
        }


MAX_QUERY_CHARS = 2000


def _check_query(query: str) -> str:
    if not isinstance(query, str):
        raise TypeError("a query must be a string")
    stripped = query.strip()
    if not stripped:
        raise ValueError("empty query")
    if len(stripped) > MAX_QUERY_CHARS:
        raise ValueError(f"query longer than {MAX_QUERY_CHARS} characters")
    return stripped
