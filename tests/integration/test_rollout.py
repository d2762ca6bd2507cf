"""Rollouts through the real agent loop and search server: the trajectory is the conversation the model saw.

A scripted generate-from-ids backend (canonical token ids of fixed replies) drives `Episode` through
search → crop → answer against the real search API; the recorded ids must equal the processor's
tokenisation of the episode's whole conversation with its images, and the trajectory must carry the
pages per turn in rank order, the crop and the credit graph the reward and GGPO read.
"""
from __future__ import annotations

import asyncio

import pytest

from search_engine.client import SearchClient
from testkit.tiny_task import AGENT, PROMPTS, build_task_model
from vrag_rl.agent.policies.token_recorder import GenerateOutput
from vrag_rl.training.algos import ggpo_turn_mask
from vrag_rl.training.rewards import RewardConfig, RewardReference, score_episode
from vrag_rl.training.rollout import RolloutTask
from vrag_rl.vrag.config import AgentConfig
from vrag_rl.vrag.prompts import Prompts
from vrag_rl.vrag.rollout import rollout_batch

REPLIES = ["<think>search</think><search>total revenue</search>", "<think>zoom</think><bbox>[0, 0, 40, 40]</bbox>",
           "<think>answer</think><answer>$341 million</answer>"]


@pytest.fixture(scope="module")
def processor(tmp_path_factory):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(build_task_model(tmp_path_factory.mktemp("rollout") / "m"))


def test_rollouts_record_the_whole_conversation(text_search_server, processor):
    tok = processor.tokenizer
    end = tok.convert_tokens_to_ids("<|im_end|>")
    seen_images: list[int] = []

    async def generate(ids, sampling, images):
        # <|im_start|> count: system + question + generation prompt = 3, then 2 more per turn
        turn = (sum(1 for i in ids if i == tok.convert_tokens_to_ids("<|im_start|>")) - 3) // 2
        seen_images.append(len(images))
        reply = tok(REPLIES[min(turn, 2)], add_special_tokens=False)["input_ids"] + [end]
        return GenerateOutput(reply, [-1.0] * len(reply), "stop")

    config = AgentConfig(**{**AGENT, "temperature": 0.0})
    reference = RewardReference("$341 million", ["acme_annual_report_2023_2"])
    task = RolloutTask("revenue", "What was Acme Robotics' total revenue in 2023?", reference)

    async def go():
        search = SearchClient(text_search_server.url)
        try:
            return await rollout_batch([task], 3, processor, generate, search, config, Prompts(**PROMPTS), seed=1)
        finally:
            await search.aclose()

    trajectories = asyncio.run(go())
    assert [t.index for t in trajectories] == [0, 1, 2] and {t.group_id for t in trajectories} == {"revenue"}
    assert len({t.seed for t in trajectories}) == 3  # each rollout samples with its own seed
    t = trajectories[0]
    assert t.result.status == "answered" and t.result.answer == "$341 million"
    assert [r.action for r in t.turn_records] == ["search", "crop", "answer"] and t.num_turns == 3
    assert t.pages_per_turn[0][0][0] == "acme_annual_report_2023_2" and t.pages_per_turn[1] == []
    assert len(t.images) == 2 and sorted(seen_images) == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # the page, then its crop
    # recorded ids == the processor's tokenisation of the episode's conversation with its images
    messages = [{"role": m["role"], "content": m["content"] if isinstance(m["content"], str) else
                 [{"type": "image"} if p["type"] == "image_ref" else p for p in m["content"]]}
                for m in t.result.messages]
    text = processor.apply_chat_template(messages, tokenize=False)
    whole = list(processor(text=[text], images=t.images)["input_ids"][0])
    assert t.prompt_ids + t.response_ids == whole[:-1]  # all but the template's final "\n"
    assert sum(t.response_mask) == sum(len(tok(r, add_special_tokens=False)["input_ids"]) + 1 for r in REPLIES)
    # the credit graph: search → crop of its page → answer from the crop; all on the answer path
    graph = t.credit_graph
    assert graph.answer_path() == {"root", "t0", "t1", "t2"}
    assert ggpo_turn_mask(graph, 3, True, {"acme_annual_report_2023_2"}) == [False, False, False]
    assert ggpo_turn_mask(graph, 3, False, {"acme_annual_report_2023_2"}) == [True, True, False]
    reward = asyncio.run(score_episode(t.result, reference, RewardConfig()))
    assert reward.total == pytest.approx(1.0) and reward.retrieval == 1.0
