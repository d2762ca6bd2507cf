"""A hostile OpenAI-compatible endpoint: a real ASGI app that answers chat completions with every
kind of malformed response an agent has met in the wild, and counts the requests it gets.

Why a server and not a patched client: the defects it is meant to catch lived in the HTTP layer
(redirect following, body decoding, the client's own response parsing), which a patched function
would skip. Tests and `scripts/fuzz_agent.py` point `VRAG(base_url=...)` at it over loopback.

What to serve is named in the URL, so one server handles many episodes at once, statelessly:

- ``/fz/k.<kind>/v1``: every turn answers with `<kind>` (see `MALFORMED_KINDS`, `WELL_FORMED_KINDS`);
- ``/fz/a.<kind>/v1``: turn 1 is a well-formed search, every later turn `<kind>` (so the malformed
  reply arrives after an image is in the conversation);
- ``/fz/m.<seed>/v1``: a seeded random mix per turn — half well-formed replies, half drawn from
  every malformed kind — derived from (seed, question, turn), so a run is reproducible and
  the episodes of one batch differ.

The turn is the number of assistant messages in the request plus one; the episode is the
`[fuzz ...]` tag of the first user message (else that whole message), so the per-episode request
count in `FuzzState.requests` is exact even when a batch of episodes shares one URL.
`/fz/<spec>/v1/models` lists one model, except for spec ``k.models_malformed``, where it answers
one of several malformed bodies.
"""
from __future__ import annotations

import json
import random
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

# Each kind: a function (rng, turn) -> Response. Kinds that break the HTTP/JSON layer come first,
# then the ones that break the reply's shape, then replies whose *text* is hostile.
Builder = Callable[[random.Random, int], Response]

QUERIES = ("Kestrel Ridge solar plant output", "bicycle share of trips", "Riverside district satisfaction score",
           "most used travel app", "harbour tunnel traffic")


def _raw(body: bytes | str, media_type: str = "application/json", status: int = 200) -> Response:
    return Response(content=body if isinstance(body, bytes) else body.encode("utf-8"), media_type=media_type,
                    status_code=status)


def _completion(content: Any, usage: Any = None, message_extra: dict | None = None) -> dict[str, Any]:
    message = {"role": "assistant", "content": content, **(message_extra or {})}
    return {"id": "chatcmpl-fuzz", "object": "chat.completion", "created": 0, "model": "fuzz",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def _ok(text: str, **kwargs: Any) -> Response:
    return JSONResponse(_completion(text, **kwargs))


class _BrokenBody(Response):
    """Promises 100 kB, sends a few bytes and ends: the connection breaks mid-body."""

    def __init__(self) -> None:
        super().__init__()

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"100000")]})
        await send({"type": "http.response.body", "body": b'{"choices": [{"message": ', "more_body": False})


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


