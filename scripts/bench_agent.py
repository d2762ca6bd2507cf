#!/usr/bin/env python
"""Benchmark the agent loop: episodes/s and per-turn overhead at several concurrency levels.

Starts (as subprocesses, on loopback) the search server over a text index of the sample corpus
and a scripted policy server replaying search → bbox → answer, then runs N episodes per level.
The policy takes no time, so the numbers are the agent's own overhead plus real search and image
work (page load, resize, crop, JPEG + base64) — the cost added on top of a model.

    python scripts/bench_agent.py --episodes 64 --concurrency 1 8 64
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SCRIPT = {"default": [
    "<think>Find the page.</think><search>{question}</search>",
    "<think>Zoom into the table.</think><bbox>[40, 60, 400, 300]</bbox>",
    "<think>Read it.</think><answer>7.4</answer>",
]}
QUESTIONS = ["What satisfaction score did the Riverside district get?", "Kestrel Ridge solar plant output",
             "What was Acme Robotics' total revenue in 2023?", "most used travel app", "bicycle share of commuters"]


def free_port() -> int:
    from testkit.loopback import free_port as pick

    return pick()


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


def ensure_index(index: Path) -> None:
    if (index / "manifest.json").exists():
        return
    from search_engine.ingest import Ingestor
    from search_engine.sample_corpus import generate_sample_corpus

    corpus = generate_sample_corpus(index.parent / "sample_pdf", overwrite=True)
    Ingestor(index, visual_model=None, text_model="minilm").add(corpus.files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=REPO / "data" / "bench_index")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    args = parser.parse_args()
    ensure_index(args.index)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps(SCRIPT))
        search_port, policy_port = free_port(), free_port()
        procs = [
            subprocess.Popen([sys.executable, "-m", "search_engine", "serve", "--index", str(args.index), "--port",
                              str(search_port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([sys.executable, "-m", "vrag_rl.policy_server", "serve", "--backend", "scripted",
                              "--script", str(script), "--port", str(policy_port)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        ]
        try:
            search_url, policy_url = f"http://127.0.0.1:{search_port}", f"http://127.0.0.1:{policy_port}"
            wait_healthy(search_url, procs[0])
            wait_healthy(policy_url, procs[1])
            from vrag_rl import VRAG

            agent = VRAG(base_url=policy_url + "/v1", search_url=search_url, model="scripted")
            agent.run(QUESTIONS[0])  # warm-up
            print(f"{args.episodes} episodes per level, 3 model turns each (search, crop, answer); "
                  f"cpu count {os.cpu_count()}")
            print(f"{'concurrency':>11} {'episodes/s':>11} {'turns/s':>9} {'p50 episode':>12} {'p95 episode':>12} "
                  f"{'agent-side ms/turn':>19} {'answered':>9}")
            for level in args.concurrency:
                questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.episodes)]
                start = time.perf_counter()
                results = agent.run_batch(questions, concurrency=level)
                wall = time.perf_counter() - start
                turns = sum(r.turns for r in results)
                latencies = sorted(r.elapsed_s for r in results)
                # time per turn not spent waiting on the policy or search servers: parsing, images, bookkeeping
                own = [(r.elapsed_s - r.timings["policy_s"] - r.timings["search_s"]) / r.turns for r in results]
                answered = sum(r.status == "answered" for r in results)
                print(f"{level:>11} {len(results) / wall:>11.1f} {turns / wall:>9.1f} "
                      f"{statistics.median(latencies) * 1000:>10.0f}ms {latencies[int(0.95 * (len(latencies) - 1))] * 1000:>10.0f}ms "
                      f"{statistics.mean(own) * 1000:>17.1f}ms {answered:>5}/{len(results)}")
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
