"""Benchmark on real documents: ingestion speed and memory, retrieval, answer regions, end-to-end answers.

Ingests a folder of PDFs (or page images) into a fresh index in a child process (pages/s and peak RSS
of that process, the way a user's `vrag-search ingest` runs), asks every question of a question file
through the `SearchEngine` (recall@1 / recall@5 of the reference page; whether the best region the
index returns for the right page holds the answer), then runs the real agent end to end against the
search server and a policy server — the CPU stand-in by default, any OpenAI-compatible endpoint with
--policy-url — scored by the evaluation harness (`vrag_rl.evaluation`: contains, exact match), and
counts honest "not found" answers apart from wrong ones. Prints a table per content type and writes a
JSON file. A benchmark, not a test: it prints numbers and asserts nothing.

    python scripts/fetch_dev_docs.py                                   # the dev corpus, once
    python scripts/bench_real_docs.py                                  # dev corpus + scripts/devset questions
    python scripts/bench_real_docs.py --docs DIR --questions q.jsonl --out runs/bench/mine.json
    python scripts/bench_real_docs.py --sample-corpus                  # the bundled sample corpus's questions
    python scripts/bench_real_docs.py --docs DIR --ingest-only         # pages/s and peak RSS only
    python scripts/bench_real_docs.py --policy-url http://127.0.0.1:8001/v1 --model Qwen/Qwen2.5-VL-7B-Instruct

Question files: upstream's `rag_dataset.json` layout, a JSON list or JSONL (`vrag_rl.evaluation.dataset`),
with optional `content_type` (text / table / chart / figure) and `language` fields per question.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from search_engine.infra.cli_exit import exit_status

REPO = Path(__file__).resolve().parents[1]

DEFAULT_DOCS = Path("~/.cache/vrag/dev_docs").expanduser()
DEFAULT_QUESTIONS = REPO / "scripts" / "devset" / "real_docs_dev.jsonl"
CONTENT_TYPES = ("text", "table", "chart", "figure")

# Phrasings of "the documents do not say": the stand-in's own fallback and common VLM ones, English and
# Chinese. The demo (demo/render.py) shows the same phrasings as a not-found result; it imports
# streamlit, so the benchmark cannot import it from there.
_NOT_FOUND = re.compile(
    r"\b(could not|couldn't|cannot|can't|unable to|did not|didn't) (find|locate|determine)\b|"
    r"\b(not|no) (found|mentioned|stated|available|information|answer)\b|"
    r"(未找到|没有找到|找不到|无法找到|无法确定|未提及|没有提到)", re.IGNORECASE)


# ------------------------------------------------------------------------------------------- scoring


def _compact(text: str) -> str:
    """SQuAD-normalised text without spaces, after NFKC (ligatures such as 'ﬁ', full-width forms)."""
    from vrag_rl.evaluation.metrics import normalize_answer

    return normalize_answer(unicodedata.normalize("NFKC", text or "")).replace(" ", "")


def answer_in_text(text: str, references: str | Sequence[str]) -> bool:
    """Whether a region's text holds one of the reference answers.

    Whole-token containment (the harness's `contains_match`) first; then containment with spaces removed,
    because a text layer or OCR splits and joins tokens differently from the printed answer ("45
    characters" vs "45characters", CJK text that has no spaces at all). References of one or two
    characters only count as whole tokens, or "2" would be found in any page number.
    """
    from vrag_rl.evaluation.metrics import contains_match

    refs = [references] if isinstance(references, str) else list(references)
    if not text or not refs:
        return False
    if contains_match(text, refs) > 0:
        return True
    haystack = _compact(text)
    return any(len(_compact(r)) > 2 and _compact(r) in haystack for r in refs)


def is_not_found(prediction: str | None) -> bool:
    """Whether an answer is an honest refusal ("I could not find ...") rather than an attempt."""
    if not prediction or not prediction.strip():
        return True
    from vrag_rl.vrag.prompts import NO_ANSWER_FALLBACK

    text = prediction.strip()
    return text == NO_ANSWER_FALLBACK or (len(text) < 200 and bool(_NOT_FOUND.search(text)))


@dataclass
class QuestionResult:
    """Everything measured for one question; None where a stage did not run."""

    uid: str
    query: str
    content_type: str
    language: str
    reference_page_ids: list[str]
    reference_answer: list[str]
    document: str = ""  # the reference page's document id (for per-document and held-back-half tables)
    half: str = ""  # "held-back" or "development" with --held-back-docs, else ""
    retrieved_page_ids: list[str] = field(default_factory=list)
    rank: int | None = None  # 1-based rank of the first reference page in the top-k, None when absent
    regions_returned: bool = False  # did the index return any region with the hit of the right page
    best_region_holds: bool | None = None  # None: the index returned no regions for that hit
    any_region_holds: bool | None = None
    best_snippet_holds: bool | None = None  # the same check on the hit's (cut) snippet alone
    best_region: dict[str, Any] | None = None
    prediction: str | None = None
    status: str | None = None
    em: float | None = None
    contains: float | None = None
    not_found: bool | None = None
    agent_saw_page: bool | None = None  # the reference page was among the pages the agent retrieved
    error: str | None = None


def _region_dict(region: Any) -> dict[str, Any]:
    data = region.to_dict() if hasattr(region, "to_dict") else dict(region)
    return {k: data.get(k) for k in ("region_id", "kind", "box", "snippet", "score")}


def score_retrieval(result: QuestionResult, hits: Sequence[Any],
                    region_text: Callable[[str, Any], str] | None = None) -> None:
    """Fill the retrieval fields of `result` from the engine's hits (SearchHit-like: page_id, regions).

    `region_text(page_id, region_hit)` gives a region's whole text: a hit's snippet is cut short, and a
    reader that zooms into the region sees all of it. Without it (or when it fails), the snippet counts.
    """

    def text_of(page_id: str, region: Any) -> str:
        if region_text is not None:
            try:
                return region_text(page_id, region) or region.snippet
            except (LookupError, OSError, ValueError):
                pass
        return region.snippet

    result.retrieved_page_ids = [h.page_id for h in hits]
    wanted = set(result.reference_page_ids)
    for rank, hit in enumerate(hits, start=1):
        if hit.page_id not in wanted:
            continue
        result.rank = rank
        regions = sorted(getattr(hit, "regions", None) or [], key=lambda r: -float(getattr(r, "score", 0.0)))
        result.regions_returned = bool(regions)
        if regions:
            result.best_region = _region_dict(regions[0])
            result.best_region_holds = answer_in_text(text_of(hit.page_id, regions[0]), result.reference_answer)
            result.best_snippet_holds = answer_in_text(regions[0].snippet, result.reference_answer)
            result.any_region_holds = any(answer_in_text(text_of(hit.page_id, r), result.reference_answer)
                                          for r in regions)
        break


def score_answer(result: QuestionResult, record: dict[str, Any]) -> None:
    """Fill the end-to-end fields from one evaluation-harness record (its metrics, not new ones)."""
    result.prediction = record.get("prediction")
    result.status = record.get("status")
    result.em = record.get("em")
    result.contains = record.get("contains")
    result.error = record.get("error")
    result.not_found = result.error is None and is_not_found(result.prediction)
    seen = set(record.get("retrieved_page_ids") or [])
    result.agent_saw_page = bool(seen & set(result.reference_page_ids)) if result.reference_page_ids else None


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def summarize(results: Sequence[QuestionResult], key: str = "content_type") -> dict[str, dict[str, Any]]:
    """Per group (content type or language) and overall: recall@1/@5, region containment, contains/EM,
    not-found and wrong counts. A region score is None ("n/a") when the index returned no regions."""
    groups: dict[str, list[QuestionResult]] = {}
    for r in results:
        groups.setdefault(getattr(r, key) or "unlabelled", []).append(r)
    order = [g for g in CONTENT_TYPES if g in groups] + sorted(g for g in groups if g not in CONTENT_TYPES)
    table = {g: _group_stats(groups[g]) for g in order}
    table["overall"] = _group_stats(list(results))
    return table


def _group_stats(rows: Sequence[QuestionResult]) -> dict[str, Any]:
    with_pages = [r for r in rows if r.reference_page_ids]
    any_regions = any(r.regions_returned for r in rows)
    answered = [r for r in rows if r.contains is not None or r.error is not None]

    def region_score(attr: str) -> float | None:
        if not any_regions:
            return None
        return _mean(1.0 if (r.rank is not None and getattr(r, attr)) else 0.0 for r in with_pages)

    return {
        "n": len(rows),
        "recall@1": _mean(1.0 if r.rank == 1 else 0.0 for r in with_pages),
        "recall@5": _mean(1.0 if r.rank is not None and r.rank <= 5 else 0.0 for r in with_pages),
        "region_best": region_score("best_region_holds"),
        "region_any": region_score("any_region_holds"),
        "region_snippet": region_score("best_snippet_holds"),
        "agent_page": _mean(None if r.agent_saw_page is None else float(r.agent_saw_page) for r in answered)
        if answered else None,
        "contains": _mean(r.contains for r in answered) if answered else None,
        "em": _mean(r.em for r in answered) if answered else None,
        "not_found": sum(1 for r in answered if r.not_found and not r.contains) if answered else None,
        "wrong": sum(1 for r in answered if not r.contains and not r.not_found and r.error is None)
        if answered else None,
        "errors": sum(1 for r in answered if r.error) if answered else None,
    }


def format_table(table: dict[str, dict[str, Any]], title: str = "content type") -> str:
    """A fixed-width text table of `summarize`'s output (percentages; n/a where not measured)."""
    columns = [("n", "n"), ("recall@1", "R@1"), ("recall@5", "R@5"), ("region_best", "region"),
               ("region_any", "any-reg"), ("region_snippet", "reg-snip"), ("agent_page", "agent-pg"),
               ("contains", "contains"), ("em", "EM"), ("not_found", "not-found"),
               ("wrong", "wrong"), ("errors", "errors")]

    def cell(key: str, value: Any) -> str:
        if value is None:
            return "n/a"
        if key in ("n", "not_found", "wrong", "errors"):
            return str(value)
        return f"{100 * value:.1f}"

    header = [title] + [label for _, label in columns]
    lines = [[name] + [cell(k, stats.get(k)) for k, _ in columns] for name, stats in table.items()]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(row) for row in lines)])


