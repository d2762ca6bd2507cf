"""One episode of the VRAG loop: think → search / crop → … → answer, as a stream of typed events.

This is the single implementation behind `VRAG.run`, `VRAG.stream`, the evaluation runner and
the RL rollout. Every way a turn can go wrong (malformed reply, bbox before any image, empty
search, an endpoint that stays down) becomes an event; the episode always ends with an answer or
an explicit failure within `max_turns + 1` model calls.
"""
from __future__ import annotations

import asyncio
import io
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

from PIL import Image

from search_engine.client import SearchClient, SearchError, SearchResultPage
from vrag_rl.agent.actions import ParsedReply, parse_reply
from vrag_rl.agent.config import AgentConfig
from vrag_rl.agent.events import (
    AgentEvent, AnswerEvent, CropEvent, EpisodeFinished, EpisodeStarted, ErrorEvent, ImageRef, SearchEvent,
    SearchResultsEvent, ThinkEvent,
)
from vrag_rl.agent.images import map_bbox_to_page, resize_for_model, to_data_url
from vrag_rl.agent.policy import PolicyClient, PolicyError
from vrag_rl.agent.prompts import Prompts
from vrag_rl.agent.result import EpisodeResult


class Episode:
    def __init__(self, question: str, config: AgentConfig, prompts: Prompts, policy: PolicyClient,
                 search: SearchClient, episode_id: str | None = None):
        if not isinstance(question, str) or not question.strip():
            raise ValueError("the question is empty")
        self.question = question.strip()
        self.config = config
        self.prompts = prompts
        self.policy = policy
        self.search_client = search
        self.episode_id = episode_id or uuid.uuid4().hex[:12]
        self.messages: list[dict[str, Any]] = prompts.initial_messages(self.question)
        self.log_messages: list[dict[str, Any]] = [dict(m) for m in self.messages]
        self.images: list[ImageRef] = []
        self.events: list[AgentEvent] = []
        self.shown_count: dict[str, int] = {}
        self.page_order: list[str] = []
        self.crops_by_page: dict[str, list[list[int]]] = {}
        self.page_paths: dict[str, str] = {}
        self._page_cache: dict[str, Image.Image] = {}
        self.timings = {"policy_s": 0.0, "search_s": 0.0, "image_s": 0.0}
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.answer: str | None = None
        self.status = "failed"
        self.error: str | None = None
        self.turns = 0
        self.started = time.perf_counter()

    # ---- the loop ------------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[AgentEvent]:
        yield self._emit(EpisodeStarted(turn=0, episode_id=self.episode_id, question=self.question))
        invalid_streak = 0
        for turn in range(1, self.config.max_turns + 2):
            self.turns = turn
            forced = turn == self.config.max_turns + 1
            if forced:
                self._add_user([{"type": "text", "text": self.prompts.force_answer}])
            try:
                reply = await self._call_policy()
            except PolicyError as exc:
                yield self._emit(ErrorEvent(turn=turn, kind="policy_failed", message=str(exc), fatal=True))
                yield self._finish("failed", error=str(exc))
                return
            self._add_assistant(reply)
            parsed = parse_reply(reply, self.config.max_queries_per_search)
            if parsed.think:
                yield self._emit(ThinkEvent(turn=turn, text=parsed.think))
            if parsed.kind == "answer":
                self.answer = parsed.answer
                yield self._emit(AnswerEvent(turn=turn, answer=parsed.answer, evidence=self.evidence(), forced=forced))
                yield self._finish("forced_answer" if forced else "answered")
                return
            if forced:
                message = "the turn budget is spent and the model still gave no <answer>"
                yield self._emit(ErrorEvent(turn=turn, kind="budget_exhausted", message=message, fatal=True))
                yield self._finish("failed", error=message)
                return
            if parsed.kind == "search":
                invalid_streak = 0
                async for event in self._do_search(turn, parsed.queries):
                    yield event
                    if isinstance(event, ErrorEvent) and event.fatal:
                        yield self._finish("failed", error=event.message)
                        return
                continue
            if parsed.kind == "bbox" and not self.images:
                parsed = ParsedReply("invalid", parsed.think, reason="<bbox> before any image was shown; search first")
            if parsed.kind == "bbox":
                event = self._do_crop(turn, parsed.bbox)
                if isinstance(event, ErrorEvent):
                    parsed = ParsedReply("invalid", parsed.think, reason=event.message)
                else:
                    invalid_streak = 0
                    yield event
                    continue
            invalid_streak += 1
            fatal = invalid_streak > self.config.max_invalid_actions
            yield self._emit(ErrorEvent(turn=turn, kind="invalid_action", message=parsed.reason, fatal=fatal))
            if fatal:
                yield self._finish("failed", error=f"{invalid_streak} unusable replies in a row: {parsed.reason}")
                return
            self._add_user([{"type": "text", "text": self.prompts.invalid_action.format(reason=parsed.reason)}])

    # ---- actions ----------------------------------------------------------------------------------
    async def _do_search(self, turn: int, queries: list[str]) -> AsyncIterator[AgentEvent]:
        yield self._emit(SearchEvent(turn=turn, queries=queries))
        started = time.perf_counter()
        try:
            results = await self.search_client.search(queries, top_k=self.config.search_top_k,
                                                      doc_ids=self.config.doc_ids)
        except SearchError as exc:
            self.timings["search_s"] += time.perf_counter() - started
            yield self._emit(ErrorEvent(turn=turn, kind="search_failed", message=str(exc), fatal=True))
            return
        self.timings["search_s"] += time.perf_counter() - started
        chosen = self._choose_pages(queries, results)
        hits_view = [[{"page_id": h.page_id, "score": h.score, "rank": r + 1} for r, h in enumerate(hits)]
                     for hits in results]
        if not chosen:
            message = self.prompts.no_new_results.format(query=" | ".join(queries))
            self._add_user([{"type": "text", "text": message}])
            yield self._emit(SearchResultsEvent(turn=turn, queries=queries, hits=hits_view, shown=[],
                                                message="no new page among the results"))
            return
        content: list[dict[str, Any]] = []
        shown: list[ImageRef] = []
        for query, hit in chosen:
            try:
                page = await self._page_image(hit)
            except (OSError, SearchError) as exc:
                yield self._emit(ErrorEvent(turn=turn, kind="search_failed", message=f"page {hit.page_id}: {exc}"))
                continue
            ref = self._show(page, hit.page_id, self.page_paths[hit.page_id], (0, 0, page.width, page.height))
            content.append({"type": "text", "text": self.prompts.search_result.format(query=query, page_id=hit.page_id)})
            content.append(self._image_part(ref))
            shown.append(ref)
        if not shown:
            self._add_user([{"type": "text", "text": self.prompts.no_new_results.format(query=" | ".join(queries))}])
        else:
            self._add_user(content)
        yield self._emit(SearchResultsEvent(turn=turn, queries=queries, hits=hits_view, shown=shown))

    def _choose_pages(self, queries: list[str],
                      results: list[list[SearchResultPage]]) -> list[tuple[str, SearchResultPage]]:
        """Per query, the best pages not shown `max_repeats` times yet (RAG-R1: one batch, many queries)."""
        chosen: list[tuple[str, SearchResultPage]] = []
        taken: set[str] = set()
        for query, hits in zip(queries, results):
            picked = 0
            for hit in hits:
                if picked >= self.config.pages_per_search:
                    break
                if hit.page_id in taken or self.shown_count.get(hit.page_id, 0) >= self.config.max_repeats:
                    continue
                chosen.append((query, hit))
                taken.add(hit.page_id)
                picked += 1
        return chosen

    def _do_crop(self, turn: int, bbox: list[float]) -> AgentEvent:
        source = self.images[-1]
        try:
            page_box, _clipped = map_bbox_to_page(bbox, source.shown_size, source.page_box, source.page_size,
                                                 self.config.crop_padding, self.config.min_crop_side)
        except ValueError as exc:
            return ErrorEvent(turn=turn, kind="invalid_action", message=str(exc))
        started = time.perf_counter()
        page = self._page_cache[source.page_id]
        ref = self._show(page.crop(page_box), source.page_id, source.image_path, page_box, parent=source)
        self.timings["image_s"] += time.perf_counter() - started
        self.crops_by_page.setdefault(source.page_id, []).append(list(page_box))
        text = self.prompts.crop.format(bbox=[round(v) for v in bbox])
        self._add_user([{"type": "text", "text": text}, self._image_part(ref)])
        event = CropEvent(turn=turn, bbox=bbox, source=source, crop=ref)
        return self._emit(event)

    # ---- images -----------------------------------------------------------------------------------
    async def _page_image(self, hit: SearchResultPage) -> Image.Image:
        if hit.page_id in self._page_cache:
            return self._page_cache[hit.page_id]
        started = time.perf_counter()
        if hit.image_path and Path(hit.image_path).is_file():
            page = await asyncio.to_thread(_open_rgb, hit.image_path)
            self.page_paths[hit.page_id] = hit.image_path
        else:  # the search server runs elsewhere: fetch the page over HTTP
            data = await self.search_client.page_image(hit.page_id)
            page = await asyncio.to_thread(_open_rgb, io.BytesIO(data))
            self.page_paths[hit.page_id] = hit.image_url
        self._page_cache[hit.page_id] = page
        self.timings["image_s"] += time.perf_counter() - started
        return page

    def _show(self, image: Image.Image, page_id: str, image_path: str, page_box, parent: ImageRef | None = None) -> ImageRef:
        cfg = self.config
        shown = resize_for_model(image, cfg.resize_factor, cfg.min_pixels, cfg.max_pixels)
        page = self._page_cache[page_id]
        ref = ImageRef(image_id=f"img-{len(self.images)}", page_id=page_id, image_path=image_path,
                       page_size=(page.width, page.height), page_box=tuple(int(v) for v in page_box),
                       shown_size=shown.size, is_crop=parent is not None,
                       parent_image_id=parent.image_id if parent else None, image=shown)
        self.images.append(ref)
        if parent is None:
            self.shown_count[page_id] = self.shown_count.get(page_id, 0) + 1
        if page_id not in self.page_order:
            self.page_order.append(page_id)
        return ref

    def _image_part(self, ref: ImageRef) -> dict[str, Any]:
        return {"type": "image_url", "image_url": {"url": to_data_url(ref.image, self.config.jpeg_quality)},
                "_ref": ref.image_id}

    # ---- conversation -------------------------------------------------------------------------------
    def _add_user(self, content: list[dict[str, Any]]) -> None:
        self.messages.append({"role": "user", "content": [{k: v for k, v in p.items() if k != "_ref"} for p in content]})
        logged = [{"type": "image_ref", "image_id": p["_ref"]} if p.get("type") == "image_url" else p for p in content]
        self.log_messages.append({"role": "user", "content": logged})

    def _add_assistant(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})
        self.log_messages.append({"role": "assistant", "content": text})

    async def _call_policy(self) -> str:
        cfg = self.config
        started = time.perf_counter()
        try:
            reply = await self.policy.complete(self.messages, cfg.temperature, cfg.top_p, cfg.max_tokens,
                                               cfg.extra_body)
        finally:
            self.timings["policy_s"] += time.perf_counter() - started
        self.usage["prompt_tokens"] += reply.prompt_tokens
        self.usage["completion_tokens"] += reply.completion_tokens
        return reply.text

    # ---- bookkeeping ---------------------------------------------------------------------------------
    def evidence(self) -> list[dict[str, Any]]:
        return [{"page_id": pid, "image_path": self.page_paths.get(pid, ""), "crops": self.crops_by_page.get(pid, [])}
                for pid in self.page_order]

    def _emit(self, event: AgentEvent) -> AgentEvent:
        self.events.append(event)
        return event

    def _finish(self, status: str, error: str | None = None) -> EpisodeFinished:
        self.status = status
        self.error = error
        return self._emit(EpisodeFinished(turn=self.turns, status=status, answer=self.answer, turns=self.turns,
                                          elapsed_s=round(time.perf_counter() - self.started, 4)))

    def result(self) -> EpisodeResult:
        return EpisodeResult(episode_id=self.episode_id, question=self.question, answer=self.answer,
                             status=self.status, evidence=self.evidence(), events=list(self.events),
                             messages=self.log_messages, images=list(self.images), turns=self.turns,
                             elapsed_s=round(time.perf_counter() - self.started, 4),
                             timings={k: round(v, 4) for k, v in self.timings.items()}, usage=dict(self.usage),
                             error=self.error)


def _open_rgb(source) -> Image.Image:
    with Image.open(source) as image:
        return image.convert("RGB")
