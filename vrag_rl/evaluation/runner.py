"""Run the agent over a dataset concurrently, score each episode, and log as it goes.

Episodes are I/O-bound (VLM and search calls), so they run concurrently under a semaphore.
Each finished example is appended and flushed to a JSONL file at once: a crash or Ctrl-C loses
nothing, and a rerun with the same file skips the uids already there (resume).
"""
from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from vrag_rl.scoring.judge import LLMJudge
from vrag_rl.scoring.metrics import anls, contains_match, exact_match, ndcg_at_k, recall_at_k, token_f1
from vrag_rl.scoring.qa_dataset import EvalExample


class ResultLike(Protocol):
    answer: str | None
    status: str
    turns: int
    elapsed_s: float
    retrieved_page_ids: list[str]

    def to_dict(self) -> dict: ...


class AgentLike(Protocol):
    async def arun(self, question: str) -> ResultLike: ...


# ------------------------------------------------------------------------------------------ records


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records already in a results file; a torn last line (crash mid-write) is ignored."""
    records: list[dict[str, Any]] = []
    if not path.exists():
        return records
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and "uid" in record:
                records.append(record)
    return records


def score_example(example: EvalExample, prediction: str | None, retrieved: Sequence[str], k: int) -> dict[str, Any]:
    """All string and retrieval metrics for one episode."""
    ref = example.reference_answer
    return {
        "em": exact_match(prediction, ref),
        "f1": token_f1(prediction, ref),
        "anls": anls(prediction, ref),
        "contains": contains_match(prediction, ref),
        f"recall@{k}": recall_at_k(retrieved, example.reference_page_ids, k),
        f"ndcg@{k}": ndcg_at_k(retrieved, example.reference_page_ids, k),
    }


SERVING_FAILURES = frozenset({"policy_failed", "search_failed", "internal", "exception", "timeout"})
"""Failure kinds that say the system broke (a server, the engine), not that the model gave no usable answer."""


def failure_kind(result: Any) -> str:
    """Why an episode that carries an error ended: the kind of its fatal `ErrorEvent` (`policy_failed`,
    `search_failed`, `internal`, `invalid_action`, `budget_exhausted`), else `token_budget` or `no_answer` from its
    status.

    An evaluation of a weak or freshly trained model needs the two apart: a model that never answers is a result,
    a policy server that fails is a fault (see `SERVING_FAILURES`)."""
    for event in reversed(list(getattr(result, "events", None) or [])):
        if getattr(event, "type", None) == "error" and getattr(event, "fatal", False):
            return str(getattr(event, "kind", "internal"))
    return "token_budget" if getattr(result, "status", None) == "token_budget" else "no_answer"


async def run_example(agent: AgentLike, example: EvalExample, judge: LLMJudge | None, k: int,
                      episode_timeout: float | None = None, save_trajectory: bool = False) -> dict[str, Any]:
    """One episode → one JSON-safe record; agent exceptions become a failed record."""
    start = time.perf_counter()
    result: Any = None
    error: str | None = None
    failure: str | None = None
    try:
        result = await asyncio.wait_for(agent.arun(example.query), timeout=episode_timeout)
    except asyncio.TimeoutError:
        error, failure = f"TimeoutError: episode exceeded {episode_timeout}s", "timeout"
    except Exception as exc:  # one bad episode must not end the evaluation
        error, failure = f"{type(exc).__name__}: {exc}", "exception"
    measured = time.perf_counter() - start
    if error is None and result is not None and getattr(result, "error", None):
        error = str(result.error)  # the agent caught it itself (e.g. policy server down)
        failure = failure_kind(result)

    prediction = getattr(result, "answer", None) if result is not None else None
    retrieved = list(getattr(result, "retrieved_page_ids", None) or [])
    elapsed = getattr(result, "elapsed_s", None)
    record: dict[str, Any] = {
        "uid": example.uid,
        "query": example.query,
        "reference": example.reference_answer,
        "reference_page_ids": example.reference_page_ids,
        "prediction": prediction,
        "status": getattr(result, "status", "failed") if result is not None else "failed",
        "turns": int(getattr(result, "turns", 0) or 0) if result is not None else 0,
        "elapsed_s": float(elapsed) if isinstance(elapsed, (int, float)) else measured,
        **score_example(example, prediction, retrieved, k),
        "judge": None,
        "judge_error": None,
        "retrieved_page_ids": retrieved,
        "error": error,
        "failure": failure,
    }
    for extra in ("timings", "usage"):  # optional: per-stage seconds, token counts
        value = getattr(result, extra, None)
        if isinstance(value, dict):
            record[extra] = value
    if judge is not None:
        verdict = await judge.ajudge(example.query, example.reference_answer, prediction)
        record["judge"], record["judge_error"] = verdict.score, verdict.error
    if save_trajectory and result is not None and hasattr(result, "to_dict"):
        try:
            record["trajectory"] = result.to_dict()
        except Exception as exc:  # a serialisation bug should not cost the scores
            record["trajectory_error"] = f"{type(exc).__name__}: {exc}"
    return record


# ------------------------------------------------------------------------------------------ summary


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class EvalSummary:
    """Aggregate scores; metric means skip examples where the metric is undefined (None)."""

    k: int
    n_examples: int
    n_evaluated: int
    n_resumed: int
    n_errors: int
    status_counts: dict[str, int]
    failure_counts: dict[str, int]
    metrics: dict[str, float | None]
    n_judged: int
    answered_rate: float | None
    mean_turns: float | None
    latency_mean_s: float | None
    latency_p50_s: float | None
    latency_p95_s: float | None
    wall_s: float
    episodes_per_s: float | None
    out_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format_table(self) -> str:
        def fmt(value: Any, pct: bool = False) -> str:
            if value is None:
                return "-"
            if pct:
                return f"{100 * value:.1f}"
            return f"{value:.3f}" if isinstance(value, float) else str(value)

        rows: list[tuple[str, str]] = [
            ("examples", f"{self.n_evaluated}/{self.n_examples}" + (f" ({self.n_resumed} resumed)"
                                                                   if self.n_resumed else "")),
            ("errors", str(self.n_errors)),
            ("status", ", ".join(f"{s}={c}" for s, c in sorted(self.status_counts.items())) or "-"),
            ("failures", ", ".join(f"{s}={c}" for s, c in sorted(self.failure_counts.items())) or "-"),
        ]
        for name, value in self.metrics.items():
            label = f"{name} (%)" + (f"  [n={self.n_judged}]" if name == "judge" else "")
            rows.append((label, fmt(value, pct=True)))
        rows += [
            ("answered (%)", fmt(self.answered_rate, pct=True)),
            ("mean turns", fmt(self.mean_turns)),
            ("latency mean/p50/p95 (s)", "/".join(fmt(v) for v in (self.latency_mean_s, self.latency_p50_s,
                                                                  self.latency_p95_s))),
            ("wall time (s)", fmt(self.wall_s)),
            ("episodes/s", fmt(self.episodes_per_s)),
        ]
        width = max(len(label) for label, _ in rows)
        return "\n".join(f"{label.ljust(width)}  {value}" for label, value in rows)


def summarize(records: Sequence[dict[str, Any]], k: int, n_examples: int | None = None, n_resumed: int = 0,
              wall_s: float = 0.0, n_run: int | None = None, out_path: Path | None = None) -> EvalSummary:
    """Aggregate per-example records. Throughput uses only this run's episodes (`n_run`)."""
    metric_names = ["em", "f1", "anls", "contains", "judge", f"recall@{k}", f"ndcg@{k}"]
    metrics: dict[str, float | None] = {}
    for name in metric_names:
        metrics[name] = _mean([float(r[name]) for r in records if r.get(name) is not None])
    latencies = [float(r["elapsed_s"]) for r in records if r.get("elapsed_s") is not None]
    n = len(records)
    n_run = n if n_run is None else n_run
    return EvalSummary(
        k=k,
        n_examples=n if n_examples is None else n_examples,
        n_evaluated=n,
        n_resumed=n_resumed,
        n_errors=sum(1 for r in records if r.get("error")),
        status_counts=dict(Counter(str(r.get("status")) for r in records)),
        failure_counts=dict(Counter(str(r["failure"]) for r in records if r.get("failure"))),
        metrics=metrics,
        n_judged=sum(1 for r in records if r.get("judge") is not None),
        answered_rate=(sum(1 for r in records if r.get("status") == "answered") / n) if n else None,
        mean_turns=_mean([float(r.get("turns") or 0) for r in records]),
        latency_mean_s=_mean(latencies),
        latency_p50_s=percentile(latencies, 50),
        latency_p95_s=percentile(latencies, 95),
        wall_s=wall_s,
        episodes_per_s=(n_run / wall_s) if wall_s > 0 and n_run else None,
        out_path=str(out_path) if out_path else None,
    )


