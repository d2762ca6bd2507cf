"""`VRAG`: the public agent class — `run`, `stream`, `arun`, `astream`, `run_batch`.

The core is async (`Episode.run` yields events). The synchronous methods run it on one private
event loop per `VRAG` object, kept for its lifetime, so `run()` called once per question (as
upstream users do) reuses the same HTTP clients, connection pools, decoded pages and image
encodings instead of building them anew each call (that cost ~44 ms CPU per call).
"""
from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

from search_engine.client import SearchClient
from vrag_rl.agent.config import AgentConfig
from vrag_rl.agent.events import AgentEvent, AnswerEvent, CropEvent, SearchEvent, SearchResultsEvent, ThinkEvent
from vrag_rl.agent.images import draw_box
from vrag_rl.agent.loop import Episode
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policies.openai_http import EncodedImageCache, OpenAIPolicy
from vrag_rl.agent.policy import Policy
from vrag_rl.agent.prompts import Prompts
from vrag_rl.agent.result import EpisodeResult


class EpisodeFailedError(RuntimeError):
    """Raised by upstream's `generator=False` call style when the episode ended without an answer.

    `result` holds the whole `EpisodeResult` (status, error, trajectory) for inspection.
    """

    def __init__(self, result: EpisodeResult):
        super().__init__(f"episode {result.episode_id} {result.status}: {result.error or 'no answer'}")
        self.result = result


