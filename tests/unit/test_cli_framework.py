"""One CLI framework: every command line of the packages and scripts is a typer app, and `exit_status` returns its
status; the scripts' documented command lines (argparse's `--methods a b c` included) still parse."""

import ast
import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main

from search_engine.infra.cli_exit import exit_status
from search_engine.infra.cli_lists import spread_values

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("search_engine", "vrag_rl", "vimrag", "demo")


def test_no_package_module_parses_arguments_with_argparse():
    offenders = [str(path.relative_to(REPO)) for package in PACKAGES for path in (REPO / package).rglob("*.py")
                 if re.search(r"^\s*(import argparse|from argparse import)", path.read_text(), re.M)]
    assert offenders == []


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False)

    @app.command()
    def run(code: int = 0, message: str = "") -> None:
        if message:
            raise SystemExit(message)
        raise typer.Exit(code)

    return app


@pytest.mark.parametrize("argv, status", [([], 0), (["--code", "3"], 3), (["--code", "nope"], 2)])
def test_exit_status_returns_the_status(argv, status):
    assert exit_status(_app(), argv, "demo-cli") == status


def test_a_message_exit_is_printed_and_counts_as_failure(capsys):
    assert exit_status(_app(), ["--message", "vrag: no such index"], "demo-cli") == 1
    assert "vrag: no such index" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- the scripts

SCRIPTS = REPO / "scripts"
# sys.path edits a script keeps on purpose: bench_agent imports the vrag_rl of the checkout given by
# --agent-repo; bench_table_extractors runs in a virtual environment without the project installed.
SYS_PATH_EDITS = {"bench_agent.py", "bench_table_extractors.py"}


def test_no_script_parses_arguments_with_argparse():
    offenders = [path.name for path in sorted(SCRIPTS.glob("*.py"))
                 if re.search(r"^\s*(import argparse|from argparse import)", path.read_text(), re.M)]
    assert offenders == []


def test_scripts_edit_sys_path_only_where_they_must_and_say_why():
    edits = {path.name: path.read_text().splitlines() for path in sorted(SCRIPTS.glob("*.py"))}
    edits = {name: [i for i, line in enumerate(lines) if "sys.path.insert(" in line]
             for name, lines in edits.items()}
    assert {name for name, at in edits.items() if at} == SYS_PATH_EDITS
    for name in SYS_PATH_EDITS:  # a comment on the line or just above it
        lines = (SCRIPTS / name).read_text().splitlines()
        assert all("#" in lines[i] or lines[i - 1].strip().startswith("#") for i in edits[name]), name


@pytest.mark.parametrize("script", ["bench_real_docs.py", "bench_search.py", "make_bench_corpus.py",
                                    "bench_plaid_libs.py", "bench_codecs.py", "bench_slides.py",
                                    "attribute_misses.py", "robustness_run.py", "text_layer_survey.py",
                                    "compare_algos.py"])
def test_script_help_runs(script):
    """`--help` as a user runs it: the script's own process, from another folder (no reliance on the cwd)."""
    proc = subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], capture_output=True, text=True,
                          timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"Usage: {script} ")


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"cli_test_{name}", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def _parsed(script: str, command_line: str) -> dict:
    """The options a documented command line gives the script's command, parsed but not run."""
    command = typer.main.get_command(_script(script).app)
    with command.make_context(f"{script}.py", shlex.split(command_line)) as ctx:
        return {k: [getattr(v, "value", v) for v in value] if isinstance(value, (list, tuple)) else value
                for k, value in ctx.params.items()}


ALL_SETS = ["standard", "noisy", "multipage", "half-unmatched"]


def test_documented_make_bench_corpus_command_lines_parse():
    # docs/benchmarks.md, docs/scale.md
    got = _parsed("make_bench_corpus", "--pages 10000 --out data/bench/synth_10k --queries 50")
    assert (got["pages"], got["out"], got["queries"], got["query_sets"]) == (10000, Path("data/bench/synth_10k"), 50,
                                                                            [])
    got = _parsed("make_bench_corpus", "--pages 10000 --out /w/synth_10k --queries 50 "
                                       "--query-sets standard noisy multipage half-unmatched")
    assert got["query_sets"] == ALL_SETS
    got = _parsed("make_bench_corpus", "--stream --finish-prefix --pages 100000 --queries 12 --codec pq32 "
                                       "--out /w/stream_100k --query-sets standard noisy multipage half-unmatched")
    assert got["stream"] and got["finish_prefix"] and got["codec"] == "pq32" and got["query_sets"] == ALL_SETS
    got = _parsed("make_bench_corpus", "--kind replicated --noise 0.05 --out x --pages 10")
    assert got["kind"] == "replicated" and got["noise"] == 0.05
    with pytest.raises(click_exceptions()):  # the choices are still checked
        _parsed("make_bench_corpus", "--pages 1 --out x --query-sets standard nosy")


