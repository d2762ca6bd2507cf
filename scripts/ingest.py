#!/usr/bin/env python
"""Ingest PDFs / images into an index (same as `vrag-search ingest`); run with --help for options."""
import sys

from search_engine.cli import app

if __name__ == "__main__":
    app(["ingest", *sys.argv[1:]])
