"""What the tiny task policy would do on fixed prompts: its probabilities of the rewarded choices, and sampled
replies (paired seeds) for the share of well-formed ones.

Why: the rollout reward of one RL step is a mean over 24 sampled episodes; its step-to-step swing
(±0.1) is as large as what 30 steps of RL gain, so a test comparing reward windows passed or failed
with the seed, and with any dependency that changed one sampled token. The probe asks the policy
directly, on the same prompts before and after RL, how likely it is to do what the reward pays for
(`testkit.tiny_task`), at the question's first turn and at the turn after a keyword search showed
the question's page (the real page image in the forward pass):
- `well_formed`: the probability of replying with one of the task's well-formed replies (a search with
  one of its query words, an answer with one of its answers): format is 0.1 of the reward and a
  malformed episode's whole reward is 0;
- `search`: the keyword's share of the first turn's search replies (retrieval, 0.2: only the keyword
  makes the engine show the question's page first); `own_words`: the share of the question's words;
- `answer`: the reference answer's share of the answer replies (outcome, 0.7).
The prompts are agent-loop episodes of a scripted policy against the real search server, written as an
SFT file, so they are tokenised as training and rollouts tokenise them.
"""
from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import testkit.tiny_task as task
from testkit.tiny_task import QUERY_WORDS, QUESTIONS, RandomTaskPolicy, answer_reply, search_reply


class PlanPolicy(RandomTaskPolicy):
    """`RandomTaskPolicy`'s replies (its plan's turns in order), with the plan given rather than drawn."""

    def __init__(self, plan: list[str]):  # no super().__init__: it would draw a random plan
        self.plan = list(plan)


async def _keyword_episodes(search_url: str) -> list[Any]:
    """Per question, in `QUESTIONS` order: the episode that searches the keyword, then answers right."""
    from search_engine.client import SearchClient
    from vrag_rl.agent.plugins import agent_plugin

    vrag = agent_plugin("vrag")  # the VRAG agent's episode, settings and words, by name
    AgentConfig, Episode, Prompts = vrag.config_type, vrag.load("episode"), vrag.prompts_type
    config, prompts = AgentConfig(**task.AGENT), Prompts(**task.PROMPTS)
    search = SearchClient(search_url)

    async def one(question: dict[str, Any]) -> Any:
        policy = PlanPolicy([search_reply(question["keyword"]), answer_reply(question["answer"])])
        episode = Episode(question["question"], config, prompts, policy, search, episode_id=f"probe-{question['id']}")
        async for _ in episode.run():
            pass
        return episode.result()

    try:
        return [await one(q) for q in QUESTIONS]
    finally:
        await search.aclose()


def write_probe(search_url: str, path: str | Path) -> Path:
    """Write the probe's prompts (one keyword episode per question, SFT format, page images beside it)."""
    from vrag_rl.training.train.sft import write_sft_file

    results = asyncio.run(_keyword_episodes(search_url))
    for question, result in zip(QUESTIONS, results):
        shown = result.retrieved_page_ids
        if result.status != "answered" or shown[:1] != question["reference_pages"]:
            raise RuntimeError(f"probe episode for {question['id']!r}: status {result.status}, pages shown {shown} "
                               f"(the keyword must show {question['reference_pages']} first)")
    path = Path(path)
    write_sft_file(results, path)
    return path


def _with_last_reply(record: dict[str, Any], upto: int, reply: str) -> dict[str, Any]:
    """The record cut after its assistant turn number `upto` (0-based), that turn's text replaced by `reply`."""
    record = copy.deepcopy(record)
    assistant = [i for i, m in enumerate(record["messages"]) if m["role"] == "assistant"][upto]
    messages = record["messages"][:assistant + 1]
    messages[-1]["content"] = reply
    images = sum(m["content"].count("<image>") for m in messages)
    return {"messages": messages, "images": record["images"][:images]}


def _last_turn_start(response_mask: Sequence[int]) -> int:
    """Where the record's last assistant turn starts among its response tokens: after the last context
    token (mask 0), the tool results and the turns before it."""
    return max((k for k, m in enumerate(response_mask) if m == 0), default=-1) + 1