def test_documented_bench_search_command_lines_parse():
    got = _parsed("bench_search", "--corpus data/bench/synth_10k --corpus data/bench/synth_100k")
    assert got["corpus"] == [Path("data/bench/synth_10k"), Path("data/bench/synth_100k")]
    got = _parsed("bench_search", "--corpus d --queries 20 --slow-queries 3 "
                                  "--methods colpali exact exact-stream fast:4:128 fast:8:128 fast:8:256")
    assert got["methods"] == ["colpali", "exact", "exact-stream", "fast:4:128", "fast:8:128", "fast:8:256"]
    assert (got["queries"], got["slow_queries"]) == (20, 3)
    got = _parsed("bench_search", "--corpus d --queries 50 --query-set standard noisy multipage half-unmatched "
                                  "--methods fast:16:128 cfast:pq32:16:256:64 cfast:sq2:16:512:128:32")
    assert got["query_set"] == ALL_SETS
    assert got["methods"] == ["fast:16:128", "cfast:pq32:16:256:64", "cfast:sq2:16:512:128:32"]
    got = _parsed("bench_search", "--corpus d --methods cfast:pq32:16:256:64 cfast:pq32:8:128:32 "
                                  "--query-set standard noisy --json rows.json --append-json")
    assert got["methods"] == ["cfast:pq32:16:256:64", "cfast:pq32:8:128:32"]
    assert got["query_set"] == ["standard", "noisy"] and got["json_path"] == Path("rows.json") and got["append_json"]
    got = _parsed("bench_search", "--json rows.json --plot-only --plot scale.png --plot-methods exact fast:8:256")
    assert got["plot_only"] and got["plot_methods"] == ["exact", "fast:8:256"]


def test_documented_compare_algos_command_lines_parse():
    # docs/algorithms_tiny.md
    got = _parsed("compare_algos", "--out runs/algos --steps 15 --seeds 0 1 2")
    assert (got["out"], got["steps"], got["seeds"]) == (Path("runs/algos"), 15, [0, 1, 2])
    got = _parsed("compare_algos", "--out runs/algos --steps 15 --report-only --agents vrag --algos grpo ggpo")
    assert got["report_only"] and got["agents"] == ["vrag"] and got["algos"] == ["grpo", "ggpo"]


def test_documented_bench_plaid_libs_command_line_parses():
    got = _parsed("bench_plaid_libs", "--corpus /w/synth_10k --method fast-plaid xtr-warp "
                                      "--query-set standard half-unmatched --queries 20 --json rows_libs_10k.json")
    assert got["method"] == ["fast-plaid", "xtr-warp"] and got["query_set"] == ["standard", "half-unmatched"]
    assert (got["queries"], got["json_path"]) == (20, Path("rows_libs_10k.json"))


def test_documented_bench_real_docs_command_lines_parse():
    got = _parsed("bench_real_docs", "--held-back-docs mnras_author_guide,gs9_color_management --no-e2e --verbose")
    assert got["held_back_docs"] == "mnras_author_guide,gs9_color_management" and got["no_e2e"] and got["verbose"]
    got = _parsed("bench_real_docs", "--policy-url http://127.0.0.1:8001/v1 --model Qwen/Qwen2.5-VL-7B-Instruct")
    assert (got["policy_url"], got["model"]) == ("http://127.0.0.1:8001/v1", "Qwen/Qwen2.5-VL-7B-Instruct")


def test_documented_robustness_run_command_lines_parse():
    # docs/robustness.md and the script's docstring
    got = _parsed("robustness_run", "--pdfs 320 --fuzz-pdfs 24 --max-pages 8 --batch 16 --layout-fuzz-pages 3 "
                                    "--seed 13")
    assert (got["pdfs"], got["fuzz_pdfs"], got["max_pages"], got["batch"], got["layout_fuzz_pages"],
            got["seed"], got["chaos"], got["fresh"]) == (320, 24, 8, 16, 3, 13, 0.0, False)
    got = _parsed("robustness_run", "--pdfs 320 --fuzz-pdfs 0 --max-pages 3 --batch 32 --layout-fuzz-pages 0 "
                                    "--chaos 0.05 --out /tmp/r --fresh")
    assert (got["chaos"], got["out"], got["fresh"], got["worker"]) == (0.05, Path("/tmp/r"), True, None)


def click_exceptions() -> type[Exception]:
    """Click's usage error class (typer vendors click in recent versions, so it is taken from typer)."""
    return typer.BadParameter.__mro__[1]


@pytest.mark.parametrize("argv, spread", [
    (["--m", "a", "b", "--x", "1"], ["--m", "a", "--m", "b", "--x", "1"]),
    (["--m", "a", "--m", "b"], ["--m", "a", "--m", "b"]),
    (["--m=a", "b"], ["--m=a", "b"]),  # one value, as argparse reads `--m=a`
    (["--m", "-1", "-.5", "-", "c"], ["--m", "-1", "--m", "-.5", "--m", "-", "--m", "c"]),  # values, not options
    (["--m", "a", "--", "b", "c"], ["--m", "a", "--", "b", "c"]),
    (["--x", "a", "b"], ["--x", "a", "b"]),  # not a list option: untouched
])
def test_spread_values_reads_a_list_like_argparse(argv, spread):
    assert spread_values(argv, ["--m"]) == spread


def test_cli_lists_loads_alone():
    """bench_plaid_libs loads search_engine/infra/cli_lists.py by its path in a venv without the project."""
    tree = ast.parse((REPO / "search_engine" / "infra" / "cli_lists.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name.split(".")[0] for name in imported} <= {"__future__", "re", "collections", "typing", "typer"}
