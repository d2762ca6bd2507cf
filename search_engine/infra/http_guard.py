"""HTTP hardening shared by the search server and the policy servers.

Both servers are reachable from other machines (RL rollouts, a demo on a LAN), so whatever a
client sends must end in a 4xx with a JSON body, never a 500 or an unbounded allocation:

* `BodyLimitMiddleware` refuses bodies over a byte limit with 413 before the app parses them
  (uvicorn has no body limit of its own; FastAPI reads the whole body into memory).
* `SafeJSONResponse` encodes what the standard response cannot: NaN / Infinity (a client can send
  them inside any JSON body, and validation errors refer back to them) and lone surrogates
  (`"\\ud800"` is valid JSON but not encodable as UTF-8).
* `validation_error_body` gives FastAPI's documented 422 shape without echoing the input (a 20 MB
  image in an error message is 20 MB of error).
* `keys_match` compares API keys as bytes: `secrets.compare_digest` raises TypeError on non-ASCII
  `str`, which turned a wrong key — or a non-ASCII configured key — into a 500.
* `BearerTokenMiddleware` is that check in front of a whole ASGI app (the policy server's `/v1`, the
  MCP server's HTTP transport), answering 401 before any body is read.
* `WholeNumber` is an integer field that also takes an integral float (`5.0`): JSON Schema counts
  5.0 as an integer, so a schema that says `integer` and a server that refuses 5.0 disagree (issue 21).
* `AllowHeaderMiddleware` makes a 405's `Allow` list every method the path serves (Starlette names
  only the first route's, so `OPTIONS /search` said `POST` though GET is served too).
"""
from __future__ import annotations

import ipaddress
import json
import math
import secrets
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, StrictInt
from starlette.datastructures import MutableHeaders
from starlette.responses import JSONResponse
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ErrorDetail(BaseModel):
    """The body of every 4xx/5xx that is not a validation error."""

    detail: str


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the error statuses a route can answer, so the schema is a contract."""
    described = {400: "Body that cannot be parsed, or a request understood but not servable",
                 401: "Missing or wrong API key (only when the server was started with one)", 404: "Unknown id",
                 413: "Request body larger than the server's limit",
                 500: "Internal error (details only in the server log)"}
    return {code: {"model": ErrorDetail, "description": described[code]} for code in codes}


def _finite(value: Any) -> Any:
    """NaN and ±Infinity have no JSON spelling: send them as strings rather than fail the response."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class SafeJSONResponse(JSONResponse):
    """A JSONResponse that cannot fail to encode: ASCII escapes (lone surrogates survive as `\\udXXX`),
    non-finite floats as strings."""

    def render(self, content: Any) -> bytes:
        return json.dumps(_finite(content), ensure_ascii=True, allow_nan=False, separators=(",", ":"),
                          default=str).encode("ascii")


def short_error(error: dict) -> dict:
    """One validation error as {loc, msg, type}: FastAPI's documented shape, without the offending input."""
    return {"loc": [str(p) if not isinstance(p, int) else p for p in error.get("loc", ())],
            "msg": str(error.get("msg", "")), "type": str(error.get("type", ""))}


def validation_error_body(errors: Iterable[dict]) -> dict:
    return {"detail": [short_error(e) for e in errors]}


def has_lone_surrogate(text: str) -> bool:
    """True for text that is not valid Unicode (a lone UTF-16 surrogate, which JSON's `\\ud800` can carry)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def keys_match(given: str | bytes | None, expected: str) -> bool:
    """Constant-time API key check on bytes. Header values arrive latin-1 decoded (the raw bytes); the
    configured key is encoded as UTF-8, so a UTF-8 key sent as raw header bytes matches."""
    if given is None or given == b"" or given == "":
        return False
    raw = given if isinstance(given, bytes) else given.encode("latin-1", errors="replace")
    return secrets.compare_digest(raw, expected.encode("utf-8"))


def is_loopback_host(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _whole_number(value: Any) -> Any:
    """5.0 → 5 (what JSON Schema calls an integer); 5.5, "5", true stay as they are and fail the int check."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def whole_number(**bounds: int) -> Any:
    """An integer type that takes an integral float too, and nothing else (no "5", no true) whether the model
    is strict or not; its JSON schema is `integer` with `bounds` (ge, le, lt, gt) as minimum/maximum.
    The bounds sit inside, on the int itself: given as `Field(ge=...)` around the validated type, pydantic
    writes them into the schema as `ge`/`le`, which are not JSON Schema keywords."""
    limits: dict[str, Any] = dict(bounds)  # Field's overloads mix keyword types; int-only ** matches none
    return Annotated[StrictInt, Field(**limits), BeforeValidator(_whole_number)]


WholeNumber = whole_number()


class BearerTokenMiddleware:
    """401 (with `WWW-Authenticate: Bearer`) for a request under `path_prefix` without the right token,
    before the app reads anything. The token is `Authorization: Bearer <token>`, or `X-API-Key` with
    `accept_x_api_key` (the search server's convention); compared in constant time (`keys_match`).
    Lifespan and other non-HTTP scopes pass through."""

    def __init__(self, app: ASGIApp, token: str, *, path_prefix: str = "", accept_x_api_key: bool = False,
                 message: str = "missing or wrong API key (send Authorization: Bearer <key>)"):
        if not token:
            raise ValueError("token must not be empty")
        self.app = app
        self.expected = token
        self.path_prefix = path_prefix
        self.accept_x_api_key = accept_x_api_key
        self.message = message

    def _authorized(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or [])
        scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() == b"bearer" and keys_match(given.strip(), self.expected):
            return True
        return self.accept_x_api_key and keys_match(headers.get(b"x-api-key"), self.expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("path", "").startswith(self.path_prefix) \
                and not self._authorized(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            response = SafeJSONResponse({"detail": self.message}, status_code=401,
                                        headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class AllowHeaderMiddleware:
    """On a 405, `Allow` lists the methods of every route at the request's path (RFC 9110 §15.5.6).

    Starlette answers a method that no route at the path serves with the first matching route's
    methods only; with `POST /search` and `GET /search` as two routes, `OPTIONS /search` said
    `Allow: POST`. The routes are read from `scope["app"]` (the FastAPI app, set before middleware runs),
    and asked which methods they serve at the path, so routes of included routers count too.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 405:
                methods = _methods_at(scope)
                if methods:
                    headers = MutableHeaders(scope=message)
                    headers["allow"] = ", ".join(sorted(methods))
            await send(message)

        await self.app(scope, receive, send_with_allow)


_HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _methods_at(scope: Scope) -> set[str]:
    """The methods some route serves at the request's path. Each route is asked through Starlette's
    `matches` (a recent FastAPI keeps an included router as one route, not as copies of its routes)."""
    router = getattr(scope.get("app"), "router", None)
    routes = getattr(router, "routes", ())
    return {method for method in _HTTP_METHODS
            if any(route.matches({**scope, "method": method})[0] == Match.FULL for route in routes)}


class BodyLimitMiddleware:
    """413 for a request body over `max_bytes`, checked on Content-Length and on the bytes actually
    received (a chunked body has no length). The body is buffered here (≤ max_bytes) and replayed
    to the app, which would read it whole anyway."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        self.app = app
        self.max_bytes = max_bytes

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = SafeJSONResponse({"detail": f"request body larger than {self.max_bytes} bytes"}, status_code=413,
                                    headers={"Connection": "close"})
        await response(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                if int(declared) > self.max_bytes:
                    await self._too_large(scope, receive, send)
                    return
            except ValueError:
                pass  # the server rejects a malformed length itself
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