# ------------------------------------------------------------------------------------------ ingestion

_INGEST_CHILD = """
import json, resource, sys, time
from search_engine.ingest import Ingestor
args = json.loads(sys.argv[1])
start = time.perf_counter()
ingestor = Ingestor(args["index"], visual_model=args["visual_model"], text_model=args["text_model"],
                    ocr_lang=args["ocr_lang"], progress=False)
report = ingestor.add(args["inputs"])
seconds = time.perf_counter() - start
own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print("INGEST_RESULT " + json.dumps({"pages": report.pages, "seconds": seconds, "failed": report.failed,
      "added": len(report.added), "self_maxrss_kib": own.ru_maxrss,
      "cpu_seconds": own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime}))
"""


@dataclass
class IngestionStats:
    """Ingestion of one folder in a child process: pages embedded, seconds, memory."""

    pages: int
    documents: int
    seconds_ingest: float  # inside the child: Ingestor construction (models load) + add()
    seconds_wall: float  # the whole child process, interpreter start-up and imports included
    pages_per_s: float
    cpu_seconds: float  # user + system CPU of the child and its subprocesses: comparable on a busy machine
    pages_per_cpu_s: float
    peak_rss_mib: float  # the child's own peak resident set (getrusage RUSAGE_SELF ru_maxrss)
    peak_rss_tree_mib: float | None  # the child and its subprocesses (OCR...): summed PSS, sampled every 0.1 s
    failed: dict[str, str]


