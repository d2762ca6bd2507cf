"""Run a typer app as `main(argv) -> int`: the exit status returned, not raised.

Console scripts (`sys.exit(main())`) and tests (`assert main([...]) == 2`) both want the status as a value;
typer's standalone mode ends every run with `SystemExit`. Typer has no "return the code" switch (its
non-standalone mode skips the usage-error printing users need), so this one function sits between.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

import typer


def exit_status(app: typer.Typer, argv: Sequence[str] | None, prog_name: str) -> int:
    """Run `app` on `argv` (None: the process's arguments) and return its exit status."""
    try:
        app(args=list(argv) if argv is not None else None, prog_name=prog_name)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)  # a message instead of a code: Python's own convention prints it
        return 1
    return 0
