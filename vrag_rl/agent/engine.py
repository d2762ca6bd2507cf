"""The episode engine: the turn machinery both agents share, once.

An episode is: ask the policy for a reply to what the model sees next, let the reply's actions
(tools) change the agent's memory, repeat — within a turn limit (one more call forces an answer), a
response-token budget and a limit on unusable replies in a row — and end with exactly one of
`EPISODE_STATUSES`, never an exception. That loop, the policy call (budget-capped sampling, adapter
failures made explicit, usage), the search call, the page fetch, events, timings and the finish are
`EpisodeEngine`'s. The two agents differ in what the model sees next and in their tools:

- VRAG (`vrag_rl.vrag.loop.Episode`) keeps a growing transcript (`vrag_rl.vrag.transcript`):
  every reply and every page or crop is appended;
- VimRAG (`vimrag.agent.VimEpisode`) keeps a memory graph (`vimrag.memory.GraphMemory`): the
  context is rebuilt from the graph at every call.

Both are a `Memory` (what the model sees next, what a reply, a tool result or feedback does to
it, what the evidence is, which steps built on which) plus the subclass's `_act` (parse the reply,
run its tools). Each agent's rollout records what its memory sends: one growing conversation (one sample
per episode: `TokenRecordingPolicy`, VRAG) or a fresh prompt per model call (one sample per turn:
`vrag_rl.agent.policies.turn_recorder.TurnRecordingPolicy`, VimRAG). Each model call is one `TurnRecord`
(index = the call's index), so a recorded turn, its turn record and its node in the credit graph
(`GraphNode.turn_indices`) line up — what GGPO on VimRAG's memory graph needs.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from PIL import Image

from search_engine.client import SearchClient, SearchError
from search_engine.types import SearchHit
from vrag_rl.agent.config import EpisodeConfig
from vrag_rl.agent.credit_graph import CreditGraph
from vrag_rl.agent.events import AgentEvent, EpisodeFinished, EpisodeStarted, EpisodeStatus, ErrorEvent
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policy import Message, Policy, PolicyError, PolicyReply
from vrag_rl.agent.result import EpisodeResultBase, TurnRecord


class Memory(Protocol):
    """What an agent remembers between model calls, and so what the model sees next."""

    def context(self) -> list[Message]:
        """The messages of the next model call."""
        ...

    def add_reply(self, text: str) -> None:
        """The model's reply joins what it sees next."""
        ...

    def add_feedback(self, text: str) -> None:
        """A line from the agent to the model (why a reply was unusable, "answer now")."""
        ...

    def evidence(self) -> list[dict[str, Any]]:
        """What the answer rests on (per page, or per memorised item)."""
        ...

    def credit_graph(self, records: list[TurnRecord]) -> CreditGraph:
        """Which step built on which (what GGPO reads), given the episode's turn records."""
        ...


class PromptsLike(Protocol):
    """The two lines the engine itself says to the model."""

    @property
    def force_answer(self) -> str: ...

    @property
    def invalid_action(self) -> str:
        """With a {reason} field."""
        ...


EventT = TypeVar("EventT", bound=AgentEvent)


@dataclass
class TurnOutcome:
    """What a reply's actions came to, as `_act` reports it to the engine (filled in place: `_act` is an
    async generator of events, which cannot also return a value)."""

    answered: bool = False
    invalid: str = ""  # why (part of) the reply could not be used; the model is told
    unusable: bool = False  # nothing of the reply could be used (counts toward `max_invalid_actions`)
    fatal: str | None = None  # the episode cannot go on (the fatal `ErrorEvent` is already out)


