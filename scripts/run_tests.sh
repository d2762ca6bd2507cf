#!/usr/bin/env bash
# Run the test suite from .venv (install first with: bash scripts/install.sh --test).
# Extra arguments go to pytest. Exits non-zero when no test ran (pytest's exit code 5).
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_THREAD_LIMIT=1 TOKENIZERS_PARALLELISM=false
.venv/bin/python -m pytest -ra "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "[tests] pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit $rc
