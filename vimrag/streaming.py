"""SSE streaming with thinking models: `reasoning_content` kept apart from `content`.

DashScope's thinking models (and vLLM with a reasoning parser) stream the reasoning in
`delta.reasoning_content` (some servers: `delta.reasoning`) and the reply in `delta.content`;
several of them only allow thinking with `stream: true`. `StreamingOpenAIPolicy` is a small
subclass of the project's `OpenAIPolicy` (same image encoding and cache, same error contract:
only `PolicyError` leaves `complete`) that streams through the official `openai` client (its SSE
decoding is the part worth having here; the plain adapter posts by itself, see its module doc) and
returns the reasoning as a leading `<think>…</think>`, which is where the agent's parser reads
thoughts. `on_delta(kind, text)` sees every piece as it arrives (a UI can show it live).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from vrag_rl.agent.policies.openai_http import OpenAIPolicy, scrub_surrogates
from vrag_rl.agent.policy import Message, PolicyError, PolicyReply, SamplingParams

MAX_STREAM_CHARS = 2_000_000  # a reply is text: a stream longer than this is runaway output


class StreamingOpenAIPolicy(OpenAIPolicy):
    """`OpenAIPolicy` that asks for `stream: true` and keeps the reasoning stream as `<think>`."""

    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None, timeout: float = 120.0,
                 max_retries: int = 3, on_delta: Callable[[str, str], None] | None = None, **kwargs: Any):
        import openai

        super().__init__(base_url, model=model, api_key=api_key, timeout=timeout, max_retries=max_retries, **kwargs)
        self.on_delta = on_delta
        self._openai = openai
        self._client = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=max_retries,
            http_client=openai.DefaultAioHttpClient(follow_redirects=False, timeout=timeout))

    async def complete(self, messages: list[Message], sampling: SamplingParams) -> PolicyReply:
        model = await self.resolve_model()
        extra: dict[str, Any] = dict(sampling.extra_body)
        if sampling.seed is not None:
            extra.setdefault("seed", sampling.seed)
        reasoning: list[str] = []
        content: list[str] = []
        finish, usage, size = None, None, 0
        try:
            stream = await self._client.chat.completions.create(
                # cast: the messages are OpenAI's wire format built as plain dicts, not the SDK's TypedDicts
                model=model, messages=cast(Any, self.to_openai_messages(messages)), temperature=sampling.temperature,
                top_p=sampling.top_p, max_tokens=sampling.max_tokens, stop=list(sampling.stop) or None,
                stream=True, stream_options={"include_usage": True}, extra_body=extra or None)
            async for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                for choice in chunk.choices or []:
                    delta = choice.delta
                    extra_fields = getattr(delta, "model_extra", None) or {}
                    think = getattr(delta, "reasoning_content", None) or extra_fields.get("reasoning_content") \
                        or extra_fields.get("reasoning")
                    for kind, piece, sink in (("reasoning", think, reasoning), ("content", delta.content, content)):
                        if isinstance(piece, str) and piece:
                            sink.append(piece)
                            size += len(piece)
                            if self.on_delta is not None:
                                self.on_delta(kind, piece)
                    if choice.finish_reason:
                        finish = choice.finish_reason
                if size > MAX_STREAM_CHARS:
                    raise PolicyError(f"streamed reply longer than {MAX_STREAM_CHARS} characters")
        except PolicyError:
            raise
        except self._openai.APIStatusError as exc:
            raise PolicyError(f"policy endpoint {self.base_url} answered {exc.status_code}") from exc
        except self._openai.APIConnectionError as exc:
            raise PolicyError(f"policy endpoint {self.base_url} unreachable: {exc}") from exc
        except self._openai.OpenAIError as exc:
            raise PolicyError(f"policy stream failed: {exc}") from exc
        except (ValueError, TypeError, AttributeError) as exc:  # a malformed chunk
            raise PolicyError(f"malformed stream from {self.base_url}: {type(exc).__name__}: {exc}") from exc
        text = "".join(content)
        thought = "".join(reasoning).strip()
        if thought and "<think>" not in text:
            text = f"<think>{thought}</think>{text}"
        return PolicyReply(text=scrub_surrogates(text), finish_reason=finish,
                           prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                           completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0))

    async def aclose(self) -> None:
        await self._client.close()
        await super().aclose()
