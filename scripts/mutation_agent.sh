#!/usr/bin/env bash
# Mutation testing of the agent (vrag_rl/agent/) with mutmut 3 — a script, not part of CI.
#
#   scripts/mutation_agent.sh                       # every mutant of the modules below (~1700; hours on 2 cores)
#   SAMPLE=150 scripts/mutation_agent.sh            # a seeded random sample of 150 mutants, spread over modules
#   scripts/mutation_agent.sh 'vrag_rl.vrag.loop*'             # mutants named by glob
#   REF=<commit> TESTS="tests/a.py tests/b.py" scripts/mutation_agent.sh   # another commit / test set
#
# It runs on a scratch copy of the COMMITTED tree (git archive $REF) in $VRAG_MUTATION_DIR
# (default /tmp/vrag_mutation_agent), so the shared working tree is never touched, and prints
# killed / survived / timeout / no-test counts and the kill rate per module. The scratch copy gets
# the current tests/conftest.py (older commits lack its cache switches), and the two test indexes
# are built once and reused by every mutant's session (VRAG_TEST_TEXT_INDEX_DIR, VRAG_TEST_MARKER_DIR).
# Each mutant runs only the tests that cover the mutated function (mutmut's own selection) out of
# TESTS — by default the parsing / geometry unit tests, the marker-page trajectory and loop-path
# tests and the agent fuzz tests (the two 10-second sweeps over every malformed kind are left out
# here; the targeted fuzz tests stay).
# Needs: pip install -c /work/helper_notes/constraints.txt mutmut  (3.x).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${VRAG_MUTATION_DIR:-/tmp/vrag_mutation_agent}"
MUTMUT="$ROOT/.venv/bin/mutmut"
PY="$ROOT/.venv/bin/python"
CHILDREN="${MUTATION_CHILDREN:-2}"
REF="${REF:-HEAD}"  # the commit whose code and tests are measured
MODULES=(actions.py images.py loop.py page_images.py policies/openai_http.py)
if [[ -n "${TESTS:-}" ]]; then read -r -a TESTS <<< "$TESTS"; else
  TESTS=(tests/unit/test_agent_parsing.py tests/unit/test_agent_geometry.py tests/unit/test_agent_page_images.py
         tests/integration/test_agent_trajectory.py tests/integration/test_agent_loop_paths.py
         tests/fuzz/test_agent_fuzz.py)
fi

rm -rf "$WORK"
mkdir -p "$WORK"
git -C "$ROOT" archive "$REF" | tar -x -C "$WORK"
cp "$ROOT/tests/conftest.py" "$WORK/tests/conftest.py"
[[ -f "$WORK/testkit/marker_pages.py" ]] || cp "$ROOT/testkit/marker_pages.py" "$WORK/testkit/"
# mutmut reads [tool.mutmut] from pyproject.toml first: write ours there (replacing any other)
"$PY" - "$WORK/pyproject.toml" "${MODULES[@]}" -- "${TESTS[@]}" <<'PY'
import re, sys
path, rest = sys.argv[1], sys.argv[2:]
split = rest.index("--")
modules, tests = rest[:split], rest[split + 1:]
text = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", open(path).read())
quoted = lambda items: "[" + ", ".join(f'"{i}"' for i in items) + "]"
text += f"""
[tool.mutmut]
source_paths = ["vrag_rl"]
only_mutate = {quoted("vrag_rl/agent/" + m for m in modules)}
also_copy = ["search_engine", "testkit", "tests", "demo", "vimrag", "data"]
pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x", "-k", "not every_malformed_kind and not seeded_random_mixes"]
pytest_add_cli_args_test_selection = {quoted(tests)}
process_isolation = "forkserver"  # fork each mutant from a process that has imported the tests already
forkserver_warmup = "collect"
timeout_multiplier = 5.0
timeout_constant = 30.0
"""
open(path, "w").write(text)
PY
cd "$WORK"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_THREAD_LIMIT=1 TOKENIZERS_PARALLELISM=false
export VRAG_TEST_MARKER_DIR="$WORK/marker_cache" VRAG_TEST_TEXT_INDEX_DIR="$WORK/text_index_cache"
FILTER=("$@")
started=$(date +%s)
if [[ -n "${SAMPLE:-}" && ${#FILTER[@]} -eq 0 ]]; then
  # generate the mutants only (a filter that matches nothing stops mutmut right after generating)
  nice -n 10 "$MUTMUT" run "no-such-mutant-*" > "$WORK/mutmut_generate.log" 2>&1 || true
  "$MUTMUT" results --all true > "$WORK/mutmut_all.txt" 2>/dev/null
  mapfile -t FILTER < <("$PY" - "$WORK/mutmut_all.txt" "$SAMPLE" <<'PY'
import random, re, sys
names = sorted({line.split(":")[0].strip() for line in open(sys.argv[1]) if "__mutmut_" in line})
if not names:
    sys.exit("no mutants were generated; see mutmut_generate.log")
for name in sorted(random.Random(11).sample(names, min(int(sys.argv[2]), len(names)))):
    print(name)
PY
)
fi
nice -n 10 "$MUTMUT" run --max-children "$CHILDREN" "${FILTER[@]}" > "$WORK/mutmut_run.log" 2>&1 || {
  echo "mutmut run failed; see $WORK/mutmut_run.log" >&2; tail -30 "$WORK/mutmut_run.log" >&2; exit 1; }
"$MUTMUT" results --all true > "$WORK/mutmut_results.txt" 2>/dev/null
printf '%s\n' "${FILTER[@]}" > "$WORK/mutants_asked.txt"
echo "mutmut on $(git -C "$ROOT" rev-parse --short "$REF") with ${TESTS[*]}"
echo "$(( $(date +%s) - started )) s; mutants: ${SAMPLE:+a seeded sample of $SAMPLE}${FILTER[*]:+ (see $WORK/mutants_asked.txt)}"
"$PY" - "$WORK/mutmut_results.txt" "$WORK/mutants_asked.txt" <<'PY'
import collections, fnmatch, re, sys
rows = collections.defaultdict(collections.Counter)
patterns = [p for p in open(sys.argv[2]).read().split() if p]
for line in open(sys.argv[1]):
    m = re.match(r"\s*(vrag_rl\.agent\.[\w.]+?)\.x\w*__mutmut_\d+: (.+)", line)
    if not m:
        continue
    name = line.split(":")[0].strip()
    if patterns and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
        continue  # mutmut lists every mutant; count only the ones this run was asked for
    rows[m.group(1)][m.group(2).strip()] += 1
print(f"{'module':36s} {'mutants':>7s} {'killed':>6s} {'survived':>8s} {'timeout':>7s} {'no tests':>8s} "
      f"{'other':>5s} {'kill rate':>9s}")
total_all = killed_all = 0
for module, c in sorted(rows.items()):
    total = sum(c.values())
    killed = c["killed"] + c["timeout"]
    other = total - c["killed"] - c["survived"] - c["timeout"] - c["no tests"]
    total_all, killed_all = total_all + total, killed_all + killed
    print(f"{module:36s} {total:7d} {c['killed']:6d} {c['survived']:8d} {c['timeout']:7d} {c['no tests']:8d} "
          f"{other:5d} {killed / total:9.1%}")
if total_all:
    print(f"{'all':36s} {total_all:7d} {'':6s} {'':8s} {'':7s} {'':8s} {'':5s} {killed_all / total_all:9.1%}")
PY
echo "survivors: cd $WORK && $MUTMUT results; $MUTMUT show <name>"
