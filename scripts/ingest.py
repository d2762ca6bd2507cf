#!/usr/bin/env python
"""Ingest PDFs / images into an index (same as `vrag-search ingest`); run with --help for options."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search_engine.cli import app  # noqa: E402

if __name__ == "__main__":
    app(["ingest", *sys.argv[1:]])
