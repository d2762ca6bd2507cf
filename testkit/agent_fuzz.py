"""Drive the real `VRAG` agent through every public API against the hostile endpoint, and judge it.

Shared by the CI fuzz suite (`tests/fuzz/test_agent_fuzz.py`) and the before/after measurement
(`scripts/fuzz_agent.py`). It uses only the public API that existed before the Policy refactor
(`VRAG(base_url, search_url, model=, generator=, **config)`, `run`, `arun`, `stream`, `astream`,
`run_batch`, `arun_batch`), so the same plan can be replayed against older code.

The rule it checks (issue 11): whatever the endpoint returns, no exception escapes the public API
(except `EpisodeFailedError`, the documented failure of upstream's `generator=False` style); every
episode ends within `max_turns + 1` model calls with a status in `EPISODE_STATUSES`; batches
return every episode's result; the endpoint sees a bounded number of requests per episode.
"""
from __future__ import annotations

import asyncio
import inspect
import random
import time
from dataclasses import dataclass, field
from typing import Any

from testkit.malformed_openai import (
    MALFORMED_KINDS,
    MODELS_MALFORMED,
    FuzzState,
    episode_tag,
)

STATUSES = ("answered", "forced_answer", "token_budget", "failed")  # the rule
APIS = ("run", "arun", "stream", "astream", "run_batch", "arun_batch", "generator_false", "generator_true")
BATCH_APIS = ("run_batch", "arun_batch")
# failure reasons that mean a bug was hit (the loop's last-resort guards), not a handled input
INTERNAL_ERRORS = ("internal error", "policy adapter failed")
QUESTION = "What satisfaction score did the Riverside district get?"


@dataclass
class FuzzCase:
    """One public-API call: `questions` has one entry, or several for the batch APIs."""

    api: str
    spec: str  # the endpoint spec (see testkit.malformed_openai)
    questions: list[str]

    @property
    def kind(self) -> str:
        mode, _, arg = self.spec.partition(".")
        return "mix" if mode == "m" else arg


@dataclass
class EpisodeOutcome:
    api: str
    spec: str
    kind: str
    question: str
    status: str | None = None  # None where the API does not say (generator=True, a crash)
    turns: int | None = None
    error: str | None = None  # the episode's failure reason, where the API says
    requests: int = 0  # chat-completion HTTP requests the endpoint saw for this episode
    elapsed_s: float = 0.0
    crash: str | None = None  # the exception that escaped the public API
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.crash is None and not self.violations


def build_plan(seed: int = 0, mix_cases: int = 24, batch_size: int = 4, kinds: list[str] | None = None,
               forms: tuple[str, ...] = ("k", "a")) -> list[FuzzCase]:
    """Every malformed kind in each form, the APIs taken in turn, plus `mix_cases` seeded random mixes.

    Question texts are unique per episode (the endpoint keys its request counts on them).
    """
    rng = random.Random(seed)
    kinds = list(kinds or MALFORMED_KINDS)
    cases: list[FuzzCase] = []
    counter = 0

    def questions(n: int) -> list[str]:
        nonlocal counter
        out = [f"[fuzz {seed}-{counter + i}] {QUESTION}" for i in range(n)]
        counter += n
        return out

    api_cycle = 0
    for form in forms:
        for kind in kinds:
            api = APIS[api_cycle % len(APIS)]
            api_cycle += 1
            cases.append(FuzzCase(api, f"{form}.{kind}", questions(batch_size if api in BATCH_APIS else 1)))
    for api in APIS:  # a malformed /v1/models, through every API
        cases.append(FuzzCase(api, f"k.{MODELS_MALFORMED}", questions(batch_size if api in BATCH_APIS else 1)))
    for i in range(mix_cases):
        api = APIS[i % len(APIS)]
        cases.append(FuzzCase(api, f"m.{seed}-{rng.randrange(10**6)}",
                              questions(batch_size if api in BATCH_APIS else 1)))
    return cases


def _status_names() -> tuple[str, ...]:
    try:
        from vrag_rl.agent.result import EPISODE_STATUSES
    except ImportError:  # code from before the statuses were named
        return STATUSES
    return tuple(EPISODE_STATUSES)


