#!/usr/bin/env python
"""The data and the verdict of `scripts/gpu_smoke.sh --cpu` (verl's own trainer on the CPU), in two commands.

`prepare OUT` builds what the runs train on, all offline: the bundled sample corpus and its index (MiniLM + BM25),
the tiny Qwen2.5-VL models of the VRAG and VimRAG tiny tasks after their SFT warm starts (`testkit.tiny_sft`; a
random model never writes a well-formed turn, so every sample would get the same reward and no weight would move),
verl parquet files of the tiny tasks' four questions in the words of the tiny prompts (one file per agent loop),
and the three questions of the merged model's evaluation.

`summarize OUT` reads what the runs left (verl's file-logger metrics, the checkpoints, the rollout dumps, the
evaluation summary) and writes `OUT/summary.json`: for `grpo_vrag` and `ggpo_vimrag` the `steps` (reward_mean,
pg_loss, grad_norm per step), `weights_changed` (actor parameters of the step-1 checkpoint against the initial
model's, tensor by tensor), `resumed_from_step` and whether the resumed step saw a question the first run's steps
did not (the data position continued); `merged_eval` (questions, finished) for the full and the LoRA merge. An
episode finished when it ended by the model's own replies — an answer, or an explicit failure for a turn limit,
a token budget or unusable replies (two steps of RL on a tiny random-born model may well unlearn the format) —
and not by a fault of the serving path (`SERVING_FAILURES`: the policy or search server failing, an engine
error, an exception, a timeout).
It exits 1 and names each failed check when the smoke did not show what it must.

    python scripts/cpu_smoke.py prepare runs/cpu_smoke
    python scripts/cpu_smoke.py summarize runs/cpu_smoke
"""
from __future__ import annotations

import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from search_engine.infra.cli_exit import exit_status
from vrag_rl.evaluation.runner import SERVING_FAILURES

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False, no_args_is_help=True,
                  context_settings={"help_option_names": ["-h", "--help"]}, help=(__doc__ or "").splitlines()[0])

RUNS = {"grpo_vrag": "vrag", "ggpo_vimrag": "vimrag"}  # run name -> tiny task (its model and parquet)
LOOPS = {"vrag": "vrag_agent", "vimrag": "vimrag_agent"}
EVAL_QUESTIONS = 3
STEP_KEYS = {"reward_mean": "critic/rewards/mean", "pg_loss": "actor/pg_loss", "grad_norm": "actor/grad_norm"}


def tiny_records() -> list[dict[str, Any]]:
    """The tiny tasks' questions as dataset records (page ids `doc_page` → file name and 1-based page)."""
    from testkit.tiny_task import QUESTIONS

    records = []
    for q in QUESTIONS:
        doc, page = q["reference_pages"][0].rsplit("_", 1)
        records.append({"uid": q["id"], "query": q["question"], "reference_answer": q["answer"],
                        "meta_info": {"file_name": f"{doc}.pdf", "reference_page": int(page)}})
    return records


@app.command()
def prepare(out: Annotated[Path, typer.Argument(help="the smoke's folder (reused: what exists is kept)")],
            seed: int = 0) -> None:
    """Index, SFT warm starts, parquet files and evaluation questions under OUT."""
    from search_engine.api import create_app
    from search_engine.engine import SearchEngine
    from testkit.loopback import LoopbackServer
    from testkit.tiny_sft import build_tiny_index, sft_vimrag, sft_vrag
    from testkit.tiny_task import PROMPTS
    from vrag_rl.agent.plugins import agent_plugin
    from vrag_rl.training.data.verl_parquet import convert_records, write_parquet

    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    index = build_tiny_index(out)
    print(f"[prepare] index {index} ({time.perf_counter() - started:.0f}s)", flush=True)
    server = LoopbackServer(create_app(engine=SearchEngine.load(index))).start()
    try:
        for agent, warm_start in (("vrag", sft_vrag), ("vimrag", sft_vimrag)):
            t0 = time.perf_counter()
            model, stats = warm_start(out / agent, server.url, seed=seed)
            print(f"[prepare] {agent} SFT model {model} {stats or '(reused)'} ({time.perf_counter() - t0:.0f}s)",
                  flush=True)
    finally:
        server.stop()
    prompts = agent_plugin("vrag").prompts_type(**PROMPTS)  # the words of configs/verl/cpu_smoke_*.yaml
    data = out / "data"
    for agent, loop in LOOPS.items():
        for split in ("train", "val"):
            rows, _ = convert_records(tiny_records(), "tiny_task", split, loop, prompts=prompts)
            write_parquet(rows, data / f"{agent}_{split}.parquet")
    questions = json.loads((out / "corpus" / "rag_dataset.json").read_text())
    examples = questions["examples"] if isinstance(questions, dict) else questions
    (data / "eval_questions.json").write_text(json.dumps(examples[:EVAL_QUESTIONS], indent=1))
    print(f"[prepare] data in {data} ({time.perf_counter() - started:.0f}s in all)")


