"""One episode of the VRAG loop: think → search / crop → … → answer, as a stream of typed events.

This is the single implementation behind `VRAG.run`, `VRAG.stream`, the evaluation runner and
the RL rollout. The turn machinery (policy call, token budget, turn limit, invalid replies,
events, finish) is the shared `EpisodeEngine`'s; what is VRAG's own is here: its memory (a growing
`Transcript`) and its tools — `<search>` shows new page images, `<bbox>` crops the last image,
`<answer>` ends the episode. It talks to a model only through the `Policy` seam, so the same loop
runs over an HTTP endpoint, an in-process model, or a token recorder that hands trajectories to a
trainer.

Every way a turn can go wrong (malformed reply, bbox before any image, empty search, an endpoint
that stays down or answers garbage, even a bug in an adapter) becomes an event; the episode
always ends with one of `EPISODE_STATUSES` within `max_turns + 1` model calls, and never raises.
"""
from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from PIL import Image

from search_engine.client import SearchClient, SearchError
from search_engine.types import SearchHit
from vrag_rl.agent.engine import EpisodeEngine, TurnOutcome
from vrag_rl.agent.events import (
    AgentEvent,
    AnswerEvent,
    CropEvent,
    ErrorEvent,
    ImageRef,
    SearchEvent,
    SearchResultsEvent,
    ThinkEvent,
)
from vrag_rl.agent.images import map_bbox_to_page
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policy import Policy, image_part, text_part
from vrag_rl.agent.result import TurnRecord
from vrag_rl.vrag.actions import parse_reply
from vrag_rl.vrag.config import AgentConfig
from vrag_rl.vrag.prompts import Prompts
from vrag_rl.vrag.result import EpisodeResult
from vrag_rl.vrag.transcript import Transcript