def run_case(case: FuzzCase, endpoint_url: str, search_url: str, state: FuzzState, max_turns: int = 3,
             policy_retries: int = 1) -> list[EpisodeOutcome]:
    """Run one case through its API; one outcome per question. Never raises."""
    from vrag_rl import VRAG

    model = None if case.kind == MODELS_MALFORMED else "fuzz-model"
    generator = {"generator_false": False, "generator_true": True}.get(case.api)
    agent = VRAG(base_url=f"{endpoint_url}/fz/{case.spec}/v1", search_url=search_url, model=model,
                 generator=generator, max_turns=max_turns, policy_retries=policy_retries, policy_timeout_s=20,
                 search_retries=1)
    outcomes = [EpisodeOutcome(case.api, case.spec, case.kind, q) for q in case.questions]
    started = time.perf_counter()
    try:
        _drive(agent, case, outcomes)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        for outcome in outcomes:
            if outcome.crash is None:
                outcome.crash = f"{exc.__class__.__name__}: {str(exc)[:200]}"
    finally:
        close = getattr(agent, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001 - a failing close is a crash of its own
                outcomes[0].violations.append("close() raised")
    elapsed = time.perf_counter() - started
    statuses = _status_names()
    bound = (max_turns + 1) * (policy_retries + 1)
    for outcome in outcomes:
        outcome.elapsed_s = elapsed / len(outcomes)
        outcome.requests = state.episode_requests(case.spec, episode_tag(outcome.question))
        if outcome.crash is not None:
            continue
        if outcome.status is not None and (outcome.status not in statuses or outcome.status not in STATUSES):
            outcome.violations.append(f"status {outcome.status!r} is not an episode status")
        if outcome.turns is not None and outcome.turns > max_turns + 1:
            outcome.violations.append(f"{outcome.turns} turns > max_turns + 1")
        if outcome.error and outcome.error.startswith(INTERNAL_ERRORS):
            outcome.violations.append(f"a bug was caught by the loop's guard: {outcome.error[:160]}")
        if outcome.requests > bound:
            outcome.violations.append(f"{outcome.requests} requests > {bound}")
    return outcomes


def _judge_result(result: Any, outcome: EpisodeOutcome) -> None:
    if result is None:
        outcome.violations.append("result is None")
        return
    outcome.status = getattr(result, "status", None)
    outcome.turns = getattr(result, "turns", None)
    outcome.error = getattr(result, "error", None)
    if outcome.status is None:
        outcome.violations.append(f"result {type(result).__name__} has no status")
    elif outcome.status in ("answered", "forced_answer") and not getattr(result, "answer", None):
        outcome.violations.append(f"status {outcome.status} without an answer")
    elif outcome.status == "failed" and not getattr(result, "error", None):
        outcome.violations.append("failed without a reason")


def _judge_events(events: list[Any], outcome: EpisodeOutcome) -> None:
    finishes = [e for e in events if getattr(e, "type", None) == "finish"]
    if len(finishes) != 1 or events[-1] is not finishes[0]:
        outcome.violations.append(f"{len(finishes)} finish events, last event {getattr(events[-1], 'type', None)!r}"
                                  if events else "no events")
        return
    outcome.status, outcome.turns = finishes[0].status, finishes[0].turns
    outcome.error = getattr(finishes[0], "error", None)


def _drive(agent: Any, case: FuzzCase, outcomes: list[EpisodeOutcome]) -> None:
    api, questions = case.api, case.questions
    if api == "run":
        _judge_result(agent.run(questions[0]), outcomes[0])
    elif api == "arun":
        _judge_result(_arun(agent, agent.arun(questions[0])), outcomes[0])
    elif api == "stream":
        _judge_events(list(agent.stream(questions[0])), outcomes[0])
    elif api == "astream":
        async def collect() -> list[Any]:
            return [e async for e in agent.astream(questions[0])]
        _judge_events(_arun(agent, collect()), outcomes[0])
    elif api in BATCH_APIS:
        if api == "run_batch":
            results = agent.run_batch(questions, concurrency=4)
        else:
            results = _arun(agent, agent.arun_batch(questions, concurrency=4))
        if len(results) != len(questions):
            outcomes[0].violations.append(f"batch returned {len(results)} of {len(questions)} results")
        for outcome, result in zip(outcomes, results):
            _judge_result(result, outcome)
            if getattr(result, "question", None) not in (outcome.question, None):
                outcome.violations.append("batch results out of order")
    elif api == "generator_false":
        try:
            answer = agent.run(questions[0])
        except Exception as exc:
            if type(exc).__name__ != "EpisodeFailedError":
                raise
            _judge_result(exc.result, outcomes[0])
            if outcomes[0].status in ("answered", "forced_answer"):
                outcomes[0].violations.append("EpisodeFailedError raised for an answered episode")
            return
        if not isinstance(answer, str) or not answer:
            outcomes[0].violations.append(f"generator=False returned {answer!r} (a silent failure)")
        else:
            outcomes[0].status = "answered"
    elif api == "generator_true":
        generator = agent.run(questions[0])
        if not inspect.isgenerator(generator):
            outcomes[0].violations.append(f"generator=True returned {type(generator).__name__}")
            return
        kinds = []
        try:
            while True:
                kinds.append(next(generator)[0])
        except StopIteration as stop:
            final = stop.value
        if not (isinstance(final, tuple) and final[0] == "answer" and isinstance(final[1], str)):
            outcomes[0].violations.append(f"generator=True ended with {final!r}")
    else:
        raise ValueError(f"unknown API {api!r}")


def _arun(agent: Any, coro: Any) -> Any:
    """Run an async API on a fresh loop, closing the agent's clients of that loop (as a user would)."""
    async def main() -> Any:
        try:
            return await coro
        finally:
            await agent.aclose()
    return asyncio.run(main())


@dataclass
class FuzzSummary:
    episodes: int
    api_calls: int
    kinds: int
    requests: int
    crashed_episodes: int
    violating_episodes: int
    crashes_by_kind: dict[str, int]
    violations_by_kind: dict[str, int]
    max_requests_per_episode: int
    elapsed_s: float

    @property
    def failure_rate(self) -> float:
        bad = self.crashed_episodes + self.violating_episodes
        return bad / self.episodes if self.episodes else 0.0


def summarise(outcomes: list[EpisodeOutcome], state: FuzzState, elapsed_s: float, api_calls: int) -> FuzzSummary:
    crashes: dict[str, int] = {}
    violations: dict[str, int] = {}
    for o in outcomes:
        if o.crash:
            crashes[o.kind] = crashes.get(o.kind, 0) + 1
        elif o.violations:
            violations[o.kind] = violations.get(o.kind, 0) + 1
    return FuzzSummary(episodes=len(outcomes), api_calls=api_calls, kinds=len({s for s in state.served}),
                       requests=state.total_requests,
                       crashed_episodes=sum(1 for o in outcomes if o.crash),
                       violating_episodes=sum(1 for o in outcomes if not o.crash and o.violations),
                       crashes_by_kind=dict(sorted(crashes.items())),
                       violations_by_kind=dict(sorted(violations.items())),
                       max_requests_per_episode=max((o.requests for o in outcomes), default=0), elapsed_s=elapsed_s)