def measure_ingestion(inputs: Sequence[Path], index: Path, *, text_model: str | None = "minilm",
                      visual_model: str | None = None, ocr_lang: str | None = None) -> IngestionStats:
    """Ingest `inputs` into `index` in a fresh Python process and measure it.

    A child process, because the benchmark itself holds other models in memory and a peak RSS taken
    in-process would mix them in; psutil samples the child's process tree so OCR subprocesses count.
    """
    import psutil

    spec = {"index": str(index), "inputs": [str(p) for p in inputs], "text_model": text_model,
            "visual_model": visual_model, "ocr_lang": ocr_lang}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _INGEST_CHILD, json.dumps(spec)], cwd=str(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak_tree = 0
    try:
        parent = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                members = [parent, *parent.children(recursive=True)]
                peak_tree = max(peak_tree, sum(_rss(p) for p in members))
            except psutil.NoSuchProcess:
                pass
            time.sleep(0.1)
    except psutil.NoSuchProcess:
        pass
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - started
    lines = [ln for ln in stdout.splitlines() if ln.startswith("INGEST_RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"ingestion failed (exit {proc.returncode}):\n{stderr[-4000:]}")
    data = json.loads(lines[-1].split(" ", 1)[1])
    pages = int(data["pages"])
    return IngestionStats(pages=pages, documents=int(data["added"]), seconds_ingest=round(data["seconds"], 2),
                          seconds_wall=round(wall, 2),
                          pages_per_s=round(pages / data["seconds"], 3) if data["seconds"] > 0 else 0.0,
                          cpu_seconds=round(data["cpu_seconds"], 1),
                          pages_per_cpu_s=round(pages / data["cpu_seconds"], 3) if data["cpu_seconds"] > 0 else 0.0,
                          peak_rss_mib=round(data["self_maxrss_kib"] / 1024, 1),
                          peak_rss_tree_mib=round(peak_tree / 2**20, 1) if peak_tree else None,
                          failed=data["failed"])


def _rss(process: Any) -> int:
    """Proportional set size where Linux gives it (shared pages split between the processes sharing them,
    so forked workers are not counted twice), else the resident set."""
    try:
        try:
            return int(process.memory_full_info().pss)
        except Exception:  # no PSS on this platform (or no permission): RSS
            return int(process.memory_info().rss)
    except Exception:  # the process ended between listing and reading: it holds no memory now
        return 0


# ------------------------------------------------------------------------------------------ servers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A project server (`python -m <module> serve ...`) on a loopback port, as run_demo.sh starts it."""

    def __init__(self, name: str, args: list[str], health_url: str, log_path: Path):
        self.name, self.health_url, self.log_path = name, health_url, log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("w")
        self.proc = subprocess.Popen([sys.executable, *args], cwd=str(REPO), stdout=self._log,
                                     stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout: float = 180.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}); see {self.log_path}")
            try:
                if httpx.get(self.health_url, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"{self.name} was not healthy in {timeout:.0f}s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _policy_module() -> str:
    """The policy server's package: `vrag_rl.serving.policy_server` (its home since the serving room), or
    the old `vrag_rl.policy_server` in a checkout from before the move."""
    import importlib.util

    try:
        if importlib.util.find_spec("vrag_rl.serving.policy_server") is not None:
            return "vrag_rl.serving.policy_server"
    except ModuleNotFoundError:
        pass
    return "vrag_rl.policy_server"


def run_end_to_end(examples: Sequence[Any], index: Path, work_dir: Path, *, policy_url: str | None,
                   model: str | None, api_key: str | None, policy_backend: str, max_turns: int,
                   concurrency: int, episode_timeout: float | None) -> list[dict[str, Any]]:
    """Run the agent on every example against a search server over `index` and a policy endpoint, scored
    by `vrag_rl.evaluation.runner.run_evaluation`; returns its per-example records."""
    from vrag_rl import VRAG
    from vrag_rl.evaluation.runner import run_evaluation

    servers: list[ServerProcess] = []
    try:
        search_port = _free_port()
        search = ServerProcess("search server", ["-m", "search_engine", "serve", "--index", str(index),
                                                 "--port", str(search_port)],
                               f"http://127.0.0.1:{search_port}/health", work_dir / "search.log")
        servers.append(search)
        if policy_url is None:
            policy_port = _free_port()
            # As run_demo.sh does: the stand-in reads the page layouts the search server stored.
            policy = ServerProcess("policy server", ["-m", _policy_module(), "serve", "--backend",
                                                     policy_backend, "--port", str(policy_port),
                                                     "--search-url", f"http://127.0.0.1:{search_port}"],
                                   f"http://127.0.0.1:{policy_port}/health", work_dir / "policy.log")
            servers.append(policy)
            policy.wait_healthy()
            policy_url = f"http://127.0.0.1:{policy_port}/v1"
        search.wait_healthy()
        options = {"base_url": policy_url, "search_url": f"http://127.0.0.1:{search_port}", "model": model,
                   "api_key": api_key}
        agent = VRAG(**{k: v for k, v in options.items() if v is not None}, max_turns=max_turns)
        out = work_dir / "episodes.jsonl"
        out.unlink(missing_ok=True)  # a fresh run: the harness would otherwise resume from old records
        run_evaluation(agent, list(examples), concurrency=concurrency, out_path=out, progress=True, k=5,
                       episode_timeout=episode_timeout)
        from vrag_rl.evaluation.runner import read_records

        return read_records(out)
    finally:
        for server in reversed(servers):
            server.stop()


# ------------------------------------------------------------------------------------------ driver


def run_retrieval(index: Path, examples: Sequence[Any], results: Sequence[QuestionResult], top_k: int) -> float:
    """Ask every question through `SearchEngine.batch_search` and score the hits; returns the seconds the
    search took. The engine is local to this call, so its memory is freed before the servers start."""
    from search_engine.engine import SearchEngine

    engine = SearchEngine.load(index)
    started = time.perf_counter()
    all_hits = engine.batch_search([ex.query for ex in examples], top_k=top_k)
    seconds = round(time.perf_counter() - started, 2)
    layouts: dict[str, Any] = {}

    def region_text(page_id: str, region: Any) -> str:
        """The region's whole text and caption from the page's stored layout (cached per page)."""
        if page_id not in layouts:
            layouts[page_id] = engine.page_layout(page_id)
        whole = layouts[page_id].region(region.region_id)
        return " ".join(t for t in (whole.caption, whole.text) if t)

    for result, hits in zip(results, all_hits):
        score_retrieval(result, hits, region_text if hasattr(engine, "page_layout") else None)
    return seconds


def load_questions(path: Path) -> list[Any]:
    """The question file as the evaluation harness reads it (EvalExample: uid, query, reference answer
    and page ids; `content_type` / `language` land in `meta`)."""
    from vrag_rl.evaluation.dataset import load_dataset

    return load_dataset(path)


def new_result(example: Any) -> QuestionResult:
    refs = example.reference_answer
    pages = list(example.reference_page_ids)
    return QuestionResult(uid=example.uid, query=example.query,
                          content_type=str(example.meta.get("content_type") or "unlabelled"),
                          language=str(example.meta.get("language") or "unlabelled"),
                          reference_page_ids=pages,
                          reference_answer=[refs] if isinstance(refs, str) else list(refs),
                          document=str(example.meta.get("doc") or (pages[0].rsplit("_", 1)[0] if pages else "")))


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@dataclass(frozen=True)
class BenchSettings:
    """The command line's settings (the options of `bench`, environment defaults resolved)."""

    docs: Path | None
    questions: Path | None
    sample_corpus: bool
    index: Path | None
    reuse_index: bool
    ingest_only: bool
    no_e2e: bool
    text_model: str
    visual_model: str
    ocr_lang: str | None
    top_k: int
    policy_url: str | None
    model: str | None
    api_key: str | None
    policy_backend: str
    max_turns: int
    concurrency: int
    episode_timeout: float
    limit: int | None
    verbose: bool
    held_back_docs: str
    out: Path | None


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help=(__doc__ or "").splitlines()[0])
def bench(
    docs: Annotated[Path | None, typer.Option(
        help=f"folder (or file) of PDFs / page images to ingest (default {DEFAULT_DOCS})")] = None,
    questions: Annotated[Path | None, typer.Option(
        help=f"question file (default {DEFAULT_QUESTIONS.relative_to(REPO)})")] = None,
    sample_corpus: Annotated[bool, typer.Option(
        "--sample-corpus",
        help="use the bundled sample corpus (generated into data/sample_corpus/pdf) and its questions")] = False,
    index: Annotated[Path | None, typer.Option(
        help="index folder (default: a fresh one in a temporary folder, removed afterwards)")] = None,
    reuse_index: Annotated[bool, typer.Option("--reuse-index", help="use --index as it is: no ingestion")] = False,
    ingest_only: Annotated[bool, typer.Option("--ingest-only", help="measure ingestion only (no questions)")] = False,
    no_e2e: Annotated[bool, typer.Option("--no-e2e", help="retrieval and regions only, no agent episodes")] = False,
    text_model: Annotated[str, typer.Option(help="text embedder of the index ('none' for none)")] = "minilm",
    visual_model: Annotated[str, typer.Option(
        help="visual embedder of the index (e.g. vidore/colqwen2-v1.0 on a GPU; default none)",
        show_default=False)] = "none",
    ocr_lang: Annotated[str | None, typer.Option(help="tesseract languages (default: the engine's auto)")] = None,
    top_k: int = 5,
    # The three below default to environment variables, read here rather than by click so that --help never
    # prints a key's value.
    policy_url: Annotated[str | None, typer.Option(
        help="OpenAI-compatible policy endpoint (default: start the CPU stand-in) [VRAG_POLICY_URL]")] = None,
    model: Annotated[str | None, typer.Option(help="model name at --policy-url [VRAG_MODEL]")] = None,
    api_key: Annotated[str | None, typer.Option(
        help="key for --policy-url [VRAG_API_KEY / OPENAI_API_KEY]")] = None,
    policy_backend: Annotated[str, typer.Option(
        help="backend of the local policy server when no --policy-url (default rule-based)",
        show_default=False)] = "rule-based",
    max_turns: int = 6,
    concurrency: Annotated[int, typer.Option(help="episodes at once (the stand-in is CPU-bound)")] = 2,
    episode_timeout: float = 300.0,
    limit: Annotated[int | None, typer.Option(help="ask only the first N questions")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="print one line per question (rank, region, answer)")] = False,
    held_back_docs: Annotated[str, typer.Option(
        help="comma-separated document ids kept out of development: prints the held-back half and the rest "
             "(development) apart, per content type, to show whether a change generalises")] = "",
    out: Annotated[Path | None, typer.Option(
        help="JSON report (default runs/bench_real_docs/<questions stem>.json)")] = None,
) -> None:
    """Ingest, ask, score; the exit status is `run`'s."""
    env = os.environ.get
    settings = BenchSettings(
        docs=docs, questions=questions, sample_corpus=sample_corpus, index=index, reuse_index=reuse_index,
        ingest_only=ingest_only, no_e2e=no_e2e, text_model=text_model, visual_model=visual_model,
        ocr_lang=ocr_lang, top_k=top_k, policy_url=policy_url if policy_url is not None else env("VRAG_POLICY_URL"),
        model=model if model is not None else env("VRAG_MODEL"),
        api_key=api_key if api_key is not None else env("VRAG_API_KEY") or env("OPENAI_API_KEY"),
        policy_backend=policy_backend, max_turns=max_turns, concurrency=concurrency,
        episode_timeout=episode_timeout, limit=limit, verbose=verbose, held_back_docs=held_back_docs, out=out)
    raise typer.Exit(run(settings))


def run(args: BenchSettings) -> int:
    """The benchmark itself: 0 when the report was written, 2 when the inputs are unusable."""
    none = ("none", "off", "")
    text_model = None if str(args.text_model).lower() in none else args.text_model
    visual_model = None if str(args.visual_model).lower() in none else args.visual_model

    docs, questions = args.docs, args.questions
    if args.sample_corpus:
        from search_engine.sample_corpus import generate_sample_corpus

        corpus = generate_sample_corpus(REPO / "data" / "sample_corpus" / "pdf")
        docs = docs or Path(corpus.files[0]).parent
        questions = questions or Path(corpus.dataset_path)
    docs = (docs or DEFAULT_DOCS).expanduser()
    questions = questions or DEFAULT_QUESTIONS
    if not args.reuse_index and not docs.exists():
        hint = " (run scripts/fetch_dev_docs.py first)" if docs == DEFAULT_DOCS else ""
        print(f"bench_real_docs: no documents at {docs}{hint}", file=sys.stderr)
        return 2
    if args.reuse_index and args.index is None:
        print("bench_real_docs: --reuse-index needs --index", file=sys.stderr)
        return 2

    examples: list[Any] = []
    if not args.ingest_only:
        try:
            examples = load_questions(questions)
        except (OSError, ValueError) as exc:
            print(f"bench_real_docs: {exc}", file=sys.stderr)
            return 2
        if args.limit is not None:
            examples = examples[: args.limit]

    work_dir = Path(tempfile.mkdtemp(prefix="bench_real_docs_"))
    index = args.index or work_dir / "index"
    report: dict[str, Any] = {"commit": git_commit(), "docs": str(docs), "questions": str(questions),
                              "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "cpu_count": os.cpu_count(), "load_average_at_start": os.getloadavg()}
    try:
        if not args.reuse_index:
            if index.exists() and any(index.iterdir()):  # never delete a user's index
                print(f"bench_real_docs: {index} is not empty: remove it, or measure it as it is with "
                      "--reuse-index", file=sys.stderr)
                return 2
            stats = measure_ingestion([docs], index, text_model=text_model, visual_model=visual_model,
                                      ocr_lang=args.ocr_lang)
            report["ingestion"] = asdict(stats)
            print(f"ingestion: {stats.pages} pages of {stats.documents} documents in {stats.seconds_ingest:.1f} s "
                  f"({stats.pages_per_s:.2f} pages/s; process {stats.seconds_wall:.1f} s with start-up; "
                  f"{stats.cpu_seconds:.0f} CPU s = {stats.pages_per_cpu_s:.2f} pages per CPU second), peak RSS "
                  f"{stats.peak_rss_mib:.0f} MiB (process tree PSS {stats.peak_rss_tree_mib} MiB)"
                  + (f", FAILED: {stats.failed}" if stats.failed else ""), flush=True)
        if args.ingest_only:
            return _finish(report, args, questions, results=None)

        results = [new_result(ex) for ex in examples]
        report["retrieval_seconds"] = run_retrieval(index, examples, results, args.top_k)

        if not args.no_e2e:
            started = time.perf_counter()
            records = run_end_to_end(examples, index, work_dir, policy_url=args.policy_url, model=args.model,
                                     api_key=args.api_key, policy_backend=args.policy_backend,
                                     max_turns=args.max_turns, concurrency=args.concurrency,
                                     episode_timeout=args.episode_timeout)
            report["e2e_seconds"] = round(time.perf_counter() - started, 1)
            print(f"end to end: {len(examples)} episodes in {report['e2e_seconds']:.1f} s "
                  f"(retrieval of all questions {report['retrieval_seconds']:.1f} s)", flush=True)
            report["policy"] = args.policy_url or f"local {args.policy_backend} stand-in"
            by_uid = {str(r["uid"]): r for r in records}
            for result in results:
                record = by_uid.get(result.uid)
                if record is None:
                    record = {"prediction": None, "status": "failed", "em": 0.0, "contains": 0.0,
                              "error": "no record: the episode did not finish"}
                score_answer(result, record)
        return _finish(report, args, questions, results)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _finish(report: dict[str, Any], args: BenchSettings, questions: Path,
            results: list[QuestionResult] | None) -> int:
    if results is not None:
        if args.verbose:
            for r in results:
                verdict = ("OK " if r.contains else "NF " if r.not_found else "BAD" if r.contains is not None
                           else "-  ")
                print(f"{verdict} {r.uid} [{r.content_type}/{r.language}] rank={r.rank} region={r.best_region_holds} "
                      f"answer={(r.prediction or '')[:80]!r} reference={r.reference_answer[0]!r}")
        held_back = {d.strip() for d in args.held_back_docs.split(",") if d.strip()}
        for r in results:
            r.half = ("held-back" if r.document in held_back else "development") if held_back else ""
        report["by_content_type"] = summarize(results, "content_type")
        report["by_language"] = summarize(results, "language")
        report["by_document"] = summarize(results, "document")
        report["questions_detail"] = [asdict(r) for r in results]
        print()
        print(format_table(report["by_content_type"]))
        print()
        print(format_table(report["by_language"], title="language"))
        print()
        print(format_table(report["by_document"], title="document"))
        if held_back:
            report["held_back_docs"] = sorted(held_back)
            report["by_half"] = summarize(results, "half")
            for half in ("development", "held-back"):
                rows = [r for r in results if r.half == half]
                report[f"{half}_by_content_type"] = summarize(rows, "content_type")
                print(f"\n{half} half ({len(rows)} questions)")
                print(format_table(report[f"{half}_by_content_type"]))
    report["load_average_at_end"] = os.getloadavg()  # timings on a shared machine mean little when this is high
    out = args.out or REPO / "runs" / "bench_real_docs" / f"{Path(questions).stem}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str))
    print(f"\ncommit {report['commit']}; report written to {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="bench_real_docs.py")


if __name__ == "__main__":
    sys.exit(main())