def read_metrics(paths: list[Path]) -> dict[int, dict[str, Any]]:
    """verl's file-logger lines (`{"step": N, "data": {...}}`) of one or more runs, by global step."""
    steps: dict[int, dict[str, Any]] = {}
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                steps.setdefault(int(record["step"]), {}).update(record["data"])
    return steps


def weights_changed(initial_model: Path, checkpoint_actor: Path) -> dict[str, Any]:
    """Compare the step-N actor checkpoint's parameters with the initial model's, tensor by tensor."""
    import torch
    from transformers import AutoModelForImageTextToText

    # loaded through the model class: the file's names (legacy `model.layers.*`) are converted to the module names
    # FSDP saves (`model.language_model.layers.*`)
    initial = AutoModelForImageTextToText.from_pretrained(initial_model, dtype=torch.float32).state_dict()
    shards = sorted(checkpoint_actor.glob("model_world_size_*_rank_*.pt"))
    if len(shards) != 1:
        raise ValueError(f"{checkpoint_actor}: expected one model shard (world size 1), found {len(shards)}")
    state = torch.load(shards[0], map_location="cpu", weights_only=False)
    compared = changed = 0
    for name, value in state.items():
        tensor = value.full_tensor() if hasattr(value, "full_tensor") else value
        if not isinstance(tensor, torch.Tensor) or name not in initial:
            continue
        compared += 1
        if not torch.equal(tensor.float(), initial[name].float()):
            changed += 1
    if not compared:
        raise ValueError(f"no parameter of {checkpoint_actor} matches a name of {initial_model}")
    return {"compared": compared, "changed": changed, "weights_changed": changed > 0}


def dumped_questions(dump_dir: Path) -> dict[int, list[str]]:
    """Questions of each step's rollout dump (`trainer.rollout_data_dir`: `<step>.jsonl`, one line per sample)."""
    found: dict[int, list[str]] = {}
    for path in sorted(dump_dir.glob("*.jsonl")):
        if not path.stem.isdigit():
            continue
        questions = set()
        for line in path.read_text().splitlines():
            if line.strip():
                match = re.search(r"Question: (.+?)(?:\n|$)", json.loads(line).get("input", ""))
                if match:
                    questions.add(match.group(1).strip())
        found[int(path.stem)] = sorted(questions)
    return found


def summarize_run(out: Path, run: str, agent: str) -> tuple[dict[str, Any], list[str]]:
    """One run's summary and the checks it fails."""
    run_dir = out / run
    metrics = read_metrics([run_dir / "metrics_first.jsonl", run_dir / "metrics_resumed.jsonl"])
    steps = []
    for step in sorted(metrics):
        entry = {"step": step, **{key: metrics[step].get(name) for key, name in STEP_KEYS.items()}}
        steps.append(entry)
    resumed = read_metrics([run_dir / "metrics_resumed.jsonl"])
    ckpt = run_dir / "ckpt"
    step1 = ckpt / "global_step_1" / "actor"
    change = weights_changed(out / agent / "model_sft", step1) if step1.is_dir() else {"weights_changed": False}
    log = run_dir / "resumed.log"
    match = re.search(r"global_step_(\d+)", _resume_line(log)) if log.exists() else None
    questions = dumped_questions(run_dir / "ckpt" / "dumps" / "rollout")
    first = {q for step in (1, 2) for q in questions.get(step, [])}
    summary = {"steps": steps, "weights_changed": change["weights_changed"], "weights": change,
               "resumed_from_step": int(match.group(1)) if match else None,
               "resumed_steps": sorted(resumed), "questions_by_step": {str(k): v for k, v in sorted(questions.items())}}
    failures = []
    if [s["step"] for s in steps] != [1, 2, 3]:
        failures.append(f"{run}: steps {[s['step'] for s in steps]}, expected [1, 2, 3] (2 + 1 resumed)")
    for s in steps:
        bad = [k for k in STEP_KEYS if not isinstance(s[k], (int, float)) or not math.isfinite(s[k])]
        if bad:
            failures.append(f"{run}: step {s['step']} has no finite {', '.join(bad)}")
    if not change["weights_changed"]:
        failures.append(f"{run}: the actor's parameters after step 1 equal the initial model's")
    if summary["resumed_from_step"] != 2 or sorted(resumed) != [3]:
        failures.append(f"{run}: the second launch did not resume from step 2 and train step 3 "
                        f"(resumed_from_step={summary['resumed_from_step']}, steps {sorted(resumed)})")
    if questions.get(3) and set(questions[3]) & first:
        failures.append(f"{run}: the resumed step 3 asked {questions[3]}, already asked in steps 1-2: the data "
                        "position did not continue")
    summary["data_position_continued"] = bool(questions.get(3)) and not (set(questions[3]) & first)
    return summary, failures


