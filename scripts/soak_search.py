#!/usr/bin/env python
"""Soak the search server: rounds of many concurrent clients, the server's RSS printed after each.

Why: a long-running search server (RL rollouts, a shared demo) must not grow without bound. This
starts `python -m search_engine serve` as its own process (so its RSS is its own), drives it with
`--clients` concurrent aiohttp clients for `--seconds` per round — a mix of POST /search with
queries of every length (1 word to ~2,000 characters), top_k and document filters, upstream's
GET /search and resized page images — and prints, per round, the requests served, errors, and the
server's RSS at the end of the round and after `--idle` seconds of quiet.

    python scripts/soak_search.py                       # 5 rounds x 64 clients x 60 s, sample text index
    python scripts/soak_search.py --index DIR --rounds 3 --seconds 20
    python scripts/soak_search.py --server-env VRAG_MALLOC_TUNING=0   # without the allocator setting
    python scripts/soak_search.py --requests 100 --seconds 600        # equal work per round on a busy machine

The last line compares the final RSS with round 1's (issue 21 asks for ≤ 15% growth). Nothing here
is a test: it prints numbers for docs and notes.
"""
from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import aiohttp
import psutil
import typer

from search_engine.infra.cli_exit import exit_status

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})
DEFAULT_WORK_DIR = os.path.join(tempfile.gettempdir(), "vrag_soak")

WORDS = ("revenue growth market share solar plant capacity megawatt board dividend memo quarterly report "
         "table chart figure page slide travel online booking airline hotel network data centre latency "
         "throughput energy annual profit loss region asia pacific europe forecast customer segment").split()


def build_sample_index(root: Path) -> Path:
    """The sample corpus with MiniLM + BM25 (the CPU channels), built once into `root`."""
    index_dir = root / "text_index"
    if (index_dir / "manifest.json").exists():
        return index_dir
    from search_engine.ingest import Ingestor
    from search_engine.sample_corpus import generate_sample_corpus

    corpus = generate_sample_corpus(root / "corpus")
    report = Ingestor(index_dir, visual_model=None, text_model="minilm", progress=False).add(corpus.files)
    if report.failed:
        raise SystemExit(f"sample ingestion failed: {report.failed}")
    return index_dir


def random_query(rng: random.Random) -> str:
    shape = rng.random()
    if shape < 0.6:
        n = rng.randint(1, 12)
    elif shape < 0.9:
        n = rng.randint(12, 80)
    else:
        n = rng.randint(80, 250)
    text = " ".join(rng.choice(WORDS) for _ in range(n))
    if rng.random() < 0.2:
        text += " " + "".join(chr(rng.randint(0x4E00, 0x4FFF)) for _ in range(rng.randint(1, 30)))
    return text[:2000]


async def client_loop(session: aiohttp.ClientSession, url: str, deadline: float, seed: int, doc_ids: list[str],
                      page_ids: list[str], counts: dict[str, int], max_requests: int) -> None:
    rng = random.Random(seed)
    while time.monotonic() < deadline and (not max_requests or counts["sent"] < max_requests):
        counts["sent"] += 1
        kind = rng.random()
        try:
            if kind < 0.8:
                body = {"queries": [random_query(rng) for _ in range(rng.choice((1, 1, 1, 2, 4)))],
                        "top_k": rng.randint(1, 20)}
                if doc_ids and rng.random() < 0.2:
                    body["doc_ids"] = rng.sample(doc_ids, rng.randint(1, len(doc_ids)))
                request = session.post(url + "/search", json=body)
            elif kind < 0.9:
                request = session.get(url + "/search", params=[("queries", random_query(rng)),
                                                               ("top_k", str(rng.randint(1, 10)))])
            else:
                request = session.get(f"{url}/pages/{rng.choice(page_ids)}/image",
                                      params={"max_side": str(rng.choice((64, 256, 512, 1024)))})
            async with request as response:
                await response.read()
                counts["ok" if response.status == 200 else f"http_{response.status}"] += 1
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            counts[type(exc).__name__] += 1


async def run_round(url: str, clients: int, seconds: float, seed: int, doc_ids: list[str],
                    page_ids: list[str], max_requests: int = 0) -> dict[str, int]:
    import collections

    counts: dict[str, int] = collections.Counter()
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(client_loop(session, url, deadline, seed * 1000 + i, doc_ids, page_ids, counts,
                                           max_requests) for i in range(clients)))
    counts.pop("sent", None)
    return dict(counts)


