"""One FastAPI app for every policy backend: validation, auth, SSE streaming, errors as 4xx."""
from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from typing import Protocol

from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from vrag_rl.policy_server.protocol import (
    BadImageError, ChatCompletionRequest, ChatCompletionResponse, ChatMessage, Choice, Generation, ModelCard,
    ModelList, ResponseMessage, Usage, apply_stop,
)


class Backend(Protocol):
    def generate(self, messages: list[ChatMessage], request: ChatCompletionRequest) -> Generation: ...


def create_app(backend: Backend, model_name: str, api_key: str | None = None, serialize: bool = False) -> FastAPI:
    """`serialize=True` runs one generation at a time (a single in-process model is not re-entrant)."""
    app = FastAPI(title="VRAG policy server (OpenAI-compatible)", version="1.0")
    lock = threading.Lock() if serialize else None

    def check_key(authorization: str | None) -> None:
        if api_key is None:
            return
        given = authorization[7:] if authorization and authorization.lower().startswith("bearer ") else ""
        if not secrets.compare_digest(given, api_key):
            raise HTTPException(401, "missing or wrong API key (Authorization: Bearer ...)")

    def generate(body: ChatCompletionRequest) -> Generation:
        if lock is None:
            result = backend.generate(body.messages, body)
        else:
            with lock:
                result = backend.generate(body.messages, body)
        text, hit = apply_stop(result.text, body.stop_list())
        if hit:
            result = Generation(text=text, prompt_tokens=result.prompt_tokens,
                                completion_tokens=result.completion_tokens, finish_reason="stop")
        return result

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, authorization: str | None = Header(None)):
        check_key(authorization)
        try:
            result = await run_in_threadpool(generate, body)
        except BadImageError as exc:
            raise HTTPException(400, str(exc)) from None
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        model = body.model or model_name
        if body.stream:
            return StreamingResponse(_sse(result, model), media_type="text/event-stream")
        return ChatCompletionResponse(
            model=model,
            choices=[Choice(message=ResponseMessage(content=result.text), finish_reason=result.finish_reason)],
            usage=Usage(prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                        total_tokens=result.prompt_tokens + result.completion_tokens),
        )

    @app.get("/v1/models", response_model=ModelList)
    async def models(authorization: str | None = Header(None)) -> ModelList:
        check_key(authorization)
        return ModelList(data=[ModelCard(id=model_name)])

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "model": model_name}

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):  # a clear 500, never a stack trace to the client
        return JSONResponse({"detail": f"internal error: {type(exc).__name__}: {exc}"}, status_code=500)

    return app


def _sse(result: Generation, model: str):
    """OpenAI's chat.completion.chunk stream: role, content pieces, finish, [DONE]."""
    chunk_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    created = int(time.time())

    def chunk(delta: dict, finish: str | None = None) -> str:
        payload = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(payload)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    words = result.text.split(" ")
    for i, word in enumerate(words):
        yield chunk({"content": word if i == 0 else " " + word})
    yield chunk({}, result.finish_reason)
    yield "data: [DONE]\n\n"
