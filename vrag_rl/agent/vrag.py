"""`VRAG`: the public agent class — `run`, `stream`, `arun`, `astream`, `run_batch`.

The core is async (`Episode.run` yields events); HTTP connection pools are shared by every episode
running on the same event loop, so `arun_batch` drives many episodes over a few connections.
The synchronous methods run that core on a private event loop.
"""
from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Sequence

from search_engine.client import SearchClient
from vrag_rl.agent.config import AgentConfig
from vrag_rl.agent.events import AgentEvent, AnswerEvent, CropEvent, SearchEvent, SearchResultsEvent, ThinkEvent
from vrag_rl.agent.images import draw_box
from vrag_rl.agent.loop import Episode
from vrag_rl.agent.policy import PolicyClient
from vrag_rl.agent.prompts import Prompts
from vrag_rl.agent.result import EpisodeResult

class VRAG:
    """A visual RAG agent over a policy endpoint and a search server.

    `VRAG(base_url="http://localhost:8001/v1", search_url="http://localhost:8002")`; `search_url`
    may also be upstream's `.../search`. Keyword arguments not listed below are `AgentConfig`
    fields (`max_turns`, `search_top_k`, `max_pixels`, `crop_padding`, ...).

    Upstream compatibility: `VRAG(base_url, search_url, generator=False).run(q)` returns the answer
    string, and `generator=True` makes `run` yield upstream's `(kind, content, raw)` tuples.
    """

    def __init__(self, base_url: str = "http://localhost:8001/v1", search_url: str = "http://localhost:8002",
                 model: str | None = None, api_key: str | None = None, search_api_key: str | None = None,
                 generator: bool | None = None, config: AgentConfig | None = None, prompts: Prompts | None = None,
                 **config_overrides: Any):
        self.base_url = base_url
        self.search_url = _search_base(search_url)
        self.model = model
        self.api_key = api_key
        self.search_api_key = search_api_key
        self.generator = generator
        base = config or AgentConfig()
        self.config = AgentConfig(**{**base.to_dict(), **config_overrides}) if config_overrides else base
        self.prompts = prompts or Prompts()
        self._clients: dict[int, tuple[PolicyClient, SearchClient]] = {}

    # ---- clients, one set per event loop ----------------------------------------------------------------
    def _clients_for_loop(self) -> tuple[PolicyClient, SearchClient]:
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._clients:
            policy = PolicyClient(self.base_url, model=self.model, api_key=self.api_key,
                                  timeout=self.config.policy_timeout_s, max_retries=self.config.policy_retries)
            search = SearchClient(self.search_url, api_key=self.search_api_key, timeout=self.config.search_timeout_s,
                                  max_retries=self.config.search_retries)
            self._clients[loop_id] = (policy, search)
        return self._clients[loop_id]

    async def aclose(self) -> None:
        clients = self._clients.pop(id(asyncio.get_running_loop()), None)
        if clients:
            await clients[0].aclose()
            await clients[1].aclose()

    def _episode(self, question: str, **overrides: Any) -> Episode:
        config = AgentConfig(**{**self.config.to_dict(), **overrides}) if overrides else self.config
        policy, search = self._clients_for_loop()
        return Episode(question, config, self.prompts, policy, search)

    # ---- async API ---------------------------------------------------------------------------------------------
    async def astream(self, question: str, **overrides: Any) -> AsyncIterator[AgentEvent]:
        """Yield the episode's events as they happen (start, think, search, ..., answer, finish)."""
        episode = self._episode(question, **overrides)
        async for event in episode.run():
            yield event

    async def arun(self, question: str, on_event: Callable[[AgentEvent], Any] | None = None,
                   **overrides: Any) -> EpisodeResult:
        episode = self._episode(question, **overrides)
        async for event in episode.run():
            if on_event is not None:
                maybe = on_event(event)
                if isinstance(maybe, Awaitable):
                    await maybe
        return episode.result()

    async def arun_batch(self, questions: Sequence[str], concurrency: int = 8, **overrides: Any) -> list[EpisodeResult]:
        """Run many episodes at once (at most `concurrency` in flight); results in input order."""
        semaphore = asyncio.Semaphore(max(1, concurrency))

        async def one(question: str) -> EpisodeResult:
            async with semaphore:
                return await self.arun(question, **overrides)

        return list(await asyncio.gather(*(one(q) for q in questions)))

    # ---- sync API -----------------------------------------------------------------------------------------------
    def run(self, question: str, stream: bool = False, **overrides: Any):
        """EpisodeResult (default); an event iterator with stream=True; upstream's shapes with generator=."""
        if self.generator is True:
            return self._upstream_generator(question)
        if stream:
            return self.stream(question, **overrides)
        result = _run_sync(self._with_close(self.arun(question, **overrides)))
        if self.generator is False:
            return result.answer
        return result

    def run_batch(self, questions: Sequence[str], concurrency: int = 8, **overrides: Any) -> list[EpisodeResult]:
        return _run_sync(self._with_close(self.arun_batch(questions, concurrency=concurrency, **overrides)))

    def stream(self, question: str, **overrides: Any) -> Iterator[AgentEvent]:
        """Events one by one as they happen, from a background event loop (for UIs such as Streamlit)."""
        events: queue.Queue = queue.Queue()
        done = object()

        async def produce() -> None:
            try:
                async for event in self.astream(question, **overrides):
                    events.put(event)
            except BaseException as exc:  # noqa: BLE001 - handed to the consuming thread
                events.put(exc)
            finally:
                await self.aclose()
                events.put(done)

        thread = threading.Thread(target=asyncio.run, args=(produce(),), daemon=True)
        thread.start()
        while True:
            item = events.get()
            if item is done:
                break
            if isinstance(item, BaseException):
                raise item
            yield item
        thread.join()

    async def _with_close(self, coro):
        try:
            return await coro
        finally:
            await self.aclose()

    def _upstream_generator(self, question: str):
        """Upstream's event tuples; the final answer is also the generator's return value."""
        answer = None
        for event in self.stream(question):
            if isinstance(event, ThinkEvent):
                yield ("think", event.text, f"<think>{event.text}</think>")
            elif isinstance(event, SearchEvent):
                text = " | ".join(event.queries)
                yield ("search", text, f"<search>{text}</search>")
            elif isinstance(event, SearchResultsEvent):
                for ref in event.shown:
                    yield ("search_image", ref.image, "")
            elif isinstance(event, CropEvent) and event.crop is not None and event.source is not None:
                yield ("bbox", str(event.bbox), f"<bbox>{event.bbox}</bbox>")
                source_with_box = draw_box(event.source.image, tuple(int(v) for v in event.bbox))
                yield ("crop_image", event.crop.image, source_with_box)
            elif isinstance(event, AnswerEvent):
                answer = event.answer
                yield ("answer", event.answer, f"<answer>{event.answer}</answer>")
        return ("answer", answer or self.prompts.no_answer, "")


def _search_base(url: str) -> str:
    url = url.rstrip("/")
    return url[: -len("/search")] if url.endswith("/search") else url


def _run_sync(coro):
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # called from inside a running loop (Jupyter, Streamlit callbacks): run on a private thread
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
