"""Doubles of verl's rollout *server* for CPU tests, used through verl's own client code.

What is real and what is a double:
- `LoopbackLLMServerClient` IS verl 0.9.1's `LLMServerClient` — its `generate` runs unchanged, so the
  fields it sets on every output (`min_global_steps` / `max_global_steps` from the server's
  `global_steps`) are set exactly as on a cluster. Only the two methods that talk to the Ray load
  balancer (`_acquire_server`, `_release_server`) are replaced: the "server handle" is the double below.
- `VLLMServerDouble` is a TEST DOUBLE of verl's `vLLMHttpServer` actor (`server.generate.remote(...)`
  → `TokenOutput`). It returns what that server returns — `extra_fields={"global_steps": <weights
  version>, "num_cached_tokens": ...}`, `stop_reason="completed"`, `num_preempted` — with token ids
  from scripted reply texts (a random tiny model cannot choose actions) and the tiny transformers
  model's log-probs of those ids on the whole conversation with its images (teacher forcing). A
  script entry may be a list of token ids (to inject special tokens) or `None` (an aborted request).
"""
from __future__ import annotations

from typing import Any


class _Remote:
    """`handle.method.remote(...)` awaited like a Ray ObjectRef."""

    def __init__(self, fn):
        self._fn = fn

    def remote(self, *args: Any, **kwargs: Any):
        return self._fn(*args, **kwargs)


class VLLMServerDouble:
    """TEST DOUBLE of verl's vLLM rollout server actor (see the module docstring)."""

    def __init__(self, model: Any, processor: Any, replies: list[Any], global_steps: int = 0):
        self.model, self.processor = model, processor
        self.tokenizer = processor.tokenizer
        self.replies = list(replies)
        self.scripts: dict[str, list[Any]] = {}  # per sticky session (the agent loop's request id)
        self.global_steps = global_steps  # the weights version, as vLLMHttpServer.set_global_steps sets it
        self.calls: list[dict[str, Any]] = []
        self.generate = _Remote(self._generate)

    async def _generate(self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                        image_data: Any = None, video_data: Any = None, session: str | None = None,
                        **kwargs: Any):
        from verl.workers.rollout.replica import TokenOutput

        images = list(image_data or [])
        self.calls.append({"prompt_len": len(prompt_ids), "images": len(images),
                           "sampling_params": dict(sampling_params), "session": session})
        script = self.scripts.setdefault(session or request_id, list(self.replies))
        reply = script.pop(0) if script else None
        extra = {"global_steps": self.global_steps}
        if reply is None:  # what vLLMHttpServer returns for a request aborted by pause_generation
            return TokenOutput(token_ids=[], log_probs=None, stop_reason="aborted", extra_fields=extra)
        if isinstance(reply, str):
            ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"]
            ids = ids + [self.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        else:
            ids = [int(t) for t in reply]
        extra["num_cached_tokens"] = 0
        return TokenOutput(token_ids=ids, log_probs=self._logprobs(prompt_ids, ids, images), stop_reason="completed",
                           num_preempted=0, extra_fields=extra)

    def _logprobs(self, prompt_ids: list[int], ids: list[int], images) -> list[float]:
        import torch

        from vrag_rl.agent.policies.local_transformers import vision_inputs

        sequence = torch.tensor([prompt_ids + ids])
        with torch.no_grad():
            logits = self.model(input_ids=sequence, attention_mask=torch.ones_like(sequence),
                                **vision_inputs(self.processor, images)).logits[0].float()
        logprobs = torch.log_softmax(logits[len(prompt_ids) - 1:-1], -1)
        return logprobs.gather(-1, torch.tensor(ids).unsqueeze(-1)).squeeze(-1).tolist()


def loopback_llm_client(config: Any, server: VLLMServerDouble):
    """verl's real `LLMServerClient` whose load balancer always hands out `server` (see the module docstring)."""
    from verl.workers.rollout.llm_server import LLMServerClient

    class LoopbackLLMServerClient(LLMServerClient):
        async def _acquire_server(self, request_id: str, **extra: Any):
            return "double-0", _SessionServer(server, request_id)

        def _release_server(self, server_id: str, request_id: str | None = None) -> None:
            return None

    return LoopbackLLMServerClient(config)


class _SessionServer:
    """The server handle for one acquire: passes the caller's sticky request id on as the script's session
    (verl sends a fresh vLLM request id per turn, so the double cannot key its scripts on that)."""

    def __init__(self, server: VLLMServerDouble, session: str):
        self.generate = _Remote(lambda **kwargs: server._generate(session=session, **kwargs))
