"""The VimRAG agent: reasoning as a memory graph, the context rebuilt from it every step.

One episode (`VimEpisode.run()`, async events) is the single implementation behind `VimRAG.run`,
`stream`, `arun`, `astream`, `run_batch` — the same API shape as `vrag_rl.VRAG`. The turn machinery
(policy call, token budget, step limit, unusable replies, events, finish) is the shared
`EpisodeEngine`'s (`vrag_rl.agent.engine`), as for VRAG; what is VimRAG's own is its memory
(`vimrag.memory.GraphMemory`: the graph, rebuilt into the context every call) and its tools
(`vimrag.tools`), run here.

A step: the context is [system, user(question, graph JSON, top-energy memory images)] plus, while
a search waits for its summary, the search call and its `<tool_response>`. The model adds search
nodes (several at once are searched as one batch), then summarises and memorises, then answers.
Every failure (malformed call, unknown parent, search down, policy down, a bug) is an event and an
explicit status; nothing escapes the public API.
"""
from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from PIL import Image

from search_engine.client import SearchClient, SearchError
from search_engine.types import SearchHit
from vimrag.config import VimRAGConfig
from vimrag.context import as_box, conversation_stats, item_views, provenance
from vimrag.events import (
    AgentEvent,
    ContextEvent,
    ErrorEvent,
    GraphAnswerEvent,
    ImageRef,
    MaxTurnsEvent,
    MemorizeEvent,
    NodeSearchEvent,
    SearchDoneEvent,
    ThinkEvent,
)
from vimrag.graph import GraphError
from vimrag.memory import Candidate, GraphMemory
from vimrag.prompts import VimPrompts
from vimrag.result import VimRAGResult
from vimrag.tools import ToolCall, answer_args, memorize_args, parse_turn, search_args
from vrag_rl.agent.engine import EpisodeEngine, TurnOutcome
from vrag_rl.agent.frontend import AgentFrontend
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policy import Message, Policy, image_part, text_part
from vrag_rl.agent.result import TurnRecord

__all__ = ["DASHSCOPE_URL", "VimEpisode", "VimRAG", "VimRAGConfig"]

DASHSCOPE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"


