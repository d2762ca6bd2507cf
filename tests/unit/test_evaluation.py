"""Evaluation package: metrics on hand-computed cases, dataset loading, the concurrent runner with
a duck-typed fake agent, the LLM judge against a real loopback HTTP server, and the CLI."""
from __future__ import annotations

import asyncio
import json
import math
import re
import socket
from dataclasses import dataclass, field

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from vrag_rl.evaluation.runner import SERVING_FAILURES, evaluate, percentile, read_records, run_evaluation
from vrag_rl.scoring.judge import LLMJudge, parse_verdict
from vrag_rl.scoring.metrics import (
    anls,
    contains_match,
    exact_match,
    levenshtein,
    ndcg_at_k,
    normalize_answer,
    recall_at_k,
    token_f1,
)
from vrag_rl.scoring.qa_dataset import EvalExample, load_dataset

# ------------------------------------------------------------------------------------------ metrics


def test_normalize_and_exact_match():
    assert normalize_answer("The  $341 Million.") == "341 million"
    assert normalize_answer(None) == ""
    assert exact_match("341 million", "$341 million") == 1.0
    assert exact_match("North America!", ["Europe", "north america"]) == 1.0
    assert exact_match("Europe", ["Asia", "north america"]) == 0.0
    assert exact_match(None, "x") == 0.0
    assert exact_match("", "") == 0.0  # an empty prediction is never right
    assert exact_match("x", []) == 0.0


def test_token_f1():
    assert token_f1("revenue was 341 million", "341 million") == pytest.approx(2 / 3)
    assert token_f1("341 million", "341 million") == 1.0
    assert token_f1("blue", "red") == 0.0
    assert token_f1("the red car", ["blue car", "red car"]) == 1.0  # best over refs; articles dropped
    assert token_f1(None, "red") == 0.0
    assert token_f1("   ", "red") == 0.0


def test_anls():
    assert levenshtein("kitten", "sitting") == 3
    assert anls("RouteFindr", "RouteFinder") == pytest.approx(1 - 1 / 11)
    assert anls("routefinder ", "RouteFinder") == 1.0  # case and outer space do not count
    assert anls("abcd", "abxy") == 0.0  # NL = 0.5 is not below the 0.5 threshold
    assert anls("abcd", "abxy", threshold=0.6) == pytest.approx(0.5)
    assert anls("abcde", "abcxy") == pytest.approx(0.6)
    assert anls("abcde", "abxyz") == 0.0
    assert anls("7.4", ["7.5", "7.4"]) == 1.0
    assert anls(None, "7.4") == 0.0 and anls("", "7.4") == 0.0


def test_contains_match():
    assert contains_match("Total revenue in 2023 was $341 million.", "$341 million") == 1.0
    assert contains_match("About 120 people", "12") == 0.0  # token boundaries
    assert contains_match("It was 12%.", "12%") == 1.0
    assert contains_match("RouteFinder", ["TransitGo", "routefinder"]) == 1.0
    assert contains_match("anything", "") == 0.0
    assert contains_match(None, "x") == 0.0
    # Chinese has no spaces between words: a reference inside a sentence counts, a different one does not.
    assert contains_match("数据中心采用了三层网络架构。", "三层网络") == 1.0
    assert contains_match("数据中心采用了两层网络架构。", "三层网络") == 0.0


def test_recall_at_k():
    assert recall_at_k(["a", "b", "c"], ["c", "d"], k=2) == 0.0
    assert recall_at_k(["a", "b", "c"], ["c", "d"], k=3) == 0.5
    assert recall_at_k(["c", "c", "d"], ["c", "d"], k=2) == 1.0  # duplicates count once
    assert recall_at_k([], ["a"], k=5) == 0.0
    assert recall_at_k(["a"], [], k=5) is None  # undefined without gold pages


