"""A small synthetic RL task over the sample corpus that a tiny policy can learn on 2 CPU cores in minutes.

Four questions of the generated sample corpus (`search_engine.sample_corpus`). Each has three of its
own words a searcher might pick (`QUERY_WORDS`); only one of them — the keyword — makes the real
search engine (MiniLM + BM25 text channels) rank the question's page first. Reward comes from
searching with the right word (retrieval NDCG: the right page shown first), answering right
(outcome, exact match against the reference answer) and writing well-formed turns (format).

What a tiny random-vision model can and cannot learn here, honestly: its vision tower is random, so
it cannot read the page pixels (they are in every forward pass, but carry no usable signal); what it
can learn is which keyword to search for each question and which answer to give — from the question
and from the page id printed in the observation ("... page acme_annual_report_2023_2."). The SFT
warm start teaches only the protocol: its trajectories come from `RandomTaskPolicy`, which searches
with a word of the question picked uniformly from its three and answers with one of the four answers
picked uniformly (kept when well-formed, right or wrong), so after SFT the policy searches and answers
in format but at chance (≈ 1/3 right word, ≈ 1/4 right answer); RL must find the right ones.

The tokenizer is trained on the task's own text (so words are single tokens and turns are short),
with the Qwen special tokens and chat template of `testkit.tiny_models`; the model is the real
Qwen2.5-VL class from a small config.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from testkit.tiny_models import CHAT_TEMPLATE, SPECIAL_TOKENS, _image_processor, _video_processor, qwen25vl_config
from vrag_rl.agent.policy import PolicyReply, SamplingParams

QUESTIONS = [
    {"id": "revenue", "question": "What was Acme Robotics' total revenue in 2023?", "answer": "$341 million",
     "reference_pages": ["acme_annual_report_2023_2"], "keyword": "total"},
    {"id": "employees", "question": "How many employees did Acme Robotics have at the end of 2023?",
     "answer": "1,870", "reference_pages": ["acme_annual_report_2023_4"], "keyword": "employees"},
    {"id": "bicycle", "question": "What share of commuters ride the bicycle according to the Metro Travel Survey?",
     "answer": "12%", "reference_pages": ["metro_travel_survey_2024_3"], "keyword": "bicycle"},
    {"id": "kestrel", "question": "How much power does the Kestrel Ridge solar plant produce?", "answer": "410 MW",
     "reference_pages": ["solar_energy_brief_3"], "keyword": "Kestrel"},
]
# Words of each question a searcher might pick; only the keyword makes the search engine rank the
# question's page first (checked against the real MiniLM + BM25 index: the others rank another page first).
# A word of the document's name ("Robotics") is on every page of its document for BM25 (the document's
# head, `search_engine.lexical.with_document_head`), so it ranks that document's shortest page first: for
# "employees" (whose page is the report's shortest) the decoy is another word of its question. "revenue"
# alone ranks page 3 ("Revenue by region", a short page whose title is the word) above page 2, the table and
# the sentence "Total revenue in 2023 was $341 million": "total" is the word only page 2 says.
QUERY_WORDS = {"revenue": ["Acme", "Robotics", "total"], "employees": ["many", "2023", "employees"],
               "bicycle": ["Travel", "Survey", "bicycle"], "kestrel": ["power", "solar", "Kestrel"]}
KEYWORDS = [q["keyword"] for q in QUESTIONS]
ALL_QUERY_WORDS = sorted({w for words in QUERY_WORDS.values() for w in words})
ANSWERS = [q["answer"] for q in QUESTIONS]

PROMPTS: dict[str, Any] = {
    "system": "Search for the keyword, look at the page, then answer.",
    "question": "Question: {question}",
    "search_result": "Result for {query}: page {page_id}.",
    "no_new_results": "No new page for {query}.",
    "crop": "Zoom {bbox}.",
    "invalid_action": "Invalid: {reason}. Write <search>, <bbox> or <answer>.",
    "force_answer": "Answer now.",
}
AGENT: dict[str, Any] = {
    "max_turns": 3, "max_tokens": 24, "max_episode_tokens": 96, "temperature": 1.0, "search_top_k": 3,
    "pages_per_search": 1, "min_pixels": 4 * 28 * 28, "max_pixels": 8 * 28 * 28, "max_invalid_actions": 1,
}
PAGE_IDS = [f"acme_annual_report_2023_{i}" for i in range(1, 5)] + \
    [f"metro_travel_survey_2024_{i}" for i in range(1, 5)] + \
    [f"solar_energy_brief_{i}" for i in range(1, 4)] + ["board_memo_scan_1"]


def search_reply(keyword: str) -> str:
    return f"<think>search</think><search>{keyword}</search>"


def answer_reply(answer: str) -> str:
    return f"<think>answer</think><answer>{answer}</answer>"


def _corpus() -> list[str]:
    texts = [PROMPTS["system"], PROMPTS["force_answer"], "Invalid: . Write <search>, <bbox> or <answer>."]
    texts += [PROMPTS["question"].format(question=q["question"]) for q in QUESTIONS]
    texts += [search_reply(k) for k in ALL_QUERY_WORDS] + [answer_reply(a) for a in ANSWERS]
    texts += [PROMPTS["search_result"].format(query=k, page_id=p) for k in ALL_QUERY_WORDS for p in PAGE_IDS]
    texts += [PROMPTS["no_new_results"].format(query=k) for k in ALL_QUERY_WORDS]
    return texts * 20


def build_task_tokenizer(vocab_size: int = 700, corpus: list[str] | None = None):
    """A byte-level BPE tokenizer trained offline on the task's texts (`corpus`, default the VRAG task's),
    with the Qwen special tokens and chat template, so prompts and replies are a few tokens each."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_corpus() if corpus is None else corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token=None)
    fast.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[1:]})
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_task_model(path: str | Path, seed: int = 0, hidden_size: int = 96, layers: int = 2,
                     tokenizer: Any = None) -> Path:
    """Save a small random Qwen2.5-VL with the task tokenizer (loadable by AutoModelForImageTextToText).

    `hidden_size` must be a multiple of 32 (16-wide heads, 2 key/value heads); `tokenizer` replaces the VRAG
    task's (the VimRAG tiny task trains its own on its tool-call text: `testkit.tiny_vimrag_task`).
    """
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor

    path = Path(path)
    torch.manual_seed(seed)
    tokenizer = tokenizer if tokenizer is not None else build_task_tokenizer()
    config = qwen25vl_config(tokenizer)
    config.text_config.hidden_size = hidden_size
    config.text_config.intermediate_size = 2 * hidden_size
    config.text_config.num_hidden_layers = layers
    config.text_config.num_attention_heads = hidden_size // 16  # head_dim 16: the mrope sections sum to 8
    config.text_config.head_dim = 16
    config.vision_config.out_hidden_size = hidden_size
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    processor = Qwen2_5_VLProcessor(image_processor=_image_processor(4 * 28 * 28, 512 * 28 * 28), tokenizer=tokenizer,
                                    video_processor=_video_processor(), chat_template=CHAT_TEMPLATE)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def write_tasks(path: str | Path) -> Path:
    """The task file the trainer reads (`vrag_rl.training.train.data`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{k: q[k] for k in ("id", "question", "answer", "reference_pages")}
                                for q in QUESTIONS], indent=1))
    return path


class RandomTaskPolicy:
    """A scripted, always well-formed policy: 1–2 searches with random words of the question, a random answer.

    The source of the SFT warm-start trajectories: it teaches the protocol, not the task.
    """

    def __init__(self, question_id: str, seed: int, second_search: float = 0.3):
        rng = random.Random(seed)
        words = rng.sample(QUERY_WORDS[question_id], 2)
        self.plan = [search_reply(words[0])]
        if rng.random() < second_search:
            self.plan.append(search_reply(words[1]))
        self.plan.append(answer_reply(rng.choice(ANSWERS)))

    async def complete(self, messages: list[dict[str, Any]], sampling: SamplingParams) -> PolicyReply:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return PolicyReply(text=self.plan[min(turn, len(self.plan) - 1)], finish_reason="stop")

    async def aclose(self) -> None:
        return None


async def collect_random_episodes(search_url: str, episodes_per_question: int, seed: int = 0) -> list[Any]:
    """Run `RandomTaskPolicy` through the real agent loop and search server; returns the EpisodeResults."""
    import asyncio

    from search_engine.client import SearchClient
    from vrag_rl.agent.plugins import agent_plugin

    vrag = agent_plugin("vrag")  # the VRAG agent's episode, settings and words, by name
    AgentConfig, Episode, Prompts = vrag.config_type, vrag.load("episode"), vrag.prompts_type
    config, prompts = AgentConfig(**AGENT), Prompts(**PROMPTS)
    search = SearchClient(search_url)

    async def one(question: dict[str, Any], i: int):
        policy = RandomTaskPolicy(question["id"], seed * 7919 + i)
        episode = Episode(question["question"], config, prompts, policy, search, episode_id=f"{question['id']}-{i}")
        async for _ in episode.run():
            pass
        return episode.result()

    try:
        return list(await asyncio.gather(*(one(q, n * len(QUESTIONS) + k) for k, q in enumerate(QUESTIONS)
                                           for n in range(episodes_per_question))))
    finally:
        await search.aclose()
