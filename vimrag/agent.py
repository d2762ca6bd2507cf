"""The VimRAG agent: reasoning as a memory graph, the context rebuilt from it every step.

One episode (`VimEpisode.run()`, async events) is the single implementation behind `VimRAG.run`,
`stream`, `arun`, `astream`, `run_batch` — the same API shape as `vrag_rl.VRAG`. It reuses the
VRAG agent's pieces: the `Policy` seam (any OpenAI-compatible endpoint through `OpenAIPolicy`, or
`vimrag.streaming.StreamingOpenAIPolicy` for SSE and `reasoning_content`), the search client,
the page image store and `smart_resize`.

A step: the context is [system, user(question, graph JSON, top-energy memory images)] plus, while
a search waits for its summary, the search call and its `<tool_response>`. The model adds search
nodes (several at once are searched as one batch), then summarises and memorises, then answers.
Every failure (malformed call, unknown parent, search down, policy down, a bug) is an event and an
explicit status; nothing escapes the public API.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from typing import Any

from PIL import Image

from search_engine.client import SearchClient, SearchError, SearchResultPage
from vimrag.context import build_context, conversation_stats, item_views, provenance
from vimrag.energy import EnergyConfig
from vimrag.events import (
    AgentEvent,
    ContextEvent,
    EpisodeFinished,
    EpisodeStarted,
    ErrorEvent,
    GraphAnswerEvent,
    ImageRef,
    MaxStepsEvent,
    MemorizeEvent,
    NodeSearchEvent,
    SearchDoneEvent,
    ThinkEvent,
)
from vimrag.graph import GraphError, MemoryGraph, MemoryItem
from vimrag.prompts import VimPrompts
from vimrag.result import VimRAGResult
from vimrag.tools import (
    MemorizeEntry,
    ParsedTurn,
    answer_args,
    memorize_args,
    parse_turn,
    search_args,
)
from vrag_rl.agent.frontend import AgentFrontend
from vrag_rl.agent.images import map_bbox_to_page
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policy import (
    Message,
    Policy,
    PolicyError,
    PolicyReply,
    SamplingParams,
    image_part,
    text_part,
)
from vrag_rl.agent.result import TurnRecord

DASHSCOPE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"


@dataclass
class VimRAGConfig:
    max_steps: int = 20  # model calls that may act; one more is made to force an answer
    search_top_k: int = 3  # items per search
    max_searches_per_step: int = 4  # add_search_node calls searched together in one step
    observation_max_pixels: int = 1003520  # a retrieved page as first shown (before memorising)
    observation_video_pixels: int = 401408  # all frames of a retrieved segment together
    min_pixels: int = 4 * 28 * 28
    resize_factor: int = 28  # 28: Qwen2.5-VL; 32: Qwen3-VL
    energy: EnergyConfig = field(default_factory=EnergyConfig)
    temperature: float = 0.0
    top_p: float = 1.0
    thinking_temperature: float = 0.6  # used instead when enable_thinking is on (upstream)
    thinking_top_p: float = 0.95
    max_tokens: int = 4096  # per model call
    max_episode_tokens: int | None = None
    enable_thinking: bool | None = None  # None: say nothing; True/False: ask the endpoint for it
    thinking_style: str = "dashscope"  # "dashscope": {"enable_thinking"}; "vllm": chat_template_kwargs
    stream: bool = False  # SSE streaming through StreamingOpenAIPolicy (URL-built policies only)
    seed: int | None = None
    max_invalid_actions: int = 3
    policy_timeout_s: float = 180.0
    policy_retries: int = 3
    search_timeout_s: float = 30.0
    search_retries: int = 3
    doc_ids: list[str] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.energy, dict):
            self.energy = EnergyConfig(**self.energy)
        if self.max_steps < 1 or self.search_top_k < 1 or self.max_searches_per_step < 1:
            raise ValueError("max_steps, search_top_k and max_searches_per_step must be at least 1")
        if self.thinking_style not in ("dashscope", "vllm"):
            raise ValueError("thinking_style is 'dashscope' or 'vllm'")
        if self.max_tokens < 1 or (self.max_episode_tokens is not None and self.max_episode_tokens < 1):
            raise ValueError("max_tokens and max_episode_tokens must be at least 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def sampling_extra(self) -> dict[str, Any]:
        extra = dict(self.extra_body)
        if self.enable_thinking is not None:
            if self.thinking_style == "dashscope":
                extra.setdefault("enable_thinking", self.enable_thinking)
            else:
                extra.setdefault("chat_template_kwargs", {"enable_thinking": self.enable_thinking})
        return extra


@dataclass
class Candidate:
    """A retrieved item the model may memorise, by its label ("Picture 3")."""

    label: str
    node_id: str
    hit: SearchResultPage
    kind: str  # "page" or "video_segment"
    page_key: str = ""
    page: Image.Image | None = None
    shown: list[ImageRef] = field(default_factory=list)
    frame_times: list[float] = field(default_factory=list)
    frame_boxes: list[list[int]] = field(default_factory=list)


class VimEpisode:
    """One question over one policy and one search client; iterate `run()` for its events."""

    def __init__(self, question: str, config: VimRAGConfig, prompts: VimPrompts, policy: Policy,
                 search: SearchClient, episode_id: str | None = None, pages: PageImageStore | None = None):
        if not isinstance(question, str) or not question.strip():
            raise ValueError("the question is empty")
        self.question = question.strip()
        self.config, self.prompts, self.policy, self.search_client = config, prompts, policy, search
        self.pages = pages or PageImageStore()
        self.episode_id = episode_id or uuid.uuid4().hex[:12]
        self.graph = MemoryGraph(self.question)
        self.pixels: dict[str, tuple[str, Image.Image]] = {}  # memory item id → (page key, page or sheet)
        self.candidates: dict[str, Candidate] = {}
        self.pending: list[str] = []  # searched nodes waiting for their summary
        self.tail: list[Message] = []  # this step's messages after the rebuilt context
        self.events: list[AgentEvent] = []
        self.turn_records: list[TurnRecord] = []
        self.context_stats: list[dict[str, Any]] = []
        self.timings = {"policy_s": 0.0, "search_s": 0.0, "image_s": 0.0}
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.answer: str | None = None
        self.status, self.error, self.turns = "failed", None, 0
        self._labels = {"page": 0, "video_segment": 0}
        self._page_cache: dict[str, tuple[str, Image.Image]] = {}
        self.started = time.perf_counter()

    # ---- the loop --------------------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[AgentEvent]:
        """The episode's events, ending with exactly one `EpisodeFinished`; never raises."""
        yield self._emit(EpisodeStarted(turn=0, episode_id=self.episode_id, question=self.question))
        try:
            async for event in self._steps():
                yield event
        except Exception as exc:  # noqa: BLE001 - a bug anywhere ends the episode explicitly, never escapes
            message = f"internal error: {exc.__class__.__name__}: {exc}"[:500]
            yield self._emit(ErrorEvent(turn=self.turns, kind="internal", message=message, fatal=True))
            yield self._finish("failed", error=message)

    async def _steps(self) -> AsyncIterator[AgentEvent]:
        cfg = self.config
        invalid_streak = 0
        for step in range(1, cfg.max_steps + 2):
            self.turns = step
            forced = step == cfg.max_steps + 1
            if forced:
                self.tail.append({"role": "user", "content": [text_part(self.prompts.force_answer)]})
            remaining = self._tokens_left()
            if remaining is not None and remaining <= 0:
                yield self._finish("token_budget", error="the episode's token budget is spent")
                return
            messages, allocations = self._context()
            stats = conversation_stats(messages, cfg.resize_factor)
            self.context_stats.append(stats.to_dict())
            yield self._emit(ContextEvent(turn=step, stats=stats.to_dict(), memory=[
                {"node_id": a.node_id, "label": a.item.label, "energy": round(a.energy, 4), "pixels": a.pixels,
                 "capped": a.capped} for a in allocations]))
            try:
                reply = await self._call_policy(messages, remaining)
            except PolicyError as exc:
                yield self._emit(ErrorEvent(turn=step, kind="policy_failed", message=str(exc), fatal=True))
                yield self._finish("failed", error=str(exc))
                return
            parsed = parse_turn(reply.text)
            record = TurnRecord(index=step - 1, action="+".join(c.name for c in parsed.calls) or "invalid",
                                reply=reply.text, valid=parsed.valid, forced=forced,
                                completion_tokens=reply.completion_tokens or len(reply.text.split()))
            self.turn_records.append(record)
            if parsed.think:
                yield self._emit(ThinkEvent(turn=step, text=parsed.think))
            errors = list(parsed.errors)
            done = False
            async for event in self._execute(step, parsed, reply.text, errors, forced):
                yield event
                if isinstance(event, EpisodeFinished):
                    return
                if isinstance(event, GraphAnswerEvent):
                    done = True
            if done:
                yield self._finish("forced_answer" if forced else "answered")
                return
            if errors:
                record.valid, record.reason = False, "; ".join(errors)[:500]
                invalid_streak = invalid_streak + 1 if not parsed.calls or record.action == "invalid" else 0
                fatal = invalid_streak > cfg.max_invalid_actions
                yield self._emit(ErrorEvent(turn=step, kind="invalid_action", message=record.reason, fatal=fatal))
                if fatal:
                    yield self._finish("failed", error=f"{invalid_streak} unusable replies in a row: {record.reason}")
                    return
                self.tail.append({"role": "user", "content": [text_part(self.prompts.invalid.format(
                    reason=record.reason))]})
            else:
                invalid_streak = 0
            if forced:
                break
            if self._tokens_left() is not None and self._tokens_left() <= 0:
                yield self._finish("token_budget", error="the episode's token budget is spent")
                return
        message = f"no answer within {cfg.max_steps} steps and the forced answer step"
        yield self._emit(MaxStepsEvent(turn=self.turns, steps=cfg.max_steps, message=message))
        yield self._finish("failed", error=message)

    async def _execute(self, step: int, parsed: ParsedTurn, reply: str, errors: list[str],
                       forced: bool) -> AsyncIterator[AgentEvent]:
        """Apply one reply's tool calls in order: memorise, then searches (one batch), or answer."""
        turn_index = step - 1
        searches: list[tuple[str, str]] = []
        self.tail.append({"role": "assistant", "content": reply})
        for call in parsed.calls:
            try:
                if call.name == "summarize_and_memorize":
                    try:
                        yield self._memorize(step, call, turn_index)
                    except _PartialMemorize as partial:
                        yield self._emit(partial.event)
                        raise
                elif call.name == "add_search_node":
                    if forced:
                        raise ValueError("no more searches: the step budget is spent, answer now")
                    if self.pending:
                        raise ValueError(f"node(s) {self.pending} wait for summarize_and_memorize before a new "
                                         "search")
                    if len(searches) >= self.config.max_searches_per_step:
                        raise ValueError(f"at most {self.config.max_searches_per_step} searches in one step")
                    node_id, query, parents = search_args(call)
                    self.graph.add_search_node(node_id, query, parents, turn_index=turn_index)
                    searches.append((node_id, query))
                    yield self._emit(NodeSearchEvent(turn=step, node_id=node_id, query=query,
                                                     parent_ids=self.graph.nodes[node_id].parent_ids,
                                                     graph=self.graph.export()))
                elif call.name == "add_answer_node":
                    answer, parents = answer_args(call)
                    self.graph.add_answer_node(answer, parents, turn_index=turn_index)
                    self.answer = answer
                    yield self._emit(GraphAnswerEvent(turn=step, answer=answer,
                                                      parent_ids=self.graph.nodes["answer"].parent_ids,
                                                      evidence=self.evidence(), forced=forced,
                                                      graph=self.graph.export()))
                    return
            except (ValueError, GraphError) as exc:
                errors.append(f"{call.name}: {exc}")
        if searches:
            async for event in self._search(step, searches):
                yield event
                if isinstance(event, ErrorEvent) and event.fatal:
                    yield self._finish("failed", error=event.message)
                    return
        elif not self.pending:
            # everything is in the graph now: the next context is rebuilt from it alone (plus the
            # reply and its feedback when something in it was unusable)
            self.tail = [self.tail[-1]] if errors else []

    # ---- search -----------------------------------------------------------------------------------------
    async def _search(self, step: int, searches: list[tuple[str, str]]) -> AsyncIterator[AgentEvent]:
        started = time.perf_counter()
        queries = [q for _, q in searches]
        try:
            results = await self.search_client.search(queries, top_k=self.config.search_top_k,
                                                      doc_ids=self.config.doc_ids)
            if len(results) != len(queries):
                raise SearchError(f"the search server answered {len(results)} lists for {len(queries)} queries")
        except Exception as exc:  # noqa: BLE001 - SearchError, or a server answering nonsense
            self.timings["search_s"] += time.perf_counter() - started
            message = str(exc) if isinstance(exc, SearchError) else f"search failed: {type(exc).__name__}: {exc}"
            yield self._emit(ErrorEvent(turn=step, kind="search_failed", message=message[:500], fatal=True))
            return
        self.timings["search_s"] += time.perf_counter() - started
        content: list[dict[str, Any]] = [text_part("<tool_response>")]
        for (node_id, query), hits in zip(searches, results):
            node = self.graph.nodes[node_id]
            node.retrieved_ids = [h.page_id for h in hits]
            self.pending.append(node_id)
            if not hits:
                content.append(text_part(self.prompts.no_results.format(node_id=node_id, query=query)))
            else:
                content.append(text_part(self.prompts.results_header.format(node_id=node_id, query=query)))
            items, shown = [], []
            for hit in hits:
                candidate = await self._candidate(step, node_id, hit)
                if isinstance(candidate, ErrorEvent):  # that item's pixels could not be fetched: said, and skipped
                    yield candidate
                    continue
                content.extend(self._observation_parts(candidate))
                items.append(_candidate_view(candidate))
                shown.extend(candidate.shown)
            yield self._emit(SearchDoneEvent(turn=step, node_id=node_id, query=query, items=items, shown=shown))
        content.append(text_part("</tool_response>\n" + self.prompts.summary))
        self.tail.append({"role": "user", "content": content})

    async def _candidate(self, step: int, node_id: str, hit: SearchResultPage) -> Candidate | ErrorEvent:
        meta = hit.metadata or {}
        kind = "video_segment" if meta.get("kind") == "video_segment" else "page"
        self._labels[kind] += 1
        label = f"{'Video' if kind == 'video_segment' else 'Picture'} {self._labels[kind]}"
        candidate = Candidate(label, node_id, hit, kind)
        try:
            candidate.page_key, candidate.page = await self._page(hit)
        except (OSError, SearchError) as exc:
            return self._emit(ErrorEvent(turn=step, kind="search_failed", message=f"{hit.page_id}: {exc}"[:300]))
        page = candidate.page
        cfg = self.config
        if kind == "video_segment":
            boxes = [list(map(int, b)) for b in meta.get("frame_boxes") or []]
            times = [float(t) for t in meta.get("frame_times") or []]
            if not boxes or len(boxes) != len(times):
                boxes, times = [[0, 0, page.width, page.height]], [float(meta.get("start_s", 0.0))]
            candidate.frame_boxes, candidate.frame_times = boxes, times
            per_frame = max(cfg.min_pixels, cfg.observation_video_pixels // len(boxes))
            for stamp, box in zip(times, boxes):
                image, key = self.pages.view(candidate.page_key, page, tuple(box), cfg.resize_factor,
                                             cfg.min_pixels, per_frame)
                candidate.shown.append(self._ref(f"{label}@{stamp:g}s", hit, page, box, image, key))
        else:
            box = [0, 0, page.width, page.height]
            image, key = self.pages.view(candidate.page_key, page, tuple(box), cfg.resize_factor, cfg.min_pixels,
                                         cfg.observation_max_pixels)
            candidate.shown.append(self._ref(label, hit, page, box, image, key))
        self.candidates[label] = candidate
        return candidate

    def _ref(self, image_id: str, hit: SearchResultPage, page: Image.Image, box: list[int], image: Image.Image,
             key: str) -> ImageRef:
        return ImageRef(image_id=image_id, page_id=hit.page_id, image_path=hit.image_path or hit.image_url,
                        page_size=(page.width, page.height), page_box=tuple(box), shown_size=image.size,
                        is_crop=box != [0, 0, page.width, page.height], image=image, cache_key=key)

    def _observation_parts(self, candidate: Candidate) -> list[dict[str, Any]]:
        hit, meta = candidate.hit, candidate.hit.metadata or {}
        if candidate.kind == "video_segment":
            head = (f"{candidate.label}: video {hit.doc_id}, segment {hit.page_id} from {meta.get('start_s', 0):g}s "
                    f"to {meta.get('end_s', 0):g}s")
            parts = [text_part(head)]
            for stamp, ref in zip(candidate.frame_times, candidate.shown):
                parts += [text_part(f"<{stamp:g} seconds>"), image_part(ref.image, ref.image_id, ref.cache_key)]
            return parts
        ref = candidate.shown[0]
        return [text_part(f"{candidate.label}: document {hit.doc_id}, page {hit.page_number} ({hit.page_id})"),
                image_part(ref.image, ref.image_id, ref.cache_key)]

    async def _page(self, hit: SearchResultPage) -> tuple[str, Image.Image]:
        if hit.page_id in self._page_cache:
            return self._page_cache[hit.page_id]
        started = time.perf_counter()
        local = bool(hit.image_path) and _is_file(hit.image_path)
        key = f"{hit.page_id}@{hit.image_path if local else hit.image_url}"
        page = await self.pages.page(key, hit.image_path if local else None,
                                     lambda: self.search_client.page_image(hit.page_id))
        self.timings["image_s"] += time.perf_counter() - started
        self._page_cache[hit.page_id] = (key, page)
        return key, page

    # ---- memory -----------------------------------------------------------------------------------------
    def _memorize(self, step: int, call, turn_index: int) -> MemorizeEvent:
        summary, entries, node_id = memorize_args(call)
        if not self.pending:
            raise ValueError("there is no search result to summarise; add a search node first")
        if node_id is not None and node_id not in self.pending:
            raise ValueError(f"node {node_id!r} has no search result waiting; waiting: {self.pending}")
        targets = [node_id] if node_id else list(self.pending)
        by_node: dict[str, list[MemoryItem]] = {t: [] for t in targets}
        problems = []
        for entry in entries:
            candidate = self.candidates.get(entry.information_id)
            if candidate is None or candidate.node_id not in by_node:
                known = [c.label for c in self.candidates.values() if c.node_id in by_node]
                problems.append(f"unknown information_id {entry.information_id!r} (known: {known})")
                continue
            if not entry.is_useful or entry.priority <= 0:
                continue
            try:
                item = self._memory_item(candidate, entry)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            by_node[candidate.node_id].append(item)
            self.pixels[item.item_id] = (candidate.page_key, candidate.page)
        stored: list[MemoryItem] = []
        for target, items in by_node.items():
            items = list({i.item_id: i for i in items}.values())  # the same label twice: keep the last
            self.graph.summarize(target, summary, items, turn_index=turn_index)
            stored.extend(items)
            self.pending.remove(target)
        thumbs = []
        for item in stored:
            key, page = self.pixels[item.item_id]
            for caption, image, view_key in item_views(item, key, page, self.pages, self.config.resize_factor,
                                                       160 * 160, self.config.min_pixels):
                thumbs.append(ImageRef(image_id=f"{item.label}{' ' + caption if caption else ''}",
                                       page_id=item.ref_id, image_path=item.image_url,
                                       page_size=(page.width, page.height),
                                       page_box=tuple(item.region or (0, 0, page.width, page.height)),
                                       shown_size=image.size, is_crop=item.kind == "crop", image=image,
                                       cache_key=view_key))
        event = MemorizeEvent(turn=step, node_ids=targets, summary=summary,
                              items=[{**i.to_dict(), "provenance": provenance(i)} for i in stored], thumbnails=thumbs,
                              graph=self.graph.export())
        if problems:
            raise _PartialMemorize(event, "; ".join(problems))
        return self._emit(event)

    def _memory_item(self, candidate: Candidate, entry: MemorizeEntry) -> MemoryItem:
        hit, meta, page = candidate.hit, candidate.hit.metadata or {}, candidate.page
        base = {"label": candidate.label, "ref_id": hit.page_id, "doc_id": hit.doc_id, "page_number": hit.page_number,
                    "priority": min(5.0, entry.priority), "image_url": hit.image_url,
                    "page_size": [page.width, page.height]}
        item_id = f"{candidate.node_id}/{candidate.label}"
        if candidate.kind == "video_segment":
            start, end = float(meta.get("start_s", 0.0)), float(meta.get("end_s", 0.0))
            picked = list(range(len(candidate.frame_times)))
            if entry.key_timestamps:  # nearest frame to each asked second (upstream matched 1-decimal strings)
                picked = sorted({min(picked, key=lambda i: abs(candidate.frame_times[i] - t))
                                 for t in entry.key_timestamps})
            return MemoryItem(item_id=item_id, kind="video_segment", time_range=[start, end],
                              key_timestamps=[candidate.frame_times[i] for i in picked],
                              frame_boxes=[candidate.frame_boxes[i] for i in picked], **base)
        if entry.region is not None:
            shown = candidate.shown[0]
            box, _ = map_bbox_to_page(entry.region, shown.shown_size, shown.page_box, shown.page_size, 0, 28)
            return MemoryItem(item_id=item_id, kind="crop", region=list(box), **base)
        return MemoryItem(item_id=item_id, kind="page", **base)

    def evidence(self) -> list[dict[str, Any]]:
        """Memorised items on the root→answer path (all memorised items when there is no answer)."""
        path = self.graph.answer_path() or set(self.graph.nodes)
        return [{"node_id": n.node_id, "label": i.label, "kind": i.kind, "ref_id": i.ref_id, "doc_id": i.doc_id,
                 "page_number": i.page_number, "region": i.region, "time_range": i.time_range,
                 "key_timestamps": i.key_timestamps, "priority": i.priority}
                for n, i in self.graph.items() if n.node_id in path]

    # ---- policy -----------------------------------------------------------------------------------------
    def _context(self):
        started = time.perf_counter()
        messages, allocations = build_context(self.graph, self.pixels, self.pages, self.config.energy,
                                              self.prompts, self.config.resize_factor)
        self.timings["image_s"] += time.perf_counter() - started
        return messages + self.tail, allocations

    async def _call_policy(self, messages: list[Message], remaining: int | None) -> PolicyReply:
        cfg = self.config
        thinking = bool(cfg.enable_thinking)
        max_tokens = cfg.max_tokens if remaining is None else max(1, min(cfg.max_tokens, remaining))
        sampling = SamplingParams(temperature=cfg.thinking_temperature if thinking else cfg.temperature,
                                  top_p=cfg.thinking_top_p if thinking else cfg.top_p, max_tokens=max_tokens,
                                  seed=cfg.seed, extra_body=cfg.sampling_extra())
        started = time.perf_counter()
        try:
            reply = await self.policy.complete(messages, sampling)
        except PolicyError:
            raise
        except Exception as exc:
            raise PolicyError(f"policy adapter failed: {type(exc).__name__}: {exc}") from exc
        finally:
            self.timings["policy_s"] += time.perf_counter() - started
        if not isinstance(reply, PolicyReply) or not isinstance(reply.text, str):
            raise PolicyError(f"policy returned {type(reply).__name__}, not a PolicyReply")
        self.usage["prompt_tokens"] += reply.prompt_tokens
        self.usage["completion_tokens"] += reply.completion_tokens or len(reply.text.split())
        return reply

    def _tokens_left(self) -> int | None:
        if self.config.max_episode_tokens is None:
            return None
        return self.config.max_episode_tokens - self.usage["completion_tokens"]

    # ---- bookkeeping --------------------------------------------------------------------------------------
    def _emit(self, event: AgentEvent) -> AgentEvent:
        self.events.append(event)
        return event

    def _finish(self, status: str, error: str | None = None) -> EpisodeFinished:
        self.status, self.error = status, error
        return self._emit(EpisodeFinished(turn=self.turns, status=status, answer=self.answer, turns=self.turns,
                                          elapsed_s=round(time.perf_counter() - self.started, 4), error=error))

    def result(self) -> VimRAGResult:
        return VimRAGResult(episode_id=self.episode_id, question=self.question, answer=self.answer,
                            status=self.status, graph=self.graph, events=list(self.events), turns=self.turns,
                            elapsed_s=round(time.perf_counter() - self.started, 4), evidence=self.evidence(),
                            context_stats=list(self.context_stats),
                            timings={k: round(v, 4) for k, v in self.timings.items()}, usage=dict(self.usage),
                            error=self.error, turn_records=list(self.turn_records))


class _PartialMemorize(ValueError):
    """Some memorize entries were unusable: the rest is stored; the event still goes out."""

    def __init__(self, event: MemorizeEvent, message: str):
        super().__init__(message)
        self.event = event


def _candidate_view(candidate: Candidate) -> dict[str, Any]:
    meta = candidate.hit.metadata or {}
    view = {"label": candidate.label, "kind": candidate.kind, "ref_id": candidate.hit.page_id,
            "doc_id": candidate.hit.doc_id, "page_number": candidate.hit.page_number,
            "score": candidate.hit.score}
    if candidate.kind == "video_segment":
        view.update(time_range=[meta.get("start_s"), meta.get("end_s")], frame_times=candidate.frame_times)
    return view


def _is_file(path: str) -> bool:
    from pathlib import Path

    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


# ---- the public class ---------------------------------------------------------------------------------------


class VimRAG(AgentFrontend[VimRAGResult]):
    """The memory-graph agent over a policy and a search server; `VRAG`'s API shape (`AgentFrontend`).

    `VimRAG(base_url=..., search_url=..., model=..., api_key=...)` talks to any OpenAI-compatible
    endpoint (default: DashScope's compatible mode, key from `DASHSCOPE_API_KEY`); `policy=` drives
    any `Policy`. Keyword arguments not listed are `VimRAGConfig` fields (`max_steps`,
    `search_top_k`, `enable_thinking`, `stream`, `energy=EnergyConfig(...)`, ...).
    """

    def __init__(self, base_url: str = DASHSCOPE_URL, search_url: str = "http://localhost:8002",
                 model: str | None = None, api_key: str | None = None, search_api_key: str | None = None,
                 config: VimRAGConfig | None = None, prompts: VimPrompts | None = None, policy: Policy | None = None,
                 **config_overrides: Any):
        import os

        if api_key is None and base_url == DASHSCOPE_URL:
            api_key = os.environ.get("DASHSCOPE_API_KEY")
        base = config or VimRAGConfig()
        config = VimRAGConfig(**{**base.to_dict(), **config_overrides}) if config_overrides else base
        super().__init__(base_url, search_url, model, api_key, search_api_key, config, policy)
        self.prompts = prompts or VimPrompts()

    def _make_policy(self) -> Policy:
        if not self.config.stream:
            return super()._make_policy()
        from vimrag.streaming import StreamingOpenAIPolicy

        return StreamingOpenAIPolicy(self.base_url, model=self.model, api_key=self.api_key,
                                     timeout=self.config.policy_timeout_s, max_retries=self.config.policy_retries,
                                     image_cache=self.encoded_images)

    def _new_episode(self, question: str, config: VimRAGConfig, policy: Policy, search: SearchClient) -> VimEpisode:
        return VimEpisode(question, config, self.prompts, policy, search, pages=self.pages)

    def _failure(self, question: str, error: str) -> VimRAGResult:
        return VimRAGResult.failure(question, error)

    def run(self, question: str, stream: bool = False, **overrides: Any):
        """A `VimRAGResult` (an event iterator with stream=True)."""
        if stream:
            return self.stream(question, **overrides)
        return self._loop().run(self.arun(question, **overrides))
