"""Coalesce concurrent search requests into one `SearchEngine.batch_search` call.

Why: an RL rollout (or a demo with many users) sends the search server dozens of small requests
at once, usually one query each. Run one by one, each pays a whole encoder forward for one short
query, and run side by side in the thread pool, the forwards fight over the cores (torch starts
its own threads per call). On the 2-core CPU machine, MiniLM cost 14 ms of CPU for one query alone
and 5 ms each in a batch of 20; `scripts/bench_agent.py` at concurrency 64 spent 8 ms of search
server CPU per agent turn before this.

How — continuous batching, the way model servers batch generation: a request joins the queue; if
no batch is running, one starts at once with everything queued (so a lone request waits for
nothing); while it runs, newcomers queue and go together in the next batch. Requests are merged
only when they ask the same thing of the engine (`top_k`, `doc_ids`, `channels`), up to
`max_queries` queries per call. If a merged call fails, its requests are run one by one, so a
request's error (an unknown document, say) is its own and never its neighbours'.

Not a general-purpose library: model servers batch inside their own process (vLLM, TEI), and the
engine's `batch_search` is synchronous; what this adds is the queue in front of it.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fastapi.concurrency import run_in_threadpool

from search_engine.types import SearchHit

SearchFn = Callable[[list[str], int, "list[str] | None", "list[str] | None"], list[list[SearchHit]]]
BatchKey = tuple[int, "tuple[str, ...] | None", "tuple[str, ...] | None"]


@dataclass
class _Request:
    queries: list[str]
    key: BatchKey
    future: asyncio.Future = field(repr=False)


class SearchBatcher:
    """Queue in front of a synchronous `search(queries, top_k, doc_ids, channels)`; one batch at a time.

    `requests` and `batches` count what went through (a batch is one call of `search`), so the
    server can report how much merging happened.
    """

    def __init__(self, search: SearchFn, max_queries: int = 256):
        if max_queries < 1:
            raise ValueError("max_queries must be at least 1")
        self._search = search
        self.max_queries = max_queries
        self._queue: list[_Request] = []
        self._worker: asyncio.Task | None = None
        self.requests = 0
        self.batches = 0

    async def search(self, queries: Sequence[str], top_k: int, doc_ids: Sequence[str] | None = None,
                     channels: Sequence[str] | None = None) -> list[list[SearchHit]]:
        """The hits for `queries`, exactly as `search` would return them; its exceptions are raised here."""
        key: BatchKey = (top_k, tuple(doc_ids) if doc_ids else None, tuple(channels) if channels else None)
        request = _Request(list(queries), key, asyncio.get_running_loop().create_future())
        self._queue.append(request)
        self.requests += 1
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await request.future

    async def _drain(self) -> None:
        """Run batches until the queue is empty (a new request starts a new drain)."""
        while self._queue:
            await self._run(self._take())

    def _take(self) -> list[_Request]:
        """The first queued request and every later one with the same key, up to `max_queries` queries."""
        first = self._queue[0]
        batch: list[_Request] = []
        rest: list[_Request] = []
        size = 0
        for request in self._queue:
            if request.key == first.key and (not batch or size + len(request.queries) <= self.max_queries):
                batch.append(request)
                size += len(request.queries)
            else:
                rest.append(request)
        self._queue = rest
        return batch

    async def _run(self, batch: list[_Request]) -> None:
        batch = [r for r in batch if not r.future.done()]  # a client that went away is not searched for
        if not batch:
            return
        top_k, doc_ids, channels = batch[0].key
        queries = [q for r in batch for q in r.queries]
        self.batches += 1
        try:
            results = await run_in_threadpool(self._search, queries, top_k, _list(doc_ids), _list(channels))
        except Exception as exc:  # noqa: BLE001 - handed to the request(s) it belongs to
            if len(batch) == 1:
                _settle(batch[0].future, exception=exc)
            else:
                for request in batch:
                    await self._run([request])
            return
        start = 0
        for request in batch:
            _settle(request.future, result=results[start:start + len(request.queries)])
            start += len(request.queries)


def _list(values: tuple[str, ...] | None) -> list[str] | None:
    return list(values) if values else None


def _settle(future: asyncio.Future, result: object = None, exception: BaseException | None = None) -> None:
    if future.done():
        return
    if exception is not None:
        future.set_exception(exception)
    else:
        future.set_result(result)
