#!/usr/bin/env python
"""Evaluate the VRAG agent on a dataset (same as the `vrag-eval` console script)."""
from vrag_rl.evaluation.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
