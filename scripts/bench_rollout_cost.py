#!/usr/bin/env python
"""Rollout cost inside verl: our `vrag_agent` loop against verl's own `tool_agent` loop, in one run on the CPU.

Why: an agent loop runs once per trajectory per step, beside the model; what it costs besides the model's own
time (parsing, the search client, images, token bookkeeping) is paid on every rollout. This measures it inside
verl itself, with nothing scripted: verl's `AgentLoopWorker` (in-process, as the integration tests drive it)
turns parquet rows into training batches through verl's real `LLMServerClient`, whose server is the CPU mode's
`hf` rollout server (`HFRolloutServer`, the tiny SFT model of `scripts/cpu_smoke.py prepare`) — the same model
and sampling for every loop. The search server runs in a child process (`python -m search_engine serve`), so its
CPU is measured apart from the loops'.

Loops, each over the same rows, episodes, concurrency, turn limit and per-turn token budget:
- `vrag_agent`: ours (`vrag_rl/vrag/verl_agent_loop.py`), scoring in the loop;
- `tool_agent`: verl's `ToolAgentLoop` with hermes tool calls and `testkit.verl_search_tool.SearchPageTool`
  (declared in verl's tool config YAML). The tiny model was trained on `<search>` tags and never writes
  `<tool_call>{json}</tool_call>`, so this loop makes one model turn per episode and no tool call: it is verl's
  loop as configured out of the box, not a per-turn comparison;
- `tool_agent_tags`: the same verl loop with `testkit.verl_search_tool.SearchTagParser` reading `<search>q</search>`
  as a call of the same tool, so verl's loop runs multi-turn episodes (search → page id and page image → ...).

Measured per loop, after one untimed warm-up batch of each: episodes/s (wall), model turns (generate calls) and
tool calls made/succeeded, and CPU per model turn excluding model generation: this process's CPU
(`time.process_time`, every thread) minus the CPU of the generating thread inside `generate` (`time.thread_time`
around the server's `generate_sync`; `--torch-threads 1` keeps all of the model's work on that thread — with more
threads torch's pool would be charged to the loops). That remainder is split into verl's per-sample
post-processing and batch assembly (padding, position ids, multimodal inputs: the same code for every loop, timed
on its thread) and the rest, the loop's own ("loop CPU": the agent loop, verl's client, the tool or search client,
the event loop). The search server's CPU per search call is reported apart. The hf server (one request at a time,
as on any CPU) sets most of the wall time, so episodes/s follows turns per episode and, on a shared machine, its
load: compare loops by the CPU columns. `--rounds N` runs every loop N times, interleaved, and sums them.

    python scripts/cpu_smoke.py prepare runs/cpu_smoke
    nice -n 10 python scripts/bench_rollout_cost.py --prepared runs/cpu_smoke --episodes 16 --concurrency 8 \\
        --rounds 3 --out runs/rollout_cost.json
"""
from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from search_engine.infra.cli_exit import exit_status

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "configs" / "verl"
CONFIG_NAME = "cpu_smoke_grpo_vrag"  # the CPU smoke's settings: hf backend, tiny prompts, lengths
LOOPS = {  # name in the table -> (verl agent loop, multi_turn.format)
    "vrag_agent": ("vrag_agent", "hermes"),
    "tool_agent": ("tool_agent", "hermes"),
    "tool_agent_tags": ("tool_agent", "vrag_search_tags"),
}

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]}, help=(__doc__ or "").splitlines()[0])


# ----------------------------------------------------------------------------------------------- the model side
@dataclass
class GenerateMeter:
    """What the model itself cost: calls, tokens, CPU of the generating thread and wall inside `generate_sync`,
    and generate calls per episode (verl's sticky request id)."""

    calls: int = 0
    tokens: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    per_request: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"calls": self.calls, "tokens": self.tokens, "cpu_s": self.cpu_s, "wall_s": self.wall_s}


