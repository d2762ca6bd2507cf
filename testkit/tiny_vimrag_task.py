"""The tiny CPU task of `testkit.tiny_task` for the VimRAG agent: same four questions, same search engine, same
reward; the agent builds a memory graph with VimRAG's tool calls.

A scripted random policy (`random_plan`) supplies the SFT warm start, as `RandomTaskPolicy` does for VRAG: it
searches with a random word of the question (only the keyword retrieves the right page), memorises the result,
sometimes opens a second search node (a *dead-end branch* when the answer does not build on it), and answers with
a random one of the four answers built on one of its search nodes. So after SFT the policy speaks the protocol at
chance, and RL must find the right keyword and answer; GGPO's μ_t has dead ends to drop (successful trajectories
with an unused branch) and valuable retrievals to spare (failed trajectories whose search found the page).

Short prompts (`PROMPTS`) keep each step's prompt small for a 2-layer model on 2 CPU cores; the tokenizer is
trained on the task's own text (tool-call JSON, graph JSON, prompts), so a reply is a handful of tokens.
"""
from __future__ import annotations

import json
import random
from typing import Any

from testkit.tiny_task import ALL_QUERY_WORDS, ANSWERS, PAGE_IDS, QUERY_WORDS, QUESTIONS
from vrag_rl.agent.policies.token_recorder import GenerateOutput
from vrag_rl.agent.policy import SamplingParams

PROMPTS: dict[str, Any] = {
    "system": "Build the graph: search the keyword, memorize, then answer.",
    "question": "Question: {question}",
    "graph": "Graph: {graph}",
    "memory_header": "Memory:",
    "memory_item": "{node_id} {label}: {provenance}",
    "next_step": "Next.",
    "results_header": "Results of {node_id} for {query}:",
    "no_results": "Nothing for {query}.",
    "summary": "Memorize.",
    "invalid": "Invalid: {reason}.",
    "force_answer": "Answer now.",
    "no_answer": "No answer.",
}
AGENT: dict[str, Any] = {
    "max_turns": 5, "max_tokens": 48, "max_episode_tokens": 240, "temperature": 1.0, "search_top_k": 1,
    "max_searches_per_turn": 1, "min_pixels": 4 * 28 * 28, "observation_max_pixels": 8 * 28 * 28,
    "max_invalid_actions": 1,
    "energy": {"memory_top_k": 2, "total_pixels": 16 * 28 * 28, "max_pixels_image": 8 * 28 * 28,
               "min_pixels": 4 * 28 * 28},
}
SUMMARY = "seen"


def _call(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}, separators=(",", ":")) + "</tool_call>"


def search_reply(node_id: str, word: str, parents: list[str]) -> str:
    return _call("add_search_node", {"id": node_id, "query": word, "parent_ids": parents})


def memorize_reply(label: str) -> str:
    return _call("summarize_and_memorize", {"summary": SUMMARY, "memorize": [
        {"information_id": label, "is_useful": True, "priority_score": 5}]})


def answer_reply(answer: str, parents: list[str]) -> str:
    return _call("add_answer_node", {"answer": answer, "parent_ids": parents})


def random_plan(question_id: str, seed: int, second_search: float = 0.4) -> list[str]:
    """The replies of one scripted episode: search, memorise, [search, memorise,] answer (see module doc)."""
    rng = random.Random(seed)
    words = rng.sample(QUERY_WORDS[question_id], 2)
    plan = [search_reply("s1", words[0], ["root"]), memorize_reply("Picture 1")]
    nodes = ["s1"]
    if rng.random() < second_search:
        plan += [search_reply("s2", words[1], [rng.choice(["root", "s1"])]), memorize_reply("Picture 2")]
        nodes.append("s2")
    plan.append(answer_reply(rng.choice(ANSWERS), [rng.choice(nodes)]))
    return plan


