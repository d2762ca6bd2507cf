"""The Policy seam: what the agent loop asks of a model, whatever serves it.

`Episode` only ever calls `await policy.complete(messages, sampling)` and reads a `PolicyReply`.
Adapters decide what that means:

- `vrag_rl.agent.policies.openai_http.OpenAIPolicy`: any OpenAI-compatible endpoint (vLLM,
  DashScope, the project's policy servers). The only place images become base64 data URLs.
- `vrag_rl.agent.policies.local_transformers`: an in-process transformers VLM.
- `vrag_rl.agent.policies.token_recorder`: wraps a "generate from token ids" callable and records
  prompt/response ids, the observation mask and logprobs for a trainer (verl plugs in here).

Messages are in *processor form*, the shape transformers' chat templates take:
``{"role": "system" | "user" | "assistant", "content": str | list[part]}`` where a part is
``{"type": "text", "text": str}`` or ``{"type": "image", "image": PIL.Image, "image_id": str,
"cache_key": str}``. The PIL image is exactly the pixels the model is meant to see (already
resized by the loop); `cache_key` names those pixels stably across episodes, so an adapter may
cache whatever it derives from them (an encoding, processor outputs). Messages are only ever
appended to during an episode, never edited — adapters may rely on that.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from PIL import Image

DEFAULT_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"

Message = dict[str, Any]


class PolicyError(RuntimeError):
    """The policy could not produce a usable reply (after retries); the episode fails with this reason.

    `retryable` says whether another attempt later may succeed (connection refused, timeout, 429,
    5xx) — what a caller with its own retry budget, like the LLM judge, decides on; `status` is the
    endpoint's HTTP status where there was one.
    """

    def __init__(self, message: str, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one reply. `max_tokens` is already capped by the episode's token budget."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024
    stop: tuple[str, ...] = ()
    seed: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)  # endpoint-specific extras (OpenAI adapter)


@dataclass
class PolicyReply:
    """One model turn. Token-level fields are filled by adapters that know them (local, recorder)."""

    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_ids: list[int] | None = None  # the reply's token ids, when the adapter generated from ids
    logprobs: list[float] | None = None  # per token of `token_ids`, under the sampling policy


@runtime_checkable
class Policy(Protocol):
    """Anything that turns a conversation into the model's next reply.

    Raise `PolicyError` for a failure the episode should report (endpoint down, unusable
    response); any other exception is treated as a bug of the adapter and also ends the episode
    as an explicit failure, never as an escaped exception.
    """

    async def complete(self, messages: list[Message], sampling: SamplingParams) -> PolicyReply: ...

    async def aclose(self) -> None: ...


def text_part(text: str) -> dict[str, Any]:
    """A text part of a user message."""
    return {"type": "text", "text": text}


def image_part(image: Image.Image, image_id: str, cache_key: str) -> dict[str, Any]:
    """An image part in processor form; see the module docstring for `cache_key`."""
    return {"type": "image", "image": image, "image_id": image_id, "cache_key": cache_key}


def message_images(messages: list[Message]) -> list[Image.Image]:
    """The images of a conversation in the order a chat template places them (what a processor needs)."""
    images: list[Image.Image] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            images.extend(part["image"] for part in content if part.get("type") == "image")
    return images