class TimedGenerator:
    """The hf server's generator with `generate_sync` timed on its own thread (see the module docstring)."""

    def __init__(self, inner: Any, meter: GenerateMeter) -> None:
        self.inner, self.meter = inner, meter

    def generate_sync(self, *args: Any, **kwargs: Any) -> Any:
        cpu, wall = time.thread_time(), time.perf_counter()
        out = self.inner.generate_sync(*args, **kwargs)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        with self.meter.lock:
            self.meter.calls += 1
            self.meter.tokens += len(out.token_ids)
            self.meter.cpu_s += cpu
            self.meter.wall_s += wall
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _Remote:
    """`handle.method.remote(...)` awaited like a Ray ObjectRef, for a server object in this process."""

    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)


class _Handle:
    def __init__(self, server: Any) -> None:
        self.generate = _Remote(server.generate)


def meter_postprocess(worker: Any) -> dict[str, float]:
    """Time verl's own per-sample post-processing (`_agent_loop_postprocess`: padding, position ids, multimodal
    inputs) and batch assembly (`_postprocess`) on the event loop's thread; the returned dict accumulates `cpu_s`.
    `thread_time` is exact here because with no reward workers and no distillation the coroutine never yields
    (its only awaits, `_compute_score` / `_compute_teacher_logprobs`, return at once: verl agent_loop.py ~822)."""
    spent = {"cpu_s": 0.0}
    per_sample, batch = worker._agent_loop_postprocess, worker._postprocess

    async def timed_per_sample(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return await per_sample(*args, **kwargs)
        finally:
            spent["cpu_s"] += time.thread_time() - started

    def timed_batch(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return batch(*args, **kwargs)
        finally:
            spent["cpu_s"] += time.thread_time() - started

    worker._agent_loop_postprocess, worker._postprocess = timed_per_sample, timed_batch
    return spent


def llm_client(config: Any, server: Any, meter: GenerateMeter, max_tokens: int) -> Any:
    """verl's own `LLMServerClient` (its `generate` runs unchanged) whose load balancer always hands out the
    in-process hf server. A request without `max_tokens` (verl's `tool_agent` sends none; vLLM would then cap it
    at `response_length`) gets the episode's per-turn budget, so both loops generate under the same limit."""
    from verl.workers.rollout.llm_server import LLMServerClient

    handle = _Handle(server)

    class InProcessLLMServerClient(LLMServerClient):
        async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                           **kwargs: Any) -> Any:
            sampling = dict(sampling_params)
            sampling.setdefault("max_tokens", max_tokens)
            with meter.lock:
                meter.per_request[request_id] += 1
            return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling, **kwargs)

        async def _acquire_server(self, request_id: str, **extra: Any) -> tuple[str, Any]:
            return "hf-0", handle

        def _release_server(self, server_id: str, request_id: str | None = None) -> None:
            return None

    return InProcessLLMServerClient(config)


# ---------------------------------------------------------------------------------------------- the search side
def proc_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_search_server(index: Path, port: int, log: Path, threads: int) -> subprocess.Popen:
    """`python -m search_engine serve` on loopback, healthy (MiniLM loaded) before this returns. Its OpenMP threads
    are `threads` (unless OMP_NUM_THREADS is set): on a small shared machine a spinning pool would bill the query
    encoder many times its work and starve the model's thread."""
    import httpx

    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(threads))}
    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "search_engine", "serve", "--index", str(index), "--port",
                                 str(port)], stdout=sink, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the search server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.terminate()
    raise TimeoutError(f"the search server on {url} was not healthy in 300 s ({log})")