class VRAG:
    """A visual RAG agent over a policy and a search server.

    `VRAG(base_url="http://localhost:8001/v1", search_url="http://localhost:8002")` talks to an
    OpenAI-compatible endpoint; `VRAG(policy=my_policy, search_url=...)` drives any object with the
    `Policy` interface (an in-process model, a token recorder for training). `search_url` may also
    be upstream's `.../search`. Keyword arguments not listed below are `AgentConfig` fields
    (`max_turns`, `search_top_k`, `max_pixels`, `crop_padding`, ...).

    Upstream compatibility: `VRAG(base_url, search_url, generator=False).run(q)` returns the answer
    string (and raises `EpisodeFailedError` when there is none, never returns a silent `None`);
    `generator=True` makes `run` yield upstream's `(kind, content, raw)` tuples.

    Call `close()` (or use `with VRAG(...) as agent:`) to release connections early.
    """

    def __init__(self, base_url: str = "http://localhost:8001/v1", search_url: str = "http://localhost:8002",
                 model: str | None = None, api_key: str | None = None, search_api_key: str | None = None,
                 generator: bool | None = None, config: AgentConfig | None = None, prompts: Prompts | None = None,
                 policy: Policy | None = None, **config_overrides: Any):
        self.base_url = base_url
        self.search_url = _search_base(search_url)
        self.model = model
        self.api_key = api_key
        self.search_api_key = search_api_key
        self.generator = generator
        base = config or AgentConfig()
        self.config = AgentConfig(**{**base.to_dict(), **config_overrides}) if config_overrides else base
        self.prompts = prompts or Prompts()
        self.policy = policy
        self.pages = PageImageStore()
        self.encoded_images = EncodedImageCache(jpeg_quality=self.config.jpeg_quality)
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._runner: _LoopThread | None = None
        self._runner_lock = threading.Lock()

    # ---- clients, one set per event loop ----------------------------------------------------------------
    def _clients_for_loop(self) -> tuple[Policy, SearchClient]:
        loop = asyncio.get_running_loop()
        if loop not in self._clients:
            policy = self.policy or OpenAIPolicy(
                self.base_url, model=self.model, api_key=self.api_key, timeout=self.config.policy_timeout_s,
                max_retries=self.config.policy_retries, image_cache=self.encoded_images)
            search = SearchClient(self.search_url, api_key=self.search_api_key, timeout=self.config.search_timeout_s,
                                  max_retries=self.config.search_retries)
            self._clients[loop] = (policy, search)
        return self._clients[loop]

    async def aclose(self) -> None:
        """Close the clients of the running event loop (a given `policy` is left to its owner)."""
        clients = self._clients.pop(asyncio.get_running_loop(), None)
        if clients:
            if self.policy is None:
                await clients[0].aclose()
            await clients[1].aclose()

    def close(self) -> None:
        """Close the private loop's clients and stop it."""
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.run(self.aclose())
            runner.stop()

    def __enter__(self) -> VRAG:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _episode(self, question: str, **overrides: Any) -> Episode:
        config = AgentConfig(**{**self.config.to_dict(), **overrides}) if overrides else self.config
        policy, search = self._clients_for_loop()
        return Episode(question, config, self.prompts, policy, search, pages=self.pages)

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
                try:
                    return await self.arun(question, **overrides)
                except Exception as exc:  # noqa: BLE001 - e.g. an empty question: one failure, not all results
                    return EpisodeResult.failure(question, f"{exc.__class__.__name__}: {exc}")

        return list(await asyncio.gather(*(one(q) for q in questions)))

    # ---- sync API -----------------------------------------------------------------------------------------------
    def _loop(self) -> _LoopThread:
        with self._runner_lock:
            if self._runner is None:
                self._runner = _LoopThread(self._clients, owns_policy=self.policy is None, owner=self)
            return self._runner

    def run(self, question: str, stream: bool = False, **overrides: Any):
        """EpisodeResult (default); an event iterator with stream=True; upstream's shapes with generator=."""
        if self.generator is True:
            return self._upstream_generator(question)
        if stream:
            return self.stream(question, **overrides)
        result = self._loop().run(self.arun(question, **overrides))
        if self.generator is False:
            if not result.answered:
                raise EpisodeFailedError(result)
            return result.answer
        return result

    def run_batch(self, questions: Sequence[str], concurrency: int = 8, **overrides: Any) -> list[EpisodeResult]:
        """Every question's result, in input order; failed episodes are results with status "failed"."""
        return self._loop().run(self.arun_batch(questions, concurrency=concurrency, **overrides))

    def stream(self, question: str, **overrides: Any) -> Iterator[AgentEvent]:
        """Events one by one as they happen, from the private event loop (for UIs such as Streamlit)."""
        events: queue.Queue = queue.Queue()
        done = object()

        async def produce() -> None:
            try:
                async for event in self.astream(question, **overrides):
                    events.put(event)
            except BaseException as exc:  # noqa: BLE001 - handed to the consuming thread
                events.put(exc)
            finally:
                events.put(done)

        future = self._loop().submit(produce())
        while True:
            item = events.get()
            if item is done:
                break
            if isinstance(item, BaseException):
                raise item
            yield item
        future.result()

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


class _LoopThread:
    """One event loop on a daemon thread; coroutines are submitted to it from any thread.

    Why not `asyncio.run` per call: every call would build (and tear down) new HTTP clients.
    """

    def __init__(self, clients: weakref.WeakKeyDictionary | None = None, owns_policy: bool = True,
                 owner: object | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="vrag-loop", daemon=True)
        self._thread.start()
        # an agent dropped (or alive at exit) without close(): its clients are still closed
        self._finalizer = (weakref.finalize(owner, _LoopThread._shutdown, self.loop, self._thread, clients,
                                            owns_policy) if owner is not None else None)

    @staticmethod
    def _shutdown(loop: asyncio.AbstractEventLoop, thread: threading.Thread,
                  clients: weakref.WeakKeyDictionary | None, owns_policy: bool) -> None:
        """Close the clients made on `loop`, then stop it. Why: aiohttp-backed clients that are never
        closed print "Unclosed client session" when a script that called `run()` exits."""
        pair = clients.pop(loop, None) if clients is not None else None
        if pair is not None and loop.is_running():
            async def close_pair() -> None:
                if owns_policy:
                    await pair[0].aclose()
                await pair[1].aclose()

            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(close_pair(), loop).result(timeout=5)
        if loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)

    def submit(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro):
        return self.submit(coro).result()

    def stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()
