#!/usr/bin/env bash
# Run the test suite from .venv (install first with: bash scripts/install.sh --test).
# Extra arguments go to pytest. Without any, the whole suite runs on TEST_WORKERS pytest-xdist workers (default 2,
# one file per worker at a time, in the collection's order — the files with slow tests first, tests/conftest.py —
# not xdist's default of the files with the most tests first); TEST_WORKERS=1 runs it in
# one process. Exits non-zero when no test ran (pytest's exit code 5).
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_THREAD_LIMIT=1 TOKENIZERS_PARALLELISM=false
workers="${TEST_WORKERS:-2}"
if [[ ! "$workers" =~ ^[1-9][0-9]*$ ]]; then echo "TEST_WORKERS must be a positive integer (got '$workers')" >&2; exit 2; fi
parallel=()
if [[ $# -eq 0 && "$workers" -gt 1 ]]; then parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder --durations=25); fi
.venv/bin/python -m pytest -ra "${parallel[@]+"${parallel[@]}"}" "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "[tests] pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit $rc
