"""Every command in README.md is exercised by a test.

The README's shell commands (its ```bash blocks, and command-like `code` spans in its prose and tables)
and its Python blocks are read from the file. Each must appear in `COVERAGE`, which says how it is
exercised: `run` — by a test of this file, which runs it as written (in a scratch folder, ports swapped
for free ones); or the tests and scripts that run it where it is too expensive here (the install, the
browser demo, cluster training). A command added to the README without an entry fails
`test_every_readme_command_is_covered`; an entry whose command left the README fails it too.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from testkit.loopback import free_port

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
ACTIVATE = f"source {shlex.quote(str(REPO / '.venv' / 'bin' / 'activate'))}"

# The house rule: exactly these two set-up commands near the top, each in its own block.
SETUP_DEMO = "bash scripts/install.sh && ./run_demo.sh"
SETUP_TESTS = "bash scripts/install.sh --test && bash scripts/run_tests.sh"

RUN = "run"  # exercised by a test in this file
INSTALL_TEST = "tests/unit/test_install_script.py::test_install_numbers_its_steps_and_names_the_next_command"
DEMO_TEST = "tests/browser/test_browser.py::test_demo_in_a_browser"
VIMRAG_DEMO_TEST = "tests/browser/test_browser_vimrag.py::test_vimrag_demo_draws_the_graph_and_answers"
DEMO_LOGS_TEST = "tests/integration/test_run_demo_logs.py::test_each_demo_mode_logs_to_its_own_folder"
TRAIN_SCRIPTS_TEST = ("tests/unit/test_verl_train_scripts.py::"
                      "test_dry_run_prints_the_command_and_the_config_verl_would_run")

COVERAGE: dict[str, list[str]] = {
    # ---- shell blocks
    SETUP_DEMO: [INSTALL_TEST, DEMO_TEST, ".ci/run"],
    SETUP_TESTS: [INSTALL_TEST, ".ci/run"],
    "source .venv/bin/activate": [RUN],
    "./run_demo.sh vimrag": [VIMRAG_DEMO_TEST, DEMO_LOGS_TEST],
    "./run_demo.sh help": [RUN],
    "vrag-search ingest my_pdfs/ --index data/index/mine": [RUN],
    "vrag-search serve --index data/index/mine --port 8003 &": [RUN],
    ("curl -s http://127.0.0.1:8003/search -H 'Content-Type: application/json' "
     """-d '{"queries": ["total revenue 2023"], "top_k": 3}'"""): [RUN],
    "VRAG_INDEX=data/index/train bash scripts/train_grpo_qwen2_5_vl_7b.sh --dry-run": [TRAIN_SCRIPTS_TEST],
    # ---- commands named in the prose and the tables
    "./run_demo.sh": [DEMO_TEST, DEMO_LOGS_TEST],
    "vllm serve Qwen/Qwen2.5-VL-7B-Instruct": [  # vLLM's own command (GPU); its OpenAI-compatible API is what
        "tests/integration/test_policy_endpoints_e2e.py",  # the agent talks to, tested against servers like it
    ],
    "python scripts/train_tiny.py --out runs/tiny": [
        "tests/integration/test_train_local.py::test_tiny_training_learns_well_formed_turns"],
    "bash scripts/run_tests.sh": [".ci/run"],
    "bash scripts/gpu_smoke.sh": [
        "tests/unit/test_verl_train_scripts.py::test_gpu_smoke_dry_run_builds_its_data_and_index_and_composes_the_v1_run"],
    "bash scripts/gpu_smoke.sh --cpu --out DIR": [
        "tests/integration/test_verl_cpu_smoke.py::test_the_cpu_smoke_trains_resumes_merges_and_serves"],
    # ---- python blocks (by their first line of code)
    "python: from vrag_rl import VRAG": [RUN],
}

SHELL_FENCES = {"bash", "sh", "shell", "console"}
COMMAND_WORDS = {"bash", "sh", "source", ".", "python", "python3", "pip", "curl", "vllm", "vrag-search",
                 "vrag-eval", "vrag-policy", "vrag-mcp", "streamlit", "./run_demo.sh"}
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")


def _blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block."""
    fences = re.finditer(r"^```([^\n]*)\n(.*?)^```", text, re.M | re.S)
    return [(m.group(1).strip().lower(), m.group(2)) for m in fences]