def test_ndcg_at_k():
    assert ndcg_at_k(["x", "r1"], ["r1"], k=5) == pytest.approx(1 / math.log2(3))
    # DCG = 1 + 1/log2(4); ideal over min(k, 2) = 2 hits: 1 + 1/log2(3)
    assert ndcg_at_k(["r1", "x", "r2"], ["r1", "r2"], k=5) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["r1"], ["r1", "r2"], k=1) == 1.0  # ideal is capped at k
    assert ndcg_at_k(["r1"], ["r1", "r2"], k=5) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["x", "r1"], ["r1"], k=1) == 0.0
    assert ndcg_at_k([], ["r1"], k=5) == 0.0
    assert ndcg_at_k(["r1"], [], k=5) is None


def test_percentile_matches_numpy_linear():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    assert percentile([], 50) is None

# ------------------------------------------------------------------------------------------ dataset


def test_sample_corpus_dataset_loads(sample_corpus):
    examples = load_dataset(sample_corpus.dataset_path)
    assert len(examples) == 9
    first = examples[0]
    assert first.uid == "0"
    assert first.reference_answer == "$341 million"
    assert first.reference_page_ids == ["acme_annual_report_2023_2"]
    assert first.file_name == "acme_annual_report_2023.pdf"
    assert first.meta["source_type"] == "Table"
    assert examples[-1].reference_page_ids == ["board_memo_scan_1"]


def test_dataset_limit_shuffle_list_and_jsonl(tmp_path, sample_corpus):
    raw = json.loads(sample_corpus.dataset_path.read_text())["examples"]
    assert [e.uid for e in load_dataset(sample_corpus.dataset_path, limit=3)] == ["0", "1", "2"]
    a = [e.uid for e in load_dataset(sample_corpus.dataset_path, shuffle=True, seed=1)]
    b = [e.uid for e in load_dataset(sample_corpus.dataset_path, shuffle=True, seed=1)]
    assert a == b and sorted(a) == sorted(str(i) for i in range(9)) and a != [str(i) for i in range(9)]

    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(raw[:2]))
    assert [e.query for e in load_dataset(bare)] == [r["query"] for r in raw[:2]]

    lines = tmp_path / "data.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in raw[:3]) + "\n\n")
    assert len(load_dataset(lines)) == 3


def test_dataset_page_ids_use_sanitised_stem(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps([
        {"query": "q", "reference_answer": 12, "meta_info": {"file_name": "--My Report (final).pdf",
                                                              "reference_page": [3, 4]}},
        {"query": "q2", "reference_answer": ["a", "b"]},
    ]))
    first, second = load_dataset(path)
    assert first.reference_page_ids == ["My_Report__final__3", "My_Report__final__4"]
    assert first.reference_answer == "12"
    assert (first.uid, second.uid) == ("0", "1")
    assert second.reference_page_ids == [] and second.reference_answer == ["a", "b"]


@pytest.mark.parametrize("content, message", [
    ('{"examples": [{"query": "q", "reference_answer": "a"}, {"reference_answer": "a"}]}', "example 1.*query"),
    ('[{"query": "q", "reference_answer": ""}]', "example 0.*reference_answer"),
    ('[{"query": "q", "reference_answer": "a", "meta_info": {"file_name": "x.pdf", "reference_page": ["two"]}}]',
     "example 0.*reference_page"),
    ('[{"query": "q", "reference_answer": "a", "meta_info": {"reference_page": [1]}}]', "example 0.*file_name"),
    ('[{"uid": "u", "query": "q", "reference_answer": "a"}, {"uid": "u", "query": "q", "reference_answer": "a"}]',
     "example 1.*duplicate uid"),
    ('["just a string"]', "example 0"),
    ('{"data": []}', "expected"),
    ("{not json", "not valid JSON"),
])
def test_malformed_datasets_give_clear_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_dataset(path)


def test_missing_dataset_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_dataset(tmp_path / "nope.json")

# ------------------------------------------------------------------------------------------ runner


@dataclass
class FakeResult:
    answer: str | None
    status: str
    turns: int
    elapsed_s: float
    retrieved_page_ids: list[str] = field(default_factory=list)
    error: str | None = None
    usage: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"answer": self.answer, "status": self.status, "turns": self.turns}


