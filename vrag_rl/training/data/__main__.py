"""`python -m vrag_rl.training.data convert|check`: build and validate the parquet files verl trains on.

    python -m vrag_rl.training.data convert SlideVQA_train.json --data-source slidevqa_train --out data/rl/train.parquet
    python -m vrag_rl.training.data convert a.json b.jsonl --data-source vidoseek --split test --out data/rl/val.parquet
    python -m vrag_rl.training.data check data/rl/train.parquet --agent-name vrag_agent

Exit codes: 0 ok, 1 bad rows (every one listed on stderr), 2 bad arguments or missing file.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from search_engine.infra.cli_exit import exit_status
from vrag_rl.scoring.qa_dataset import read_dataset_records
from vrag_rl.training.data.verl_parquet import (
    AGENT_NAME,
    DatasetConversionError,
    check_parquet,
    convert_records,
    write_parquet,
)

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help=(__doc__ or "").replace("    python -m", "\b\n    python -m", 1))
AllowNoPages = Annotated[bool, typer.Option(
    "--allow-no-pages", help="accept rows without reference pages (the retrieval reward is then 0 for them)")]


@app.command()
def convert(
    inputs: Annotated[list[Path], typer.Argument(help="dataset files ({'examples': [...]}, a JSON list, or .jsonl)")],
    out: Annotated[Path, typer.Option(help="parquet file to write")],
    data_source: Annotated[str | None, typer.Option(
        help="benchmark name stored per row (default: each input file's stem)")] = None,
    split: str = "train",
    agent_name: str = AGENT_NAME,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="write the good rows and list the bad ones")] = False,
    allow_no_pages: AllowNoPages = False,
    prompts: Annotated[Path | None, typer.Option(
        help="JSON object of the VRAG agent's prompt fields (system, question, ...) the rows start from; the same "
             "words as the run's vrag.prompts")] = None,
) -> None:
    """QA JSON/JSONL (upstream or the project's format) -> verl parquet."""
    def run() -> int:
        words = load_prompts(prompts) if prompts else None
        rows: list = []
        skipped: list[str] = []
        for path in inputs:
            source = data_source or path.stem
            converted, report = convert_records(read_dataset_records(path), source, split, agent_name, skip_bad,
                                                not allow_no_pages, source=str(path), start_index=len(rows),
                                                prompts=words)
            rows.extend(converted)
            skipped.extend(f"{path}: {e}" for e in report.skipped)
        write_parquet(rows, str(out))
        for line in skipped:
            print(f"skipped {line}", file=sys.stderr)
        print(f"wrote {len(rows)} rows to {out}" + (f" ({len(skipped)} skipped)" if skipped else ""))
        return 0

    raise typer.Exit(_with_exit_codes(run))


@app.command()
def check(path: Path, allow_no_pages: AllowNoPages = False,
          agent_name: Annotated[str | None, typer.Option(
              help="the agent loop the run trains: every row's agent_name must be it")] = None) -> None:
    """Validate a parquet file before training."""
    def run() -> int:
        rows = check_parquet(str(path), require_pages=not allow_no_pages, agent_name=agent_name)
        print(f"{path}: {rows} rows OK" + (f" (agent_name {agent_name})" if agent_name else ""))
        return 0

    raise typer.Exit(_with_exit_codes(run))


def load_prompts(path: Path):
    """The VRAG agent's `Prompts` from a JSON object of its fields; an unknown field is a ValueError (exit 2)."""
    import json

    from vrag_rl.agent.plugins import agent_plugin

    fields = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(fields, dict):
        raise ValueError(f"{path}: a JSON object of prompt fields is expected")
    try:
        return agent_plugin("vrag").prompts_type(**fields)
    except TypeError as exc:
        raise ValueError(f"{path}: {exc}") from exc


def _with_exit_codes(run: Callable[[], int]) -> int:
    """The documented exit codes: 1 bad rows, 2 missing file or bad arguments."""
    try:
        return run()
    except DatasetConversionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    """`python -m vrag_rl.training.data`: the exit status (see the module docstring)."""
    return exit_status(app, argv, "python -m vrag_rl.training.data")


if __name__ == "__main__":
    sys.exit(main())
