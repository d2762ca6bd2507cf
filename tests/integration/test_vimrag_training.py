"""VimRAG as a rollout environment for the local trainer, with the budgets held.

Real: the demo's `VimEpisode` over the real search API (sample corpus, MiniLM + BM25) driven by
`TurnRecordingPolicy` (`vimrag.rollout`); the tiny Qwen2.5-VL's processor and model; the
trainer's training forward (`vrag_rl.training.train.forward.response_logprobs`) and `VimRAGTrainer`'s RL step.
Double: the generate function (`TeacherForcedGenerate`): a tiny random model cannot build a memory graph, so it
emits a scripted VimRAG reply chosen from what the prompt shows, and computes that reply's logprobs with the
tiny model on exactly the ids and images it was given — the training forward must reproduce them, which holds
only if the trainer sees the same ids, the same images and the same resize as the model did.
"""
from __future__ import annotations

import asyncio
import json

import pytest
import torch

from search_engine.client import SearchClient
from testkit.tiny_task import QUESTIONS, write_tasks
from vimrag.config import VimRAGConfig
from vimrag.energy import EnergyConfig
from vimrag.prompts import VimPrompts
from vimrag.rollout import energy_for_prompt_length, run_vim_episode
from vrag_rl.agent.policies.local_transformers import image_token_id, vision_inputs
from vrag_rl.agent.policies.token_recorder import GenerateOutput
from vrag_rl.training.algos.settings import AlgorithmSettings
from vrag_rl.training.rewards import RewardReference
from vrag_rl.training.rollout.task import RolloutTask
from vrag_rl.training.train.forward import response_logprobs

REVENUE = QUESTIONS[0]
QUERY = "Acme Robotics total revenue 2023"  # ranks the reference page first (as in test_verl_agent_loop)


def call(name: str, arguments: dict) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


class TeacherForcedGenerate:
    """Scripted replies by what the prompt shows; logprobs from the tiny model on exactly (ids, images) given.

    Episode plan: search s1 (it finds the reference page), memorise, search s2 (a dead end), memorise, answer built
    on s1 — the right answer when the step's seed is even, a wrong one otherwise (so a group has both outcomes).
    """

    def __init__(self, model, processor):
        self.model, self.processor, self.tok = model, processor, processor.tokenizer
        self.calls: list[dict] = []

    def reply(self, prompt: str, seed: int | None) -> str:
        if "<tool_response>" in prompt:
            label = "Picture 2" if '"id":"s2"' in prompt else "Picture 1"
            return call("summarize_and_memorize", {"summary": "a page", "memorize": [
                {"information_id": label, "is_useful": True, "priority_score": 5}]})
        if '"id":"s2"' in prompt:
            answer = REVENUE["answer"] if (seed or 0) % 2 == 0 else "12%"
            return call("add_answer_node", {"answer": answer, "parent_ids": ["s1"]})
        if '"id":"s1"' in prompt:
            return call("add_search_node", {"id": "s2", "query": "bicycle commuters", "parent_ids": ["root"]})
        return call("add_search_node", {"id": "s1", "query": QUERY, "parent_ids": ["root"]})

    async def __call__(self, prompt_ids, sampling, images) -> GenerateOutput:
        prompt = self.tok.decode(prompt_ids)
        ids = self.tok(self.reply(prompt, sampling.seed), add_special_tokens=False)["input_ids"]
        ids = ids + [self.tok.convert_tokens_to_ids("<|im_end|>")]
        sequence = torch.tensor([list(prompt_ids) + ids])
        with torch.no_grad():
            logits = self.model(input_ids=sequence, attention_mask=torch.ones_like(sequence),
                                **vision_inputs(self.processor, list(images))).logits[0].float()
        logprobs = torch.log_softmax(logits[len(prompt_ids) - 1:-1], -1).gather(-1, torch.tensor(ids)[:, None])
        self.calls.append({"prompt_len": len(prompt_ids), "images": [i.size for i in images]})
        return GenerateOutput(token_ids=ids, logprobs=logprobs.squeeze(-1).tolist(), finish_reason="stop")