# ------------------------------------------------------------------------------------------ driver


def _open_for_append(path: Path):
    """Append handle that first ends a torn last line, so the next record is not glued to it."""
    needs_newline = False
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as fh:
            fh.seek(-1, 2)
            needs_newline = fh.read(1) != b"\n"
    handle = path.open("a", encoding="utf-8")
    if needs_newline:
        handle.write("\n")
        handle.flush()
    return handle


async def evaluate(agent: AgentLike, examples: Sequence[EvalExample], concurrency: int = 8,
                   judge: LLMJudge | None = None, out_path: Path | str | None = None, progress: bool = True,
                   k: int = 5, episode_timeout: float | None = None,
                   save_trajectories: bool = False, retry_errors: bool = False) -> EvalSummary:
    """Evaluate `agent` on `examples`; resumes from `out_path` and summarises old + new records.

    `retry_errors` reruns uids whose earlier record holds an agent error (e.g. the server was
    down); without it every uid already in the file is skipped.
    """
    out = Path(out_path) if out_path is not None else None
    wanted = {ex.uid for ex in examples}
    previous: dict[str, dict[str, Any]] = {}
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        # Later lines win, so a retried uid's newest record is the one that counts.
        previous = {str(r["uid"]): r for r in read_records(out) if str(r["uid"]) in wanted}
        if retry_errors:
            previous = {uid: r for uid, r in previous.items() if not r.get("error")}
    pending = [ex for ex in examples if ex.uid not in previous]

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pending), desc="eval", unit="ep", dynamic_ncols=True)

    semaphore = asyncio.Semaphore(max(1, concurrency))
    new_records: list[dict[str, Any]] = []
    fh = _open_for_append(out) if out is not None else None

    async def one(example: EvalExample) -> None:
        async with semaphore:
            record = await run_example(agent, example, judge, k, episode_timeout, save_trajectories)
        # The loop is single-threaded and this block never awaits, so lines cannot interleave.
        new_records.append(record)
        if fh is not None:
            fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            fh.flush()
        if bar is not None:
            bar.update(1)
            bar.set_postfix(contains=f"{_mean([r['contains'] for r in new_records]):.2f}")

    start = time.perf_counter()
    try:
        await asyncio.gather(*(one(ex) for ex in pending))
    finally:
        wall = time.perf_counter() - start
        if fh is not None:
            fh.close()
        if bar is not None:
            bar.close()
        if judge is not None:
            await judge.aclose()

    order = {ex.uid: i for i, ex in enumerate(examples)}
    records = sorted([*previous.values(), *new_records], key=lambda r: order.get(r["uid"], len(order)))
    return summarize(records, k, n_examples=len(examples), n_resumed=len(previous), wall_s=wall,
                     n_run=len(new_records), out_path=out)


def run_evaluation(agent: AgentLike, examples: Sequence[EvalExample], **kwargs: Any) -> EvalSummary:
    """Synchronous wrapper around `evaluate` for scripts and notebooks without a running loop.

    It owns the event loop, so it also closes the agent's clients for that loop (`aclose`, when
    the agent has one) before the loop goes away.
    """

    async def main() -> EvalSummary:
        try:
            return await evaluate(agent, examples, **kwargs)
        finally:
            close = getattr(agent, "aclose", None)
            if close is not None:
                await close()

    return asyncio.run(main())
