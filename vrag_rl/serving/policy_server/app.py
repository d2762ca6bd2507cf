"""One FastAPI app for every policy backend: validation, auth, SSE streaming, errors as 4xx.

Backends only turn a conversation into text; everything HTTP (OpenAI shapes, bounds, API key,
streaming, error bodies) lives here once, so the scripted, rule-based and transformers servers
behave identically towards the agent, and like vLLM.
"""
from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from search_engine.infra.http_guard import (
    AllowHeaderMiddleware,
    BearerTokenMiddleware,
    BodyLimitMiddleware,
    SafeJSONResponse,
    error_responses,
    validation_error_body,
)
from vrag_rl.serving.policy_server.protocol import (
    BadRequest,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatMessage,
    Choice,
    Generation,
    GenerationParams,
    ModelCard,
    ModelList,
    ResponseMessage,
    Usage,
    _completion_id,
    apply_stop,
)

log = logging.getLogger(__name__)

# One server-sent event of a streamed completion: `data:` holds a chat.completion.chunk as JSON, or [DONE].
SSE_EVENT_SCHEMA = {"type": "object", "required": ["data"],
                    "properties": {"data": {"type": "string", "description": "a chat.completion.chunk JSON "
                                                                             "object, or [DONE] at the end"},
                                   "event": {"type": "string"}, "id": {"type": "string"}}}
DEFAULT_MAX_BODY_BYTES = 64 * 2**20  # a conversation with a few dozen page images; one image is at most 20 MB


@runtime_checkable
class Backend(Protocol):
    """Anything that turns a conversation into the next assistant turn.

    May set `max_concurrency` (an int): the app then queues requests beyond it in the event loop
    instead of parking worker threads on a lock (an in-process model is not re-entrant).
    Raise `BadRequest` for input it cannot use (answered 400); anything else is a 500.
    """

    def generate(self, messages: list[ChatMessage], params: GenerationParams) -> Generation: ...


def create_app(backend: Backend, model_name: str, api_key: str | None = None, *, serialize: bool = False,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """The OpenAI-compatible app for `backend`, served as `model_name`.

    `api_key`: when set, `/v1/*` needs `Authorization: Bearer <api_key>` (401 otherwise); `/health` stays open
    for load balancers. `serialize=True` forces one generation at a time whatever the backend declares.
    `max_body_bytes`: larger request bodies are answered 413 before they are parsed.
    """
    app = FastAPI(title="VRAG policy server (OpenAI-compatible)", version="1.0",
                  default_response_class=SafeJSONResponse)
    app.state.backend = backend
    app.state.model_name = model_name
    declared = getattr(backend, "max_concurrency", None)
    concurrency = 1 if serialize else declared
    limiter_box: dict[str, Any] = {}

    def limiter() -> anyio.CapacityLimiter | None:
        # created lazily: an anyio limiter belongs to the running event loop
        if concurrency is None:
            return None
        if "limiter" not in limiter_box:
            limiter_box["limiter"] = anyio.CapacityLimiter(int(concurrency))
        return limiter_box["limiter"]

    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    app.add_middleware(AllowHeaderMiddleware)
    if api_key:  # added last, so it runs first: a stranger gets 401 before any body is read
        app.add_middleware(BearerTokenMiddleware, token=api_key, path_prefix="/v1",
                           message="missing or wrong API key (send Authorization: Bearer <key>)")
    errors = error_responses(401, 413, 500) if api_key else error_responses(413, 500)

    def run(body: ChatCompletionRequest) -> Generation:
        for message in body.messages:  # fail fast (400) on bad image URLs, before any model work
            for part in message.image_parts():
                part.raw()
        params = body.params()
        result = backend.generate(body.messages, params)
        text, hit = apply_stop(result.text, params.stop)
        if hit:
            result = result.model_copy(update={"text": text, "finish_reason": "stop"})
        return result

    @app.post("/v1/chat/completions", response_model=ChatCompletionResponse,
              responses={200: {"description": "The completion; with `stream: true` an SSE stream of "
                                              "`chat.completion.chunk` events ending in `data: [DONE]`",
                               "content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA}}},
                         **error_responses(400), **errors})
    async def chat_completions(body: ChatCompletionRequest):
        try:
            result = await anyio.to_thread.run_sync(run, body, limiter=limiter())
        except BadRequest as exc:
            return SafeJSONResponse({"detail": str(exc)}, status_code=400)
        model = body.model or model_name
        usage = Usage(prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                      total_tokens=result.prompt_tokens + result.completion_tokens)
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return StreamingResponse(_sse(result, model, usage if include_usage else None),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        return ChatCompletionResponse(
            model=model,
            choices=[Choice(message=ResponseMessage(content=result.text), finish_reason=result.finish_reason)],
            usage=usage,
        )

    @app.get("/v1/models", response_model=ModelList, responses=errors)
    async def models() -> ModelList:
        return ModelList(data=[ModelCard(id=model_name)])

    @app.get("/health", response_model=HealthInfo, responses=error_responses(413))
    async def health() -> HealthInfo:
        return HealthInfo(status="ok", model=model_name)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        # FastAPI's default echoes each offending input back: for a 20 MB image that is 20 MB of error.
        return SafeJSONResponse(validation_error_body(exc.errors()), status_code=422)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        # The trace goes to the server log only: exception text can hold prompts, paths or other users' input.
        log.exception("policy backend failed")
        return SafeJSONResponse({"detail": f"internal error ({type(exc).__name__}); see the policy server's log"},
                                status_code=500)

    return app


class HealthInfo(BaseModel):
    status: str
    model: str


def _pieces(text: str) -> list[str]:
    """Word-sized pieces whose concatenation is exactly `text` (whitespace kept)."""
    return [p for p in re.findall(r"\s*\S+\s*|\s+", text) if p]


def _sse(result: Generation, model: str, usage: Usage | None) -> Iterator[str]:
    """OpenAI's chat.completion.chunk stream: role, content pieces, finish reason, [usage], [DONE]."""
    chunk_id = _completion_id()
    created = int(time.time())

    def chunk(delta: dict, finish: str | None = None, choices: bool = True, usage_obj: Usage | None = None) -> str:
        payload: dict[str, Any] = {"id": chunk_id, "object": "chat.completion.chunk", "created": created,
                                   "model": model, "choices": []}
        if choices:
            payload["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
        if usage is not None:
            payload["usage"] = usage_obj.model_dump() if usage_obj is not None else None
        return f"data: {json.dumps(payload)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(result.text):
        yield chunk({"content": piece})
    yield chunk({}, result.finish_reason)
    if usage is not None:
        yield chunk({}, choices=False, usage_obj=usage)
    yield "data: [DONE]\n\n"
