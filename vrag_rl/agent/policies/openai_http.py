"""`OpenAIPolicy`: the Policy adapter for any OpenAI-compatible chat-completions endpoint.

vLLM, DashScope's compatible mode, the project's own policy servers. What this module does, and why:

- It is the only place images become base64 JPEG data URLs, and it caches that encoding per
  image (`cache_key`), so a page shown in many episodes, or again on every later turn of one
  episode, is encoded once.
- It reads the raw HTTP response itself instead of trusting the endpoint: a body that is not
  UTF-8 JSON, is nested too deep to parse, or lacks `choices[0].message.content` as text becomes a
  `PolicyError` with a short reason, never an `AttributeError` escaping the agent. (The client's
  own parsing raised JSONDecodeError, UnicodeDecodeError, RecursionError, AttributeError and
  TypeError on such bodies: 26% of fuzzed episodes crashed.)
- The body is read in chunks and refused past `MAX_RESPONSE_BYTES`, so memory stays bounded
  whatever an endpoint sends; a connection that breaks mid-body is a `PolicyError` too.
- It posts the JSON body itself, through aiohttp (`search_engine.infra.http_session`), with the `openai`
  SDK's retry policy: connection errors, timeouts, 408/409/429 and 5xx are retried with exponential
  backoff and a short `Retry-After` is obeyed; other 4xx fail at once. Why not the SDK: a chat call
  here is one POST whose reply is validated by hand anyway (see above), and the SDK's request
  building (headers, URL merging, httpx2 request and response models) cost about 1 ms of the
  agent's CPU per call — a third of a turn's own CPU in `scripts/bench_agent.py`. The SDK stays the
  reference client the tests hold the project's policy servers to.
- Redirects are not followed: a redirect loop cost 85 requests in one episode; a policy endpoint
  has no reason to redirect a POST.
- Lone surrogates in a reply are replaced, so the next request can still be encoded.
"""
from __future__ import annotations

import asyncio
import base64
import io
import json
import threading
from typing import Any

import aiohttp
from cachetools import LRUCache
from PIL import Image

from search_engine.infra.http_session import BodyTooLarge, LoopSession, send_with_retries
from vrag_rl.agent.policy import DEFAULT_MODEL, Message, PolicyError, PolicyReply, SamplingParams

MAX_RESPONSE_BYTES = 8 * 2**20  # a chat completion is text: more than this is not a reply
RETRY_STATUSES = frozenset({408, 409, 429})  # and every 5xx: the statuses the openai SDK retries


def _retryable_status(status: int) -> bool:
    return status in RETRY_STATUSES or status >= 500


class EncodedImageCache:
    """cache_key → data URL, bounded by total characters (an LRU over the encodings).

    Shared by every episode that uses the same adapter; thread-safe because the demo streams
    from worker threads.
    """

    def __init__(self, max_chars: int = 256 * 2**20, jpeg_quality: int = 90):
        self.jpeg_quality = jpeg_quality
        self._cache: LRUCache = LRUCache(maxsize=max_chars, getsizeof=len)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def data_url(self, image: Image.Image, cache_key: str | None) -> str:
        if cache_key is not None:
            with self._lock:
                cached = self._cache.get(cache_key)
            if cached is not None:
                self.hits += 1
                return cached
        self.misses += 1
        url = encode_data_url(image, self.jpeg_quality)
        if cache_key is not None and len(url) <= self._cache.maxsize:
            with self._lock:
                self._cache[cache_key] = url
        return url


