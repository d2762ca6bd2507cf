"""One episode engine, two memories: the turn machinery is shared, what the model sees next is not.

- both agents are `EpisodeEngine`s over a `Memory`; their configs share `EpisodeConfig`'s fields once;
- a VimRAG episode driven by `TurnRecordingPolicy` records every model call as its own sample, with
  exactly the prompt that call sent (the context rebuilt from the graph), over the real search server;
- the growing `TokenRecordingPolicy` refuses a rebuilt context (an explicit failure, never a wrong
  record), which is why VimRAG's rollout records each turn with `TurnRecordingPolicy`;
- VimRAG turn records speak the shared action vocabulary and carry what each search retrieved.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import re

import pytest

from search_engine.client import SearchClient
from vimrag.agent import VimEpisode
from vimrag.config import VimRAGConfig
from vimrag.energy import EnergyConfig
from vimrag.prompts import VimPrompts
from vrag_rl.agent.config import EpisodeConfig
from vrag_rl.agent.engine import EpisodeEngine
from vrag_rl.agent.policies.token_recorder import GenerateOutput, TokenRecordingPolicy
from vrag_rl.agent.policies.turn_recorder import TurnRecordingPolicy
from vrag_rl.agent.policy import message_images
from vrag_rl.agent.result import TURN_ACTIONS, EpisodeResultBase
from vrag_rl.vrag.config import AgentConfig
from vrag_rl.vrag.loop import Episode


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


REPLIES = [
    "<think>Look it up.</think>" + call("add_search_node", id="s1", query="Kestrel Ridge solar plant power",
                                        parent_ids=["root"]),
    "<think>Keep it.</think>" + call("summarize_and_memorize", summary="Kestrel Ridge makes 410 MW.",
                                     memorize=[{"information_id": "Picture 1", "is_useful": True,
                                                "priority_score": 5}]),
    "<think>Done.</think>" + call("add_answer_node", answer="410 MW", parent_ids=["s1"]),
]


@pytest.fixture(scope="module")
def processor(tiny_qwen25vl_dir):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(tiny_qwen25vl_dir)


class ScriptedGenerate:
    """The canonical ids of fixed replies (+ <|im_end|>); remembers each call's prompt ids."""

    def __init__(self, tokenizer, replies):
        self.tokenizer, self.replies = tokenizer, list(replies)
        self.prompts: list[list[int]] = []

    async def __call__(self, prompt_ids, sampling, images):
        self.prompts.append(list(prompt_ids))
        ids = self.tokenizer(self.replies.pop(0), add_special_tokens=False)["input_ids"]
        ids = ids + [self.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        return GenerateOutput(ids, [-0.25] * len(ids), "stop")


class SpyPolicy:
    """Wraps a policy and keeps a copy of the messages of every call (what the model was shown)."""

    def __init__(self, inner):
        self.inner, self.sent = inner, []

    async def complete(self, messages, sampling):
        self.sent.append(list(messages))
        return await self.inner.complete(messages, sampling)

    async def aclose(self):
        return None


CONFIG = VimRAGConfig(max_turns=4, search_top_k=1, observation_max_pixels=64 * 28 * 28, seed=7,
                      energy=EnergyConfig(total_pixels=64 * 28 * 28, max_pixels_image=64 * 28 * 28))


async def _vim_episode(policy, search_url):
    search = SearchClient(search_url, max_retries=0)
    try:
        episode = VimEpisode("How much power does the Kestrel Ridge plant make?", CONFIG, VimPrompts(), policy,
                             search)
        events = [event async for event in episode.run()]
    finally:
        await search.aclose()
    return episode, events


def test_both_agents_are_the_engine_over_their_own_memory():
    assert issubclass(Episode, EpisodeEngine) and issubclass(VimEpisode, EpisodeEngine)
    shared = {f.name for f in dataclasses.fields(EpisodeConfig)}
    for config in (AgentConfig(), VimRAGConfig()):
        assert shared <= {f.name for f in dataclasses.fields(config)}
    assert (AgentConfig(max_turns=3).turn_limit, VimRAGConfig(max_turns=5).turn_limit) == (3, 5)
    with pytest.raises(ValueError, match="max_turns"):
        VimRAGConfig(max_turns=0)
    with pytest.raises(ValueError, match="max_tokens"):
        VimRAGConfig(max_tokens=0)  # the shared check, once, in the base



def test_a_vimrag_episode_is_recorded_one_sample_per_model_call(processor, text_search_server):
    generate = ScriptedGenerate(processor.tokenizer, REPLIES)
    recorder = TurnRecordingPolicy(processor, generate)
    spy = SpyPolicy(recorder)
    episode, events = asyncio.run(_vim_episode(spy, text_search_server.url))
    result = episode.result()
    assert (result.status, result.answer) == ("answered", "410 MW"), result.error
    assert isinstance(result, EpisodeResultBase)

    # one sample per model call, each with the prompt that call sent (not a growing conversation)
    assert [s.index for s in recorder.turns] == [0, 1, 2] == [r.index for r in result.turn_records]
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    for step, messages, sent_ids in zip(recorder.turns, spy.sent, generate.prompts):
        assert step.prompt_ids == sent_ids  # the generator saw exactly the recorded prompt
        images = message_images(messages)
        assert [im.size for im in step.images] == [im.size for im in images]
        encoded = processor(text=[processor.apply_chat_template(_template(messages), add_generation_prompt=True,
                                                                tokenize=False)],
                            images=images or None, return_tensors=None)
        assert step.prompt_ids == list(encoded["input_ids"][0])
        assert step.response_ids[-1] == processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
        assert step.response_logprobs == [-0.25] * len(step.response_ids)
        assert (step.prompt_ids.count(image_pad) > 0) == bool(images)
    texts = [processor.tokenizer.decode(s.prompt_ids) for s in recorder.turns]
    assert "<tool_response>" not in texts[0] and "<tool_response>" in texts[1]  # the search result waits
    # after memorising, the context is rebuilt from the graph: the summary is in it, the raw results are not
    assert "<tool_response>" not in texts[2] and "Kestrel Ridge makes 410 MW." in texts[2]
    assert not texts[2].startswith(texts[1].rsplit("<|im_start|>assistant", 1)[0])

    # the shared action vocabulary, the tool calls, and what each search retrieved
    records = result.turn_records
    assert [r.action for r in records] == ["search", "memorize", "answer"]
    assert all(r.action in TURN_ACTIONS for r in records)
    assert [r.tool_calls for r in records] == [["add_search_node"], ["summarize_and_memorize"], ["add_answer_node"]]
    assert records[0].queries == ["Kestrel Ridge solar plant power"]
    assert records[0].retrieved == [result.graph.nodes["s1"].retrieved_ids] and result.retrieved_ranked
    assert result.credit_graph.answer_path() == {"root", "s1", "answer"}


def test_the_growing_recorder_refuses_a_rebuilt_context(processor, text_search_server):
    """What the step recorder is for: a rebuilt context is not an extension of the last one."""
    recorder = TokenRecordingPolicy(processor, ScriptedGenerate(processor.tokenizer, REPLIES))
    episode, events = asyncio.run(_vim_episode(recorder, text_search_server.url))
    result = episode.result()
    assert result.status == "failed" and re.search("append-only|not extended", result.error or ""), result.error
    assert len(result.turn_records) == 1  # the first call recorded; the second, rebuilt, refused
    assert [e.kind for e in events if e.type == "error"] == ["policy_failed"]


def _template(messages):
    """Chat-template form: image parts as {"type": "image"} (what the processor's template takes)."""
    return [{"role": m["role"], "content": m["content"] if isinstance(m["content"], str) else [
        {"type": "image"} if p["type"] == "image" else {"type": "text", "text": p["text"]} for p in m["content"]]}
            for m in messages]


def test_the_public_import_paths_still_hold():
    """What users and the other rooms import: unchanged by the move to one engine."""
    import vimrag
    import vimrag.agent
    from vimrag.events import GraphAnswerEvent, MemorizeEvent  # noqa: F401
    from vimrag.result import EPISODE_STATUSES as VIM_STATUSES
    from vrag_rl import VRAG  # noqa: F401
    from vrag_rl.agent.events import AnswerEvent, CropEvent, EpisodeFinished  # noqa: F401
    from vrag_rl.agent.result import EPISODE_STATUSES, TurnRecord  # noqa: F401

    assert vimrag.VimRAGConfig is vimrag.agent.VimRAGConfig is VimRAGConfig
    assert vimrag.VimRAG is vimrag.agent.VimRAG and vimrag.VimRAGResult.__mro__[1] is EpisodeResultBase
    assert EPISODE_STATUSES == VIM_STATUSES == ("answered", "forced_answer", "token_budget", "failed")
    assert set(TURN_ACTIONS) == {"search", "crop", "answer", "memorize", "invalid"}
