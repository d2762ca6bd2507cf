"""One way to start the search server: `python -m search_engine.api` is `vrag-search serve`, not a second CLI."""

import subprocess
import sys

from typer.testing import CliRunner

from search_engine import api
from search_engine.cli import app


def _option_names(help_text: str) -> set[str]:
    return {word.strip("│,") for word in help_text.split() if word.startswith("--")}


def test_module_form_has_exactly_the_serve_commands_options(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich would cut long option names in a narrow terminal
    serve_help = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200).output
    try:
        api.main(["--help"])
    except SystemExit as stop:
        assert stop.code == 0
    module_help = capsys.readouterr().out
    assert _option_names(serve_help) and _option_names(module_help) == _option_names(serve_help)
    assert "--backend" in _option_names(module_help)  # an option only `vrag-search serve` ever had


def test_module_form_refuses_a_missing_index_like_serve(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "search_engine.api", "--index", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no index at" in proc.stderr and "Traceback" not in proc.stderr
