#!/usr/bin/env bash
# Type-check the project with mypy (configuration: [tool.mypy] in pyproject.toml, which lists the checked
# packages). Extra arguments go to mypy, e.g. `bash scripts/typecheck.sh search_engine/fusion.py`.
# Prints one summary line and exits non-zero on any error.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! .venv/bin/python -c "import mypy" 2>/dev/null; then
  echo "[typecheck] mypy is not installed in .venv: .venv/bin/python -m pip install 'mypy>=2.4,<3'" >&2
  exit 2
fi
exec .venv/bin/python -m mypy "$@"