class Episode(EpisodeEngine):
    """One question, asked of one policy over one search client; iterate `run()` for its events."""

    config: AgentConfig
    prompts: Prompts
    memory: Transcript

    def __init__(self, question: str, config: AgentConfig, prompts: Prompts, policy: Policy,
                 search: SearchClient, episode_id: str | None = None, pages: PageImageStore | None = None):
        super().__init__(question, config, prompts, policy, search, episode_id, pages)
        self.memory = Transcript(self.question, prompts, self.page_paths)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.memory.messages

    @property
    def images(self) -> list[ImageRef]:
        return self.memory.images

    # ---- one reply's action --------------------------------------------------------------------------------
    async def _act(self, turn: int, reply: str, record: TurnRecord, forced: bool,
                   outcome: TurnOutcome) -> AsyncIterator[AgentEvent]:
        parsed = parse_reply(reply, self.config.max_queries_per_search)
        record.action, record.valid, record.reason = parsed.kind, parsed.kind != "invalid", parsed.reason
        if parsed.think:
            yield self._emit(ThinkEvent(turn=turn, text=parsed.think))
        if parsed.kind == "answer":
            self.answer = parsed.answer or ""  # the parser never gives an empty answer
            yield self._emit(AnswerEvent(turn=turn, answer=self.answer, evidence=self.evidence(), forced=forced))
            outcome.answered = True
            return
        if forced or self._tokens_exhausted():  # the last call: only an answer counts
            return
        reason = parsed.reason
        if parsed.kind == "search":
            record.queries = list(parsed.queries)
            async for event in self._do_search(turn, parsed.queries, record):
                yield event
                if isinstance(event, ErrorEvent) and event.fatal:
                    outcome.fatal = event.message
            return
        if parsed.kind == "crop":
            if not self.memory.images:
                reason = "<bbox> before any image was shown; search first"
            else:
                event = self._do_crop(turn, parsed.bbox or [], record)
                if not isinstance(event, ErrorEvent):
                    yield event
                    return
                reason = event.message
        record.action, record.valid, record.reason = "invalid", False, reason
        outcome.invalid, outcome.unusable = reason, True

    # ---- tools ---------------------------------------------------------------------------------------------------
    async def _do_search(self, turn: int, queries: list[str], record: TurnRecord) -> AsyncIterator[AgentEvent]:
        yield self._emit(SearchEvent(turn=turn, queries=queries))
        results = await self._search(turn, queries)
        if isinstance(results, ErrorEvent):
            yield results
            return
        record.retrieved = [[h.page_id for h in hits] for hits in results]
        chosen = self._choose_pages(queries, results)
        hits_view = [[{"page_id": h.page_id, "score": h.score, "rank": r + 1} for r, h in enumerate(hits)]
                     for hits in results]
        content: list[dict[str, Any]] = []
        shown: list[ImageRef] = []
        for query, hit in chosen:
            try:
                key, page = await self._page(hit)
            except (OSError, SearchError) as exc:
                yield self._emit(ErrorEvent(turn=turn, kind="search_failed", message=f"page {hit.page_id}: {exc}"))
                continue
            ref = self._show(page, key, hit.page_id, (0, 0, page.width, page.height))
            content.append(text_part(self.prompts.search_result.format(query=query, page_id=hit.page_id)))
            content.append(_image_part(ref))
            shown.append(ref)
        record.shown_image_ids = [ref.image_id for ref in shown]
        if not shown:
            self.memory.add_feedback(self.prompts.no_new_results.format(query=" | ".join(queries)))
        else:
            self.memory.add_user(content)
        message = "" if chosen else "no new page among the results"
        yield self._emit(SearchResultsEvent(turn=turn, queries=queries, hits=hits_view, shown=shown, message=message))

    def _choose_pages(self, queries: list[str],
                      results: list[list[SearchHit]]) -> list[tuple[str, SearchHit]]:
        """Per query, the best pages not shown `max_repeats` times yet (RAG-R1: one batch, many queries)."""
        chosen: list[tuple[str, SearchHit]] = []
        taken: set[str] = set()
        for query, hits in zip(queries, results):
            picked = 0
            for hit in hits:
                if picked >= self.config.pages_per_search:
                    break
                if hit.page_id in taken or self.memory.shown_count.get(hit.page_id, 0) >= self.config.max_repeats:
                    continue
                chosen.append((query, hit))
                taken.add(hit.page_id)
                picked += 1
        return chosen

    def _do_crop(self, turn: int, bbox: list[float], record: TurnRecord) -> AgentEvent:
        source = self.memory.images[-1]
        try:
            page_box, _clipped = map_bbox_to_page(bbox, source.shown_size, source.page_box, source.page_size,
                                                 self.config.crop_padding, self.config.min_crop_side)
        except ValueError as exc:
            return ErrorEvent(turn=turn, kind="invalid_action", message=str(exc))
        started = time.perf_counter()
        key, page = self._page_images[source.page_id]
        ref = self._show(page, key, source.page_id, page_box, parent=source)
        self.timings["image_s"] += time.perf_counter() - started
        record.crop_source_image_id = source.image_id
        record.crop_page_box = list(page_box)
        record.shown_image_ids = [ref.image_id]
        text = self.prompts.crop.format(bbox=[round(v) for v in bbox])
        self.memory.add_user([text_part(text), _image_part(ref)])
        return self._emit(CropEvent(turn=turn, bbox=bbox, source=source, crop=ref))

    def _show(self, page: Image.Image, key: str, page_id: str, page_box: Sequence[float],
              parent: ImageRef | None = None) -> ImageRef:
        """The region resized as the model will see it, registered in the transcript."""
        cfg = self.config
        x1, y1, x2, y2 = (int(v) for v in page_box)
        box = (x1, y1, x2, y2)
        shown, view_key = self.pages.view(key, page, box, cfg.resize_factor, cfg.min_pixels, cfg.max_pixels)
        ref = ImageRef(image_id=self.memory.next_image_id(), page_id=page_id, image_path=self.page_paths[page_id],
                       page_size=(page.width, page.height), page_box=box, shown_size=shown.size,
                       is_crop=parent is not None, parent_image_id=parent.image_id if parent else None, image=shown,
                       cache_key=view_key)
        self.memory.add_image(ref)
        return ref

    # ---- the engine's questions ------------------------------------------------------------------------------
    def _turn_limit_event(self, turn: int) -> ErrorEvent:
        return ErrorEvent(turn=turn, kind="budget_exhausted", fatal=True,
                          message="the turn budget is spent and the model still gave no <answer>")

    def result(self) -> EpisodeResult:
        return EpisodeResult(**self.base_result_fields(), messages=self.memory.log_messages,
                             images=list(self.memory.images), credit_graph=self.credit_graph())


def _image_part(ref: ImageRef) -> dict[str, Any]:
    if ref.image is None:
        raise ValueError(f"image {ref.image_id} has no pixels to show")
    return image_part(ref.image, ref.image_id, ref.cache_key or ref.image_id)