@pytest.fixture(scope="module")
def tiny(tiny_qwen25vl_dir):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    return AutoModelForImageTextToText.from_pretrained(tiny_qwen25vl_dir).eval(), \
        AutoProcessor.from_pretrained(tiny_qwen25vl_dir)


CONFIG = VimRAGConfig(max_turns=6, max_tokens=128, search_top_k=1, max_searches_per_turn=1, min_pixels=3136,
                      observation_max_pixels=50176,
                      energy=EnergyConfig(memory_top_k=2, total_pixels=100352, max_pixels_image=50176, min_pixels=3136))


def _episode(tiny, url, config, max_prompt_length=None, seed=0):
    model, processor = tiny
    generate = TeacherForcedGenerate(model, processor)
    task = RolloutTask("revenue", REVENUE["question"], RewardReference(REVENUE["answer"], REVENUE["reference_pages"]))

    async def run():
        search = SearchClient(url)
        try:
            return await run_vim_episode(task, 0, processor, generate, search, config, VimPrompts(), seed,
                                         max_prompt_length=max_prompt_length)
        finally:
            await search.aclose()

    return asyncio.run(run()), generate


def test_each_step_is_a_sample_trained_on_exactly_what_the_model_saw(tiny, text_search_server):
    model, processor = tiny
    trajectory, generate = _episode(tiny, text_search_server.url, CONFIG)
    assert trajectory.result.status == "answered", trajectory.result.error
    assert [s.turn for s in trajectory.turns] == [0, 1, 2, 3, 4]
    assert [s.node_ids for s in trajectory.turns] == [("s1",), ("s1",), ("s2",), ("s2",), ("answer",)]
    assert [len(s.images) for s in trajectory.turns] == [0, 1, 1, 2, 2]  # memory images + the step's observation
    assert [[i.size for i in s.images] for s in trajectory.turns] == [c["images"] for c in generate.calls]
    assert all(s.group_id == "revenue" and s.result is trajectory.result for s in trajectory.turns)
    for turn in trajectory.turns:  # the training forward reproduces the sampling logprobs: same ids, same pixels
        trained, _ = response_logprobs(model, processor, turn)
        assert trained[0].tolist() == pytest.approx(turn.response_logprobs, abs=1e-4)
    # GGPO on the memory graph: the dead end s2 (steps 2, 3) dropped when correct, s1 spared when wrong
    settings = AlgorithmSettings("ggpo")
    assert trajectory.pruned_turns(settings, 1.0, REVENUE["reference_pages"]) == [2, 3]
    assert trajectory.pruned_turns(settings, 0.0, REVENUE["reference_pages"]) == [0, 1]
    assert trajectory.pruned_turns(AlgorithmSettings("grpo"), 1.0, REVENUE["reference_pages"]) == []
    keys = trajectory.state_keys()
    assert trajectory.result.graph.nodes["s1"].retrieved_ids == list(REVENUE["reference_pages"])
    assert keys[0] == ((), frozenset()) and keys[2] == ((QUERY.lower(),), frozenset(REVENUE["reference_pages"]))


def test_the_energy_budget_decides_which_memory_images_fit_the_prompt_length(tiny, text_search_server):
    full, _ = _episode(tiny, text_search_server.url, CONFIG)
    image_token = image_token_id(tiny[1])
    text_tokens = max(len(s.prompt_ids) - s.prompt_ids.count(image_token) for s in full.turns)
    limit = text_tokens + 64 + 20  # text, one observation (64 tokens), 20 tokens of memory images
    assert max(len(s.prompt_ids) for s in full.turns) > limit  # the unconstrained run would not fit
    fitted = energy_for_prompt_length(CONFIG, limit, text_tokens)
    assert fitted.energy.total_pixels < CONFIG.energy.total_pixels
    budgeted, _ = _episode(tiny, text_search_server.url, fitted, max_prompt_length=limit)
    assert budgeted.result.status == "answered", budgeted.result.error
    assert all(len(s.prompt_ids) <= limit for s in budgeted.turns)
    last_full, last = full.turns[-1], budgeted.turns[-1]
    pixels = [sum(i.width * i.height for i in s.images) for s in (last_full, last)]
    assert pixels[1] < pixels[0]  # the memory shown at the answer step was cut by the energy allocation
    # without the fitted buffer the same limit ends the episode explicitly, before the oversized call
    failed, generate = _episode(tiny, text_search_server.url, CONFIG, max_prompt_length=limit)
    assert failed.result.status == "failed" and "prompt length" in failed.result.error
    assert all(c["prompt_len"] <= limit for c in generate.calls)
    with pytest.raises(ValueError, match="cannot hold"):
        energy_for_prompt_length(CONFIG, 100, 95)