def _resume_line(log: Path) -> str:
    """The line where verl's v1 trainer says which checkpoint it resumes (`Resuming from .../global_step_N, ...`)."""
    for line in log.read_text(errors="replace").splitlines():
        if "Resuming from" in line and "global_step_" in line:
            return line
    return ""


@app.command()
def summarize(out: Annotated[Path, typer.Argument(help="the smoke's folder")]) -> None:
    """Write OUT/summary.json; exit 1 naming every check the smoke failed."""
    summary: dict[str, Any] = {}
    failures: list[str] = []
    for run, agent in RUNS.items():
        summary[run], failed = summarize_run(out, run, agent)
        failures += failed
    merged: dict[str, Any] = {}
    for kind in ("full", "lora"):
        path = out / f"eval_{kind}.json"
        if not path.exists():
            failures.append(f"merged_eval: no evaluation of the {kind} merge ({path})")
            continue
        merged[kind], failure = merged_eval_entry(json.loads(path.read_text()), kind)
        merged[kind]["weights_differ"] = _merge_differs(out, kind)
        if failure:
            failures.append(failure)
        if not merged[kind]["weights_differ"]:
            failures.append(f"merged_eval ({kind}): the merged weights equal the base model's")
    summary["merged_eval"] = {"questions": sum(m["questions"] for m in merged.values()),
                              "finished": sum(m["finished"] for m in merged.values()), **merged}
    summary["failures"] = failures
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    if failures:
        for failure in failures:
            print(f"[smoke] FAIL: {failure}", file=sys.stderr)
        raise typer.Exit(1)


def merged_eval_entry(evaluation: dict[str, Any], kind: str) -> tuple[dict[str, Any], str | None]:
    """One merge's `merged_eval` entry from its vrag-eval summary, and the failed check if any: every question
    must have finished, i.e. ended without a serving fault (the module doc says why a wrong or missing answer
    is not one)."""
    questions = int(evaluation["n_examples"])
    faults = {k: n for k, n in evaluation["failure_counts"].items() if k in SERVING_FAILURES}
    finished = int(evaluation["n_evaluated"]) - sum(faults.values())
    entry = {"questions": questions, "finished": finished, "status": evaluation["status_counts"],
             "failures": evaluation["failure_counts"]}
    if questions != EVAL_QUESTIONS or finished != questions:
        return entry, (f"merged_eval ({kind}): {finished} of {questions} episodes finished "
                       f"(serving faults: {faults or 'none'}; see eval_{kind}.jsonl)")
    return entry, None


def _merge_differs(out: Path, kind: str) -> bool:
    """Whether the merged folder's weights differ from the SFT model the run started from."""
    import torch
    from transformers import AutoModelForImageTextToText

    def weights(folder: Path) -> dict[str, torch.Tensor]:
        return AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).state_dict()

    merged, base = weights(out / f"merged_{kind}"), weights(out / "vrag" / "model_sft")
    shared = [name for name in merged if name in base]
    return bool(shared) and any(not torch.equal(merged[n].float(), base[n].float()) for n in shared)


def main(argv: list[str] | None = None) -> int:
    """The exit status of one command on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="cpu_smoke.py")


if __name__ == "__main__":
    sys.exit(main())
