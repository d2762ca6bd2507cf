"""`python -m vrag_rl.data convert|check`: build and validate the parquet files verl trains on.

    python -m vrag_rl.data convert SlideVQA_train.json --data-source slidevqa_train --out data/rl/train.parquet
    python -m vrag_rl.data convert a.json b.jsonl --data-source vidoseek --split test --out data/rl/val.parquet
    python -m vrag_rl.data check data/rl/train.parquet

Exit codes: 0 ok, 1 bad rows (every one listed on stderr), 2 bad arguments or missing file.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vrag_rl.data.verl_parquet import (
    AGENT_NAME,
    DatasetConversionError,
    check_parquet,
    convert_records,
    write_parquet,
)
from vrag_rl.scoring.qa_dataset import read_dataset_records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vrag_rl.data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("convert", help="QA JSON/JSONL (upstream or the project's format) → verl parquet")
    conv.add_argument("inputs", nargs="+", help="dataset files ({'examples': [...]}, a JSON list, or .jsonl)")
    conv.add_argument("--out", required=True, help="parquet file to write")
    conv.add_argument("--data-source", default=None,
                      help="benchmark name stored per row (default: each input file's stem)")
    conv.add_argument("--split", default="train")
    conv.add_argument("--agent-name", default=AGENT_NAME)
    conv.add_argument("--skip-bad", action="store_true", help="write the good rows and list the bad ones")
    conv.add_argument("--allow-no-pages", action="store_true",
                      help="accept rows without reference pages (the retrieval reward is then 0 for them)")
    chk = sub.add_parser("check", help="validate a parquet file before training")
    chk.add_argument("path")
    chk.add_argument("--allow-no-pages", action="store_true")
    args = parser.parse_args(argv)

    try:
        if args.command == "check":
            rows = check_parquet(args.path, require_pages=not args.allow_no_pages)
            print(f"{args.path}: {rows} rows OK")
            return 0
        rows: list = []
        skipped: list[str] = []
        for path in args.inputs:
            source = args.data_source or Path(path).stem
            converted, report = convert_records(read_dataset_records(Path(path)), source, args.split, args.agent_name,
                                                args.skip_bad, not args.allow_no_pages, source=path,
                                                start_index=len(rows))
            rows.extend(converted)
            skipped.extend(f"{path}: {e}" for e in report.skipped)
        write_parquet(rows, args.out)
        for line in skipped:
            print(f"skipped {line}", file=sys.stderr)
        print(f"wrote {len(rows)} rows to {args.out}" + (f" ({len(skipped)} skipped)" if skipped else ""))
        return 0
    except DatasetConversionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