def rss_mib(process: psutil.Process) -> float:
    return process.memory_info().rss / 2**20


def anon_mib(process: psutil.Process) -> float:
    """The anonymous part of RSS (heap, tensors): what an allocator keeps. The rest is file-backed (the
    model's safetensors are mapped) and the kernel drops it under memory pressure, which moves RSS alone."""
    try:
        with open(f"/proc/{process.pid}/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"search server exited with {proc.returncode} during start-up")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("search server did not become healthy")


@app.command(help=(__doc__ or "").split("\n\n")[0])
def soak(
    index: Annotated[str | None, typer.Option(
        help="index directory (default: the sample text index, built on first use)")] = None,
    work_dir: str = DEFAULT_WORK_DIR,
    rounds: int = 5,
    clients: int = 64,
    seconds: float = 60.0,
    requests: Annotated[int, typer.Option(
        help="end a round after this many requests (0: only --seconds); equal work per round when the machine "
             "is too busy for time-based rounds to compare")] = 0,
    idle: Annotated[float, typer.Option(help="quiet seconds after each round before the RSS")] = 10.0,
    port: int = 18722,
    seed: int = 7,
    server_env: Annotated[list[str] | None, typer.Option(
        help="KEY=VALUE for the server process (KEY= unsets it); repeatable")] = None,
) -> None:
    """Serve the index in its own process, run the rounds, print the RSS after each and the growth."""
    server_env = list(server_env or [])
    index_dir = Path(index) if index else build_sample_index(Path(work_dir))
    env = dict(os.environ)
    for item in server_env:
        key, _, value = item.partition("=")
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "search_engine", "serve", "--index", str(index_dir), "--host",
                             "127.0.0.1", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_healthy(url, proc)
        server = psutil.Process(proc.pid)
        doc_ids, page_ids = _corpus_ids(url)
        print(f"server pid {proc.pid}, index {index_dir}, {len(doc_ids)} documents, {len(page_ids)} pages; "
              f"env {server_env or 'unchanged'}", flush=True)
        print(f"RSS after start: {rss_mib(server):.0f} MiB (anonymous {anon_mib(server):.0f})", flush=True)
        rows: list[float] = []
        anons: list[float] = []
        for round_no in range(1, rounds + 1):
            started = time.monotonic()
            counts = asyncio.run(run_round(url, clients, seconds, seed + round_no, doc_ids,
                                           page_ids, requests))
            elapsed = time.monotonic() - started
            busy = rss_mib(server)
            time.sleep(idle)
            idle_rss, anon = rss_mib(server), anon_mib(server)
            rows.append(idle_rss)
            anons.append(anon)
            served = counts.get("ok", 0)
            other = dict(sorted((k, v) for k, v in counts.items() if k != "ok"))
            print(f"round {round_no}: {served} ok in {elapsed:.0f} s ({served / elapsed:.1f}/s), other {other}, "
                  f"RSS end {busy:.0f} MiB, after {idle:.0f} s idle {idle_rss:.0f} MiB (anonymous {anon:.0f})",
                  flush=True)
        growth = rows[-1] / rows[0] - 1 if rows else 0.0
        print(f"RSS after round {len(rows)} vs round 1 (idle): {rows[-1]:.0f} / {rows[0]:.0f} MiB = "
              f"{growth * 100:+.1f}% ({'within' if growth <= 0.15 else 'OVER'} the 15% bound); anonymous "
              f"{anons[-1]:.0f} / {anons[0]:.0f} MiB = {(anons[-1] / anons[0] - 1) * 100:+.1f}%", flush=True)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        errors = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
        if "Traceback" in errors:
            print("server log had tracebacks:\n" + errors[-3000:], file=sys.stderr)


def _corpus_ids(url: str) -> tuple[list[str], list[str]]:
    """Document ids and page ids (`{doc}_{n}`, the index's naming) from the server's /documents."""
    import json
    import urllib.request

    with urllib.request.urlopen(url + "/documents", timeout=10) as response:
        documents = json.loads(response.read())
    doc_ids = [d["doc_id"] for d in documents]
    return doc_ids, [f"{d['doc_id']}_{n}" for d in documents for n in range(1, d["num_pages"] + 1)]


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="soak_search.py")


if __name__ == "__main__":
    sys.exit(main())
