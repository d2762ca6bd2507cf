#!/usr/bin/env bash
# Mutation testing of the search engine's core with mutmut (issue 11). Not part of CI: it runs the
# relevant tests once per mutant, which takes minutes to hours on a small machine.
#
#   scripts/mutation_test.sh [GROUP ...] [--sample N] [--seed S] [--keep] [--tests-from REV]
#
# Groups (default: all):
#   index    search_engine/index/{atomic,dense,manifest,maxsim}.py and search_engine/fusion.py
#            tests: tests/unit/test_index_core.py tests/unit/test_maxsim.py
#   ingest   search_engine/ingest.py
#            tests: tests/integration/test_ingest_robustness.py (not the slow kill test) and
#                   tests/unit/test_search_engine.py::test_incremental_add_update_remove / killed / corrupt
# --sample N      run a seeded random sample of N mutants per group (default: every mutant)
# --tests-from R  use the test files as they were at git revision R (the "before" column of a table)
# --only FILE     run just the mutants named in FILE, one per line (e.g. the survivors of a previous run)
# --keep          keep the work folder (mutmut's `mutants/` and its results) and print its path
#
# Each group runs in a fresh copy of the sources under $TMPDIR (mutmut writes its mutants there, never
# into the repository), under `nice -n 10`. The last lines print killed / survived / no-test counts and
# the kill rate per group; the survivors are listed so a test can be written for each.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$(pwd)"
PY="$REPO/.venv/bin/python"
MUTMUT="$REPO/.venv/bin/mutmut"
[[ -x "$MUTMUT" ]] || { echo "mutation_test.sh: mutmut is missing: .venv/bin/pip install 'mutmut>=3.3,<4'" >&2; exit 2; }

GROUPS_WANTED=()
SAMPLE=0
SEED=11
KEEP=0
TESTS_FROM=""
ONLY=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sample) SAMPLE="$2"; shift 2;;
    --seed) SEED="$2"; shift 2;;
    --keep) KEEP=1; shift;;
    --only) ONLY="$(realpath "$2")"; shift 2;;
    --tests-from) TESTS_FROM="$2"; shift 2;;
    index|ingest) GROUPS_WANTED+=("$1"); shift;;
    -h|--help) sed -n '2,20p' "$0"; exit 0;;
    *) echo "mutation_test.sh: unknown argument '$1'" >&2; exit 2;;
  esac
done
[[ ${#GROUPS_WANTED[@]} -gt 0 ]] || GROUPS_WANTED=(index ingest)

group_files() {
  case "$1" in
    index) echo "search_engine/fusion.py search_engine/index/atomic.py search_engine/index/dense.py search_engine/index/manifest.py search_engine/index/maxsim.py";;
    ingest) echo "search_engine/ingest.py";;
  esac
}
group_tests() {
  case "$1" in
    index) echo "tests/unit/test_index_core.py tests/unit/test_maxsim.py";;
    ingest) echo "tests/integration/test_ingest_robustness.py tests/unit/test_search_engine.py";;
  esac
}
# tests of test_search_engine.py that exercise ingestion (the others search a prebuilt index)
INGEST_NODES="test_incremental_add_update_remove test_corrupt_and_encrypted_pdfs_are_skipped_with_a_reason
test_killed_ingestion_leaves_a_valid_index_and_resumes test_one_ingestor_per_index test_mixing_embedders_is_refused"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_THREAD_LIMIT=1 TOKENIZERS_PARALLELISM=false

for group in "${GROUPS_WANTED[@]}"; do
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/vrag-mutation-$group.XXXXXX")"
  cp -r search_engine testkit "$WORK/"
  [[ -d vrag_rl ]] && cp -r vrag_rl "$WORK/"
  mkdir -p "$WORK/tests/unit" "$WORK/tests/integration"
  cp tests/conftest.py "$WORK/tests/"
  for t in $(group_tests "$group"); do
    if [[ -n "$TESTS_FROM" ]]; then
      git show "$TESTS_FROM:$t" > "$WORK/$t" 2>/dev/null || rm -f "$WORK/$t"  # absent then: no such test yet
    else
      cp "$t" "$WORK/$t"
    fi
  done
  find "$WORK" -name __pycache__ -prune -exec rm -rf {} +
  only=""
  for f in $(group_files "$group"); do only+="    $f"$'\n'; done
  tests_present=""
  for t in $(group_tests "$group"); do
    [[ -f "$WORK/$t" ]] || continue
    if [[ "$group" == ingest && "$t" == tests/unit/test_search_engine.py ]]; then
      for node in $INGEST_NODES; do grep -q "def $node(" "$WORK/$t" && tests_present+="    $t::$node"$'\n'; done
    else
      tests_present+="    $t"$'\n'
    fi
  done
  [[ -n "$tests_present" ]] || { echo "[$group] no test files at ${TESTS_FROM:-HEAD}: kill rate 0"; continue; }
  # the kill-during-update test starts 4 processes per run: too slow to repeat per mutant
  extra="    -m"$'\n'"    not slow"$'\n'
  cat > "$WORK/setup.cfg" <<EOF