class FakeAgent:
    """Duck-typed agent: canned answers per question, raises for some, counts overlap."""

    def __init__(self, answers: dict[str, tuple[str | None, list[str]]], fail: set[str] = frozenset(),
                 delay: float = 0.05):
        self.answers, self.fail, self.delay = answers, fail, delay
        self.in_flight = self.max_in_flight = 0
        self.calls: list[str] = []
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1

    async def arun(self, question: str) -> FakeResult:
        self.calls.append(question)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            if question in self.fail:
                raise RuntimeError("policy server unreachable")
            if question == "q-soft-fail":  # the agent catches its own failure, as VRAG does
                return FakeResult(None, "failed", turns=1, elapsed_s=0.0, error="search server 503")
            answer, pages = self.answers.get(question, (None, []))
            status = "answered" if answer else "forced_answer"
            return FakeResult(answer, status, turns=3, elapsed_s=self.delay, retrieved_page_ids=pages,
                              usage={"prompt_tokens": 10})
        finally:
            self.in_flight -= 1


def _examples() -> list[EvalExample]:
    return [
        EvalExample("a", "q-a", "$341 million", ["acme_2"], "acme.pdf"),
        EvalExample("b", "q-b", "North America", ["acme_3"], "acme.pdf"),
        EvalExample("c", "q-c", "12%", ["survey_3"], "survey.pdf"),
        EvalExample("d", "q-d", "7.4", ["survey_4", "survey_1"], "survey.pdf"),
    ]


def _agent(**kw) -> FakeAgent:
    return FakeAgent({
        "q-a": ("$341 million", ["acme_2", "acme_1"]),  # exact, retrieval rank 1
        "q-b": ("The largest region is North America.", ["acme_1", "acme_3"]),  # contains only
        "q-c": (None, ["x_1"]),  # forced, empty answer
    }, fail={"q-d"}, **kw)


def test_runner_records_and_summary(tmp_path):
    out = tmp_path / "runs" / "eval.jsonl"
    agent = _agent()
    summary = run_evaluation(agent, _examples(), concurrency=4, out_path=out, progress=False, k=5)

    records = {r["uid"]: r for r in read_records(out)}
    assert set(records) == {"a", "b", "c", "d"}
    a, b, c, d = (records[u] for u in "abcd")
    assert (a["em"], a["contains"], a["recall@5"], a["ndcg@5"]) == (1.0, 1.0, 1.0, 1.0)
    assert (b["em"], b["contains"]) == (0.0, 1.0)
    assert b["ndcg@5"] == pytest.approx(1 / math.log2(3))
    assert c["prediction"] is None and c["f1"] == 0.0 and c["status"] == "forced_answer" and c["recall@5"] == 0.0
    assert d["status"] == "failed" and "policy server unreachable" in d["error"] and d["turns"] == 0
    assert d["retrieved_page_ids"] == [] and d["ndcg@5"] == 0.0
    assert a["judge"] is None and a["error"] is None and a["turns"] == 3
    for key in ("query", "reference", "prediction", "elapsed_s", "anls", "f1"):
        assert key in a

    assert summary.n_examples == summary.n_evaluated == 4 and summary.n_errors == 1
    assert summary.metrics["em"] == 0.25
    assert summary.metrics["contains"] == 0.5
    assert summary.metrics["recall@5"] == 0.5
    assert summary.metrics["judge"] is None and summary.n_judged == 0
    assert summary.answered_rate == 0.5
    assert summary.status_counts == {"answered": 2, "forced_answer": 1, "failed": 1}
    assert summary.mean_turns == pytest.approx(9 / 4)
    assert summary.latency_p50_s is not None and summary.episodes_per_s > 0
    assert agent.max_in_flight > 1, "episodes should overlap"
    assert agent.closed == 1  # run_evaluation owns the loop, so it closes the agent's clients
    assert a["usage"] == {"prompt_tokens": 10}
    table = summary.format_table()
    assert "contains (%)" in table and "50.0" in table and "episodes/s" in table
    json.dumps(summary.to_dict())