# ------------------------------------------------------------------------------------------------ verl's side
def compose_config(model: Path, search_url: str, tool_config: Path, tool_format: str, max_turns: int,
                   max_tokens: int) -> Any:
    """The CPU smoke's verl config with this run's model, search server, tool and limits (both loops' limits)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name=CONFIG_NAME, overrides=[
            f"actor_rollout_ref.model.path={model}", f"vrag.search.url={search_url}",
            f"vrag.agent.max_turns={max_turns}", f"vrag.agent.max_tokens={max_tokens}",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_config}",
            f"actor_rollout_ref.rollout.multi_turn.format={tool_format}",
            f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={max_turns}",
            f"actor_rollout_ref.rollout.multi_turn.max_user_turns={max_turns}",
        ])
    OmegaConf.resolve(cfg)
    return cfg


def load_rows(cfg: Any, data: Path, cache: Path) -> list[dict[str, Any]]:
    """The parquet's rows as verl's `RLHFDataset` yields them to the agent loop worker."""
    from omegaconf import OmegaConf
    from verl.utils import hf_processor, hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    model = cfg.actor_rollout_ref.model.path
    tokenizer, processor = hf_tokenizer(model), hf_processor(model)
    config = OmegaConf.create({"prompt_key": "prompt", "image_key": "images", "return_raw_chat": True,
                               "max_prompt_length": int(cfg.data.max_prompt_length), "dataloader_num_workers": 0,
                               "truncation": "error", "filter_overlong_prompts": False, "cache_dir": str(cache)})
    dataset = RLHFDataset(data_files=[str(data)], tokenizer=tokenizer, config=config, processor=processor)
    return [dataset[i] for i in range(len(dataset))]


def make_batch(rows: list[dict[str, Any]], start: int, size: int, agent_name: str) -> Any:
    """`size` episodes from row `start` on (cycling), as the trainer hands a batch to an agent loop worker."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import collate_fn

    items = []
    for i in range(start, start + size):
        item = {**rows[i % len(rows)], "agent_name": agent_name}
        items.append({**item, "dummy_tensor": torch.zeros(1, dtype=torch.uint8)})
    batch = DataProto.from_single_dict(collate_fn(items))
    batch.non_tensor_batch["uid"] = np.array([f"q{i % len(rows)}" for i in range(start, start + size)], dtype=object)
    return batch