[mutmut]
source_paths =
    search_engine
only_mutate =
$only
pytest_add_cli_args_test_selection =
$tests_present
pytest_add_cli_args =
    -q
    -p
    no:cacheprovider
    -x
$extra
EOF
  echo "==> [$group] mutating: $(group_files "$group")"
  echo "    tests: $(group_tests "$group" | tr ' ' '\n' | while read -r t; do [[ -f "$WORK/$t" ]] && printf '%s ' "$t"; done)${TESTS_FROM:+ (as of $TESTS_FROM)}"
  cd "$WORK"
  names=()
  if [[ -n "$ONLY" ]]; then
    mapfile -t names < <(grep -v '^\s*$' "$ONLY")
    echo "    ${#names[@]} mutants from $ONLY"
  elif [[ "$SAMPLE" -gt 0 ]]; then
    # generate the mutants once (no test runs yet), then pick a seeded sample of their names
    nice -n 10 "$PY" - "$SAMPLE" "$SEED" $(group_files "$group") > "$WORK/sample.txt" <<'PYEOF'
import random, sys
from pathlib import Path
from mutmut.mutation.file_mutation import mutate_file_contents  # mutmut 3: the names mutmut will use
sample, seed, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
names = []
for f in files:
    module = f[:-3].replace("/", ".")
    mutated = mutate_file_contents(f, Path(f).read_text())
    for n in mutated.mutant_names:
        # maxsim.py also holds the streaming top-k of the approximate backends, tested by test_fast_search.py:
        # this group measures the exact scorer only
        if f.endswith("maxsim.py") and "MaxSimScorer" not in n:
            continue
        names.append(f"{module}.{n}")
random.Random(seed).shuffle(names)
print("\n".join(sorted(names[:sample])))
PYEOF
    mapfile -t names < "$WORK/sample.txt"
    echo "    sampled ${#names[@]} mutants (seed $SEED)"
  fi
  set +e
  # .venv's vrag_torchvision_shim.pth imports search_engine at interpreter start-up, before mutmut can put
  # its mutants/ first on sys.path; PYTHONPATH is searched before .pth files run. A first pass generates
  # mutants/ (and stops: the originals were imported), the second imports the mutated copy.
  PYTEST_ADDOPTS="-k no_test_has_this_name" nice -n 10 "$MUTMUT" run "${names[@]}" > "$WORK/generate.log" 2>&1
  PYTHONPATH="$WORK/mutants" nice -n 10 "$MUTMUT" run "${names[@]}" > "$WORK/run.log" 2>&1
  rc=$?
  set -e
  "$PY" - "$WORK" "$group" "${names[@]}" <<'PYEOF'
import collections, json, sys
from pathlib import Path
from mutmut.stats import status_by_exit_code
work, group, names = Path(sys.argv[1]), sys.argv[2], set(sys.argv[3:])
counts = collections.Counter()
survivors = []
for meta in sorted((work / "mutants").rglob("*.meta")):
    data = json.loads(meta.read_text())
    for name, code in data.get("exit_code_by_key", {}).items():
        if names and name not in names:
            continue
        status = status_by_exit_code[code]
        counts[status] += 1
        if status in ("survived", "no tests"):
            survivors.append(f"{status}: {name}")
# a mutant no test runs counts as surviving: the code it changed is untested
dead = counts["killed"] + counts["timeout"] + counts["segfault"]
total = dead + counts["survived"] + counts["no tests"]
rate = 100.0 * dead / total if total else 0.0
print(f"[{group}] mutants {total}: killed {counts['killed']}, timeout {counts['timeout']}, "
      f"survived {counts['survived']}, no covering test {counts['no tests']}, other {dict((k, v) for k, v in counts.items() if k not in ('killed', 'timeout', 'segfault', 'survived', 'no tests'))}; "
      f"kill rate {rate:.1f}%")
for line in survivors:
    print("    " + line)
PYEOF
  [[ $rc -eq 0 ]] || { echo "    (mutmut exited $rc; last lines of $WORK/run.log:)"; tail -n 15 "$WORK/run.log"; }
  cd "$REPO"
  if [[ $KEEP -eq 1 ]]; then echo "    work folder kept: $WORK (cd there; mutmut show NAME)"; else rm -rf "$WORK"; fi
done
