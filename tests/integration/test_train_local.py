"""The local trainer end to end, over the real search server on loopback and a tiny task model.

- SFT data: episodes of the agent loop → messages+images JSON (LLaMA-Factory / TRL format) → the same
  token record as an RL rollout (ids == the processor's tokenisation, mask 1 == assistant turns);
- checkpoints resume exactly (weights, optimiser, RNG, step: the same metrics and weights as a
  straight run);
- learning: a shortened `scripts/train_tiny.py` makes the policy's turns well-formed, the part of the reward a
  tiny policy learns in 20 steps (slow).
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from testkit.tiny_task import build_task_model, collect_random_episodes, write_tasks
from vrag_rl.agent.policies.token_recorder import _template_form
from vrag_rl.training.train.config import load_config
from vrag_rl.training.train.sft import _processor_messages, load_sft_file, record_to_sample, write_sft_file

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def task_model(tmp_path_factory) -> Path:
    return build_task_model(tmp_path_factory.mktemp("task") / "model", seed=0)


def _config(tmp_path: Path, model: Path, search_url: str, **overrides):
    return load_config(REPO / "configs" / "local" / "tiny_grpo.yaml", model=str(model),
                       tasks=str(write_tasks(tmp_path / "tasks.json")), output_dir=str(tmp_path / "run"),
                       search_url=search_url, **overrides)


def test_sft_file_round_trip(text_search_server, task_model, tmp_path):
    from transformers import AutoProcessor

    results = asyncio.run(collect_random_episodes(text_search_server.url, 1, seed=3))
    assert all(r.status == "answered" for r in results) and len(results) == 4
    path = tmp_path / "sft" / "data.json"
    assert write_sft_file(results, path) == 4
    records = load_sft_file(path)
    record = max(records, key=lambda r: len(r["images"]))
    assert record["messages"][0]["role"] == "system" and record["images"][0].endswith(".png")
    marks = sum(m["content"].count("<image>") for m in record["messages"])
    assert marks == len(record["images"]) >= 1
    processor = AutoProcessor.from_pretrained(task_model)
    sample = record_to_sample(record, processor, path.parent)
    messages = _processor_messages(record, path.parent)
    text = processor.apply_chat_template(_template_form(messages), tokenize=False)
    whole = processor(text=[text], images=sample.images)["input_ids"][0]
    assert sample.prompt_ids + sample.response_ids == list(whole[:-1])  # all but the final "\n"
    assistant = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
    expected = sum(len(processor.tokenizer(a, add_special_tokens=False)["input_ids"]) + 1 for a in assistant)
    assert sum(sample.response_mask) == expected  # the model's turns (+ their <|im_end|>) and nothing else
    # a broken file is refused with every problem named
    bad = json.loads(path.read_text())
    bad[0]["images"] = bad[0]["images"] + ["missing.png"]
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="record 0"):
        load_sft_file(path)


def test_checkpoint_resumes_exactly(text_search_server, task_model, tmp_path):
    from vrag_rl.training.train.trainer import LocalTrainer

    common = dict(questions_per_step=2, rollouts_per_question=2, checkpoint_every=1, kl_coef=0.01)
    straight = LocalTrainer(_config(tmp_path / "a", task_model, text_search_server.url, steps=2, **common),
                            progress=False)
    straight_metrics = straight.train()
    first = LocalTrainer(_config(tmp_path / "b", task_model, text_search_server.url, steps=1, **common),
                         progress=False)
    first.train()
    resumed = LocalTrainer(_config(tmp_path / "b", task_model, text_search_server.url, steps=2, **common),
                           progress=False)
    resumed_metrics = resumed.train()
    assert resumed.step == 2 and len(resumed_metrics) == 2

    def comparable(record):
        return {k: v for k, v in record.items() if not k.endswith("_s")}

    assert [comparable(r) for r in resumed_metrics] == [comparable(r) for r in straight_metrics]
    for (name, a), (_, b) in zip(straight.model.named_parameters(), resumed.model.named_parameters()):
        assert torch.equal(a, b), name
    assert straight_metrics[0]["images"] >= 0 and "kl" in straight_metrics[0]



def test_lora_step_trains_adapters_only(text_search_server, task_model, tmp_path):
    """LoRA (peft): only adapter weights move; the reference for KL is the base model (adapters disabled)."""
    from vrag_rl.training.train.trainer import LocalTrainer

    config = _config(tmp_path, task_model, text_search_server.url, steps=1, questions_per_step=1,
                     rollouts_per_question=2, kl_coef=0.01, lr=0.01, algorithm="ggpo",
                     lora={"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]})
    trainer = LocalTrainer(config, progress=False)
    names = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert names and all("lora_" in n for n in names)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    record = trainer.train()[0]
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed <= names
    assert record["algorithm"] == "ggpo" and record["episodes"] == 2 and record["kl"] >= 0.0
    assert (tmp_path / "run" / "checkpoints").is_dir() and trainer.latest_checkpoint() is not None


@pytest.mark.slow
@pytest.mark.timeout(1200)  # ~190 s alone, 425-600 s beside the CPU smoke on two cores: over the suite's 600 s once
def test_tiny_training_learns_well_formed_turns(tmp_path):
    """A shortened `scripts/train_tiny.py` (its own index, search server, SFT warm start): RL moves the policy
    towards what the reward pays for — well-formed turns — measured on fixed prompts before and after.

    Why this and not "the mean reward rises" (measured 2026-11-25; it replaced that test, quarantined then):
    - With the script's default 12 SFT epochs, this install's SFT already writes well-formed replies 95 % of
      the time (probe `valid`; 96 % of the first RL step's episodes). Fixing the format was most of what the
      first 30–40 RL steps gained in the install docs/training.md's run was made in (format 0.78 → 0.94, reward
      0.23 → 0.31), so comparing reward windows had nothing left to see here: the seed-0 run started at 0.32
      and stayed flat for 60 steps. The rest of the reward needs the policy to tell the four questions apart
      (which word to search, which answer to give); after SFT on random choices it does not (keyword share
      ≈ 1/12 of the query words, answer share ≈ 1/4, probe before and after) and 20–30 RL steps do not teach it:
      those shares random-walk (one answer takes over, another vanishes), so the reward's largest term is noise
      and its windows compare by coin flip (seed 1, 8 SFT epochs: format 0.56 → 0.75 but reward 0.16 → 0.16).
    - So the warm start is cut to 8 epochs, which leaves the format to learn, and the first assertion checks
      that it did leave it: if a dependency or code change moves how fast SFT learns, this fails by name
      instead of comparing two flat curves; then pick `--sft-epochs` again from the probe. The SFT data are
      scripted episodes against the real search engine, so a ranking change that breaks the task's premise
      (`tests/integration/test_tiny_task.py`) moves this too: with 'share' ranking the bicycle page first
      (2026-11-27, fixed by choosing other query words) 8 epochs left the protocol unlearned (probe 0.09) and
      10 left 0.53 or, words fixed, 0.81.
    - The probe samples 16 replies per prompt with the same seeds before and after (paired), at the first
      turn and after the keyword's page, and parses them with the agent loop's parser. Measured after 20
      steps (seed 0, 8 epochs, 2026-11-27): probe 0.64 → 0.92; the rollouts' format rate, first vs last 10
      steps, 0.63 → 0.81 (reward 0.117 → 0.161); 2026-11-25: 0.65 → 0.94 (seed 0), 0.68 → 0.92 (seed 1).
      The margins below are about half of those.
    """
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "train_tiny.py"), "--out", str(tmp_path / "tiny"),
                           "--steps", "20", "--algos", "grpo", "--sft-episodes", "12", "--sft-epochs", "8",
                           "--no-progress"], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((tmp_path / "tiny" / "summary.json").read_text())
    records = [json.loads(line) for line in (tmp_path / "tiny" / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 20 and all(r["images"] > 0 for r in records[-3:])  # pages really in the episodes
    before, after = summary["probe_sft"], summary["grpo"]["probe"]
    assert 0.2 < before["valid"] < 0.8, f"the SFT start leaves no format to learn (or never learned it): {before}"
    assert after["valid"] > before["valid"] + 0.12, (before, after)
    first = sum(r["format"] for r in records[:10]) / 10
    last = sum(r["format"] for r in records[-10:]) / 10
    assert last > first + 0.08, [round(r["format"], 2) for r in records]
    assert Path(summary["plot"]).stat().st_size > 1000
