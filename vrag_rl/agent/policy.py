"""The policy: any OpenAI-compatible chat-completions endpoint (vLLM, DashScope, our own servers).

The official `openai` client does the HTTP work, including retries with exponential backoff on
connection errors, 429 and 5xx; what is left here is turning its failures into one clear
`PolicyError` and finding the served model's name when none is given.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

DEFAULT_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"


class PolicyError(RuntimeError):
    """The policy endpoint could not produce a reply (after retries)."""


@dataclass
class PolicyReply:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int


class PolicyClient:
    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None, timeout: float = 120.0,
                 max_retries: int = 3):
        import openai

        self.base_url = _normalise_base_url(base_url)
        self.model = model
        self._openai = openai
        self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key or "EMPTY", timeout=timeout,
                                          max_retries=max_retries)
        self._model_lock = asyncio.Lock()

    async def resolve_model(self) -> str:
        """The name to send: the one given, else the first model the server lists (vLLM's served name)."""
        if self.model:
            return self.model
        async with self._model_lock:
            if not self.model:
                try:
                    models = await self._client.models.list()
                    names = [m.id for m in models.data]
                except self._openai.OpenAIError:
                    names = []
                self.model = names[0] if names else DEFAULT_MODEL
        return self.model

    async def complete(self, messages: list[dict[str, Any]], temperature: float, top_p: float, max_tokens: int,
                       extra_body: dict[str, Any] | None = None) -> PolicyReply:
        model = await self.resolve_model()
        try:
            response = await self._client.chat.completions.create(
                model=model, messages=messages, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                extra_body=extra_body or None,
            )
        except self._openai.APIStatusError as exc:
            raise PolicyError(f"policy endpoint {self.base_url} answered {exc.status_code}: {_status_detail(exc)}") from exc
        except self._openai.APIConnectionError as exc:
            raise PolicyError(f"policy endpoint {self.base_url} unreachable: {exc}") from exc
        except self._openai.OpenAIError as exc:
            raise PolicyError(f"policy call failed: {exc}") from exc
        if not response.choices:
            raise PolicyError("policy endpoint returned no choices")
        choice = response.choices[0]
        usage = response.usage
        return PolicyReply(text=choice.message.content or "", finish_reason=choice.finish_reason,
                           prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                           completion_tokens=getattr(usage, "completion_tokens", 0) or 0)

    async def aclose(self) -> None:
        await self._client.close()


def _normalise_base_url(url: str) -> str:
    """Accept `http://host:8001`, `.../v1` or `.../v1/chat/completions` alike."""
    url = url.rstrip("/")
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    if not url.endswith("/v1") and "/v1" not in url.split("//", 1)[-1]:
        url += "/v1"
    return url


def _status_detail(exc) -> str:
    try:
        body = exc.response.json()
        detail = body.get("detail") or body.get("error") or body
    except Exception:  # noqa: BLE001 - any body at all is better than none in an error message
        detail = exc.response.text
    return str(detail)[:300]
