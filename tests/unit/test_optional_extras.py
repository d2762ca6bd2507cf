"""Optional extras: reportlab ([samples]) and llama-index-core ([llama-index]) are not core dependencies,
and a feature whose extra is missing fails with a message naming the extra, before writing anything.

"Missing" is simulated in a fresh interpreter by `sys.modules[name] = None` (Python's documented way to
make an import fail), so the installed packages stay untouched.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run_without(module: str, code: str) -> subprocess.CompletedProcess:
    prelude = f"import sys; sys.modules[{module!r}] = None\n"
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120)


def test_reportlab_and_llama_index_are_extras_not_core_dependencies():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    extras = project["optional-dependencies"]
    assert "reportlab" not in core and "llama-index" not in core
    assert any(d.startswith("reportlab") for d in extras["samples"])
    assert any(d.startswith("llama-index-core") for d in extras["llama-index"])
    # the demo builds its index from the sample corpus; the tests use both
    assert any("samples" in d for d in extras["demo"])
    assert any("samples" in d and "llama-index" in d for d in extras["test"])


def test_nothing_outside_the_two_features_imports_them():
    """A core module importing reportlab or llama_index would break a core-only install."""
    allowed = {"search_engine/sample_corpus.py", "search_engine/llama_index_retriever.py",
               "testkit/structured_pdf.py"}  # testkit is test-only ([test] pulls [samples])
    offenders = []
    for package in ("search_engine", "vrag_rl", "vimrag", "demo", "testkit"):
        for path in (REPO / package).rglob("*.py"):
            rel = path.relative_to(REPO).as_posix()
            text = path.read_text(encoding="utf-8")
            if rel not in allowed and ("import reportlab" in text or "from reportlab" in text
                                       or "llama_index" in text.replace("llama_index_retriever", "")):
                offenders.append(rel)
    assert offenders == []


def test_sample_corpus_without_reportlab_names_the_extra_and_writes_nothing(tmp_path):
    out = tmp_path / "corpus"
    proc = _run_without("reportlab", f"""
from search_engine.extras import MissingExtraError
from search_engine.sample_corpus import generate_sample_corpus
try:
    generate_sample_corpus({str(out)!r})
except MissingExtraError as exc:
    print("MISSING", exc)
""")
    assert proc.returncode == 0, proc.stderr
    assert "MISSING" in proc.stdout and "vrag-rl[samples]" in proc.stdout and "reportlab" in proc.stdout
    assert not out.exists()


def test_sample_corpus_cli_without_reportlab_exits_2_with_the_message(tmp_path):
    proc = _run_without("reportlab", f"""
import sys
from search_engine.cli import app
sys.argv = ["vrag-search", "sample-corpus", "--out", {str(tmp_path / "c")!r}]
app()
""")
    assert proc.returncode == 2
    assert "vrag-rl[samples]" in proc.stderr and "Traceback" not in proc.stderr


def test_llama_index_adapter_without_llama_index_names_the_extra():
    proc = _run_without("llama_index", """
from search_engine.extras import MissingExtraError
try:
    import search_engine.llama_index_retriever
except MissingExtraError as exc:
    print("MISSING", exc)
""")
    assert proc.returncode == 0, proc.stderr
    assert "MISSING" in proc.stdout and "vrag-rl[llama-index]" in proc.stdout and "llama-index-core" in proc.stdout


def test_search_engine_imports_without_either_extra():
    """The core (engine, API, CLI) loads with neither optional package present."""
    proc = _run_without("reportlab", """
sys.modules["llama_index"] = None
import search_engine.api, search_engine.cli, search_engine.engine, search_engine.sample_corpus
print("ok")
""")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
