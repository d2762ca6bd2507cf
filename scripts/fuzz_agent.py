"""Fuzz the VRAG agent with a hostile OpenAI-compatible endpoint and print the crash rate.

    .venv/bin/python scripts/fuzz_agent.py [--seed 0] [--mix 96] [--max-turns 3] [--json out.json]

Starts, on loopback, the real search server over the generated sample corpus (MiniLM + BM25, built
once into --workdir) and `testkit.malformed_openai`'s endpoint, then drives `vrag_rl.VRAG` through
every public API with every malformed-response kind (`testkit.agent_fuzz.build_plan`). Prints
episodes, kinds, HTTP requests, and the episodes whose exception escaped the public API
("crashed") or that broke the episode rule ("violations": a silent None, too many turns or
requests, a lost batch result), per kind.

To measure code from another commit, run this script with that checkout first on the import path,
`PYTHONPATH=<checkout> .venv/bin/python scripts/fuzz_agent.py` (e.g. a scratch `git worktree` holding
copies of `testkit/agent_fuzz.py`, `testkit/malformed_openai.py` and this script); it uses only the
public API that existed before the Policy refactor.
"""
from __future__ import annotations

import fnmatch
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_THREAD_LIMIT", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import testkit  # noqa: F401  (torchvision shim)

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "vrag_fuzz_agent"


def _text_index(workdir: Path) -> Path:
    """The sample corpus ingested with the CPU channels (as the tests' `text_index` fixture)."""
    from search_engine.ingest import Ingestor
    from search_engine.sample_corpus import generate_sample_corpus

    index_dir = workdir / "index"
    if (index_dir / "manifest.json").exists():
        return index_dir
    corpus = generate_sample_corpus(workdir / "corpus")
    report = Ingestor(index_dir, visual_model=None, text_model="minilm", progress=False).add(corpus.files)
    if report.failed:
        raise SystemExit(f"ingestion failed: {report.failed}")
    return index_dir


def _parse_bench() -> None:
    """Seconds `parse_reply` takes on the huge replies (issue 11: 5 s and 12.6 s with the quadratic parser)."""
    from vrag_rl.vrag.actions import parse_reply

    for name, text in (("64 KB of <search>", "<search>" * 8192), ("128 KB of <search>", "<search>" * 16384),
                       ("128 KB <answer><search>x</search>", "<think>" + "<answer><search>x</search>" * 5000)):
        started = time.perf_counter()
        parsed = parse_reply(text)
        print(f"parse_reply({name}): {time.perf_counter() - started:.3f} s -> {parsed.kind}", flush=True)


def _run_with_timeout(case, endpoint_url: str, search_url: str, state, *, max_turns: int,
                      policy_retries: int, case_timeout: float) -> list:
    """`run_case` on a daemon thread: a hung public-API call is a failure to count, not the end of the run."""
    from testkit.agent_fuzz import EpisodeOutcome, run_case

    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("outcomes", run_case(
        case, endpoint_url, search_url, state, max_turns=max_turns, policy_retries=policy_retries)),
        daemon=True)
    thread.start()
    thread.join(case_timeout)
    if "outcomes" in box:
        return box["outcomes"]
    return [EpisodeOutcome(case.api, case.spec, case.kind, q, crash=f"hung for more than {case_timeout:.0f} s")
            for q in case.questions]


