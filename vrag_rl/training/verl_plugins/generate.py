"""verl's server manager as the `GenerateFn` of the token recorder.

`TokenRecordingPolicy` asks a `GenerateFn(prompt_ids, sampling, images)` for each model turn; in verl
that is `server_manager.generate(request_id, prompt_ids=..., sampling_params=..., image_data=...)`
(`verl.workers.rollout.llm_server.LLMServerClient`, token ids in, `TokenOutput` out). Four rules
come from verl rather than from the agent:

- sampling (temperature, top_p, top_k, logprobs) is verl's — the trainer's rollout settings, or
  `val_kwargs` when validating — not the agent's `AgentConfig.temperature`; only the per-turn
  `max_tokens` comes from the episode;
- the whole multi-turn response (model turns *and* observations) must fit in
  `rollout.response_length`, so a turn may use only what is left of it; when nothing is left the
  episode ends with a `PolicyError` (status "failed", reason in the result), never by truncating
  an image's tokens;
- what verl's trainer reads of a generation travels in `TokenOutput.extra_fields` (and
  `num_preempted`), and an agent loop must pass it on in its `AgentLoopOutput`: the v1 trainer
  (`trainer.use_v1: true`, verl 0.9.1's default) tags every trajectory with `min_global_steps` /
  `max_global_steps` and fails on `int(None)` without them. `ServerFields` merges them over the
  episode's turns exactly as verl's own `ToolAgentLoop` does;
- vision special tokens are kept out of sampling with `logit_bias` where the rollout server takes it
  (vLLM: token id keys; SGLang: string keys); whatever the server does, the token recorder rejects a
  reply that holds one (`token_recorder.check_no_vision_tokens`).
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

from PIL import Image

from vrag_rl.agent.policies.token_recorder import GenerateOutput
from vrag_rl.agent.policy import PolicyError, SamplingParams

# what verl's trainers read of a generation's extra_fields (verl 0.9.1): the model-weight versions of
# the trajectory (v1 trainer tags and staleness metrics; fully-async trainer) and, with MTP speculative
# decoding, the per-request draft statistics (summed over turns, as verl's ToolAgentLoop does)
STEP_KEYS = ("global_steps", "min_global_steps", "max_global_steps")
SPEC_DECODE_KEYS = ("spec_num_draft_tokens", "spec_num_accepted_tokens", "spec_num_verify_steps")
LOGIT_BIAS_SERVERS = {"vllm": int, "sglang": str}  # rollout.name → the type of logit_bias keys it takes
SUPPRESS_BIAS = -100.0  # the most negative bias vLLM and SGLang accept


class ServerFields:
    """The generate outputs' fields a trainer reads, merged over an episode's turns.

    As verl's `ToolAgentLoop`: the first output's `extra_fields` are the base (its `global_steps`,
    `min_global_steps`, `num_cached_tokens`, ...); `max_global_steps` follows the latest turn (we keep
    the max and the min over turns, which is the same when weights only move forward and safe if they
    do not); speculative-decoding counts add up; `num_preempted` adds up (-1: the server never said).
    """

    def __init__(self) -> None:
        self.extra: dict[str, Any] = {}
        self.num_preempted = -1
        self.turns = 0

    def add(self, output: Any) -> None:
        """Merge one `TokenOutput`'s fields."""
        fields = dict(getattr(output, "extra_fields", None) or {})
        if not self.turns:
            self.extra = fields
        else:
            for key, pick in (("min_global_steps", min), ("max_global_steps", max)):
                values = [v for v in (self.extra.get(key), fields.get(key)) if v is not None]
                if values:
                    self.extra[key] = pick(int(v) for v in values)
            if fields.get("global_steps") is not None:
                self.extra["global_steps"] = fields["global_steps"]
            for key in SPEC_DECODE_KEYS:
                if key in fields and key in self.extra:
                    self.extra[key] = int(self.extra[key]) + int(fields[key])
        preempted = getattr(output, "num_preempted", None)
        if preempted is not None:
            self.num_preempted = max(self.num_preempted, 0) + int(preempted)
        self.turns += 1

    def for_output(self, trainer_step: Any = None) -> dict[str, Any]:
        """The fields for `AgentLoopOutput.extra_fields`; never a missing weight version when one can be known.

        An episode that never reached the server (its first generate failed) has no version of its own:
        it takes the weights current when the prompt was issued, `trainer_step - 1` (verl's trainers
        load weights version s - 1 before generating step s; its staleness metric assumes the same),
        when verl passed the row's `global_steps` (the v1 trainer does); else the keys stay None, as
        verl's v0 batch assembly fills them.
        """
        fields = dict(self.extra)
        if fields.get("min_global_steps") is None and fields.get("global_steps") is not None:
            fields["min_global_steps"] = fields["global_steps"]
        if fields.get("max_global_steps") is None and fields.get("global_steps") is not None:
            fields["max_global_steps"] = fields["global_steps"]
        if fields.get("min_global_steps") is None and trainer_step is not None:
            version = max(int(trainer_step) - 1, 0)
            fields.update(min_global_steps=version, max_global_steps=version)
        return fields


def logit_bias_against(token_ids: Iterable[int], rollout_name: str | None) -> dict[Any, float] | None:
    """`logit_bias` that keeps `token_ids` out of sampling on this rollout server, or None where it has none."""
    key = LOGIT_BIAS_SERVERS.get(str(rollout_name or ""))
    ids = sorted(set(int(t) for t in token_ids))
    if key is None or not ids:
        return None
    return {key(t): SUPPRESS_BIAS for t in ids}


class ServerManagerGenerate:
    """GenerateFn over a verl server manager; one per episode (it tracks the episode's response budget)."""

    def __init__(self, server_manager: Any, sampling_params: dict[str, Any], response_length: int,
                 request_id: str | None = None, suppress_token_ids: Iterable[int] = (),
                 rollout_name: str | None = None):
        self.server_manager = server_manager
        self.sampling_params = dict(sampling_params)
        bias = logit_bias_against(suppress_token_ids, rollout_name)
        if bias:
            merged = dict(self.sampling_params.get("logit_bias") or {})
            merged.update(bias)
            self.sampling_params["logit_bias"] = merged
        self.response_length = int(response_length)
        self.request_id = request_id or uuid.uuid4().hex  # sticky session: every turn to the same server
        self.prompt_length: int | None = None  # the episode's initial prompt, from the first call
        self.generate_s = 0.0
        self.calls = 0
        self.fields = ServerFields()

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
        self.fields.add(output)
        if getattr(output, "stop_reason", None) in ("aborted", "abort"):
            raise PolicyError("the rollout server aborted the generation")
        ids = [int(t) for t in output.token_ids]
        logprobs = [float(v) for v in output.log_probs] if output.log_probs else None
        if not ids:
            raise PolicyError("the rollout server returned an empty generation")
        finish = "length" if len(ids) >= params["max_tokens"] else "stop"
        return GenerateOutput(token_ids=ids, logprobs=logprobs, finish_reason=finish)