MALFORMED_KINDS: dict[str, Builder] = {
    # the body is not a usable JSON object
    "invalid_json": lambda r, t: _raw('{"choices": [{"message": {"content": "<answer>x'),
    "empty_body": lambda r, t: _raw(b""),
    "non_utf8": lambda r, t: _raw(b'{"choices": [{"message": {"role": "assistant", "content": "\xff\xfe<answer>x'
                                  b'</answer>"}}]}'),
    "deeply_nested": lambda r, t: _raw('{"choices": ' + _deep(50_000) + "}"),
    "json_null": lambda r, t: _raw("null"),
    "json_list": lambda r, t: _raw(json.dumps([_completion("<answer>x</answer>")])),
    "json_string": lambda r, t: _raw(json.dumps("<answer>x</answer>")),
    "html": lambda r, t: _raw("<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"),
    "sse": lambda r, t: _raw('data: {"choices": [{"delta": {"content": "<answer>x</answer>"}}]}\n\ndata: [DONE]\n\n',
                             "text/event-stream"),
    "no_content_204": lambda r, t: Response(status_code=204),
    "oversized_body": lambda r, t: _raw('{"choices": [{"message": {"content": "' + "<search>x</search>" * 500_000
                                        + '"}}]}'),  # 9 MB, over the adapter's 8 MiB cap
    "broken_body": lambda r, t: _BrokenBody(),
    # the object has the wrong shape
    "choices_dict": lambda r, t: JSONResponse({**_completion("<answer>x</answer>"), "choices": {"0": {}}}),
    "choices_null_item": lambda r, t: JSONResponse({**_completion("<answer>x</answer>"), "choices": [None]}),
    "choices_empty": lambda r, t: JSONResponse({**_completion("<answer>x</answer>"), "choices": []}),
    "choice_without_message": lambda r, t: JSONResponse(
        {**_completion(""), "choices": [{"index": 0, "finish_reason": "stop"}]}),
    "message_null": lambda r, t: JSONResponse({**_completion(""), "choices": [{"index": 0, "message": None}]}),
    "content_list": lambda r, t: JSONResponse(_completion(["<answer>", 1, None])),
    "content_int": lambda r, t: JSONResponse(_completion(42)),
    "content_dict": lambda r, t: JSONResponse(_completion({"text": "<answer>x</answer>"})),
    "usage_string": lambda r, t: JSONResponse(_completion(
        f"<think>t</think><search>{QUERIES[t % len(QUERIES)]}</search>",
        usage={"prompt_tokens": "12", "completion_tokens": [3], "total_tokens": None})),
    # a reply holding a lone surrogate: valid as a JSON escape, unencodable as UTF-8 on the next request
    "lone_surrogate": lambda r, t: _raw('{"choices": [{"message": {"role": "assistant", '
                                        '"content": "<think>\\udfff</think><search>\\ud800</search>"}}]}'),
    "redirect_loop": lambda r, t: RedirectResponse("chat/completions", status_code=307),
    # hostile reply text
    "huge_search_64k": lambda r, t: _ok("<search>" * 8192),
    "huge_search_128k": lambda r, t: _ok("<search>" * 16384),
    "huge_mixed_128k": lambda r, t: _ok("<think>" + "<answer><search>x</search>" * 5000),
    "answer_with_tags": lambda r, t: _ok("<think>t</think><answer><search>x</search></answer>"),
    "nul_answer": lambda r, t: _ok("<think>t</think><answer>\x00\x00\x00</answer>"),
    "deep_search_json": lambda r, t: _ok("<search>" + "[" * 5000 + "</search>"),
    "deep_bbox_json": lambda r, t: _ok("<bbox>" + "[" * 5000 + "</bbox>"),
    "huge_int_bbox": lambda r, t: _ok("<bbox>[1" + "0" * 400 + ", 1, 2, 3]</bbox>"),
    "huge_int_search": lambda r, t: _ok("<search>[1" + "0" * 5000 + "]</search>"),
}
# `/v1/models` answers when the client is given no model name (served under spec k.models_malformed)
MALFORMED_MODELS: tuple[Callable[[], Response], ...] = (
    lambda: _raw("null"), lambda: _raw("[1, 2]"), lambda: _raw("<html>models</html>", "text/html"),
    lambda: JSONResponse({"data": "fuzz"}), lambda: JSONResponse({"data": [None, {"id": 5}]}),
    lambda: _raw('{"data": [{"id": "x'), lambda: _raw(b"\xff\xfe"), lambda: Response(status_code=204),
    lambda: JSONResponse({"object": "list"}),
)


def _good_search(r: random.Random, t: int) -> Response:
    queries = r.sample(QUERIES, r.choice((1, 1, 2)))
    return _ok(f"<think>look it up</think><search>{' | '.join(queries)}</search>")


def _good_crop(r: random.Random, t: int) -> Response:
    x1, y1 = r.randint(-50, 700), r.randint(-50, 700)
    return _ok(f"<think>zoom</think><bbox>[{x1}, {y1}, {x1 + r.randint(1, 400)}, {y1 + r.randint(1, 400)}]</bbox>")


def _garbage(r: random.Random, t: int) -> Response:
    alphabet = "<>/abcsearchbox[]{}|,.0123456789 \n\t\x00\u00e9\u4e2d\U0001f600"
    return _ok("".join(r.choice(alphabet) for _ in range(r.randint(0, 300))))


WELL_FORMED_KINDS: dict[str, Builder] = {
    "good_search": _good_search,
    "good_crop": _good_crop,
    "good_answer": lambda r, t: _ok("<think>it says 7.4</think><answer>7.4</answer>"),
    "unclosed_answer": lambda r, t: _ok("<think>cut off</think><answer>7.4"),
    "garbage_text": _garbage,  # well-formed HTTP, nonsense text: the agent must ask again
}
ALL_KINDS: dict[str, Builder] = {**MALFORMED_KINDS, **WELL_FORMED_KINDS}
MODELS_MALFORMED = "models_malformed"


