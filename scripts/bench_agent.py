#!/usr/bin/env python
"""Benchmark the agent loop: episodes/s and the agent process's own CPU per turn.

Starts, as subprocesses on loopback, the search server over a text index of the sample corpus and
a scripted policy server replaying search → bbox → answer after a simulated model time
(`--model-ms`, default 50 ms per reply). The agent runs in this process, so `time.process_time()`
measured around a batch is exactly the agent's own CPU (parsing, page images, resize, crop, JPEG +
base64, HTTP client work), not time spent queueing for the servers.

    python scripts/bench_agent.py --episodes 64 --concurrency 1 8 64 --model-ms 50

`--agent-repo DIR` imports `vrag_rl` from another checkout (e.g. a `git worktree` of an older
commit) to compare before/after with the same measurement; `--upstream FILE` also runs upstream
VRAG's `demo/vrag_agent.py` class (a scratch copy, never committed) sequentially against the same
servers, as its users call it: one `run()` per question.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import httpx
import typer

REPO = Path(__file__).resolve().parents[1]

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"],
                                    # `--concurrency 1 8 64` (argparse's nargs="+", which click options lack):
                                    # the values after the first arrive as extra arguments, see `_levels`
                                    "allow_extra_args": True})

SCRIPT = {"default": [
    "<think>Find the page.</think><search>{question}</search>",
    "<think>Zoom into the table.</think><bbox>[40, 60, 400, 300]</bbox>",
    "<think>Read it.</think><answer>7.4</answer>",
]}
QUESTIONS = ["What satisfaction score did the Riverside district get?", "Kestrel Ridge solar plant output",
             "What was Acme Robotics' total revenue in 2023?", "most used travel app", "bicycle share of commuters"]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise TimeoutError(url)


def server_cpu_s(pids: list[int]) -> float:
    """CPU seconds the server processes have used so far (Linux /proc; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return total


def ensure_index(index: Path) -> None:
    if (index / "manifest.json").exists():
        return
    from search_engine.ingest import Ingestor
    from search_engine.sample_corpus import generate_sample_corpus

    corpus = generate_sample_corpus(index.parent / "sample_pdf", overwrite=True)
    Ingestor(index, visual_model=None, text_model="minilm").add(corpus.files)


def serve_policy(script: str, port: int, model_ms: float) -> None:
    """The scripted policy server with a simulated model time per reply (run as a subprocess)."""
    import uvicorn

    from vrag_rl.serving.policy_server.app import create_app
    from vrag_rl.serving.policy_server.scripted import ScriptedBackend

    class SlowBackend(ScriptedBackend):
        def generate(self, messages, params):  # runs in a worker thread: sleeping there is the model's time
            time.sleep(model_ms / 1000)
            return super().generate(messages, params)

    backend = SlowBackend.from_file(script)
    uvicorn.run(create_app(backend, "scripted"), host="127.0.0.1", port=port, log_level="warning")


def bench_ours(policy_url: str, search_url: str, episodes: int, levels: list[int], server_pids: list[int]) -> None:
    from vrag_rl import VRAG

    agent = VRAG(base_url=policy_url + "/v1", search_url=search_url, model="scripted")
    agent.run(QUESTIONS[0])  # imports, first connections
    print(f"{'concurrency':>11} {'episodes/s':>11} {'turns/s':>9} {'p50 episode':>12} {'p95 episode':>12} "
          f"{'own CPU ms/turn':>16} {'answered':>9} {'search + policy server CPU ms/turn':>35}")
    # Every question once, sequentially, before the timed levels: the first sight of a page pays its
    # decode, resize and JPEG encode (reported on this line); the levels then compare like with like
    # instead of charging all of that to whichever level runs first.
    cpu, start = time.process_time(), time.perf_counter()
    turns = sum(agent.run(question).turns for question in QUESTIONS[1:])
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{'cold pages':>11} {(len(QUESTIONS) - 1) / wall:>11.1f} {turns / wall:>9.1f} {'':>12} {'':>12} "
          f"{cpu / max(turns, 1) * 1000:>14.2f}ms")
    for level in levels:
        questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(episodes)]
        servers, cpu, start = [server_cpu_s([pid]) for pid in server_pids], time.process_time(), time.perf_counter()
        results = agent.run_batch(questions, concurrency=level)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        servers = [server_cpu_s([pid]) - before for pid, before in zip(server_pids, servers)]
        turns = sum(r.turns for r in results)
        latencies = sorted(r.elapsed_s for r in results)
        answered = sum(r.status == "answered" for r in results)
        p50, p95 = statistics.median(latencies), latencies[int(0.95 * (len(latencies) - 1))]
        print(f"{level:>11} {len(results) / wall:>11.1f} {turns / wall:>9.1f} "
              f"{p50 * 1000:>10.0f}ms {p95 * 1000:>10.0f}ms "
              f"{cpu / max(turns, 1) * 1000:>14.2f}ms {answered:>5}/{len(results)} "
              f"{servers[0] / max(turns, 1) * 1000:>24.2f} + {servers[1] / max(turns, 1) * 1000:.2f}ms")
    # upstream's call style: one run() per question, sequentially
    cpu, start = time.process_time(), time.perf_counter()
    n = min(episodes, 32)
    turns = 0
    for i in range(n):
        turns += agent.run(QUESTIONS[i % len(QUESTIONS)]).turns
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{'run() x' + str(n):>11} {n / wall:>11.1f} {turns / wall:>9.1f} {'':>12} {'':>12} "
          f"{cpu / max(turns, 1) * 1000:>14.2f}ms")
    getattr(agent, "close", lambda: None)()  # older checkouts have no close()


