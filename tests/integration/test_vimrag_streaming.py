"""SSE streaming with a thinking model's `reasoning_content` (DashScope / vLLM reasoning parser style),
against a small OpenAI-compatible server on loopback that streams like one."""
from __future__ import annotations

import asyncio
import json

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from testkit.loopback import LoopbackServer
from vimrag import VimRAG
from vimrag.streaming import StreamingOpenAIPolicy
from vrag_rl.agent.policy import SamplingParams

ANSWER = '<tool_call>{"name": "add_answer_node", "arguments": {"answer": "42", "parent_ids": ["root"]}}</tool_call>'


def thinking_server(seen: list[dict]) -> FastAPI:
    app = FastAPI()

    @app.get("/health")
    async def health():
        return {"ok": True}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        seen.append(body)

        def chunk(delta: dict, finish=None, usage=None) -> str:
            payload = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "thinker",
                       "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage:
                payload["usage"] = usage
            return f"data: {json.dumps(payload)}\n\n"

        def events():
            yield chunk({"role": "assistant"})
            for piece in ("The question is ", "simple."):
                yield chunk({"reasoning_content": piece})
            for piece in (ANSWER[:30], ANSWER[30:]):
                yield chunk({"content": piece})
            yield chunk({}, finish="stop")
            yield chunk({}, usage={"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18})
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def test_reasoning_content_is_the_thought_and_content_the_reply():
    seen: list[dict] = []
    server = LoopbackServer(thinking_server(seen)).start()
    try:
        pieces: list[tuple[str, str]] = []
        policy = StreamingOpenAIPolicy(server.url + "/v1", model="thinker", on_delta=lambda k, t: pieces.append((k, t)))

        async def ask():
            try:
                return await policy.complete([{"role": "user", "content": "q"}], SamplingParams(max_tokens=64))
            finally:
                await policy.aclose()  # its aiohttp session belongs to this loop: closed before the loop ends

        reply = asyncio.run(ask())
        assert reply.text == "<think>The question is simple.</think>" + ANSWER
        assert (reply.prompt_tokens, reply.completion_tokens, reply.finish_reason) == (11, 7, "stop")
        assert [k for k, _ in pieces] == ["reasoning", "reasoning", "content", "content"]
        result = VimRAG(base_url=server.url + "/v1", search_url="http://127.0.0.1:9", model="thinker", stream=True,
                        enable_thinking=True).run("What is six times seven?")
    finally:
        server.stop()
    assert result.status == "answered" and result.answer == "42"
    assert [e.text for e in result.events if e.type == "think"] == ["The question is simple."]
    body = seen[-1]
    assert body["stream"] is True and body["enable_thinking"] is True  # DashScope's switch, sent as given
    assert body["temperature"] == 0.6 and body["top_p"] == 0.95  # upstream's thinking sampling