@dataclass
class FuzzState:
    """What the endpoint saw: requests per (spec, question), and what it served per kind."""

    requests: Counter = field(default_factory=Counter)
    served: Counter = field(default_factory=Counter)
    model_requests: Counter = field(default_factory=Counter)
    log: list[dict[str, Any]] = field(default_factory=list)  # per chat request: spec, episode, turn, kind, params
    lock: threading.Lock = field(default_factory=threading.Lock)

    def episode_requests(self, spec: str, question: str) -> int:
        with self.lock:
            return self.requests[(spec, question)]

    @property
    def total_requests(self) -> int:
        with self.lock:
            return sum(self.requests.values()) + sum(self.model_requests.values())


def choose_kind(spec: str, question: str, turn: int) -> str:
    """The kind served for this spec, episode and turn (deterministic)."""
    mode, _, arg = spec.partition(".")
    if mode == "k":
        return "good_search" if arg == MODELS_MALFORMED and turn == 1 else (
            "good_answer" if arg == MODELS_MALFORMED else arg)
    if mode == "a":
        return "good_search" if turn == 1 else arg
    if mode == "m":
        rng = random.Random(f"{arg}|{question}|{turn}")
        pool = WELL_FORMED_KINDS if rng.random() < 0.5 else MALFORMED_KINDS
        return rng.choice(sorted(pool))
    raise ValueError(f"unknown fuzz spec {spec!r}")


_EPISODE_TAG = re.compile(r"\[fuzz [^\]]{1,80}\]")


def _episode_of(body: bytes) -> tuple[str, int, dict[str, Any]]:
    """(episode, turn, request) from a chat request the agent sent (the agent's own JSON is well-formed)."""
    try:
        payload = json.loads(body)
        messages = payload["messages"]
    except (ValueError, KeyError, TypeError):
        return "", 1, {}
    question = ""
    for message in messages:
        if message.get("role") == "user":
            content = message.get("content")
            question = content if isinstance(content, str) else " ".join(
                p.get("text", "") for p in content if isinstance(p, dict))
            break
    tag = _EPISODE_TAG.search(question)
    turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
    return (tag.group(0) if tag else question), turn, payload


def episode_tag(question: str) -> str:
    """The key the endpoint counts an episode's requests under: its `[fuzz ...]` tag, else the question."""
    tag = _EPISODE_TAG.search(question)
    return tag.group(0) if tag else question


def create_app(state: FuzzState | None = None) -> FastAPI:
    """The endpoint; `app.state.fuzz` is the `FuzzState` it counts into."""
    app = FastAPI()
    app.state.fuzz = state = state or FuzzState()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/fz/{spec}/v1/models")
    async def models(spec: str) -> Response:
        with state.lock:
            state.model_requests[spec] += 1
            n = state.model_requests[spec]
        if spec == f"k.{MODELS_MALFORMED}":
            return MALFORMED_MODELS[n % len(MALFORMED_MODELS)]()
        return JSONResponse({"object": "list", "data": [{"id": "fuzz-model", "object": "model"}]})

    @app.post("/status/{code}/v1/chat/completions")
    async def status(code: int) -> Response:
        """An error status with an OpenAI-style JSON error body (what vLLM sends when it fails)."""
        return JSONResponse({"error": "model crashed"}, status_code=code)

    @app.post("/fz/{spec}/v1/chat/completions")
    async def chat(spec: str, request: Request) -> Response:
        question, turn, payload = _episode_of(await request.body())
        kind = choose_kind(spec, question, turn)
        images = sum(1 for m in payload.get("messages", []) if isinstance(m.get("content"), list)
                     for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url")
        with state.lock:
            state.requests[(spec, question)] += 1
            state.served[kind] += 1
            state.log.append({"spec": spec, "episode": question, "turn": turn, "kind": kind, "images": images,
                              "model": payload.get("model"), "max_tokens": payload.get("max_tokens"),
                              "seed": payload.get("seed"), "stop": payload.get("stop"),
                              "top_k": payload.get("top_k")})
        rng = random.Random(f"{spec}|{question}|{turn}|reply")
        return ALL_KINDS[kind](rng, turn)

    return app
