"""`TurnRecordingPolicy`: token recording for agents whose context is rebuilt at every model call.

`TokenRecordingPolicy` records one growing conversation: it needs every call's messages to extend
the previous call's (the VRAG transcript does). VimRAG rebuilds its context from the memory graph at
every call, so one growing record would train
on a conversation the model never saw. Here every model call is recorded as its own turn with its
own prompt — prompt ids (graph JSON + the memory images of that call), the sampled ids, logprobs and
images — by a fresh `TokenRecordingPolicy` per call, so the tokenisation, the image-token expansion,
the vision-token guard and the end-of-turn handling are exactly the growing recorder's. An agent's
rollout (`AgentPlugin.rollout`) picks the recorder its memory needs.

Each turn's sampling seed is derived from the episode's seed and the turn's index, as the growing
recorder derives a turn's, so an episode is reproducible whatever order concurrent episodes reach
the model in.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from PIL import Image

from vrag_rl.agent.policies.token_recorder import GenerateFn, TokenRecordingPolicy, turn_seed
from vrag_rl.agent.policy import Message, PolicyReply, SamplingParams


@dataclass
class RecordedTurn:
    """One model call as a training sample: its own prompt, the sampled reply, the images of the prompt."""

    index: int  # the model call's 0-based index (= `TurnRecord.index` of the episode)
    prompt_ids: list[int]
    response_ids: list[int]  # the sampled ids only (all trained: mask 1)
    response_logprobs: list[float]
    images: list[Image.Image]
    finish_reason: str | None = None


class TurnRecordingPolicy:
    """Policy over a `GenerateFn`; after the episode read `turns` (one `RecordedTurn` per model call)."""

    def __init__(self, processor: Any, generate: GenerateFn):
        self.processor = processor
        self.generate = generate
        self.turns: list[RecordedTurn] = []

    async def complete(self, messages: list[Message], sampling: SamplingParams) -> PolicyReply:
        index = len(self.turns)
        recorder = TokenRecordingPolicy(self.processor, self.generate)
        reply = await recorder.complete(messages, replace(sampling, seed=turn_seed(sampling.seed, index)))
        self.turns.append(RecordedTurn(index=index, prompt_ids=list(recorder.prompt_ids),
                                       response_ids=list(recorder.response_ids),
                                       response_logprobs=list(recorder.response_logprobs),
                                       images=list(recorder.images), finish_reason=recorder.finish_reasons[-1]))
        return reply

    async def aclose(self) -> None:
        return None

