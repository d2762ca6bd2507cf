"""Vision special tokens are never accepted from the model, on any path that records tokens.

- the token recorder (local trainer and verl plugin alike) rejects a reply holding any of them before
  anything of it is recorded; through the agent loop the episode ends "failed" with the reason, and the
  trajectory's ids hold exactly as many image tokens as its images' features;
- the verl adapter asks the rollout server to keep them out of sampling (`logit_bias`), in the key type
  each server takes, and passes on what verl's trainer reads of each generation.
"""
from __future__ import annotations

import asyncio

import pytest

from search_engine.client import SearchClient
from vrag_rl.agent.policies.token_recorder import (
    VISION_TOKENS,
    GenerateOutput,
    TokenRecordingPolicy,
    VisionTokenError,
    vision_token_ids,
)
from vrag_rl.agent.policy import PolicyError, SamplingParams
from vrag_rl.training.rollout import RolloutTask, model_inputs
from vrag_rl.training.verl_plugins.generate import ServerFields, ServerManagerGenerate, logit_bias_against
from vrag_rl.vrag.config import AgentConfig
from vrag_rl.vrag.prompts import Prompts
from vrag_rl.vrag.rollout import run_one

SEARCH = "<think>look</think><search>Acme Robotics total revenue 2023</search>"


@pytest.fixture(scope="module")
def processor(tiny_qwen25vl_dir):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(tiny_qwen25vl_dir)


class Scripted:
    """GenerateFn returning fixed token-id replies (lists) in order."""

    def __init__(self, replies: list[list[int]]):
        self.replies = list(replies)

    async def __call__(self, prompt_ids, sampling, images):
        ids = self.replies.pop(0)
        return GenerateOutput(ids, [-0.1] * len(ids), "stop")


def _ids(tokenizer, text: str, end: bool = True) -> list[int]:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids + [tokenizer.convert_tokens_to_ids("<|im_end|>")] if end else ids


def test_the_tiny_processor_knows_the_qwen_vision_tokens(processor):
    known = vision_token_ids(processor.tokenizer)
    assert set(known.values()) == {"<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"}
    assert set(known.values()) <= set(VISION_TOKENS)


@pytest.mark.parametrize("token", ["<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"])
def test_a_reply_holding_a_vision_token_is_rejected_before_the_record(processor, token):
    tok = processor.tokenizer
    bad = _ids(tok, "<think>hm</think>", end=False) + [tok.convert_tokens_to_ids(token)] + \
        _ids(tok, "<answer>x</answer>")
    recorder = TokenRecordingPolicy(processor, Scripted([_ids(tok, SEARCH), bad]))
    messages = [{"role": "user", "content": "Question: q?"}]

    async def go():
        reply = await recorder.complete(messages, SamplingParams())
        messages.extend([{"role": "assistant", "content": reply.text}, {"role": "user", "content": "nothing found"}])
        before = (list(recorder.response_ids), list(recorder.response_mask), list(recorder.turn_spans))
        with pytest.raises(VisionTokenError, match=token.replace("|", r"\|")) as caught:
            await recorder.complete(messages, SamplingParams())
        assert isinstance(caught.value, PolicyError)  # what the agent loop handles
        # the observation before the reply is recorded (mask 0); nothing of the rejected reply is
        after = (recorder.response_ids, recorder.response_mask, recorder.turn_spans)
        assert after[2] == before[2] and after[0][:len(before[0])] == before[0]
        assert tok.convert_tokens_to_ids(token) not in after[0][len(before[0]):]
        assert all(m == 0 for m in after[1][len(before[1]):])

    asyncio.run(go())


@pytest.mark.parametrize("token", ["<|image_pad|>", "<|vision_start|>"])
def test_through_the_agent_loop_the_episode_fails_clearly_and_ids_match_the_images(processor, text_search_server,
                                                                                   token):
    """Turn 1 searches (a page is shown), turn 2 holds a vision token: status failed, reason named, and the
    trajectory's image tokens equal its one image's features (no stray placeholder)."""
    tok = processor.tokenizer
    bad = _ids(tok, "<think>", end=False) + [tok.convert_tokens_to_ids(token)] * 3 + _ids(tok, "</think>")
    search = SearchClient(text_search_server.url)
    config = AgentConfig(max_turns=3, max_tokens=64, min_pixels=3136, max_pixels=12544)
    try:
        trajectory = asyncio.run(run_one(RolloutTask("q", "What was Acme Robotics' revenue in 2023?"), 0, processor,
                                         Scripted([_ids(tok, SEARCH), bad]), search, config, Prompts(), seed=0))
    finally:
        asyncio.run(search.aclose())
    result = trajectory.result
    assert result.status == "failed" and token in result.error and "vision special token" in result.error
    assert len(trajectory.turn_spans) == 1 and len(trajectory.images) == 1
    model_inputs(trajectory, processor)  # raises when image tokens and image features disagree


@pytest.mark.parametrize("name, key", [("vllm", int), ("sglang", str)])
def test_sampling_biases_vision_tokens_away_where_the_server_allows(processor, name, key):
    ids = vision_token_ids(processor.tokenizer)
    bias = logit_bias_against(ids, name)
    assert bias == {key(t): -100.0 for t in sorted(ids)}
    assert logit_bias_against(ids, "trtllm") is None and logit_bias_against([], "vllm") is None

    class Manager:
        async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None):
            from verl.workers.rollout.replica import TokenOutput

            self.params = sampling_params
            return TokenOutput(token_ids=[1, 2], log_probs=[-0.1, -0.2], stop_reason="completed",
                               extra_fields={"global_steps": 3, "min_global_steps": 3, "max_global_steps": 3})

    manager = Manager()
    generate = ServerManagerGenerate(manager, {"temperature": 1.0, "logit_bias": {key(5): 2.0}}, 100,
                                     suppress_token_ids=ids, rollout_name=name)
    asyncio.run(generate([1, 2, 3], SamplingParams(max_tokens=8), []))
    assert manager.params["logit_bias"] == {key(5): 2.0, **bias} and manager.params["max_tokens"] == 8


def test_server_fields_merge_over_turns_as_verls_tool_agent_loop():
    from verl.workers.rollout.replica import TokenOutput

    fields = ServerFields()
    assert fields.for_output(trainer_step=5) == {"min_global_steps": 4, "max_global_steps": 4}  # never generated
    assert fields.for_output() == {}  # v0: verl fills None itself
    for step, drafts in ((3, 4), (4, 6)):  # weights updated between the two turns (partial rollout)
        fields.add(TokenOutput(token_ids=[1], num_preempted=1, extra_fields={
            "global_steps": step, "min_global_steps": step, "max_global_steps": step, "num_cached_tokens": 7,
            "spec_num_draft_tokens": drafts}))
    out = fields.for_output(trainer_step=9)
    assert (out["global_steps"], out["min_global_steps"], out["max_global_steps"]) == (4, 3, 4)
    assert out["spec_num_draft_tokens"] == 10 and out["num_cached_tokens"] == 7 and fields.num_preempted == 2