class VimEpisode(EpisodeEngine):
    """One question over one policy and one search client; iterate `run()` for its events."""

    config: VimRAGConfig
    prompts: VimPrompts
    memory: GraphMemory

    def __init__(self, question: str, config: VimRAGConfig, prompts: VimPrompts, policy: Policy,
                 search: SearchClient, episode_id: str | None = None, pages: PageImageStore | None = None):
        super().__init__(question, config, prompts, policy, search, episode_id, pages)
        self.memory = GraphMemory(self.question, prompts, self.pages, config.energy, config.resize_factor)
        self.graph = self.memory.graph
        self.context_stats: list[dict[str, Any]] = []

    # ---- one reply's tool calls ---------------------------------------------------------------------------
    def _context_events(self, turn: int, messages: list[Message]) -> list[AgentEvent]:
        stats = conversation_stats(messages, self.config.resize_factor).to_dict()
        self.context_stats.append(stats)
        return [ContextEvent(turn=turn, stats=stats, memory=[
            {"node_id": a.node_id, "label": a.item.label, "energy": round(a.energy, 4), "pixels": a.pixels,
             "capped": a.capped} for a in self.memory.allocations])]

    async def _act(self, turn: int, reply: str, record: TurnRecord, forced: bool,
                   outcome: TurnOutcome) -> AsyncIterator[AgentEvent]:
        """Apply the reply's tool calls in order: memorise, then searches (one batch), or answer."""
        parsed = parse_turn(reply)
        record.tool_calls, record.valid = [c.name for c in parsed.calls], parsed.valid
        if parsed.think:
            yield self._emit(ThinkEvent(turn=turn, text=parsed.think))
        errors, done = list(parsed.errors), []
        searches: list[tuple[str, str]] = []
        for call in parsed.calls:
            try:
                if call.name == "summarize_and_memorize":
                    memorized, problems = self._memorize(turn, call)
                    yield self._emit(memorized)
                    done.append("memorize")
                    if problems:
                        raise ValueError(problems)
                elif call.name == "add_search_node":
                    yield self._emit(self._add_search_node(turn, call, forced, searches))
                elif call.name == "add_answer_node":
                    answer, parents = answer_args(call)
                    self.graph.add_answer_node(answer, parents, turn_index=turn - 1)
                    self.answer, record.action, outcome.answered = answer, "answer", True
                    yield self._emit(GraphAnswerEvent(turn=turn, answer=answer, forced=forced,
                                                      parent_ids=self.graph.nodes["answer"].parent_ids,
                                                      evidence=self.evidence(), graph=self.graph.export()))
                    return
            except (ValueError, GraphError) as exc:
                errors.append(f"{call.name}: {exc}")
        record.action = "search" if searches else "memorize" if done else "invalid"
        if searches:
            async for event in self._run_searches(turn, searches, record):
                yield event
                if isinstance(event, ErrorEvent) and event.fatal:
                    outcome.fatal = event.message
                    return
        else:
            self.memory.settle(keep_reply=bool(errors))
        if errors:
            outcome.invalid, outcome.unusable = "; ".join(errors), not parsed.calls

    def _add_search_node(self, turn: int, call: ToolCall, forced: bool,
                         searches: list[tuple[str, str]]) -> NodeSearchEvent:
        if forced:
            raise ValueError("no more searches: the step budget is spent, answer now")
        if self.memory.pending:
            raise ValueError(f"node(s) {self.memory.pending} wait for summarize_and_memorize before a new search")
        if len(searches) >= self.config.max_searches_per_turn:
            raise ValueError(f"at most {self.config.max_searches_per_turn} searches in one step")
        node_id, query, parents = search_args(call)
        self.graph.add_search_node(node_id, query, parents, turn_index=turn - 1)
        searches.append((node_id, query))
        return NodeSearchEvent(turn=turn, node_id=node_id, query=query, parent_ids=self.graph.nodes[node_id].parent_ids,
                               graph=self.graph.export())

    # ---- search -----------------------------------------------------------------------------------------
    async def _run_searches(self, turn: int, searches: list[tuple[str, str]],
                            record: TurnRecord) -> AsyncIterator[AgentEvent]:
        record.queries = [q for _, q in searches]
        results = await self._search(turn, record.queries)
        if isinstance(results, ErrorEvent):
            yield results
            return
        content: list[dict[str, Any]] = [text_part("<tool_response>")]
        for (node_id, query), hits in zip(searches, results):
            self.graph.nodes[node_id].retrieved_ids = [h.page_id for h in hits]
            record.retrieved.append([h.page_id for h in hits])
            self.memory.pending.append(node_id)
            header = self.prompts.no_results if not hits else self.prompts.results_header
            content.append(text_part(header.format(node_id=node_id, query=query)))
            items, shown = [], []
            for hit in hits:
                candidate = await self._candidate(turn, node_id, hit)
                if isinstance(candidate, ErrorEvent):  # that item's pixels could not be fetched: said, and skipped
                    yield candidate
                    continue
                content.extend(_observation_parts(candidate))
                items.append(candidate.view())
                shown.extend(candidate.shown)
            record.shown_image_ids.extend(ref.image_id for ref in shown)
            yield self._emit(SearchDoneEvent(turn=turn, node_id=node_id, query=query, items=items, shown=shown))
        content.append(text_part("</tool_response>\n" + self.prompts.summary))
        self.memory.add_observation(content)

    async def _candidate(self, turn: int, node_id: str, hit: SearchHit) -> Candidate | ErrorEvent:
        candidate = self.memory.new_candidate(node_id, hit)
        try:
            candidate.page_key, candidate.page = await self._page(hit)
        except (OSError, SearchError) as exc:
            return self._emit(ErrorEvent(turn=turn, kind="search_failed", message=f"{hit.page_id}: {exc}"[:300]))
        page, meta, cfg, label = candidate.page, hit.metadata or {}, self.config, candidate.label
        if candidate.kind == "video_segment":
            boxes = [list(map(int, b)) for b in meta.get("frame_boxes") or []]
            times = [float(t) for t in meta.get("frame_times") or []]
            if not boxes or len(boxes) != len(times):
                boxes, times = [[0, 0, page.width, page.height]], [float(meta.get("start_s", 0.0))]
            candidate.frame_boxes, candidate.frame_times = boxes, times
            per_frame = max(cfg.min_pixels, cfg.observation_video_pixels // len(boxes))
            for stamp, box in zip(times, boxes):
                image, key = self.pages.view(candidate.page_key, page, as_box(box), cfg.resize_factor,
                                             cfg.min_pixels, per_frame)
                candidate.shown.append(_ref(f"{label}@{stamp:g}s", hit, page, box, image, key))
        else:
            box = [0, 0, page.width, page.height]
            image, key = self.pages.view(candidate.page_key, page, as_box(box), cfg.resize_factor, cfg.min_pixels,
                                         cfg.observation_max_pixels)
            candidate.shown.append(_ref(label, hit, page, box, image, key))
        self.memory.candidates[label] = candidate
        return candidate

    # ---- memory -----------------------------------------------------------------------------------------
    def _memorize(self, turn: int, call: ToolCall) -> tuple[MemorizeEvent, str]:
        """The memorize event (the usable entries are stored) and what was unusable ("" when nothing)."""
        summary, entries, node_id = memorize_args(call)
        pending = self.memory.pending
        if not pending:
            raise ValueError("there is no search result to summarise; add a search node first")
        if node_id is not None and node_id not in pending:
            raise ValueError(f"node {node_id!r} has no search result waiting; waiting: {pending}")
        targets = [node_id] if node_id else list(pending)
        stored, problems = self.memory.memorize(targets, summary, entries, turn_index=turn - 1)
        thumbs = []
        for item in stored:
            key, page = self.memory.pixels[item.item_id]
            for caption, image, view_key in item_views(item, key, page, self.pages, self.config.resize_factor,
                                                       160 * 160, self.config.min_pixels):
                thumbs.append(ImageRef(image_id=f"{item.label}{' ' + caption if caption else ''}",
                                       page_id=item.ref_id, image_path=item.image_url,
                                       page_size=(page.width, page.height),
                                       page_box=as_box(item.region or [0, 0, page.width, page.height]),
                                       shown_size=image.size, is_crop=item.kind == "crop", image=image,
                                       cache_key=view_key))
        return MemorizeEvent(turn=turn, node_ids=targets, summary=summary, thumbnails=thumbs, graph=self.graph.export(),
                             items=[{**i.to_dict(), "provenance": provenance(i)} for i in stored]), "; ".join(problems)

    # ---- the engine's questions ------------------------------------------------------------------------------
    def _turn_limit_event(self, turn: int) -> MaxTurnsEvent:
        message = f"no answer within {self.config.max_turns} turns and the forced answer turn"
        return MaxTurnsEvent(turn=turn, max_turns=self.config.max_turns, message=message)

    def result(self) -> VimRAGResult:
        return VimRAGResult(**self.base_result_fields(), graph=self.graph, context_stats=list(self.context_stats),
                            credit_graph=self.graph.to_credit_graph())  # the evaluation view (memorised items)


def _ref(image_id: str, hit: SearchHit, page: Image.Image, box: list[int], image: Image.Image,
         key: str) -> ImageRef:
    return ImageRef(image_id=image_id, page_id=hit.page_id, image_path=hit.image_ref,
                    page_size=(page.width, page.height), page_box=as_box(box), shown_size=image.size,
                    is_crop=box != [0, 0, page.width, page.height], image=image, cache_key=key)


def _observation_parts(candidate: Candidate) -> list[dict[str, Any]]:
    hit, meta = candidate.hit, candidate.hit.metadata or {}
    if candidate.kind == "video_segment":
        head = (f"{candidate.label}: video {hit.doc_id}, segment {hit.page_id} from {meta.get('start_s', 0):g}s "
                f"to {meta.get('end_s', 0):g}s")
        parts = [text_part(head)]
        for stamp, ref in zip(candidate.frame_times, candidate.shown):
            parts += [text_part(f"<{stamp:g} seconds>"), _image_part(ref)]
        return parts
    return [text_part(f"{candidate.label}: document {hit.doc_id}, page {hit.page_number} ({hit.page_id})"),
            _image_part(candidate.shown[0])]


def _image_part(ref: ImageRef) -> dict[str, Any]:
    if ref.image is None:
        raise ValueError(f"{ref.image_id} has no pixels to show")
    return image_part(ref.image, ref.image_id, ref.cache_key or ref.image_id)


# ---- the public class ---------------------------------------------------------------------------------------


class VimRAG(AgentFrontend[VimRAGResult]):
    """The memory-graph agent over a policy and a search server; `VRAG`'s API shape (`AgentFrontend`).

    `VimRAG(base_url=..., search_url=..., model=..., api_key=...)` talks to any OpenAI-compatible
    endpoint (default: DashScope's compatible mode, key from `DASHSCOPE_API_KEY`); `policy=` drives
    any `Policy`. Keyword arguments not listed are `VimRAGConfig` fields (`max_turns`,
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
