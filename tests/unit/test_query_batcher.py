"""Concurrent search requests share engine calls, and each gets exactly its own answer or error."""
from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from search_engine.client import SearchClient, SearchError
from search_engine.query_batcher import SearchBatcher


class Recorder:
    """A synchronous search function (as the engine's) that records each call and can be slowed."""

    def __init__(self, delay: float = 0.0):
        self.calls: list[tuple[list[str], int, list[str] | None]] = []
        self.delay = delay
        self.gate = threading.Event()

    def __call__(self, queries, top_k, doc_ids, channels):
        self.calls.append((list(queries), top_k, doc_ids))
        if self.delay:
            self.gate.wait(self.delay)
        if any(q == "bad" for q in queries):
            raise ValueError("bad query")
        return [[f"{q}:{top_k}:{doc_ids}"] for q in queries]


def test_requests_that_queue_during_a_batch_go_together():
    search = Recorder(delay=0.2)

    async def main():
        batcher = SearchBatcher(search)
        first = asyncio.create_task(batcher.search(["a"], 5))
        await asyncio.sleep(0.05)  # the first batch is running; these queue behind it
        rest = [asyncio.create_task(batcher.search([f"q{i}", f"r{i}"], 5)) for i in range(4)]
        other_key = asyncio.create_task(batcher.search(["z"], 3, doc_ids=["d"]))
        results = await asyncio.gather(first, *rest, other_key)
        return batcher, results

    batcher, results = asyncio.run(main())
    assert results[0] == [["a:5:None"]]
    assert results[1:5] == [[[f"q{i}:5:None"], [f"r{i}:5:None"]] for i in range(4)]
    assert results[5] == [["z:3:['d']"]]
    assert [len(c[0]) for c in search.calls] == [1, 8, 1]  # a lone request alone; the queue in one call
    assert (batcher.requests, batcher.batches) == (6, 3)


def test_a_failing_request_does_not_fail_its_neighbours():
    search = Recorder(delay=0.1)

    async def main():
        batcher = SearchBatcher(search)
        head = asyncio.create_task(batcher.search(["head"], 5))
        await asyncio.sleep(0.03)
        tasks = [asyncio.create_task(batcher.search([q], 5)) for q in ("ok1", "bad", "ok2")]
        return await asyncio.gather(head, *tasks, return_exceptions=True)

    head, ok1, bad, ok2 = asyncio.run(main())
    assert ok1 == [["ok1:5:None"]] and ok2 == [["ok2:5:None"]] and head == [["head:5:None"]]
    assert isinstance(bad, ValueError) and str(bad) == "bad query"


def test_batches_respect_max_queries():
    search = Recorder(delay=0.1)

    async def main():
        batcher = SearchBatcher(search, max_queries=4)
        head = asyncio.create_task(batcher.search(["h"], 5))
        await asyncio.sleep(0.03)
        tasks = [asyncio.create_task(batcher.search([f"a{i}", f"b{i}", f"c{i}"], 5)) for i in range(3)]
        return await asyncio.gather(head, *tasks)

    results = asyncio.run(main())
    assert results[3] == [["a2:5:None"], ["b2:5:None"], ["c2:5:None"]]
    assert [len(c[0]) for c in search.calls] == [1, 3, 3, 3]  # 3 + 3 > 4: never merged past the limit
    with pytest.raises(ValueError):
        SearchBatcher(search, max_queries=0)


def test_server_merges_concurrent_requests_and_answers_each_as_alone(text_search_server):
    questions = ["Riverside satisfaction score", "Acme Robotics revenue 2023", "bicycle share of commuters",
                 "most used travel app", "Kestrel Ridge solar output", "board of directors"]
    url = text_search_server.url

    async def alone() -> list[list[str]]:
        client = SearchClient(url)
        try:
            return [[h.page_id for h in (await client.search([q], top_k=3))[0]] for q in questions]
        finally:
            await client.aclose()

    async def together() -> list[list[str]]:
        client = SearchClient(url)
        try:
            hits = await asyncio.gather(*(client.search([q], top_k=3) for q in questions * 4))
            return [[h.page_id for h in result[0]] for result in hits]
        finally:
            await client.aclose()

    expected = asyncio.run(alone())
    before = httpx.get(url + "/stats").json()
    got = asyncio.run(together())
    after = httpx.get(url + "/stats").json()
    assert got == expected * 4
    requests = after["search_requests"] - before["search_requests"]
    batches = after["search_batches"] - before["search_batches"]
    assert requests == 24 and batches < requests  # some requests shared an engine call

    async def unknown_document() -> str:
        client = SearchClient(url, max_retries=0)
        try:
            with pytest.raises(SearchError, match="404"):  # still that request's own 404
                await client.search(["revenue"], doc_ids=["no-such-doc"])
            await client.search(["revenue"])  # and our 404 was not taken for "no POST /search here"
            return client.protocol
        finally:
            await client.aclose()

    assert asyncio.run(unknown_document()) == "vrag"