class EpisodeEngine:
    """One question, one policy, one search client, one memory; iterate `run()` for the events.

    A subclass sets `self.memory` and implements `_act` (and `_turn_limit_event`, `result`); it may
    add events before each call (`_context_events`).
    """

    memory: Memory

    def __init__(self, question: str, config: EpisodeConfig, prompts: PromptsLike, policy: Policy,
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
        self.events: list[AgentEvent] = []
        self.turn_records: list[TurnRecord] = []
        self.page_paths: dict[str, str] = {}  # page id → how results name its image (`SearchHit.image_ref`)
        self._page_images: dict[str, tuple[str, Image.Image]] = {}  # this episode's pages (the store may evict)
        self.timings = {"policy_s": 0.0, "search_s": 0.0, "image_s": 0.0}
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.answer: str | None = None
        self.status: EpisodeStatus = "failed"
        self.error: str | None = None
        self.turns = 0
        self.started = time.perf_counter()

    # ---- what a subclass says ---------------------------------------------------------------------------
    def _act(self, turn: int, reply: str, record: TurnRecord, forced: bool,
             outcome: TurnOutcome) -> AsyncIterator[AgentEvent]:
        """Parse the reply, run its tools against the memory, fill `record` and `outcome`; yield the events."""
        raise NotImplementedError

    def _context_events(self, turn: int, messages: list[Message]) -> list[AgentEvent]:
        """Events about the context just built, before it is sent (none by default)."""
        return []

    def _turn_limit_event(self, turn: int) -> AgentEvent:
        """The event that says the forced-answer call brought no answer (it has a `message`)."""
        raise NotImplementedError

    def result(self) -> EpisodeResultBase:
        raise NotImplementedError

    # ---- the loop ------------------------------------------------------------------------------------------
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
        for turn in range(1, cfg.turn_limit + 2):
            self.turns = turn
            forced = turn == cfg.turn_limit + 1
            remaining = self._tokens_left()
            if remaining is not None and remaining <= 0:
                yield self._finish("token_budget", error=self._budget_message())
                return
            if forced:
                self.memory.add_feedback(self.prompts.force_answer)
            messages = self._context()
            for event in self._context_events(turn, messages):
                yield self._emit(event)
            try:
                reply = await self._call_policy(messages, remaining)
            except PolicyError as exc:
                yield self._emit(ErrorEvent(turn=turn, kind="policy_failed", message=str(exc), fatal=True))
                yield self._finish("failed", error=str(exc))
                return
            self.memory.add_reply(reply.text)
            record = TurnRecord(index=turn - 1, action="invalid", reply=reply.text, valid=False, forced=forced,
                                completion_tokens=self._reply_tokens(reply))
            self.turn_records.append(record)
            outcome = TurnOutcome()
            async for event in self._act(turn, reply.text, record, forced, outcome):
                yield event
            if outcome.fatal is not None:
                yield self._finish("failed", error=outcome.fatal)
                return
            if outcome.answered:
                yield self._finish("forced_answer" if forced else "answered")
                return
            if outcome.invalid:
                record.valid, record.reason = False, outcome.invalid[:500]
                invalid_streak = invalid_streak + 1 if outcome.unusable else 0
                fatal = invalid_streak > cfg.max_invalid_actions
                yield self._emit(ErrorEvent(turn=turn, kind="invalid_action", message=record.reason, fatal=fatal))
                if fatal:
                    yield self._finish("failed", error=f"{invalid_streak} unusable replies in a row: {record.reason}")
                    return
                self.memory.add_feedback(self.prompts.invalid_action.format(reason=record.reason))
            else:
                invalid_streak = 0
            if forced:
                event = self._emit(self._turn_limit_event(turn))
                yield event
                yield self._finish("failed", error=getattr(event, "message", None) or "no answer")
                return
            if self._tokens_exhausted():
                yield self._finish("token_budget", error=self._budget_message())
                return

    # ---- the policy --------------------------------------------------------------------------------------------
    def _context(self) -> list[Message]:
        started = time.perf_counter()
        messages = self.memory.context()
        self.timings["image_s"] += time.perf_counter() - started
        return messages

    async def _call_policy(self, messages: list[Message], tokens_left: int | None) -> PolicyReply:
        cfg = self.config
        max_tokens = cfg.max_tokens if tokens_left is None else max(1, min(cfg.max_tokens, tokens_left))
        started = time.perf_counter()
        try:
            reply = await self.policy.complete(messages, cfg.sampling(max_tokens))
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

    @staticmethod
    def _reply_tokens(reply: PolicyReply) -> int:
        """The reply's length in tokens: its ids where the adapter has them, else the reported usage, else
        a word count (an endpoint that reports no usage must not make the token budget unbounded)."""
        if reply.token_ids is not None:
            return len(reply.token_ids)
        return reply.completion_tokens or len(reply.text.split())

    def _tokens_left(self) -> int | None:
        budget = self.config.max_episode_tokens
        return None if budget is None else budget - self.usage["completion_tokens"]

    def _tokens_exhausted(self) -> bool:
        left = self._tokens_left()
        return left is not None and left <= 0

    def _budget_message(self) -> str:
        return f"the episode's token budget ({self.config.max_episode_tokens} response tokens) is spent"

    # ---- search and pages -----------------------------------------------------------------------------------
    async def _search(self, turn: int, queries: list[str]) -> list[list[SearchHit]] | ErrorEvent:
        """One batch of queries → per query its hits; a failure is a fatal `ErrorEvent` (emitted, returned)."""
        started = time.perf_counter()
        try:
            results = await self.search_client.search(queries, top_k=self.config.search_top_k,
                                                      doc_ids=self.config.doc_ids)
            if len(results) != len(queries):
                raise SearchError(f"the search server answered {len(results)} result lists for {len(queries)} queries")
        except Exception as exc:  # noqa: BLE001 - SearchError, or a server answering nonsense
            message = str(exc) if isinstance(exc, SearchError) else f"search failed: {exc.__class__.__name__}: {exc}"
            return self._emit(ErrorEvent(turn=turn, kind="search_failed", message=message[:500], fatal=True))
        finally:
            self.timings["search_s"] += time.perf_counter() - started
        return results

    async def _page(self, hit: SearchHit) -> tuple[str, Image.Image]:
        """(cache key, decoded page) of a hit: from its local file when there is one, else from the server."""
        if hit.page_id in self._page_images:
            return self._page_images[hit.page_id]
        started = time.perf_counter()
        local = bool(hit.image_path) and _is_file(hit.image_path)
        key = f"{hit.page_id}@{hit.image_path if local else hit.image_url}"
        page = await self.pages.page(key, hit.image_path if local else None,
                                     lambda: self.search_client.page_image(hit.page_id))
        self.page_paths[hit.page_id] = hit.image_ref  # what results show: the image's URL or the page id
        self._page_images[hit.page_id] = (key, page)
        self.timings["image_s"] += time.perf_counter() - started
        return key, page

    # ---- bookkeeping ---------------------------------------------------------------------------------------------
    def evidence(self) -> list[dict[str, Any]]:
        return self.memory.evidence()

    def credit_graph(self) -> CreditGraph:
        return self.memory.credit_graph(self.turn_records)

    def _emit(self, event: EventT) -> EventT:
        self.events.append(event)
        return event

    def _finish(self, status: EpisodeStatus, error: str | None = None) -> EpisodeFinished:
        self.status = status
        self.error = error
        return self._emit(EpisodeFinished(turn=self.turns, status=status, answer=self.answer, turns=self.turns,
                                          elapsed_s=self._elapsed(), error=error))

    def _elapsed(self) -> float:
        return round(time.perf_counter() - self.started, 4)

    def base_result_fields(self) -> dict[str, Any]:
        """The `EpisodeResultBase` fields, for a subclass's `result()`."""
        return {"episode_id": self.episode_id, "question": self.question, "answer": self.answer,
                "status": self.status, "events": list(self.events), "turns": self.turns,
                "elapsed_s": self._elapsed(), "evidence": self.evidence(),
                "timings": {k: round(v, 4) for k, v in self.timings.items()}, "usage": dict(self.usage),
                "error": self.error, "turn_records": list(self.turn_records)}


def _is_file(path: str) -> bool:
    try:
        return Path(path).is_file()
    except (OSError, ValueError):  # a path with NUL or too long: not a local file
        return False