def bench_upstream(path: Path, policy_url: str, search_url: str, episodes: int) -> None:
    """Upstream's class, sequential, as its README calls it (it is a generator; the answer is its return value)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("upstream_vrag_agent", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"bench_agent: cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agent = module.VRAG(base_url=policy_url + "/v1", search_url=search_url + "/search", generator=False)

    def one(question: str) -> int:
        steps = agent.run(question)
        try:
            while True:
                next(steps)
        except StopIteration as stop:
            return 0 if stop.value is None else 1

    one(QUESTIONS[0])
    n = min(episodes, 32)
    cpu, start = time.process_time(), time.perf_counter()
    answered = sum(one(QUESTIONS[i % len(QUESTIONS)]) for i in range(n))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    turns = 3 * n
    print(f"{'upstream':>11} {n / wall:>11.1f} {turns / wall:>9.1f} {'':>12} {'':>12} "
          f"{cpu / turns * 1000:>14.2f}ms {answered:>5}/{n}")


@app.command(help="\n\n".join(f"\b\n{part}" for part in (__doc__ or "").split("\n\n")))  # \b: printed as written
def bench(
    ctx: typer.Context,
    index: Path = REPO / "data" / "bench_index",
    episodes: int = 64,
    concurrency: Annotated[list[int] | None, typer.Option(show_default="1 8 64")] = None,
    model_ms: Annotated[float, typer.Option(help="simulated model time per reply")] = 50.0,
    agent_repo: Annotated[Path, typer.Option(help="checkout whose vrag_rl is benchmarked")] = REPO,
    upstream: Annotated[Path | None, typer.Option(help="upstream's demo/vrag_agent.py, to compare")] = None,
    serve_policy_at: Annotated[tuple[str, int] | None, typer.Option(
        "--serve-policy", metavar="SCRIPT PORT", hidden=True)] = None,
) -> None:
    """Start the servers, run the agent at each concurrency level (and upstream's, if given), print the table."""
    levels = _levels(concurrency, ctx.args)
    # deliberately first on the path: the vrag_rl imported from here on is the one of the checkout named by
    # --agent-repo (another version to compare), not the project installed in this venv
    sys.path.insert(0, str(agent_repo.resolve()))
    if serve_policy_at:
        serve_policy(serve_policy_at[0], serve_policy_at[1], model_ms)
        return
    ensure_index(index)
    from testkit.loopback import free_port  # not at the top: `--agent-repo` decides what is imported

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps(SCRIPT))
        search_port, policy_port = free_port(), free_port()
        procs = [
            subprocess.Popen([sys.executable, "-m", "search_engine", "serve", "--index", str(index), "--port",
                              str(search_port), *(["--expose-paths"] if upstream else [])], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve-policy", str(script),
                              str(policy_port), "--model-ms", str(model_ms)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        ]
        try:
            search_url, policy_url = f"http://127.0.0.1:{search_port}", f"http://127.0.0.1:{policy_port}"
            wait_healthy(search_url, procs[0])
            wait_healthy(policy_url, procs[1])
            print(f"agent from {agent_repo}; {episodes} episodes per level, 3 model turns each "
                  f"(search, crop, answer), {model_ms:.0f} ms simulated model time per reply; "
                  f"cpu count {os.cpu_count()}")
            bench_ours(policy_url, search_url, episodes, levels, [p.pid for p in procs])
            if upstream:
                bench_upstream(upstream, policy_url, search_url, episodes)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)


def _levels(options: list[int] | None, extra: list[str]) -> list[int]:
    """`--concurrency 1 --concurrency 8` and argparse's `--concurrency 1 8` (8 arrives among the extra arguments)."""
    if options is None:
        if extra:
            raise typer.BadParameter(f"unexpected argument {extra[0]!r}")
        return [1, 8, 64]
    levels = list(options)
    for value in extra:
        try:
            levels.append(int(value))
        except ValueError:
            raise typer.BadParameter(f"{value!r} is not a valid integer", param_hint="'--concurrency'") from None
    return levels


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    from search_engine.infra.cli_exit import exit_status  # not at the top: `--agent-repo` decides what is imported

    return exit_status(app, argv, prog_name="bench_agent.py")


if __name__ == "__main__":
    app(prog_name="bench_agent.py")  # typer's own exit: nothing of this checkout imported before `--agent-repo`
