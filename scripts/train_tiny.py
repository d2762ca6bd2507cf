#!/usr/bin/env python
"""Train a tiny policy on CPU on the synthetic sample-corpus task, with GRPO and GGPO, and plot it.

What it does (every piece is the project's real code; nothing is downloaded):
1. generates the sample corpus and ingests it (MiniLM + BM25 text channels), then serves it with the
   real search API on a loopback port;
2. builds a small random Qwen2.5-VL with a task tokenizer (`testkit.tiny_task`);
3. SFT warm start: runs the random, well-formed `RandomTaskPolicy` through the agent loop, keeps the
   well-formed episodes (right or wrong), writes them as messages+images SFT JSON and trains on them
   — this teaches the protocol, at chance on the task;
4. RL from that one SFT model, once with GRPO and once with GGPO (same seed, same steps), with the
   configs `configs/local/tiny_{grpo,ggpo}.yaml` (`--algos gspo`: GGPO without its prune mask);
5. reports mean reward and answer accuracy over the first and last 10% of RL steps, and plots both
   runs to a PNG;
6. probes the policy on fixed prompts before and after RL (`testkit.tiny_probe`: the share of
   well-formed replies, sampled with the same seeds before and after, and the shares of the rewarded
   search word and answer), which the sampled reward curve, with its ±0.1 step-to-step swing, shows
   only over many steps.

    python scripts/train_tiny.py --out runs/tiny               # the full run (see docs/training.md for timings)
    python scripts/train_tiny.py --out /tmp/t --steps 12 --algos grpo   # a short run

`--agent vimrag` runs the same pipeline for the VimRAG memory-graph agent (`testkit/tiny_vimrag_task.py`,
`configs/local/tiny_vimrag_{grpo,ggpo,gspo,gigpo}.yaml`, `vimrag.trainer`): the SFT warm start is
scripted random VimRAG episodes recorded step by step, and RL compares GRPO, GGPO on the memory graph and the
GiGPO-style step credit (default `--algos grpo ggpo gigpo`).

    python scripts/train_tiny.py --agent vimrag --out runs/tiny_vimrag --steps 30
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_THREAD_LIMIT", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]

import testkit  # noqa: E402,F401  (torchvision shim before transformers)
from search_engine.infra.cli_exit import exit_status  # noqa: E402

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"],
                                    # `--algos grpo ggpo` (argparse's nargs="+", which click options lack): the
                                    # values after the first arrive as extra arguments, see `_algos`
                                    "allow_extra_args": True})


class Algo(str, Enum):
    grpo = "grpo"
    ggpo = "ggpo"
    gspo = "gspo"
    gigpo = "gigpo"


@dataclass(frozen=True)
class TinyRun:
    """The command line's settings, shared by the two agents' pipelines."""

    out: Path
    steps: int | None
    algos: list[str]
    seed: int
    sft_episodes: int
    sft_epochs: int | None
    plot: Path | None
    no_progress: bool


def write_summary(summary: dict, runs: dict, args: TinyRun, out: Path, started: float, title: str) -> dict:
    """Plot the runs' curves, add the plot and the total time to the summary, write and print it (both agents)."""
    from vrag_rl.training.train.metrics import plot_runs

    plot = plot_runs(runs, args.plot or out / "curves.png", keys=("reward", "accuracy", "retrieval", "turns"),
                     title=title)
    summary["plot"] = str(plot)
    summary["total_s"] = round(time.perf_counter() - started, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return summary


def run_config(algo: str, **overrides):
    from vrag_rl.training.train.config import load_config

    return load_config(REPO / "configs" / "local" / f"tiny_{algo}.yaml", **overrides)


def summarise(records: list[dict], fraction: float = 0.1) -> dict:
    from vrag_rl.training.train.metrics import window_means

    out: dict = {"steps": len(records)}
    for key in ("reward", "accuracy", "retrieval", "format", "answer_rate"):
        first, last = window_means(records, key, fraction)
        out[key] = {"first": round(first, 4), "last": round(last, 4)}
    return out


def run_vimrag(args: TinyRun) -> dict:
    """The VimRAG agent's tiny run: scripted SFT steps, then RL per estimator from the same SFT model."""
    from search_engine.api import create_app
    from search_engine.engine import SearchEngine
    from testkit.loopback import LoopbackServer
    from testkit.tiny_sft import build_tiny_index, sft_vimrag
    from testkit.tiny_task import write_tasks
    from vrag_rl.training.train.config import load_config

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    server = LoopbackServer(create_app(engine=SearchEngine.load(build_tiny_index(out)))).start()

    def config(algo: str, **overrides):
        return load_config(REPO / "configs" / "local" / f"tiny_vimrag_{algo}.yaml", tasks=str(tasks),
                           search_url=server.url, seed=args.seed, **overrides)

    try:
        tasks = write_tasks(out / "tasks.json")
        summary: dict = {"agent": "vimrag"}
        sft_model, sft_stats = sft_vimrag(out, server.url, seed=args.seed, episodes_per_question=args.sft_episodes,
                                          epochs=args.sft_epochs, progress=not args.no_progress)
        if sft_stats:
            summary["sft"] = sft_stats
        summary["sft_s"] = round(time.perf_counter() - started, 1)
        runs = {}
        for algo in args.algos:
            t0 = time.perf_counter()
            run = config(algo, model=str(sft_model), output_dir=str(out / algo), steps=args.steps)
            records = run.plugin().load("trainer")(run, progress=not args.no_progress).train()
            runs[algo.upper() if algo != "gigpo" else "GiGPO-style"] = records
            summary[algo] = {**summarise(records), "train_s": round(time.perf_counter() - t0, 1)}
    finally:
        server.stop()
    return write_summary(summary, runs, args, out, started,
                         "tiny Qwen2.5-VL, VimRAG memory-graph agent (CPU), after SFT warm start")


@app.command(help="\n\n".join(f"\b\n{part}" for part in (__doc__ or "").split("\n\n")))  # \b: printed as written
def train(
    ctx: typer.Context,
    out: Path = REPO / "runs" / "tiny",
    steps: Annotated[int | None, typer.Option(help="RL steps per algorithm (config: 40)")] = None,
    agent: Annotated[str, typer.Option(
        help="the agent plugin to train: vrag (the VRAG agent) or vimrag (the memory-graph agent)")] = "vrag",
    algos: Annotated[list[Algo] | None, typer.Option(
        help="estimators to run (default: grpo ggpo; --agent vimrag: grpo ggpo gigpo; either also takes gspo)")] = None,
    seed: int = 0,
    sft_episodes: Annotated[int, typer.Option(help="random episodes per question for SFT")] = 16,
    sft_epochs: int | None = None,
    plot: Annotated[Path | None, typer.Option(help="PNG path (default: OUT/curves.png)")] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress")] = False,
) -> None:
    """Build the index and the tiny model, SFT, then RL per estimator; plot and print the summary."""
    if agent not in TINY_RUNS:
        raise typer.BadParameter(f"no tiny task for agent {agent!r}; one of {', '.join(TINY_RUNS)}",
                                 param_hint="'--agent'")
    run, estimators = TINY_RUNS[agent]
    chosen = _algos(algos, ctx.args)
    unknown = [a for a in chosen if a not in estimators]
    if unknown:
        raise typer.BadParameter(f"{', '.join(unknown)}: the {agent} tiny task runs {', '.join(estimators)}",
                                 param_hint="'--algos'")
    args = TinyRun(out=out, steps=steps, algos=chosen or list(DEFAULT_ALGOS[agent]), seed=seed,
                   sft_episodes=sft_episodes, sft_epochs=sft_epochs, plot=plot, no_progress=no_progress)
    run(args)


def _algos(options: list[Algo] | None, extra: list[str]) -> list[str]:
    """`--algos a --algos b` and argparse's `--algos a b` (b arrives among the extra arguments)."""
    names = [a.value for a in options or []]
    for value in extra:
        if not names or value not in Algo.__members__:
            raise typer.BadParameter(f"unexpected argument {value!r}" if not names else
                                     f"{value!r} is not one of {', '.join(Algo.__members__)}",
                                     param_hint="'--algos'" if names else None)
        names.append(value)
    return names


def run_vrag(args: TinyRun) -> dict:
    """The VRAG agent's tiny run: SFT on random well-formed episodes, then RL per estimator from that model."""
    from search_engine.api import create_app
    from search_engine.engine import SearchEngine
    from testkit.loopback import LoopbackServer
    from testkit.tiny_probe import probe_choices, write_probe
    from testkit.tiny_sft import build_tiny_index, sft_vrag
    from testkit.tiny_task import write_tasks

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    server = LoopbackServer(create_app(engine=SearchEngine.load(build_tiny_index(out)))).start()
    try:
        tasks = write_tasks(out / "tasks.json")
        sft_model, sft_stats = sft_vrag(out, server.url, seed=args.seed, episodes_per_question=args.sft_episodes,
                                        epochs=args.sft_epochs, progress=not args.no_progress)
        sft_s = time.perf_counter() - started
        runs: dict = {}
        summary: dict = {"sft": sft_stats, "sft_s": round(sft_s, 1)}
        # fixed prompts on which the policy's choices are read off before and after RL (testkit.tiny_probe)
        probe = write_probe(server.url, out / "probe" / "probe.json")
        for algo in args.algos:
            config = run_config(algo, model=str(sft_model), tasks=str(tasks), output_dir=str(out / algo),
                                search_url=server.url, seed=args.seed, steps=args.steps)
            t0 = time.perf_counter()
            trainer = config.plugin().load("trainer")(config, progress=not args.no_progress)
            if "probe_sft" not in summary:  # every algorithm starts from the same SFT model
                summary["probe_sft"] = probe_choices(trainer.model, trainer.processor, probe, config.stop_strings)
            records = trainer.train()
            runs[algo.upper()] = records
            summary[algo] = {**summarise(records),
                             "probe": probe_choices(trainer.model, trainer.processor, probe, config.stop_strings),
                             "train_s": round(time.perf_counter() - t0, 1)}
    finally:
        server.stop()
    return write_summary(summary, runs, args, out, started,
                         "tiny Qwen2.5-VL on the sample-corpus task (CPU), after SFT warm start")


# the tiny task of each agent (its SFT warm start and probes are the agent's own) and the estimators it compares;
# the trainer comes from the agent's plugin (the run config's agent_type)
TINY_RUNS: dict[str, tuple[Callable[[TinyRun], dict], tuple[str, ...]]] = {
    "vrag": (run_vrag, ("grpo", "ggpo", "gspo")),
    "vimrag": (run_vimrag, ("grpo", "ggpo", "gspo", "gigpo")),
}
# what a run without --algos compares (GSPO, GGPO without its mask, is the ablation `scripts/compare_algos.py` adds)
DEFAULT_ALGOS = {"vrag": ("grpo", "ggpo"), "vimrag": ("grpo", "ggpo", "gigpo")}


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="train_tiny.py")


if __name__ == "__main__":
    sys.exit(main())
