"""The tiny tasks' index and SFT warm starts, shared by `scripts/train_tiny.py` and the CPU smoke of verl's trainer.

Why a module: a tiny random model never writes a well-formed turn, so every sample of a group gets the same reward,
GRPO's advantages are all zero and no weight moves. The warm start (SFT on random well-formed episodes, at chance
on the task: see `testkit.tiny_task`) makes rewards differ within a group, which is what a training step needs.
Both agents' warm starts run the project's real search server, agent loop and local trainer.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def build_tiny_index(out: Path) -> Path:
    """The sample corpus under `out/corpus`, ingested into `out/index` (MiniLM + BM25, no visual model); reused."""
    from search_engine.ingest import Ingestor
    from search_engine.sample_corpus import generate_sample_corpus

    index = out / "index"
    if not (index / "manifest.json").exists():
        corpus = generate_sample_corpus(out / "corpus", overwrite=True)
        report = Ingestor(index, visual_model=None, text_model="minilm", progress=False).add(corpus.files)
        if report.failed:
            raise RuntimeError(f"ingestion failed: {report.failed}")
    return index


def local_config(name: str, **overrides: Any):
    """`configs/local/<name>.yaml` with `overrides` (the tiny runs' configs)."""
    from vrag_rl.training.train.config import load_config

    return load_config(REPO / "configs" / "local" / f"{name}.yaml", **overrides)


def sft_vrag(out: Path, search_url: str, seed: int = 0, episodes_per_question: int = 16,
             epochs: int | None = None, progress: bool = False) -> tuple[Path, dict]:
    """The VRAG tiny model after its SFT warm start (`out/model_sft`, reused when present) and the SFT's numbers."""
    from testkit.tiny_task import build_task_model, collect_random_episodes, write_tasks
    from vrag_rl.training.rewards import format_score
    from vrag_rl.training.train.sft import write_sft_file

    sft_model = out / "model_sft"
    stats: dict = {}
    if (sft_model / "config.json").exists():
        return sft_model, stats
    tasks = write_tasks(out / "tasks.json")
    model = build_task_model(out / "model_init", seed=seed)
    results = asyncio.run(collect_random_episodes(search_url, episodes_per_question, seed))
    good = [r for r in results if r.status == "answered" and format_score(r.turn_records) == 1.0]
    sft_path = out / "sft" / "sft.json"
    write_sft_file(good, sft_path)
    stats.update(episodes=len(results), kept=len(good))
    config = local_config("tiny_grpo", model=str(model), tasks=str(tasks), output_dir=str(out / "sft_run"),
                          search_url=search_url, steps=0, seed=seed)
    config.sft.data = str(sft_path)
    if epochs:
        config.sft.epochs = epochs
    trainer = config.plugin().load("trainer")(config, progress=progress)
    history = trainer.run_sft()
    trainer.model.save_pretrained(sft_model)
    trainer.processor.save_pretrained(sft_model)
    stats.update(loss_first=history[0]["loss"], loss_last=history[-1]["loss"])
    return sft_model, stats


def sft_vimrag(out: Path, search_url: str, seed: int = 0, episodes_per_question: int = 16,
               epochs: int | None = None, progress: bool = False) -> tuple[Path, dict]:
    """The VimRAG tiny model after its scripted SFT warm start (`out/model_sft`, reused) and the SFT's numbers."""
    from testkit.tiny_task import write_tasks
    from testkit.tiny_vimrag_task import build_vimrag_task_model, collect_scripted_trajectories

    sft_model = out / "model_sft"
    stats: dict = {}
    if (sft_model / "config.json").exists():
        return sft_model, stats
    tasks = write_tasks(out / "tasks.json")
    model = build_vimrag_task_model(out / "model_init", seed=seed)
    config = local_config("tiny_vimrag_grpo", model=str(model), tasks=str(tasks), search_url=search_url, seed=seed,
                          output_dir=str(out / "sft_run"), steps=0)
    trainer = config.plugin().load("trainer")(config, progress=progress)
    scripted = asyncio.run(collect_scripted_trajectories(search_url, trainer.processor, episodes_per_question, seed))
    turns = [s for t in scripted if t.result.status == "answered" for s in t.turns]
    history = trainer.sft_on_turns(turns, epochs=epochs or 12, lr=0.005, batch_size=8)
    trainer.model.save_pretrained(sft_model)
    trainer.processor.save_pretrained(sft_model)
    stats.update(episodes=len(scripted), turns=len(turns), loss_first=history[0]["loss"],
                 loss_last=history[-1]["loss"])
    return sft_model, stats
