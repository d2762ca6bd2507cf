"""One episode of the VRAG loop: think → search / crop → … → answer, as a stream of typed events.

This is the single implementation behind `VRAG.run`, `VRAG.stream`, the evaluation runner and
the RL rollout. It talks to a model only through the `Policy` seam (`vrag_rl.agent.policy`), so
the same loop runs over an HTTP endpoint, an in-process model, or a token recorder that hands
trajectories to a trainer.

Every way a turn can go wrong (malformed reply, bbox before any image, empty search, an endpoint
that stays down or answers garbage, even a bug in an adapter) becomes an event; the episode
always ends with one of `EPISODE_STATUSES` within `max_turns + 1` model calls, and never raises.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from PIL import Image

from search_engine.client import SearchClient, SearchError, SearchResultPage
from vrag_rl.agent.actions import ParsedReply, parse_reply
from vrag_rl.agent.config import AgentConfig
from vrag_rl.agent.events import (
    AgentEvent,
    AnswerEvent,
    CropEvent,
    EpisodeFinished,
    EpisodeStarted,
    ErrorEvent,
    ImageRef,
    SearchEvent,
    SearchResultsEvent,
    ThinkEvent,
)
from vrag_rl.agent.images import map_bbox_to_page
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policy import Message, Policy, PolicyError, PolicyReply, SamplingParams, image_part, text_part
from vrag_rl.agent.prompts import Prompts
from vrag_rl.agent.result import EpisodeResult, TurnRecord
from vrag_rl.agent.step_graph import ROOT_ID, StepGraph, StepNode


class Episode:
    """One question, asked of one policy over one search client; iterate `run()` for its events."""

    def __init__(self, question: str, config: AgentConfig, prompts: Prompts, policy: Policy,
                 search: SearchClient, episode_id: str | None = None, pages: PageImageStore | None = None):
        if not isinstance(question, str) or not question.strip():
            raise ValueError("the question is empty")
        self.question = question.strip()
        self.config = config
        self.prompts = prompts
        self.policy = policy
        self.search_client = search
        self.pages = pages or PageImageStore()
        self.episode_id = episode_id or uuid.uuid4().hex[:12]
        self.messages: list[Message] = prompts.initial_messages(self.question)
        self.log_messages: list[dict[str, Any]] = [dict(m) for m in self.messages]
        self.images: list[ImageRef] = []
        self.events: list[AgentEvent] = []
        self.turn_records: list[TurnRecord] = []
        self.shown_count: dict[str, int] = {}
        self.page_order: list[str] = []
        self.crops_by_page: dict[str, list[list[int]]] = {}
        self.page_paths: dict[str, str] = {}
        self._page_images: dict[str, Image.Image] = {}  # pages of this episode (the store may evict)
        self._page_keys: dict[str, str] = {}
        self._step_of_image: dict[str, str] = {}
        self._graph_nodes: list[StepNode] = []
        self._answer_step: str | None = None
        self.timings = {"policy_s": 0.0, "search_s": 0.0, "image_s": 0.0}
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.answer: str | None = None
        self.status = "failed"
        self.error: str | None = None
        self.turns = 0
        self.started = time.perf_counter()

    # ---- the loop ------------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[AgentEvent]:
        """The episode's events, ending with exactly one `EpisodeFinished`; never raises."""
        yield self._emit(EpisodeStarted(turn=0, episode_id=self.episode_id, question=self.question))
        try:
            async for event in self._turns():
                yield event
        except Exception as exc:  # noqa: BLE001 - a bug anywhere must end the episode explicitly, not escape
            message = f"internal error: {exc.__class__.__name__}: {exc}"[:500]
            yield self._emit(ErrorEvent(turn=self.turns, kind="internal", message=message, fatal=True))
            yield self._finish("failed", error=message)

    async def _turns(self) -> AsyncIterator[AgentEvent]:
        cfg = self.config
        invalid_streak = 0
        for turn in range(1, cfg.max_turns + 2):
            self.turns = turn
            forced = turn == cfg.max_turns + 1
            remaining = self._tokens_left()
            if remaining is not None and remaining <= 0:
                yield self._finish("token_budget", error=self._budget_message())
                return
            if forced:
                self._add_user([text_part(self.prompts.force_answer)])
            try:
                reply = await self._call_policy(remaining)
            except PolicyError as exc:
                yield self._emit(ErrorEvent(turn=turn, kind="policy_failed", message=str(exc), fatal=True))
                yield self._finish("failed", error=str(exc))
                return
            self._add_assistant(reply.text)
            parsed = parse_reply(reply.text, cfg.max_queries_per_search)
            record = TurnRecord(index=turn - 1, action=parsed.kind, reply=reply.text, valid=parsed.kind != "invalid",
                                forced=forced, completion_tokens=self._reply_tokens(reply), reason=parsed.reason)
            self.turn_records.append(record)
            if parsed.think:
                yield self._emit(ThinkEvent(turn=turn, text=parsed.think))
            if parsed.kind == "answer":
                self.answer = parsed.answer
                self._add_step(record, "answer", self._last_image_step(), ())
                self._answer_step = f"t{record.index}"
                yield self._emit(AnswerEvent(turn=turn, answer=parsed.answer, evidence=self.evidence(), forced=forced))
                yield self._finish("forced_answer" if forced else "answered")
                return
            if forced or self._tokens_exhausted():
                self._add_step(record, "invalid" if parsed.kind == "invalid" else parsed.kind, (), ())
                if not forced:
                    yield self._finish("token_budget", error=self._budget_message())
                    return
                message = "the turn budget is spent and the model still gave no <answer>"
                yield self._emit(ErrorEvent(turn=turn, kind="budget_exhausted", message=message, fatal=True))
                yield self._finish("failed", error=message)
                return
            if parsed.kind == "search":
                invalid_streak = 0
                record.queries = list(parsed.queries)
                async for event in self._do_search(turn, parsed.queries, record):
                    yield event
                    if isinstance(event, ErrorEvent) and event.fatal:
                        yield self._finish("failed", error=event.message)
                        return
                continue
            if parsed.kind == "bbox" and not self.images:
                parsed = ParsedReply("invalid", parsed.think, reason="<bbox> before any image was shown; search first")
            if parsed.kind == "bbox":
                event = self._do_crop(turn, parsed.bbox, record)
                if isinstance(event, ErrorEvent):
                    parsed = ParsedReply("invalid", parsed.think, reason=event.message)
                else:
                    invalid_streak = 0
                    yield event
                    continue
            record.action, record.valid, record.reason = "invalid", False, parsed.reason
            self._add_step(record, "invalid", (), ())
            invalid_streak += 1
            fatal = invalid_streak > cfg.max_invalid_actions
            yield self._emit(ErrorEvent(turn=turn, kind="invalid_action", message=parsed.reason, fatal=fatal))
            if fatal:
                yield self._finish("failed", error=f"{invalid_streak} unusable replies in a row: {parsed.reason}")
                return
            self._add_user([text_part(self.prompts.invalid_action.format(reason=parsed.reason))])

    # ---- actions ----------------------------------------------------------------------------------
    async def _do_search(self, turn: int, queries: list[str], record: TurnRecord) -> AsyncIterator[AgentEvent]:
        yield self._emit(SearchEvent(turn=turn, queries=queries))
        started = time.perf_counter()
        try:
            results = await self.search_client.search(queries, top_k=self.config.search_top_k,
                                                      doc_ids=self.config.doc_ids)
            if len(results) != len(queries):
                raise SearchError(f"the search server answered {len(results)} result lists for {len(queries)} queries")
        except Exception as exc:  # noqa: BLE001 - SearchError, or a server answering nonsense
            self.timings["search_s"] += time.perf_counter() - started
            self._add_step(record, "search", (), ())
            message = str(exc) if isinstance(exc, SearchError) else f"search failed: {exc.__class__.__name__}: {exc}"
            yield self._emit(ErrorEvent(turn=turn, kind="search_failed", message=message[:500], fatal=True))
            return
        self.timings["search_s"] += time.perf_counter() - started
        record.retrieved = [[h.page_id for h in hits] for hits in results]
        chosen = self._choose_pages(queries, results)
        hits_view = [[{"page_id": h.page_id, "score": h.score, "rank": r + 1} for r, h in enumerate(hits)]
                     for hits in results]
        content: list[dict[str, Any]] = []
        shown: list[ImageRef] = []
        for query, hit in chosen:
            try:
                page = await self._page_image(hit)
            except (OSError, SearchError) as exc:
                yield self._emit(ErrorEvent(turn=turn, kind="search_failed", message=f"page {hit.page_id}: {exc}"))
                continue
            ref = self._show(page, hit.page_id, (0, 0, page.width, page.height))
            content.append(text_part(self.prompts.search_result.format(query=query, page_id=hit.page_id)))
            content.append(self._image_part(ref))
            shown.append(ref)
        record.shown_image_ids = [ref.image_id for ref in shown]
        self._add_step(record, "search", (), tuple(ref.page_id for ref in shown))
        if not shown:
            self._add_user([text_part(self.prompts.no_new_results.format(query=" | ".join(queries)))])
        else:
            self._add_user(content)
        message = "" if chosen else "no new page among the results"
        yield self._emit(SearchResultsEvent(turn=turn, queries=queries, hits=hits_view, shown=shown, message=message))

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

    def _do_crop(self, turn: int, bbox: list[float], record: TurnRecord) -> AgentEvent:
        source = self.images[-1]
        try:
            page_box, _clipped = map_bbox_to_page(bbox, source.shown_size, source.page_box, source.page_size,
                                                 self.config.crop_padding, self.config.min_crop_side)
        except ValueError as exc:
            return ErrorEvent(turn=turn, kind="invalid_action", message=str(exc))
        started = time.perf_counter()
        page = self._page_images[source.page_id]
        ref = self._show(page, source.page_id, page_box, parent=source)
        self.timings["image_s"] += time.perf_counter() - started
        self.crops_by_page.setdefault(source.page_id, []).append(list(page_box))
        record.action = "crop"
        record.crop_source_image_id = source.image_id
        record.crop_page_box = list(page_box)
        record.shown_image_ids = [ref.image_id]
        self._add_step(record, "crop", (self._step_of_image.get(source.image_id, ROOT_ID),), (source.page_id,))
        text = self.prompts.crop.format(bbox=[round(v) for v in bbox])
        self._add_user([text_part(text), self._image_part(ref)])
        return self._emit(CropEvent(turn=turn, bbox=bbox, source=source, crop=ref))

    # ---- images -----------------------------------------------------------------------------------
    async def _page_image(self, hit: SearchResultPage) -> Image.Image:
        if hit.page_id in self._page_images:
            return self._page_images[hit.page_id]
        started = time.perf_counter()
        local = bool(hit.image_path) and _is_file(hit.image_path)
        key = f"{hit.page_id}@{hit.image_path if local else hit.image_url}"
        page = await self.pages.page(key, hit.image_path if local else None,
                                     lambda: self.search_client.page_image(hit.page_id))
        self.page_paths[hit.page_id] = hit.image_path if local else hit.image_url
        self._page_images[hit.page_id] = page
        self._page_keys[hit.page_id] = key
        self.timings["image_s"] += time.perf_counter() - started
        return page

    def _show(self, page: Image.Image, page_id: str, page_box, parent: ImageRef | None = None) -> ImageRef:
        cfg = self.config
        box = tuple(int(v) for v in page_box)
        shown, key = self.pages.view(self._page_keys[page_id], page, box, cfg.resize_factor, cfg.min_pixels,
                                     cfg.max_pixels)
        ref = ImageRef(image_id=f"img-{len(self.images)}", page_id=page_id, image_path=self.page_paths[page_id],
                       page_size=(page.width, page.height), page_box=box, shown_size=shown.size,
                       is_crop=parent is not None, parent_image_id=parent.image_id if parent else None, image=shown,
                       cache_key=key)
        self.images.append(ref)
        if parent is None:
            self.shown_count[page_id] = self.shown_count.get(page_id, 0) + 1
        if page_id not in self.page_order:
            self.page_order.append(page_id)
        return ref

    def _image_part(self, ref: ImageRef) -> dict[str, Any]:
        return image_part(ref.image, ref.image_id, ref.cache_key or ref.image_id)

    # ---- conversation -------------------------------------------------------------------------------
    def _add_user(self, content: list[dict[str, Any]]) -> None:
        self.messages.append({"role": "user", "content": content})
        logged = [{"type": "image_ref", "image_id": p["image_id"]} if p.get("type") == "image" else p for p in content]
        self.log_messages.append({"role": "user", "content": logged})

    def _add_assistant(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})
        self.log_messages.append({"role": "assistant", "content": text})

    async def _call_policy(self, tokens_left: int | None) -> PolicyReply:
        cfg = self.config
        max_tokens = cfg.max_tokens if tokens_left is None else max(1, min(cfg.max_tokens, tokens_left))
        sampling = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=max_tokens,
                                  seed=cfg.seed, extra_body=dict(cfg.extra_body))
        started = time.perf_counter()
        try:
            reply = await self.policy.complete(self.messages, sampling)
        except PolicyError:
            raise
        except Exception as exc:  # noqa: BLE001 - an adapter's bug is still only this episode's failure
            raise PolicyError(f"policy adapter failed: {exc.__class__.__name__}: {exc}"[:500]) from exc
        finally:
            self.timings["policy_s"] += time.perf_counter() - started
        if not isinstance(reply, PolicyReply) or not isinstance(reply.text, str):
            raise PolicyError(f"policy returned {type(reply).__name__}, not a PolicyReply with text")
        self.usage["prompt_tokens"] += reply.prompt_tokens
        self.usage["completion_tokens"] += self._reply_tokens(reply)
        return reply

    # ---- token budget ------------------------------------------------------------------------------
    @staticmethod
    def _reply_tokens(reply: PolicyReply) -> int:
        return len(reply.token_ids) if reply.token_ids is not None else reply.completion_tokens

    def _tokens_left(self) -> int | None:
        budget = self.config.max_episode_tokens
        return None if budget is None else budget - self.usage["completion_tokens"]

    def _tokens_exhausted(self) -> bool:
        left = self._tokens_left()
        return left is not None and left <= 0

    def _budget_message(self) -> str:
        return f"the episode's token budget ({self.config.max_episode_tokens} response tokens) is spent"

    # ---- step graph -------------------------------------------------------------------------------------
    def _add_step(self, record: TurnRecord, kind: str, parents: tuple[str, ...], evidence: tuple[str, ...]) -> None:
        step_id = f"t{record.index}"
        self._graph_nodes.append(StepNode(step_id, parents or (ROOT_ID,), kind, (record.index,), evidence))
        for image_id in record.shown_image_ids:
            self._step_of_image[image_id] = step_id

    def _last_image_step(self) -> tuple[str, ...]:
        return (self._step_of_image[self.images[-1].image_id],) if self.images else ()

    def step_graph(self) -> StepGraph:
        """The turn graph: search → root, crop → the step that showed its source, answer → last image's step."""
        return StepGraph.build(self._graph_nodes, self._answer_step)

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
                                          elapsed_s=round(time.perf_counter() - self.started, 4), error=error))

    def result(self) -> EpisodeResult:
        return EpisodeResult(episode_id=self.episode_id, question=self.question, answer=self.answer,
                             status=self.status, evidence=self.evidence(), events=list(self.events),
                             messages=self.log_messages, images=list(self.images), turns=self.turns,
                             elapsed_s=round(time.perf_counter() - self.started, 4),
                             timings={k: round(v, 4) for k, v in self.timings.items()}, usage=dict(self.usage),
                             error=self.error, turn_records=list(self.turn_records), step_graph=self.step_graph())


def _is_file(path: str) -> bool:
    from pathlib import Path

    try:
        return Path(path).is_file()
    except (OSError, ValueError):  # a path with NUL or too long: not a local file
        return False