def _corpus() -> list[str]:
    texts = list(PROMPTS.values())
    texts += [PROMPTS["question"].format(question=q["question"]) for q in QUESTIONS]
    for word in ALL_QUERY_WORDS:
        for node in ("s1", "s2"):
            texts.append(search_reply(node, word, ["root"]))
            texts.append(search_reply(node, word, ["s1"]))
            texts.append(PROMPTS["results_header"].format(node_id=node, query=word))
            texts.append(json.dumps([{"id": node, "parent_ids": ["root"], "query": word, "summary": SUMMARY,
                                      "memory": ["Picture 1"]}], separators=(",", ":")))
    texts += [memorize_reply(f"Picture {i}") for i in (1, 2)]
    texts += [answer_reply(a, [n]) for a in ANSWERS for n in ("s1", "s2")]
    texts += [f"Picture {i}: document {p.rsplit('_', 1)[0]}, page {p.rsplit('_', 1)[1]} ({p})" for p in PAGE_IDS
              for i in (1, 2)]
    texts += [f"s1 Picture 1: document {p.rsplit('_', 1)[0]} page {p.rsplit('_', 1)[1]}" for p in PAGE_IDS]
    texts += ['{"id":"root","content":"Initial query from user: ' + q["question"] + '"}' for q in QUESTIONS]
    return texts * 20


def build_vimrag_tokenizer(vocab_size: int = 900):
    """The task tokenizer (`testkit.tiny_task`'s recipe) trained on VimRAG's tool calls and graph text."""
    from testkit.tiny_task import build_task_tokenizer

    return build_task_tokenizer(vocab_size, corpus=_corpus())


def build_vimrag_task_model(path: Any, seed: int = 0):
    """A small random Qwen2.5-VL with the VimRAG task tokenizer (`testkit.tiny_task.build_task_model`)."""
    from testkit.tiny_task import build_task_model

    return build_task_model(path, seed=seed, tokenizer=build_vimrag_tokenizer())


class ScriptedGenerate:
    """A `GenerateFn` that emits a fixed plan of reply texts as token ids (end-of-turn appended), logprobs 0.

    Drives `TurnRecordingPolicy` for the SFT warm start: the steps are recorded exactly as in RL.
    """

    def __init__(self, tokenizer: Any, plan: list[str]):
        self.tokenizer, self.plan, self.calls = tokenizer, list(plan), 0
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    async def __call__(self, prompt_ids: list[int], sampling: SamplingParams, images: list[Any]) -> GenerateOutput:
        text = self.plan[min(self.calls, len(self.plan) - 1)]
        self.calls += 1
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) + [self.end]
        return GenerateOutput(token_ids=ids, logprobs=[0.0] * len(ids), finish_reason="stop")


async def collect_scripted_trajectories(search_url: str, processor: Any, episodes_per_question: int,
                                        seed: int = 0) -> list[Any]:
    """Run `random_plan` episodes through `run_vim_episode` (the real VimEpisode and search server)."""
    import asyncio

    from search_engine.client import SearchClient
    from vimrag.config import VimRAGConfig
    from vimrag.prompts import VimPrompts
    from vimrag.rollout import run_vim_episode
    from vrag_rl.training.rewards import RewardReference
    from vrag_rl.training.rollout.task import RolloutTask

    config, prompts = VimRAGConfig(**AGENT), VimPrompts(**PROMPTS)
    search = SearchClient(search_url)

    async def one(question: dict[str, Any], i: int):
        generate = ScriptedGenerate(processor.tokenizer, random_plan(question["id"], seed * 7919 + i))
        task = RolloutTask(question["id"], question["question"],
                           RewardReference(question["answer"], list(question["reference_pages"])))
        return await run_vim_episode(task, i, processor, generate, search, config, prompts, seed)

    try:
        return list(await asyncio.gather(*(one(q, n * len(QUESTIONS) + k) for k, q in enumerate(QUESTIONS)
                                           for n in range(episodes_per_question))))
    finally:
        await search.aclose()