def test_concurrency_limit_is_respected():
    agent = _agent()
    asyncio.run(evaluate(agent, _examples(), concurrency=2, progress=False))
    assert agent.max_in_flight == 2
    agent = _agent()
    asyncio.run(evaluate(agent, _examples(), concurrency=1, progress=False))
    assert agent.max_in_flight == 1


def test_resume_skips_finished_uids(tmp_path):
    out = tmp_path / "eval.jsonl"
    examples = _examples()
    run_evaluation(_agent(), examples[:2], out_path=out, progress=False)
    with out.open("a") as fh:
        fh.write('{"uid": "c", "em"')  # a crash mid-write leaves a torn line
    agent = _agent()
    summary = run_evaluation(agent, examples, out_path=out, progress=False)
    assert sorted(agent.calls) == ["q-c", "q-d"]
    assert summary.n_resumed == 2 and summary.n_evaluated == 4
    assert summary.metrics["em"] == 0.25  # old and new records together
    assert sorted(r["uid"] for r in read_records(out)) == ["a", "b", "c", "d"]

    # errors are kept unless asked to retry them
    agent = _agent()
    run_evaluation(agent, examples, out_path=out, progress=False)
    assert agent.calls == []
    agent = _agent()
    agent.fail = set()
    summary = run_evaluation(agent, examples, out_path=out, progress=False, retry_errors=True)
    assert agent.calls == ["q-d"] and summary.n_errors == 0 and summary.n_evaluated == 4


def test_episode_timeout_and_trajectories(tmp_path):
    agent = _agent(delay=0.5)
    summary = run_evaluation(agent, _examples()[:1], progress=False, episode_timeout=0.05,
                             out_path=tmp_path / "t.jsonl")
    record = read_records(tmp_path / "t.jsonl")[0]
    assert record["status"] == "failed" and "TimeoutError" in record["error"] and summary.n_errors == 1

    run_evaluation(_agent(), _examples()[:1], progress=False, save_trajectories=True, out_path=tmp_path / "u.jsonl")
    assert read_records(tmp_path / "u.jsonl")[0]["trajectory"]["turns"] == 3

# ------------------------------------------------------------------------------------------ judge