@dataclass
class LoopRun:
    """One loop's timed run."""

    name: str
    episodes: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    generate: dict[str, Any] = field(default_factory=dict)
    search_cpu_s: float = 0.0
    postprocess_cpu_s: float = 0.0
    turns_per_episode: list[int] = field(default_factory=list)
    tool_calls: int = 0
    tool_calls_ok: int = 0
    answers: int = 0
    model_tokens: int = 0
    response_tokens: int = 0
    images: int = 0

    def add(self, other: LoopRun) -> None:
        """Another round of the same loop, summed into this one."""
        for name in ("episodes", "wall_s", "cpu_s", "search_cpu_s", "postprocess_cpu_s", "tool_calls",
                     "tool_calls_ok", "answers", "model_tokens", "response_tokens", "images"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.generate = {key: self.generate.get(key, 0) + value for key, value in other.generate.items()}
        self.turns_per_episode = sorted(self.turns_per_episode + other.turns_per_episode)

    def row(self) -> dict[str, Any]:
        """The table's numbers (also what --out writes)."""
        turns = max(sum(self.turns_per_episode), 1)
        bookkeeping = self.cpu_s - self.generate["cpu_s"]
        return {
            "loop": self.name, "episodes": self.episodes, "wall_s": round(self.wall_s, 3),
            "episodes_per_s": round(self.episodes / self.wall_s, 3) if self.wall_s else None,
            "model_turns": sum(self.turns_per_episode),
            "turns_per_episode": round(sum(self.turns_per_episode) / max(self.episodes, 1), 2),
            "turns_histogram": dict(sorted(Counter(self.turns_per_episode).items())),
            "tool_calls": self.tool_calls, "tool_calls_ok": self.tool_calls_ok,
            "episodes_with_answer": self.answers,
            "generated_tokens_per_turn": round(self.generate["tokens"] / turns, 1),
            "images_per_episode": round(self.images / max(self.episodes, 1), 2),
            "response_tokens_per_episode": round(self.response_tokens / max(self.episodes, 1), 1),
            "process_cpu_s": round(self.cpu_s, 3), "generate_cpu_s": round(self.generate["cpu_s"], 3),
            "generate_wall_s": round(self.generate["wall_s"], 3),
            "postprocess_cpu_s": round(self.postprocess_cpu_s, 3),
            "cpu_ms_per_turn_excl_generate": round(bookkeeping / turns * 1000, 2),
            "loop_cpu_ms_per_turn": round((bookkeeping - self.postprocess_cpu_s) / turns * 1000, 2),
            "verl_postprocess_cpu_ms_per_episode": round(self.postprocess_cpu_s / max(self.episodes, 1) * 1000, 2),
            "cpu_ms_per_episode_excl_generate": round(bookkeeping / max(self.episodes, 1) * 1000, 2),
            "generate_cpu_ms_per_turn": round(self.generate["cpu_s"] / turns * 1000, 2),
            "search_server_cpu_ms_per_call": round(self.search_cpu_s / self.tool_calls * 1000, 2)
            if self.tool_calls else None,
        }


def count_outputs(run: LoopRun, out: Any, tokenizer: Any, loop: str) -> None:
    """Tool calls (ours: its search turns and the ones that found a page), answers, tokens and images of a batch."""
    responses, mask = out.batch["responses"], out.batch["response_mask"]
    attention = out.batch["attention_mask"][:, -responses.shape[1]:]
    run.model_tokens += int(mask.sum())
    run.response_tokens += int(attention.sum())
    for i in range(len(out)):
        model_ids = responses[i][mask[i].bool()].tolist()
        run.answers += "<answer>" in tokenizer.decode(model_ids)
        mm = out.non_tensor_batch.get("multi_modal_inputs")
        if mm is not None and mm[i] is not None and "image_grid_thw" in mm[i]:
            run.images += int(mm[i]["image_grid_thw"].shape[0])
        if loop == "vrag_agent":
            actions = list(out.non_tensor_batch["turn_actions"][i])
            pages = list(out.non_tensor_batch["pages_per_turn"][i])
            searches = [t for t, action in enumerate(actions) if action == "search"]
            run.tool_calls += len(searches)
            run.tool_calls_ok += sum(1 for t in searches if t < len(pages) and any(pages[t]))


async def run_loop(name: str, worker: Any, rows: list[dict[str, Any]], episodes: int, concurrency: int,
                   meter: GenerateMeter, postprocess: dict[str, float], search_pid: int, tokenizer: Any) -> LoopRun:
    """`episodes` episodes of one loop in batches of `concurrency` (verl runs a batch's episodes concurrently)."""
    agent_name = LOOPS[name][0]
    tool = worker.tools[0] if worker.tools else None
    tool_before = (tool.calls, tool.hits) if tool is not None else (0, 0)
    run = LoopRun(name)
    before, postprocess_before = meter.snapshot(), postprocess["cpu_s"]
    meter.per_request.clear()
    search_cpu, cpu, wall = proc_cpu_s(search_pid), time.process_time(), time.perf_counter()
    outputs = []
    for start in range(0, episodes, concurrency):
        outputs.append(await worker.generate_sequences(make_batch(rows, start, min(concurrency, episodes - start),
                                                                  agent_name)))
    run.wall_s, run.cpu_s = time.perf_counter() - wall, time.process_time() - cpu
    run.search_cpu_s = proc_cpu_s(search_pid) - search_cpu
    run.postprocess_cpu_s = postprocess["cpu_s"] - postprocess_before
    after = meter.snapshot()
    run.generate = {key: after[key] - before[key] for key in after}
    run.episodes = episodes
    run.turns_per_episode = sorted(meter.per_request.values())
    for out in outputs:  # counted after the clock stopped: not part of the measured cost
        count_outputs(run, out, tokenizer, name)
    if name != "vrag_agent" and tool is not None:
        run.tool_calls, run.tool_calls_ok = tool.calls - tool_before[0], tool.hits - tool_before[1]
    return run


TABLE = [("loop", "loop", "{}"), ("episodes/s", "episodes_per_s", "{:.2f}"),
         ("turns/ep", "turns_per_episode", "{:.2f}"), ("tool ok/calls", None, ""),
         ("answers", "episodes_with_answer", "{}"), ("gen tok/turn", "generated_tokens_per_turn", "{:.1f}"),
         ("CPU ms/turn excl gen", "cpu_ms_per_turn_excl_generate", "{:.1f}"),
         ("loop CPU ms/turn", "loop_cpu_ms_per_turn", "{:.1f}"),
         ("verl post-proc CPU ms/ep", "verl_postprocess_cpu_ms_per_episode", "{:.1f}"),
         ("gen CPU ms/turn", "generate_cpu_ms_per_turn", "{:.1f}"),
         ("search srv CPU ms/call", "search_server_cpu_ms_per_call", "{:.1f}")]


def render_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (printed, and what docs/training_cluster.md shows)."""
    lines = ["| " + " | ".join(title for title, _, _ in TABLE) + " |", "|" + "---|" * len(TABLE)]
    for row in rows:
        cells = []
        for _, key, fmt in TABLE:
            if key is None:
                cells.append(f"{row['tool_calls_ok']}/{row['tool_calls']}")
            else:
                cells.append("-" if row[key] is None else fmt.format(row[key]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def bench_all(cfgs: dict[str, Any], server: Any, meter: GenerateMeter, rows: list[dict[str, Any]],
                    episodes: int, concurrency: int, warmup: int, rounds: int, max_tokens: int, search_pid: int,
                    loops: list[str]) -> list[LoopRun]:
    """Build one verl agent-loop worker per loop, warm each up, then time each in turn, `rounds` times over (one
    event loop for all; interleaved rounds spread the drift of a shared machine over every loop alike)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    workers = {name: AgentLoopWorker(cfgs[name], llm_client=llm_client(cfgs[name], server, meter, max_tokens))
               for name in loops}
    postprocess = {name: meter_postprocess(worker) for name, worker in workers.items()}
    tokenizer = next(iter(workers.values())).tokenizer
    for name in loops:  # imports, first connections, page decode caches: not charged to the first timed loop
        if warmup:
            await workers[name].generate_sequences(make_batch(rows, 0, warmup, LOOPS[name][0]))
        print(f"[bench] {name}: warmed up ({warmup} episodes)", flush=True)
    runs = {name: LoopRun(name) for name in loops}
    for round_ in range(1, rounds + 1):
        for name in loops:
            run = await run_loop(name, workers[name], rows, episodes, concurrency, meter, postprocess[name],
                                 search_pid, tokenizer)
            print(f"[bench] round {round_}/{rounds} {name}: {episodes} episodes in {run.wall_s:.1f}s", flush=True)
            runs[name].add(run)
    from testkit.verl_search_tool import SearchPageTool

    for worker in workers.values():
        for tool in worker.tools:
            if isinstance(tool, SearchPageTool):
                await tool.aclose()
    return list(runs.values())


@app.command(help="\n\n".join(f"\b\n{part}" for part in (__doc__ or "").split("\n\n")))  # \b: printed as written
def bench(
    prepared: Annotated[Path | None, typer.Option(
        help="a folder of `scripts/cpu_smoke.py prepare` (vrag/model_sft, index, data/vrag_train.parquet)")] = None,
    model: Annotated[Path | None, typer.Option(help="the policy (default: PREPARED/vrag/model_sft)")] = None,
    index: Annotated[Path | None, typer.Option(help="the search index (default: PREPARED/index)")] = None,
    data: Annotated[Path | None, typer.Option(help="verl parquet rows (default: PREPARED/data/vrag_train.parquet)")]
    = None,
    episodes: Annotated[int, typer.Option(min=1, help="timed episodes per loop")] = 16,
    concurrency: Annotated[int, typer.Option(min=1, help="episodes per agent-loop batch (run concurrently)")] = 8,
    warmup: Annotated[int, typer.Option(min=0, help="untimed episodes per loop first")] = 2,
    rounds: Annotated[int, typer.Option(min=1, help="timed runs of every loop, interleaved, summed")] = 1,
    max_turns: Annotated[int, typer.Option(min=1, help="model turns per episode, both loops")] = 3,
    max_tokens: Annotated[int, typer.Option(min=1, help="tokens per model turn, both loops")] = 24,
    loop: Annotated[list[str] | None, typer.Option(
        help=f"loops to run, repeatable (default all: {', '.join(LOOPS)})")] = None,
    torch_threads: Annotated[int, typer.Option(
        min=1, help="torch intra-op threads; >1 charges torch's pool threads to the loops' CPU")] = 1,
    out: Annotated[Path | None, typer.Option(help="write the results as JSON here")] = None,
) -> None:
    """Run every loop on the same model, search server and rows; print the table; write --out."""
    loops = list(loop or LOOPS)
    unknown = [name for name in loops if name not in LOOPS]
    if unknown:
        raise typer.BadParameter(f"unknown loop(s) {unknown}; choose from {', '.join(LOOPS)}", param_hint="'--loop'")
    model, index, data = _paths(prepared, model, index, data)
    from vrag_rl.training.verl_plugins.cpu import cpu_environment

    for key, value in cpu_environment().items():  # before verl is imported: its platform is chosen at import
        os.environ.setdefault(key, value)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import torch
    from omegaconf import OmegaConf

    torch.set_num_threads(torch_threads)
    import vrag_rl.training.verl_plugins.cpu.register  # noqa: F401  (the hf backend, as verl's workers import it)
    import vrag_rl.training.verl_plugins.register  # noqa: F401  (vrag_agent, as external_lib does in workers)
    from testkit.loopback import free_port
    from testkit.verl_search_tool import tool_config
    from vrag_rl.training.verl_plugins.cpu.hf_rollout import HFRolloutServer

    with tempfile.TemporaryDirectory(prefix="rollout_cost_") as tmp_name:
        tmp = Path(tmp_name)
        port = free_port()
        search = start_search_server(index, port, tmp / "search_server.log", torch_threads)
        try:
            url, tools = f"http://127.0.0.1:{port}", tmp / "tools.yaml"
            cfgs = {name: compose_config(model, url, tools, LOOPS[name][1], max_turns, max_tokens) for name in loops}
            first = cfgs[loops[0]]
            agent = first.vrag.agent  # the tool asks for as many hits and shows pages within the same budget
            tools.write_text(OmegaConf.to_yaml(OmegaConf.create(tool_config(
                url, min_pixels=int(agent.min_pixels), max_pixels=int(agent.max_pixels),
                top_k=int(agent.search_top_k)))))
            rows = load_rows(first, data, tmp / "dataset_cache")
            meter = GenerateMeter()
            server = HFRolloutServer(first.actor_rollout_ref.rollout, first.actor_rollout_ref.model, device="cpu")
            server.generator = cast(Any, TimedGenerator(server.generator, meter))  # duck-typed: generate_sync
            print(f"[bench] model {model}, {len(rows)} questions, search server pid {search.pid}; "
                  f"{episodes} episodes per loop x {rounds} round(s), concurrency {concurrency}, "
                  f"max {max_turns} turns x {max_tokens} tokens; torch threads {torch.get_num_threads()}, "
                  f"{os.cpu_count()} CPUs", flush=True)
            runs = asyncio.run(bench_all(cfgs, server, meter, rows, episodes, concurrency, warmup, rounds,
                                         max_tokens, search.pid, loops))
        finally:
            search.terminate()
            search.wait(timeout=30)
    table = [run.row() for run in runs]
    print(render_table(table))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "settings": {"model": str(model), "index": str(index), "data": str(data), "episodes": episodes,
                         "concurrency": concurrency, "warmup": warmup, "rounds": rounds, "max_turns": max_turns,
                         "max_tokens": max_tokens, "torch_threads": torch.get_num_threads(),
                         "config": CONFIG_NAME},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
            "loops": table,
        }, indent=1))
        print(f"[bench] wrote {out}")


def _paths(prepared: Path | None, model: Path | None, index: Path | None,
           data: Path | None) -> tuple[Path, Path, Path]:
    """Model, index and parquet: each given, or under --prepared; a missing one is named with how to build it."""
    found = {"model": model or (prepared / "vrag" / "model_sft" if prepared else None),
             "index": index or (prepared / "index" if prepared else None),
             "data": data or (prepared / "data" / "vrag_train.parquet" if prepared else None)}
    missing = [f"--{key}" for key, path in found.items() if path is None or not path.exists()]
    if missing:
        raise typer.BadParameter(f"{', '.join(missing)} not found; give --prepared DIR after "
                                 "`python scripts/cpu_smoke.py prepare DIR`, or each path")
    return found["model"], found["index"], found["data"]  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="bench_rollout_cost.py")


if __name__ == "__main__":
    sys.exit(main())