def _reply_logprobs(model: Any, processor: Any, records: list[dict[str, Any]], base: Path) -> list[float]:
    """Per record, log π(its last reply | the turns before it), the reply's closing <|im_end|> left out.

    Left out because a rollout's turn ends at its action's closing tag (the trainer's stop strings) and the
    recorder appends <|im_end|> as context (mask 0): RL never trains it, SFT does.
    """
    import torch

    from vrag_rl.training.train.forward import response_logprobs
    from vrag_rl.training.train.sft import record_to_sample

    totals = []
    with torch.no_grad():
        for i, record in enumerate(records):
            sample = record_to_sample(record, processor, base, i)
            logprobs, _ = response_logprobs(model, processor, sample)
            start = _last_turn_start(sample.response_mask)
            totals.append(float(logprobs[0, start:-1].sum()))
    return totals


def _turn_prompts(record: dict[str, Any], processor: Any, base: Path) -> list[tuple[list[int], list[Any]]]:
    """(prompt ids, images) the policy generates from at the record's first and second turn."""
    from vrag_rl.training.train.sft import record_to_sample

    prompts = []
    for turn in (0, 1):
        sample = record_to_sample(_with_last_reply(record, turn, answer_reply("x")), processor, base)
        start = _last_turn_start(sample.response_mask)
        prompts.append((sample.prompt_ids + sample.response_ids[:start], list(sample.images)))
    return prompts


def probe_choices(model: Any, processor: Any, path: str | Path, stop_strings: Sequence[str],
                  samples: int = 16) -> dict[str, Any]:
    """Per question and averaged over the four, at the first turn and at the turn after the keyword's page:

    - `valid`: the share of sampled replies that are a well-formed action (the agent loop's own parse; the
      task's temperature and the trainer's `stop_strings`, as in rollouts). What is well-formed is open-ended
      (`<search>$ MW</search>` is), so this is sampled, `samples` replies per prompt with the seeds
      0..samples-1 — the same seeds before and after training, so the comparison is paired;
    - `search`: the keyword's share of the first turn's search replies, one per query word, scored whole;
    - `own_words`: the share of the question's own three words among them (what the SFT data searched);
    - `answer`: the reference answer's share of the answer replies after the keyword's page.
    """
    import math

    from vrag_rl.agent.policies.local_transformers import LocalTransformersGenerate
    from vrag_rl.agent.policy import SamplingParams
    from vrag_rl.vrag.actions import parse_reply

    path = Path(path)
    records = json.loads(path.read_text())
    words, answers = task.ALL_QUERY_WORDS, task.ANSWERS
    generate = LocalTransformersGenerate(model, processor, str(next(model.parameters()).device),
                                         stop_strings=tuple(stop_strings))
    sampling = SamplingParams(temperature=task.AGENT["temperature"], max_tokens=task.AGENT["max_tokens"])
    tokenizer = processor.tokenizer
    was_training = model.training
    model.eval()
    try:
        per_question: dict[str, dict[str, float]] = {}
        for question, record in zip(QUESTIONS, records):
            valid = 0
            for ids, images in _turn_prompts(record, processor, path.parent):
                for seed in range(samples):
                    out = generate.generate_sync(ids, replace(sampling, seed=seed), images)
                    text = tokenizer.decode(out.token_ids, skip_special_tokens=True)
                    valid += parse_reply(text).kind != "invalid"
            first = [math.exp(lp) for lp in _reply_logprobs(
                model, processor, [_with_last_reply(record, 0, search_reply(w)) for w in words], path.parent)]
            second = [math.exp(lp) for lp in _reply_logprobs(
                model, processor, [_with_last_reply(record, 1, answer_reply(a)) for a in answers], path.parent)]
            share = {w: p / sum(first) for w, p in zip(words, first)}
            per_question[question["id"]] = {
                "valid": valid / (2 * samples),
                "search": share[question["keyword"]],
                "own_words": sum(share[w] for w in QUERY_WORDS[question["id"]]),
                "answer": second[answers.index(question["answer"])] / sum(second)}
    finally:
        model.train(was_training)
    keys = ("valid", "search", "own_words", "answer")
    means = {k: round(sum(q[k] for q in per_question.values()) / len(per_question), 4) for k in keys}
    return {**means, "questions": {q: {k: round(v, 4) for k, v in values.items()}
                                   for q, values in per_question.items()}}