def _shell_lines(body: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments and blank lines dropped."""
    commands, pending = [], ""
    for raw in body.splitlines():
        line = re.sub(r"(^|\s+)#(\s.*)?$", "", raw).rstrip()  # a trailing "# comment" (never inside our commands)
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        line = (pending + line.strip()).strip()
        pending = ""
        if line:
            commands.append(line)
    return commands


def _is_command(span: str) -> bool:
    words = span.split()
    while words and ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    return len(words) >= 2 and words[0] in COMMAND_WORDS or (len(words) == 1 and words[0] == "./run_demo.sh")


def readme_commands(text: str | None = None) -> list[str]:
    """Every command of the README, in order of appearance, once each (see the module doc)."""
    text = README.read_text() if text is None else text
    found: list[str] = []
    for info, body in _blocks(text):
        if info in SHELL_FENCES:
            found += _shell_lines(body)
        elif info == "python":
            first = next(line for line in body.splitlines() if line.strip() and not line.startswith("#"))
            found.append(f"python: {first.strip()}")
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    found += [span.strip() for span in re.findall(r"`([^`\n]+)`", prose) if _is_command(span.strip())]
    return list(dict.fromkeys(found))


def python_block(first_line: str) -> str:
    return next(body for info, body in _blocks(README.read_text())
                if info == "python" and first_line in body.splitlines()[0:3])


# ---------------------------------------------------------------------------------------------------- the map


def test_the_extraction_sees_blocks_prose_and_continuations():
    text = ("intro `./run_demo.sh` and `vrag-search` alone, `SearchEngine.load(x)`, `X=1 bash a.sh --dry-run`\n"
            "```bash\nfoo --a 1 \\\n  --b 2   # note\n# only a comment\n\nbar\n```\n"
            "```python\nimport os\nos.getcwd()\n```\n")
    assert readme_commands(text) == ["foo --a 1 --b 2", "bar", "python: import os", "./run_demo.sh",
                                     "X=1 bash a.sh --dry-run"]


def test_every_readme_command_is_covered():
    commands = readme_commands()
    unmapped = [c for c in commands if c not in COVERAGE]
    assert not unmapped, ("README commands without a test: add each to COVERAGE in this file, with the test "
                          f"that runs it (or `run`, with a test here): {unmapped}")
    stale = [c for c in COVERAGE if c not in commands]
    assert not stale, f"COVERAGE names commands the README no longer has: {stale}"


def test_every_mapped_test_exists():
    for command, where in COVERAGE.items():
        assert where, command
        for target in where:
            if target == RUN:
                continue
            path, _, name = target.partition("::")
            assert (REPO / path).is_file(), f"{command!r}: {path} does not exist"
            if name:
                assert re.search(rf"^def {re.escape(name)}\(", (REPO / path).read_text(), re.M), \
                    f"{command!r}: {path} has no test {name}"


def test_the_two_setup_commands_are_kept_exactly_near_the_top():
    text = README.read_text()
    shell = [body.strip() for info, body in _blocks(text) if info in SHELL_FENCES]
    assert shell[:2] == [SETUP_DEMO, SETUP_TESTS]
    assert text.index(SETUP_TESTS) < 1500  # within the first screen
    assert len(text.splitlines()) <= 200  # read in five minutes


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_links_of_the_readme_and_the_docs_resolve():
    """The README's links and those of the pages it sends readers to (files, and #anchors to headings)."""
    broken = []
    for page in [README, *sorted((REPO / "docs").glob("*.md"))]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", page.read_text()):
            if re.match(r"(https?|mailto):", target):
                continue
            path = page.parent / target if target else page
            if not path.exists():
                broken.append(f"{page.name} → {target}")
            elif anchor and path.suffix == ".md" and anchor not in {
                    _slug(h) for h in re.findall(r"^#+ (.*)$", path.read_text(), re.M)}:
                broken.append(f"{page.name} → {target}#{anchor}")
    assert not broken, broken


# ---------------------------------------------------------------------------------------------------- run here


def _bash(command: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`command` in bash, inside the project's virtualenv exactly as the README says to enter it."""
    return subprocess.run(["bash", "-c", f"{ACTIVATE} && {command}"], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"})


def test_activation_puts_the_project_commands_on_the_path(tmp_path):
    assert "source .venv/bin/activate" in COVERAGE
    proc = _bash("command -v vrag-search && python -c 'import vrag_rl, search_engine; print(\"imports\")'", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [str(REPO / ".venv" / "bin" / "vrag-search"), "imports"]


def test_run_demo_help_lists_the_options():
    proc = subprocess.run(["./run_demo.sh", "help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--policy-url" in proc.stdout and "--policy-model" in proc.stdout and "runs/demo_logs/<mode>" in proc.stdout
    assert "set -euo" not in proc.stdout  # the help is the comment block, not the code


def _readme_line(prefix: str) -> str:
    return next(c for c in readme_commands() if c.startswith(prefix))


@pytest.mark.slow
def test_ingest_serve_search_and_the_agent_as_the_readme_writes_them(tmp_path, sample_corpus, scripted_policy):
    """Uses 2–4 of the README, in a scratch folder: `my_pdfs/` holds two of the sample corpus's PDFs."""
    (tmp_path / "my_pdfs").mkdir()
    for pdf in sample_corpus.files:
        if pdf.name in ("metro_travel_survey_2024.pdf", "acme_annual_report_2023.pdf"):
            (tmp_path / "my_pdfs" / pdf.name).write_bytes(pdf.read_bytes())
    ingest = _readme_line("vrag-search ingest")
    proc = _bash(ingest, tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "data" / "index" / "mine" / "manifest.json").is_file()

    serve = _readme_line("vrag-search serve")
    assert serve.endswith(" &") and "--port 8003" in serve
    port = free_port()
    argv = shlex.split(serve[:-2].replace("--port 8003", f"--port {port}"))
    server = subprocess.Popen(["bash", "-c", f"{ACTIVATE} && exec {shlex.join(argv)}"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, server.stdout.read() if server.poll() else ""
            time.sleep(0.5)

        curl = _readme_line("curl ")
        proc = _bash(curl.replace("127.0.0.1:8003", f"127.0.0.1:{port}"), tmp_path, timeout=60)
        assert proc.returncode == 0, proc.stderr
        hits = json.loads(proc.stdout)["results"][0]
        assert len(hits) == 3 and hits[0]["page_id"] == "acme_annual_report_2023_2"  # the revenue table

        policy = scripted_policy({
            "Riverside": ["<search>Riverside district satisfaction score</search>", "<answer>7.4</answer>"],
            "Kestrel": ["<search>Kestrel Ridge solar plant</search>", "<answer>not in these documents</answer>"],
        })
        code = python_block("from vrag_rl import VRAG")
        assert "http://127.0.0.1:8001/v1" in code and '"http://127.0.0.1:8002"' in code
        code = code.replace("http://127.0.0.1:8001/v1", policy).replace('"http://127.0.0.1:8002"', repr(base))
        namespace: dict = {}
        exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - the README's own example
        namespace["agent"].close()
        result = namespace["result"]
        assert result.status == "answered" and result.answer == "7.4"
        assert "metro_travel_survey_2024_4" in result.retrieved_page_ids
    finally:
        server.terminate()
        server.wait(timeout=30)
