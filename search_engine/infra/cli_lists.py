"""List options that take several values after one flag (`--methods a b c`), for typer apps.

Click options take a fixed number of values; a list option is repeated (`--methods a --methods b`). The
benchmark scripts were argparse programs with `nargs="+"` options, and their documented command lines
(docs/benchmarks.md, docs/scale.md) write `--methods a b c`. `spread_values` rewrites such a command line into the
repeated form before click parses it, so both spellings mean the same; `command_spreading` makes a typer
command class that does it, for `@app.command(cls=...)`.

Like argparse, a list ends at the next argument that looks like an option (starts with "-", except a
negative number such as -1 or -.5 and a lone "-"), and nothing after "--" is touched.

This module imports nothing of the project (scripts/bench_plaid_libs.py, which runs in a virtual
environment without the project, loads this file by its path).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from typer.core import TyperCommand

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's own rule for "a value, not an option"


def _looks_like_option(arg: str) -> bool:
    return arg.startswith("-") and arg != "-" and not _NEGATIVE_NUMBER.match(arg)


def spread_values(args: Sequence[str], options: Sequence[str]) -> list[str]:
    """`args` with `OPT a b c` written as `OPT a OPT b OPT c` for every OPT in `options`.

    Only the exact spelling `OPT` starts a list (`OPT=a` is one value, as in argparse); the values run up to
    the next option-like argument or "--".
    """
    out: list[str] = []
    current: str | None = None  # the list option whose values are being read, if any
    for position, arg in enumerate(args):
        if arg == "--":
            out.extend(args[position:])
            break
        if _looks_like_option(arg):
            current = arg if arg in options else None
            out.append(arg)
            continue
        if current is not None and out[-1] != current:  # a second, third, ... value: repeat the option
            out.append(current)
        out.append(arg)
    return out


def command_spreading(*options: str) -> type[TyperCommand]:
    """A typer command class whose list options `options` also accept several values after one flag."""

    class SpreadingCommand(TyperCommand):
        # ctx: click's Context, which recent typer versions vendor (typer._click) rather than import
        def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
            return super().parse_args(ctx, spread_values(args, options))

    return SpreadingCommand