def _judge_app(mode: str = "ok"):
    app = FastAPI()
    app.state.calls = 0
    app.state.auth = []

    @app.get("/health")
    def health():
        return {"ok": True}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        app.state.calls += 1
        app.state.auth.append(request.headers.get("authorization"))
        if mode == "down" or (mode == "flaky" and app.state.calls == 1):
            return JSONResponse({"error": "overloaded"}, status_code=500)
        body = await request.json()
        prompt = body["messages"][-1]["content"]
        ref = re.search(r"Reference answer: (.*)", prompt).group(1)
        pred = re.search(r"Candidate answer: (.*)", prompt).group(1)
        verdict = "True" if normalize_answer(ref) in normalize_answer(pred) else "False"
        if mode == "chatty":
            verdict = f"<think>is it false? no.</think> {verdict}."
        return {"id": "x", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": verdict}}]}

    return app


@pytest.fixture()
def serve_judge():
    from testkit.loopback import LoopbackServer

    servers = []

    def start(mode: str = "ok"):
        app = _judge_app(mode)
        servers.append(LoopbackServer(app).start())
        return servers[-1], app

    yield start
    for server in servers:
        server.stop()


def test_parse_verdict():
    assert parse_verdict("True") == 1.0
    assert parse_verdict(" false.") == 0.0
    assert parse_verdict("Yes, correct") == 1.0
    assert parse_verdict("Incorrect") == 0.0
    assert parse_verdict("<judge>True</judge>") == 1.0
    assert parse_verdict("<think>true or false?</think>\nFalse") == 0.0
    assert parse_verdict("1") == 1.0
    assert parse_verdict("maybe") is None


def _judge_once(judge: LLMJudge, *args):
    """`judge.ajudge(*args)` on an event loop of its own; the judge's HTTP session belongs to that loop, so it is
    closed before the loop ends (left open, aiohttp reports an unclosed session when it is collected)."""
    async def go():
        try:
            return await judge.ajudge(*args)
        finally:
            await judge.aclose()

    return asyncio.run(go())


def test_judge_over_http(serve_judge):
    server, app = serve_judge()
    judge = LLMJudge(server.url, "judge-model", api_key="k-123")

    async def go():
        verdicts = await asyncio.gather(
            judge.ajudge("Revenue?", "$341 million", "It was 341 million dollars... $341 million"),
            judge.ajudge("Revenue?", "$341 million", "$200 million"),
            judge.ajudge("Revenue?", "$341 million", None),
        )
        await judge.aclose()
        return verdicts

    right, wrong, empty = asyncio.run(go())
    assert (right.score, right.raw, right.error) == (1.0, "True", None)
    assert (wrong.score, wrong.raw) == (0.0, "False")
    assert empty.score == 0.0 and app.state.calls == 2  # empty answers are not sent
    assert app.state.auth == ["Bearer k-123"] * 2

    chatty_server, _ = serve_judge("chatty")
    verdict = _judge_once(LLMJudge(chatty_server.url + "/v1", "m"), "q", "7.4", "7.4")
    assert verdict.score == 1.0


def test_judge_retries_then_gives_none(serve_judge):
    server, app = serve_judge("down")
    judge = LLMJudge(server.url, "m", max_retries=2, backoff_s=0.01)
    verdict = _judge_once(judge, "q", "a", "a")
    assert verdict.score is None and "500" in verdict.error and app.state.calls == 3

    flaky, flaky_app = serve_judge("flaky")
    verdict = _judge_once(LLMJudge(flaky.url, "m", max_retries=2, backoff_s=0.01), "q", "a", "a")
    assert verdict.score == 1.0 and flaky_app.state.calls == 2


def test_judge_unreachable_never_raises():
    from testkit.loopback import free_port

    judge = LLMJudge(f"http://127.0.0.1:{free_port()}", "m", max_retries=1, backoff_s=0.01, timeout=2)
    verdict = _judge_once(judge, "q", "a", "a")
    assert verdict.score is None and "unreachable" in verdict.error  # the adapter names a refused connection


def test_runner_with_judge(serve_judge, tmp_path):
    server, _ = serve_judge()
    judge = LLMJudge(server.url, "m", backoff_s=0.01)
    summary = run_evaluation(_agent(), _examples(), judge=judge, out_path=tmp_path / "j.jsonl", progress=False)
    records = {r["uid"]: r for r in read_records(tmp_path / "j.jsonl")}
    assert records["a"]["judge"] == 1.0 and records["b"]["judge"] == 1.0
    assert records["c"]["judge"] == 0.0 and records["d"]["judge"] == 0.0
    assert summary.n_judged == 4 and summary.metrics["judge"] == 0.5

    down, _ = serve_judge("down")
    summary = run_evaluation(_agent(), _examples()[:2], judge=LLMJudge(down.url, "m", max_retries=0),
                             progress=False)
    assert summary.n_judged == 0 and summary.metrics["judge"] is None and summary.metrics["em"] == 0.5

# ------------------------------------------------------------------------------------------ cli


def test_cli_runs_the_real_agent_over_loopback(tmp_path, sample_corpus, scripted_policy, text_search_server,
                                               monkeypatch, capsys):
    """`vrag-eval` end to end: the real agent, a scripted policy and the search server on loopback sockets."""
    from vrag_rl.evaluation.cli import main

    examples = sample_corpus.qa[:5]
    # every question: search it, then answer right; the last one never answers (the --max-turns budget ends it)
    scripts = {qa.query: ["<search>" + qa.query + "</search>", f"<answer>{qa.answer}</answer>"] for qa in examples[:4]}
    scripts[examples[4].query] = ["<search>" + examples[4].query + "</search>"]
    policy_url = scripted_policy(scripts)
    monkeypatch.delenv("VRAG_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    dataset = tmp_path / "five.json"
    full = json.loads(sample_corpus.dataset_path.read_text())
    rows = full["examples"] if isinstance(full, dict) else full
    dataset.write_text(json.dumps([r for r in rows if r["query"] in scripts]))
    summary_path = tmp_path / "summary.json"
    rc = main(["--dataset", str(dataset), "--out", str(tmp_path / "e.jsonl"), "--summary", str(summary_path),
               "--base-url", policy_url, "--search-url", text_search_server.url, "--max-turns", "3",
               "--no-progress"])
    assert rc == 0
    summary = json.loads(summary_path.read_text())
    assert summary["n_evaluated"] == 5 and summary["metrics"]["em"] == pytest.approx(0.8)
    records = {r["query"]: r for r in read_records(tmp_path / "e.jsonl")}
    for qa in examples[:4]:
        assert records[qa.query]["em"] == 1.0 and records[qa.query]["turns"] == 2
    assert records[examples[4].query]["em"] == 0.0 and records[examples[4].query]["turns"] == 4  # 3 + forced
    assert [records[qa.query]["failure"] for qa in examples] == [None] * 4 + ["budget_exhausted"]
    assert summary["failure_counts"] == {"budget_exhausted": 1}
    assert "em (%)" in capsys.readouterr().out

    # the policy server gone: the same questions fail as a serving fault, not as the model's behaviour
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    rc = main(["--dataset", str(dataset), "--out", str(tmp_path / "dead.jsonl"), "--summary", str(summary_path),
               "--base-url", f"http://127.0.0.1:{dead_port}/v1", "--search-url", text_search_server.url,
               "--max-turns", "3", "--no-progress"])
    assert rc == 1  # every episode failed
    failures = {r["failure"] for r in read_records(tmp_path / "dead.jsonl")}
    assert failures == {"policy_failed"} and failures <= SERVING_FAILURES

    assert main(["--dataset", str(tmp_path / "missing.json")]) == 2


def test_dataset_doc_ids_agree_with_the_corpus_rule():
    """Page ids from datasets must equal the ids the ingestion gives the same PDFs."""
    from search_engine.corpus import doc_id_for
    from vrag_rl.scoring.qa_dataset import doc_id_for_file

    names = ["acme_annual_report_2023.pdf", "--My Report (final).pdf", "a b/c.d.pdf", "x" * 200 + ".pdf",
             "été 2024.pdf", "a...b.pdf", "___.pdf"]
    for name in names:
        expected = doc_id_for(name)
        assert doc_id_for_file(name) == expected, name


def test_result_error_counts_as_error():
    example = EvalExample("s", "q-soft-fail", "x", [], "")
    summary = asyncio.run(evaluate(_agent(), [example], progress=False))
    assert summary.n_errors == 1 and summary.status_counts == {"failed": 1}


def test_the_scoring_package_exports_only_its_own_modules_names():
    """`vrag_rl.scoring`'s lazy exports are the objects its own modules define (no name forwarded from
    elsewhere), and an unknown name is an ordinary AttributeError."""
    import importlib

    from vrag_rl import scoring

    for name in scoring.__all__:
        module = importlib.import_module(f"vrag_rl.scoring.{scoring._EXPORTS[name]}")
        obj = getattr(scoring, name)
        assert obj is getattr(module, name), name
        if isinstance(obj, type) or callable(obj):
            assert obj.__module__ == module.__name__, name
    with pytest.raises(AttributeError):
        scoring.no_such_name  # noqa: B018


def test_training_and_rewards_do_not_import_the_evaluation_harness():
    """The reward and the training-data converter score through `vrag_rl.scoring`: importing them loads
    nothing of `vrag_rl.evaluation` (a fresh interpreter, so other tests' imports do not count)."""
    import subprocess
    import sys

    code = ("import sys, vrag_rl.training.rewards, vrag_rl.training.data, vrag_rl.training.data.__main__; "
            "print(sorted(m for m in sys.modules if m.startswith('vrag_rl.evaluation')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    # and the scoring room sits below all three: it imports none of them
    code = ("import sys, vrag_rl.scoring.metrics, vrag_rl.scoring.judge, vrag_rl.scoring.qa_dataset; "
            "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['vrag_rl', 'evaluation'], ['vrag_rl', 'rewards'], ['vrag_rl', 'data'], ['vrag_rl', 'train'])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
