"""One CLI framework: every command line of the package is a typer app, and `exit_status` returns its status."""

import re
from pathlib import Path

import pytest
import typer

from search_engine.infra.cli_exit import exit_status

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
