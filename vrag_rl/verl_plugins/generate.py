"""verl's server manager as the `GenerateFn` of the token recorder.

`TokenRecordingPolicy` asks a `GenerateFn(prompt_ids, sampling, images)` for each model turn; in verl
that is `server_manager.generate(request_id, prompt_ids=..., sampling_params=..., image_data=...)`
(`verl.workers.rollout.llm_server.LLMServerClient`, token ids in, `TokenOutput` out). Two rules
come from verl rather than from the agent:

- sampling (temperature, top_p, top_k, logprobs) is verl's — the trainer's rollout settings, or
  `val_kwargs` when validating — not the agent's `AgentConfig.temperature`; only the per-turn
  `max_tokens` comes from the episode;
- the whole multi-turn response (model turns *and* observations) must fit in
  `rollout.response_length`, so a turn may use only what is left of it; when nothing is left the
  episode ends with a `PolicyError` (status "failed", reason in the result), never by truncating
  an image's tokens.
"""
from __future__ import annotations

import time
import uuid
from typing import Any

from PIL import Image

from vrag_rl.agent.policies.token_recorder import GenerateOutput
from vrag_rl.agent.policy import PolicyError, SamplingParams


class ServerManagerGenerate:
    """GenerateFn over a verl server manager; one per episode (it tracks the episode's response budget)."""

    def __init__(self, server_manager: Any, sampling_params: dict[str, Any], response_length: int,
                 request_id: str | None = None):
        self.server_manager = server_manager
        self.sampling_params = dict(sampling_params)
        self.response_length = int(response_length)
        self.request_id = request_id or uuid.uuid4().hex  # sticky session: every turn to the same server
        self.prompt_length: int | None = None  # the episode's initial prompt, from the first call
        self.generate_s = 0.0
        self.calls = 0

    async def __call__(self, prompt_ids: list[int], sampling: SamplingParams,
                       images: list[Image.Image]) -> GenerateOutput:
        if self.prompt_length is None:
            self.prompt_length = len(prompt_ids)
        left = self.response_length - (len(prompt_ids) - self.prompt_length)
        if left <= 0:
            raise PolicyError(f"the trajectory fills rollout.response_length ({self.response_length} tokens incl. "
                              "observations); no room for another model turn")
        params = dict(self.sampling_params)
        params["max_tokens"] = max(1, min(int(sampling.max_tokens), left))
        started = time.perf_counter()
        try:
            output = await self.server_manager.generate(request_id=self.request_id, prompt_ids=list(prompt_ids),
                                                        sampling_params=params, image_data=list(images) or None)
        finally:
            self.generate_s += time.perf_counter() - started
            self.calls += 1
        if getattr(output, "stop_reason", None) == "aborted":
            raise PolicyError("the rollout server aborted the generation")
        ids = [int(t) for t in output.token_ids]
        logprobs = [float(v) for v in output.log_probs] if output.log_probs else None
        finish = "length" if len(ids) >= params["max_tokens"] else "stop"
        return GenerateOutput(token_ids=ids, logprobs=logprobs, finish_reason=finish)