@app.command(help=(__doc__ or "").split("\n\n")[0])
def fuzz(
    seed: int = 0,
    mix: Annotated[int, typer.Option(help="seeded random-mix cases (each API in turn)")] = 96,
    max_turns: int = 3,
    policy_retries: int = 1,
    batch_size: int = 4,
    workdir: Path = DEFAULT_WORKDIR,
    json_out: Annotated[Path | None, typer.Option("--json", help="write every episode's outcome here")] = None,
    case_timeout: Annotated[float, typer.Option(
        help="seconds before a public-API call counts as hung (its episodes count as crashed)")] = 180.0,
    progress: Annotated[bool, typer.Option("--progress", help="print one line per case to stderr")] = False,
    exclude_kinds: Annotated[str, typer.Option(help="comma-separated fnmatch patterns of kinds to leave out "
                                               "(e.g. 'huge_*' for code whose quadratic parser would take minutes "
                                               "on them)")] = "",
    parse_bench: Annotated[bool, typer.Option(
        "--parse-bench", help="also time parse_reply on the 64 KB / 128 KB replies, in this process")] = False,
) -> None:
    """Fuzz the agent and print the crash rate."""
    from search_engine.api import create_app as search_app
    from search_engine.engine import SearchEngine
    from testkit.agent_fuzz import build_plan, summarise
    from testkit.loopback import LoopbackServer
    from testkit.malformed_openai import create_app as fuzz_app

    workdir.mkdir(parents=True, exist_ok=True)
    search = LoopbackServer(search_app(engine=SearchEngine.load(_text_index(workdir)))).start()
    endpoint_app = fuzz_app()
    endpoint = LoopbackServer(endpoint_app).start()
    state = endpoint_app.state.fuzz
    plan = build_plan(seed, mix_cases=mix, batch_size=batch_size)
    excluded = [p for p in exclude_kinds.split(",") if p]
    plan = [c for c in plan if not any(fnmatch.fnmatch(c.kind, p) for p in excluded)]
    if parse_bench:
        _parse_bench()
    outcomes = []
    started = time.perf_counter()
    try:
        for number, case in enumerate(plan, 1):
            case_outcomes = _run_with_timeout(case, endpoint.url, search.url, state, max_turns=max_turns,
                                              policy_retries=policy_retries, case_timeout=case_timeout)
            outcomes.extend(case_outcomes)
            if progress:
                bad = [o.crash or o.violations[0] for o in case_outcomes if not o.ok]
                print(f"[{number}/{len(plan)}] {case.api} {case.spec}: {len(case_outcomes)} episodes, "
                      f"{sum(o.elapsed_s for o in case_outcomes):.1f} s {bad[:1]}", file=sys.stderr, flush=True)
    finally:
        endpoint.stop()
        search.stop()
    summary = summarise(outcomes, state, time.perf_counter() - started, api_calls=len(plan))
    if not outcomes:
        return
    print(f"code under test: {Path(sys.modules['vrag_rl'].__file__ or '?').parents[1]}")
    print(f"episodes {summary.episodes} in {summary.api_calls} public-API calls; kinds served {summary.kinds}; "
          f"HTTP requests to the endpoint {summary.requests} (max per episode {summary.max_requests_per_episode}); "
          f"{summary.elapsed_s:.1f} s")
    print(f"crashed (exception escaped the public API): {summary.crashed_episodes} "
          f"({summary.crashed_episodes / summary.episodes:.1%})")
    print(f"other rule violations: {summary.violating_episodes}; "
          f"episodes failing the rule: {summary.failure_rate:.1%}")
    by_api: dict[str, list[int]] = {}
    for o in outcomes:
        counts = by_api.setdefault(o.api, [0, 0, 0])
        counts[0] += 1
        counts[1] += o.crash is not None
        counts[2] += o.crash is None and bool(o.violations)
    for api, (n, crashed, violating) in by_api.items():
        print(f"  {api:16s} episodes {n:4d}  crashed {crashed:4d}  violations {violating:4d}")
    for kind, n in summary.crashes_by_kind.items():
        example = next(o.crash for o in outcomes if o.kind == kind and o.crash)
        print(f"  crash  {kind:24s} {n:3d}  e.g. {example[:110]}")
    for kind, n in summary.violations_by_kind.items():
        example = next(o.violations[0] for o in outcomes if o.kind == kind and not o.crash and o.violations)
        print(f"  broke  {kind:24s} {n:3d}  e.g. {example[:110]}")
    if json_out:
        json_out.write_text(json.dumps({"summary": asdict(summary), "outcomes": [asdict(o) for o in outcomes]},
                                        indent=1))


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    from search_engine.infra.cli_exit import exit_status  # not at the top: older checkouts (see above) lack it

    return exit_status(app, argv, prog_name="fuzz_agent.py")


if __name__ == "__main__":
    app(prog_name="fuzz_agent.py")  # typer's own exit, so that a checkout without cli_exit can run this script