def test_vimrag_trainer_step_trains_every_step_with_its_trajectorys_advantage(tiny, tiny_qwen25vl_dir,
                                                                             text_search_server, tmp_path):
    """One RL step of `VimRAGTrainer` (GGPO): samples are steps; advantages are per trajectory; μ_t drops steps."""
    from pathlib import Path

    from vimrag.trainer import VimRAGTrainer
    from vrag_rl.training.train.config import load_config

    config = load_config(Path(__file__).resolve().parents[2] / "configs" / "local" / "tiny_vimrag_ggpo.yaml",
                         model=str(tiny_qwen25vl_dir), tasks=str(write_tasks(tmp_path / "tasks.json")),
                         output_dir=str(tmp_path / "run"), search_url=text_search_server.url, steps=1,
                         questions_per_step=1, rollouts_per_question=4, kl_coef=0.0, ppo_epochs=1,
                         # the test tokenizer is not the task's: longer prompts
                         agent_training={"max_prompt_length": 4096},
                         agent={**load_config(Path(__file__).resolve().parents[2] / "configs" / "local"
                                              / "tiny_vimrag_ggpo.yaml", model="m", tasks="t", output_dir="o",
                                              search_url="s").agent, "max_tokens": 128, "max_episode_tokens": None,
                                "max_turns": 6})
    trainer = VimRAGTrainer(config, progress=False)
    trainer.tasks = [t for t in trainer.tasks if t.id == "revenue"]
    trainer.generate = TeacherForcedGenerate(trainer.model, trainer.processor)
    trajectories, rewards = asyncio.run(trainer._rollouts(0))
    assert {t.result.status for t in trajectories} == {"answered"}, [t.result.error for t in trajectories]
    outcomes = [r.outcome for r in rewards]
    assert 0.0 in outcomes and 1.0 in outcomes  # both outcomes in the group
    samples, advantages, masks, counts = trainer._training_samples(trajectories, rewards)
    assert len(samples) == sum(len(t.turns) for t in trajectories) == 20
    per_trajectory = advantages.view(4, 5)
    assert torch.allclose(per_trajectory, per_trajectory[:, :1].expand(4, 5))  # one advantage per trajectory
    assert counts.pruned == 8  # two steps of each trajectory: s2 when right, s1 when wrong (R = r here: no gating)
    record = trainer.rl_step()
    assert record["episodes"] == 4 and record["turns"] == 5.0 and record["pruned_turns"] == pytest.approx(0.4)
    assert record["logprob_gap"] < 1e-3  # the trainer's forward saw what the model saw


@pytest.mark.slow
def test_train_tiny_runs_the_vimrag_agent_with_the_three_estimators(tmp_path):
    """`scripts/train_tiny.py --agent vimrag` as a user runs it (shortened): SFT on scripted steps, then GRPO, GGPO
    and GiGPO-style from the same SFT model; the summary has each run's first/last window and the plot is drawn.
    (Whether the reward rises is measured by the full run, docs/training.md; 2 steps only show the pipeline works.)"""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "tiny_vimrag"
    proc = subprocess.run([sys.executable, str(repo / "scripts" / "train_tiny.py"), "--agent", "vimrag", "--out",
                           str(out), "--steps", "2", "--sft-episodes", "2", "--sft-epochs", "1", "--no-progress"],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["agent"] == "vimrag" and summary["sft"]["turns"] > 0
    for algo in ("grpo", "ggpo", "gigpo"):
        assert summary[algo]["steps"] == 2 and "first" in summary[algo]["reward"]
        records = [json.loads(line) for line in (out / algo / "metrics.jsonl").read_text().splitlines()]
        assert len(records) == 2 and all(r["episodes"] == 16 for r in records)
    assert (out / "curves.png").stat().st_size > 0
