"""`AgentFrontend`: what the public agent classes (`VRAG`, `vimrag.VimRAG`) share around their episodes.

An agent class is an episode type plus this front end: clients per event loop, the sync / async /
streaming / batch entry points, and one private event loop that lives as long as the object. Why
the private loop: the core is async, and `run()` called once per question (as upstream users do)
should reuse the same HTTP clients, connection pools, decoded pages and image encodings instead of
building them anew each call (that cost ~44 ms CPU per call). Why one base class: both agents
must behave the same at this surface (a question that cannot start is a failed result, a batch
never loses results to one failure, clients are closed when the object goes away), and two copies
had started to drift.

A subclass names its episode (`_new_episode`) and its failed result (`_failure`); it may build its
own OpenAI adapter (`_make_policy`, e.g. a streaming one).
"""
from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from search_engine.client import SearchClient
from vrag_rl.agent.events import AgentEvent, EpisodeFinished, ErrorEvent
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policies.openai_http import EncodedImageCache, OpenAIPolicy
from vrag_rl.agent.policy import Policy

ResultT = TypeVar("ResultT")
ResultT_co = TypeVar("ResultT_co", covariant=True)


class RunnableEpisode(Protocol[ResultT_co]):
    """What the front end needs of an episode: its event stream, then its result."""

    def run(self) -> AsyncIterator[AgentEvent]: ...

    def result(self) -> ResultT_co: ...


class AgentFrontend(Generic[ResultT]):
    """Entry points and client lifetime shared by the agent classes (see the module doc).

    `config` is the subclass's config dataclass (it needs `to_dict()` and the `policy_timeout_s`,
    `policy_retries`, `search_timeout_s`, `search_retries` fields). Call `close()` (or use
    `with Agent(...) as agent:`) to release connections early; an object dropped without it still
    closes its private loop's clients.
    """

    def __init__(self, base_url: str, search_url: str, model: str | None, api_key: str | None,
                 search_api_key: str | None, config: Any, policy: Policy | None, jpeg_quality: int = 90):
        self.base_url = base_url
        self.search_url = search_base(search_url)
        self.model = model
        self.api_key = api_key
        self.search_api_key = search_api_key
        self.config = config
        self.policy = policy
        self.pages = PageImageStore()
        self.encoded_images = EncodedImageCache(jpeg_quality=jpeg_quality)
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._runner: LoopThread | None = None
        self._runner_lock = threading.Lock()

    # ---- what a subclass says ------------------------------------------------------------------------------
    def _new_episode(self, question: str, config: Any, policy: Policy, search: SearchClient) -> RunnableEpisode:
        raise NotImplementedError

    def _failure(self, question: str, error: str) -> ResultT:
        raise NotImplementedError

    def _make_policy(self) -> Policy:
        """The OpenAI adapter for `base_url` (used when no `policy` was given)."""
        return OpenAIPolicy(self.base_url, model=self.model, api_key=self.api_key,
                            timeout=self.config.policy_timeout_s, max_retries=self.config.policy_retries,
                            image_cache=self.encoded_images)

    # ---- clients, one set per event loop ----------------------------------------------------------------
    def _clients_for_loop(self) -> tuple[Policy, SearchClient]:
        loop = asyncio.get_running_loop()
        if loop not in self._clients:
            search = SearchClient(self.search_url, api_key=self.search_api_key, timeout=self.config.search_timeout_s,
                                  max_retries=self.config.search_retries)
            self._clients[loop] = (self.policy or self._make_policy(), search)
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

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _episode(self, question: str, **overrides: Any) -> RunnableEpisode:
        config = type(self.config)(**{**self.config.to_dict(), **overrides}) if overrides else self.config
        policy, search = self._clients_for_loop()
        return self._new_episode(question, config, policy, search)

    # ---- async API ---------------------------------------------------------------------------------------------
    async def astream(self, question: str, **overrides: Any) -> AsyncIterator[AgentEvent]:
        """The episode's events as they happen; a question that cannot start yields error + finish."""
        try:
            episode = self._episode(question, **overrides)
        except (ValueError, TypeError) as exc:
            yield ErrorEvent(turn=0, kind="internal", message=str(exc), fatal=True)
            yield EpisodeFinished(turn=0, status="failed", error=str(exc))
            return
        async for event in episode.run():
            yield event

    async def arun(self, question: str, on_event: Callable[[AgentEvent], Any] | None = None,
                   **overrides: Any) -> ResultT:
        """The episode's result (a question that cannot start, e.g. an empty one, is a failed result)."""
        try:
            episode = self._episode(question, **overrides)
        except (ValueError, TypeError) as exc:
            return self._failure(question, f"{type(exc).__name__}: {exc}")
        async for event in episode.run():
            if on_event is not None:
                maybe = on_event(event)
                if isinstance(maybe, Awaitable):
                    await maybe
        return episode.result()

    async def arun_batch(self, questions: Sequence[str], concurrency: int = 8, **overrides: Any) -> list[ResultT]:
        """Run many episodes at once (at most `concurrency` in flight); results in input order."""
        semaphore = asyncio.Semaphore(max(1, concurrency))

        async def one(question: str) -> ResultT:
            async with semaphore:
                try:
                    return await self.arun(question, **overrides)
                except Exception as exc:  # noqa: BLE001 - one failure, not all results
                    return self._failure(question, f"{type(exc).__name__}: {exc}")

        return list(await asyncio.gather(*(one(q) for q in questions)))

    # ---- sync API -----------------------------------------------------------------------------------------------
    def _loop(self) -> LoopThread:
        with self._runner_lock:
            if self._runner is None:
                self._runner = LoopThread(self._clients, owns_policy=self.policy is None, owner=self)
            return self._runner

    def run_batch(self, questions: Sequence[str], concurrency: int = 8, **overrides: Any) -> list[ResultT]:
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


def search_base(url: str) -> str:
    """The search server's root: upstream configs name the endpoint (`.../search`)."""
    url = url.rstrip("/")
    return url[: -len("/search")] if url.endswith("/search") else url


class LoopThread:
    """One event loop on a daemon thread; coroutines are submitted to it from any thread.

    Why not `asyncio.run` per call: every call would build (and tear down) new HTTP clients.
    """

    def __init__(self, clients: weakref.WeakKeyDictionary | None = None, owns_policy: bool = True,
                 owner: object | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="vrag-loop", daemon=True)
        self._thread.start()
        # an agent dropped (or alive at exit) without close(): its clients are still closed
        self._finalizer = (weakref.finalize(owner, LoopThread._shutdown, self.loop, self._thread, clients,
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
        if not thread.is_alive() and not loop.is_closed():
            loop.close()  # its self-pipe sockets too: unclosed, each is a ResourceWarning when collected

    def submit(self, coro):
        """Schedule `coro` on the loop; a `concurrent.futures.Future` of its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro):
        """Run `coro` on the loop and wait for its result (from any other thread)."""
        return self.submit(coro).result()

    def stop(self) -> None:
        """Stop the loop and its thread (the clients are closed first by `AgentFrontend.close`)."""
        if self._finalizer is not None:
            self._finalizer.detach()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()
