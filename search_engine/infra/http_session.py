"""The HTTP plumbing the project's two clients share: the search client and the OpenAI adapter.

Both send through aiohttp: per request it costs the agent about a third of the CPU of httpx (and of
the `openai` SDK's httpx2 layer on top), and those requests were most of what a turn costs besides
the model (`scripts/bench_agent.py`). What aiohttp leaves to its user, and this module does once:

* `LoopSession` — an aiohttp session belongs to the event loop it was opened on, so it is opened at
  the first request, not in a constructor (which may run outside any loop), and opened again when a
  caller moves to another loop (a script calling `asyncio.run` twice with one client). The
  `HTTP(S)_PROXY` / `NO_PROXY` environment is read once, when the session opens, for the one server
  it talks to: aiohttp's `trust_env` re-reads it, and `~/.netrc`, in a worker thread on every
  request (two thread hops, a third of the client's CPU per request). A session still open when its
  loop shuts down (`asyncio.run` returning, with no `aclose` first) is closed by the loop's shutdown,
  not left for the garbage collector to report as an "Unclosed client session".
* `read_capped` — reads a body chunk by chunk and refuses it as soon as it passes a byte limit, so
  an endpoint that sends gigabytes cannot fill the caller's memory before a size check runs.
* `send_with_retries` — the one retry loop both clients use: a retryable status or a connection
  error is tried again after `retry_delay` (exponential backoff with jitter, a short `Retry-After`
  obeyed); what each client retries and how it words failures stays with the client.
"""
from __future__ import annotations

import asyncio
import random
import urllib.request
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp


class BodyTooLarge(ValueError):
    """A response body passed the caller's byte limit; reading stopped there."""


class LoopSession:
    """An `aiohttp.ClientSession` per running event loop, opened on first use.

    `session` shares a session the caller owns: it is used as is and never closed here.
    """

    def __init__(self, base_url: str, headers: Mapping[str, str] | None = None, timeout: float = 30.0,
                 max_connections: int = 256, session: aiohttp.ClientSession | None = None):
        self.base_url = base_url
        self._headers = dict(headers or {})
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._max_connections = max_connections
        self._session = session
        self._owned = session is None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncGenerator[None, None] | None = None  # see _close_at_loop_shutdown

    def get(self) -> aiohttp.ClientSession:
        """The session for the running loop (call from inside it)."""
        if not self._owned:
            assert self._session is not None
            return self._session
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout, headers=self._headers,
                                                  proxy=env_proxy(self.base_url))
            self._loop = loop
            self._closer = _close_at_loop_shutdown(self._session)
        return self._session

    async def aclose(self) -> None:
        """Close the session this object opened (a shared one is left to its owner)."""
        if self._owned and self._session is not None and not self._session.closed:
            await self._session.close()
        if self._owned:
            self._session, self._loop, self._closer = None, None, None


def _close_at_loop_shutdown(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    """Have the running loop close `session` when it shuts down, if nobody closed it before.

    A session can only be closed on its own loop, and a caller that runs a client under `asyncio.run` (once, or
    once per call) has no place to do that. Event loops finalize the async generators still suspended when they
    shut down (`asyncio.run` does, through `loop.shutdown_asyncgens()`): this one is started here, so the loop
    knows it, and waits; its `finally` closes the session then. Keep the returned generator referenced (the
    loop holds it weakly); a loop that never shuts its generators down leaves the session to its owner, as before.
    """
    async def closer() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            if not session.closed:
                await session.close()

    generator = closer()
    step = generator.asend(None)  # runs to the `yield` now (no task): the loop's first-iteration hook registers it
    try:
        step.send(None)
    except StopIteration:
        pass
    return generator


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`), or None."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme) or None


async def read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, or `BodyTooLarge` as soon as it passes `limit` bytes."""
    if (response.content_length or 0) > limit:
        raise BodyTooLarge(f"response is larger than {limit} bytes")
    buffer = bytearray()
    async for chunk in response.content.iter_any():
        buffer += chunk
        if len(buffer) > limit:
            raise BodyTooLarge(f"response is larger than {limit} bytes")
    return bytes(buffer)


def retry_delay(attempt: int, backoff: float, retry_after: str | None = None, cap: float = 8.0) -> float:
    """Seconds to wait before retry number `attempt + 1`.

    A numeric `Retry-After` of up to 60 s is obeyed (a rate limiter knows best); otherwise
    `backoff · 2^attempt`, capped, with up to 25% jitter so many episodes do not retry in lockstep.
    """
    if retry_after is not None:
        try:
            seconds = float(retry_after)
        except ValueError:
            seconds = -1.0
        if 0 <= seconds <= 60:
            return seconds
    return min(cap, backoff * 2**attempt) * (1 - 0.25 * random.random())


async def send_with_retries(session: aiohttp.ClientSession, method: str, url: str, *, max_retries: int,
                            backoff: float, retry_status: Callable[[int], bool], limit: int,
                            no_retry: tuple[type[BaseException], ...] = (), **kwargs: Any) -> tuple[int, bytes]:
    """`(status, body)` of the first response whose status is not retryable, or of the last one when
    the retries run out. A connection error or timeout is retried too, and re-raised when the retries
    run out; `no_retry` exceptions and `BodyTooLarge` are raised at once. Redirects are not followed."""
    for attempt in range(max_retries + 1):
        retry_after = None
        try:
            async with session.request(method, url, allow_redirects=False, **kwargs) as response:
                status, retry_after = response.status, response.headers.get("Retry-After")
                body = await read_capped(response, limit)
        except no_retry:
            raise
        except (aiohttp.ClientError, asyncio.TimeoutError):
            if attempt >= max_retries:
                raise
        else:
            if attempt >= max_retries or not retry_status(status):
                return status, body
        await asyncio.sleep(retry_delay(attempt, backoff, retry_after))
    raise ValueError("max_retries must be >= 0")
