#!/usr/bin/env python
"""Evaluate the VRAG agent on a dataset (same as the `vrag-eval` console script)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from vrag_rl.evaluation.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