def encode_data_url(image: Image.Image, quality: int = 90) -> str:
    """A JPEG data URL of `image` (converted to RGB only when it is not already)."""
    buffer = io.BytesIO()
    (image if image.mode == "RGB" else image.convert("RGB")).save(buffer, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


class OpenAIPolicy:
    """A Policy over an OpenAI-compatible endpoint; `complete` raises only `PolicyError`.

    `max_retries` more attempts follow a retryable failure (see the module doc), `backoff_s` apart
    and doubling. One instance serves one event loop at a time (its connection pool is per loop).
    """

    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None, timeout: float = 120.0,
                 max_retries: int = 3, image_cache: EncodedImageCache | None = None, backoff_s: float = 0.5):
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.base_url = normalise_base_url(base_url)
        self.model = model
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.images = image_cache or EncodedImageCache()
        self._session = LoopSession(self.base_url, {"Authorization": f"Bearer {api_key or 'EMPTY'}"}, timeout=timeout)
        self._model_lock = asyncio.Lock()

    async def resolve_model(self) -> str:
        """The name to send: the one given, else the first model the server lists (vLLM's served name)."""
        if self.model:
            return self.model
        async with self._model_lock:
            if not self.model:
                self.model = await self._first_listed_model() or DEFAULT_MODEL
        return self.model

    async def _first_listed_model(self) -> str | None:
        try:
            payload = _decode_json(await self._send("GET", "/models"))
            names = [m.get("id") for m in payload.get("data", []) if isinstance(m, dict)]
        except Exception:  # noqa: BLE001 - any malformed /v1/models means "no name listed", not a crash
            return None
        names = [n for n in names if isinstance(n, str) and n.strip()]
        return names[0] if names else None

    def to_openai_messages(self, messages: list[Message]) -> list[dict[str, Any]]:
        """Processor-form messages → OpenAI chat messages (image parts become cached data URLs)."""
        out: list[dict[str, Any]] = []
        for message in messages:
            content = message["content"]
            if isinstance(content, list):
                content = [self._part(p) for p in content]
            out.append({"role": message["role"], "content": content})
        return out

    def _part(self, part: dict[str, Any]) -> dict[str, Any]:
        if part.get("type") == "image":
            url = self.images.data_url(part["image"], part.get("cache_key"))
            return {"type": "image_url", "image_url": {"url": url}}
        return part

    async def complete(self, messages: list[Message], sampling: SamplingParams) -> PolicyReply:
        model = await self.resolve_model()
        extra: dict[str, Any] = dict(sampling.extra_body)
        if sampling.seed is not None:
            extra.setdefault("seed", sampling.seed)
        payload: dict[str, Any] = {"model": model, "messages": self.to_openai_messages(messages),
                                   "temperature": sampling.temperature, "top_p": sampling.top_p,
                                   "max_tokens": sampling.max_tokens}
        if sampling.stop:
            payload["stop"] = list(sampling.stop)
        payload.update(extra)
        try:
            body = json.dumps(payload).encode("ascii")  # escaped: a lone surrogate in a question still encodes
        except (TypeError, ValueError) as exc:
            raise PolicyError(f"policy request cannot be encoded as JSON: {exc}") from None
        return parse_chat_completion(await self._send("POST", "/chat/completions", body))

    async def _send(self, method: str, path: str, body: bytes | None = None) -> bytes:
        """One request with retries; the response body (2xx) or a `PolicyError` saying why not."""
        headers = {"Content-Type": "application/json"} if body is not None else None
        try:
            status, content = await send_with_retries(
                self._session.get(), method, self.base_url + path, max_retries=self.max_retries,
                backoff=self.backoff_s, retry_status=_retryable_status, limit=MAX_RESPONSE_BYTES,
                no_retry=(aiohttp.ClientPayloadError,), data=body, headers=headers)
        except BodyTooLarge:
            raise PolicyError(f"policy response is larger than {MAX_RESPONSE_BYTES} bytes") from None
        except aiohttp.ClientPayloadError as exc:  # the reply started and broke off: not retried
            raise PolicyError(f"policy endpoint {self.base_url} broke off its response: "
                              f"{exc.__class__.__name__}: {exc}"[:500]) from exc
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise PolicyError(f"policy endpoint {self.base_url} unreachable: {exc.__class__.__name__}: {exc}"[:500],
                              retryable=True) from exc
        if 200 <= status < 300:
            return content
        raise PolicyError(f"policy endpoint {self.base_url} answered {status}: {_status_detail(content)}",
                          retryable=_retryable_status(status), status=status)

    async def aclose(self) -> None:
        await self._session.aclose()


def parse_chat_completion(body: bytes) -> PolicyReply:
    """A `PolicyReply` from a chat-completions response body, or `PolicyError` saying what is wrong."""
    payload = _decode_json(body)
    if not isinstance(payload, dict):
        raise PolicyError(f"policy response is a JSON {type(payload).__name__}, not an object")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        raise PolicyError("policy response has no `choices` list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise PolicyError("policy response's first choice is not an object")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise PolicyError("policy response's first choice has no `message` object")
    text = _content_text(message.get("content"))
    finish = choice.get("finish_reason")
    raw_usage = payload.get("usage")
    usage = raw_usage if isinstance(raw_usage, dict) else {}
    return PolicyReply(text=scrub_surrogates(text), finish_reason=finish if isinstance(finish, str) else None,
                       prompt_tokens=_count(usage.get("prompt_tokens")),
                       completion_tokens=_count(usage.get("completion_tokens")))


def _decode_json(body: bytes) -> Any:
    if not body:
        raise PolicyError("policy response body is empty")
    if len(body) > MAX_RESPONSE_BYTES:
        raise PolicyError(f"policy response is larger than {MAX_RESPONSE_BYTES} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"policy response is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise PolicyError("policy response JSON is nested too deeply") from None
    except ValueError as exc:
        start = text.lstrip()[:40]
        raise PolicyError(f"policy response is not JSON ({exc.__class__.__name__}; starts {start!r})") from None


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        texts = [t for t in parts if isinstance(t, str)]
        if texts and len(texts) == len(parts):
            return "".join(texts)
    raise PolicyError(f"policy reply content is a {type(content).__name__}, not text")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def scrub_surrogates(text: str) -> str:
    """Replace lone surrogates (valid in JSON escapes, unencodable in UTF-8) so the next request encodes."""
    return text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text


def normalise_base_url(url: str) -> str:
    """Accept `http://host:8001`, `.../v1` or `.../v1/chat/completions` alike."""
    url = url.rstrip("/")
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    if not url.endswith("/v1") and "/v1" not in url.split("//", 1)[-1]:
        url += "/v1"
    return url


def _status_detail(content: bytes) -> str:
    text = content.decode("utf-8", "replace")
    try:
        body = json.loads(text)
        detail = body.get("detail") or body.get("error") or body
    except Exception:  # noqa: BLE001 - any body at all is better than none in an error message
        detail = text
    return scrub_surrogates(str(detail))[:300]
