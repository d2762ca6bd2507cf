#!/usr/bin/env bash
# Start the VRAG demo: search server + policy endpoint + Streamlit UI. Ctrl-C stops everything.
#
#   ./run_demo.sh [vrag|vimrag] [options]   (vimrag: the memory-graph agent, demo/vimrag_app.py)
#
# Options (or environment variables):
#   --index DIR            index directory            (VRAG_INDEX_DIR, default data/index/sample)
#   --search-port N        search server port         (VRAG_SEARCH_PORT, default 8002)
#   --policy-url URL       an OpenAI-compatible endpoint, e.g. vLLM's http://host:8001/v1 or
#                          https://dashscope.aliyuncs.com/compatible-mode/v1  (VRAG_POLICY_URL)
#   --api-key KEY          key for that endpoint      (VRAG_API_KEY, or DASHSCOPE_API_KEY / OPENAI_API_KEY)
#   --model NAME           model name at that endpoint (VRAG_MODEL)
#   --policy-model PATH    no endpoint: serve this transformers VLM locally (VRAG_POLICY_MODEL;
#                          default Qwen/Qwen2.5-VL-3B-Instruct when it is in the local HF cache)
#   --policy-port N        port of the local policy server (VRAG_POLICY_PORT, default 8001)
#   --ui-port N            Streamlit port             (VRAG_UI_PORT, default 8501)
#   --ui-host ADDR         Streamlit listen address   (VRAG_UI_HOST, default 127.0.0.1; 0.0.0.0 exposes the UI)
#   --visual-model NAME    embed pages with this visual model too when building the index, e.g.
#                          vidore/colqwen2-v1.0 on a GPU (VRAG_VISUAL_MODEL; default: text channel only)
# Without an endpoint or a local VLM, a rule-based OCR policy stands in, so the demo still works on CPU.
# vimrag: the endpoint you give; else DashScope (qwen3.5-plus, thinking, SSE) when DASHSCOPE_API_KEY is set;
# else the vimrag-rule-based CPU stand-in.
# Logs: runs/demo_logs/<mode>/{search,policy,ui}.log (VRAG_LOG_DIR moves runs/demo_logs), one folder per mode,
# so the two demos never overwrite each other's logs. The UI offers the sample corpus's questions as buttons
# (VRAG_SAMPLE_QUESTIONS: another rag_dataset.json).
set -euo pipefail
cd "$(dirname "$0")"

die() { echo "run_demo.sh: $*" >&2; exit 1; }

MODE="vrag"
if [[ $# -gt 0 && "$1" != --* ]]; then MODE="$1"; shift; fi
case "$MODE" in
  vrag|vimrag) ;;
  help|-h|--help) sed -n '2,25p' "$0"; exit 0 ;;
  *) die "unknown mode '$MODE' (known: vrag, vimrag)";;
esac

INDEX="${VRAG_INDEX_DIR:-data/index/sample}"
SEARCH_PORT="${VRAG_SEARCH_PORT:-8002}"
POLICY_URL="${VRAG_POLICY_URL:-}"
API_KEY="${VRAG_API_KEY:-${DASHSCOPE_API_KEY:-${OPENAI_API_KEY:-}}}"
MODEL="${VRAG_MODEL:-}"
POLICY_MODEL="${VRAG_POLICY_MODEL:-}"
POLICY_PORT="${VRAG_POLICY_PORT:-8001}"
UI_PORT="${VRAG_UI_PORT:-8501}"
UI_HOST="${VRAG_UI_HOST:-127.0.0.1}"
VISUAL_MODEL="${VRAG_VISUAL_MODEL:-none}"
SAMPLE_DIR="${VRAG_SAMPLE_DIR:-data/sample_corpus/pdf}"
LOG_DIR="${VRAG_LOG_DIR:-runs/demo_logs}"  # the parent: each mode logs to its own folder under it
while [[ $# -gt 0 ]]; do
  case "$1" in
    --index) INDEX="$2"; shift 2;;
    --search-port) SEARCH_PORT="$2"; shift 2;;
    --policy-url) POLICY_URL="$2"; shift 2;;
    --api-key) API_KEY="$2"; shift 2;;
    --model) MODEL="$2"; shift 2;;
    --policy-model) POLICY_MODEL="$2"; shift 2;;
    --policy-port) POLICY_PORT="$2"; shift 2;;
    --ui-port) UI_PORT="$2"; shift 2;;
    --ui-host) UI_HOST="$2"; shift 2;;
    --visual-model) VISUAL_MODEL="$2"; shift 2;;
    *) die "unknown option '$1' (see ./run_demo.sh help)";;
  esac
done

# ---- check what is needed; install nothing behind the user's back ------------------------------
PY=".venv/bin/python"
[[ -x "$PY" ]] || die "no virtual environment at .venv — run: bash scripts/install.sh"
missing=()
modules=(streamlit fastapi uvicorn search_engine vrag_rl colpali_engine pytesseract)
[[ -f "$INDEX/manifest.json" ]] || modules+=(reportlab)  # the sample corpus is drawn with it (extra [samples])
# looked up, not imported (one interpreter, a fraction of a second; importing them all took ~30 s)
for module in $("$PY" -c 'import importlib.util as u, sys; print(*(m for m in sys.argv[1:] if u.find_spec(m) is None))' \
                  "${modules[@]}" 2>/dev/null || echo "${modules[@]}"); do
  missing+=("python package '$module'")
done
command -v pdftoppm >/dev/null || missing+=("poppler-utils (pdftoppm)")
command -v tesseract >/dev/null || missing+=("tesseract-ocr")
if [[ ${#missing[@]} -gt 0 ]]; then
  printf 'run_demo.sh: missing: %s\n' "${missing[@]}" >&2
  die "install them with: bash scripts/install.sh"
fi

port_free() { "$PY" - "$1" <<'PYEOF'
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
PYEOF
}
wait_healthy() {  # url pid name log
  for _ in $(seq 1 600); do
    if "$PY" -c "import httpx,sys; sys.exit(0 if httpx.get('$1', timeout=1).status_code < 500 else 1)" 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "$2" 2>/dev/null; then
      echo "run_demo.sh: the $3 exited during start-up; last lines of $4:" >&2; tail -n 20 "$4" >&2; exit 1
    fi
    sleep 0.5
  done
  die "the $3 did not become healthy at $1 (see $4)"
}

PIDS=()
cleanup() {
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
LOG_DIR="$LOG_DIR/$MODE"
mkdir -p "$LOG_DIR"
echo "==> logs of this demo ($MODE): $LOG_DIR/"
export HF_HUB_DISABLE_TELEMETRY=1 OMP_THREAD_LIMIT="${OMP_THREAD_LIMIT:-1}" TOKENIZERS_PARALLELISM=false

# ---- index: build it from the bundled sample corpus if there is none ------------------------------
if [[ ! -f "$INDEX/manifest.json" ]]; then
  echo "==> no index at $INDEX: generating the sample corpus and ingesting it"
  "$PY" -m search_engine sample-corpus --out "$SAMPLE_DIR"
  "$PY" -m search_engine ingest "$SAMPLE_DIR" --index "$INDEX" --text-model minilm --visual-model "$VISUAL_MODEL"
fi

# ---- search server ---------------------------------------------------------------------------------
port_free "$SEARCH_PORT" || die "port $SEARCH_PORT (search server) is taken; pick another with --search-port"
echo "==> search server on http://127.0.0.1:$SEARCH_PORT (log: $LOG_DIR/search.log)"
"$PY" -m search_engine serve --index "$INDEX" --port "$SEARCH_PORT" >"$LOG_DIR/search.log" 2>&1 &
PIDS+=($!)
wait_healthy "http://127.0.0.1:$SEARCH_PORT/health" "${PIDS[-1]}" "search server" "$LOG_DIR/search.log"

# ---- policy endpoint ---------------------------------------------------------------------------------
if [[ "$MODE" == "vimrag" && -z "$POLICY_URL" && -n "${DASHSCOPE_API_KEY:-}" ]]; then
  POLICY_URL="https://dashscope.aliyuncs.com/compatible-mode/v1"; MODEL="${MODEL:-qwen3.5-plus}"
  API_KEY="${VRAG_API_KEY:-$DASHSCOPE_API_KEY}"
  export VIMRAG_ENABLE_THINKING="${VIMRAG_ENABLE_THINKING:-1}" VIMRAG_STREAM="${VIMRAG_STREAM:-1}"
fi
if [[ -n "$POLICY_URL" ]]; then
  echo "==> using the policy endpoint $POLICY_URL ${MODEL:+(model $MODEL)}"
  if ! "$PY" -c "import httpx,sys; r=httpx.get('${POLICY_URL%/}/models', headers={'Authorization': 'Bearer ${API_KEY}'}, timeout=5); sys.exit(r.status_code >= 500)" 2>/dev/null; then
    echo "run_demo.sh: warning: $POLICY_URL does not answer /models yet; the app will report errors until it does" >&2
  fi
else
  if [[ -z "$POLICY_MODEL" && "$MODE" == "vrag" ]]; then  # vimrag needs a model that follows its tool protocol
    if "$PY" -c "from huggingface_hub import try_to_load_from_cache as t; import sys; sys.exit(0 if isinstance(t('Qwen/Qwen2.5-VL-3B-Instruct','config.json'), str) else 1)" 2>/dev/null; then
      POLICY_MODEL="Qwen/Qwen2.5-VL-3B-Instruct"
    fi
  fi
  port_free "$POLICY_PORT" || die "port $POLICY_PORT (policy server) is taken; pick another with --policy-port"
  if [[ -n "$POLICY_MODEL" ]]; then
    echo "==> local transformers policy server with $POLICY_MODEL on port $POLICY_PORT (log: $LOG_DIR/policy.log)"
    "$PY" -m vrag_rl.serving.policy_server serve --backend transformers --model "$POLICY_MODEL" --port "$POLICY_PORT" \
      >"$LOG_DIR/policy.log" 2>&1 &
  elif [[ "$MODE" == "vimrag" ]]; then
    echo "==> no endpoint (--policy-url) and no DASHSCOPE_API_KEY: using the vimrag-rule-based OCR stand-in"
    echo "    on port $POLICY_PORT. Point the demo at a real VLM for real reasoning."
    POLICY_KIND="vimrag rule-based stand-in (OCR, no model): it speaks the graph protocol, it does not reason"
    "$PY" -m vrag_rl.serving.policy_server serve --backend vimrag-rule-based --port "$POLICY_PORT" \
      --search-url "http://127.0.0.1:$SEARCH_PORT" >"$LOG_DIR/policy.log" 2>&1 &
  else
    echo "==> no VLM configured (--policy-url, or --policy-model / a cached Qwen2.5-VL): using the rule-based OCR"
    echo "    policy on port $POLICY_PORT. Point the demo at a real VLM for real reasoning."
    POLICY_KIND="rule-based stand-in (OCR + MiniLM extractive reader), not a VLM"  # the UI says so
    "$PY" -m vrag_rl.serving.policy_server serve --backend rule-based --port "$POLICY_PORT" \
      --search-url "http://127.0.0.1:$SEARCH_PORT" >"$LOG_DIR/policy.log" 2>&1 &
  fi
  PIDS+=($!)
  wait_healthy "http://127.0.0.1:$POLICY_PORT/health" "${PIDS[-1]}" "policy server" "$LOG_DIR/policy.log"
  POLICY_URL="http://127.0.0.1:$POLICY_PORT/v1"
fi

# ---- the UI ----------------------------------------------------------------------------------------------
port_free "$UI_PORT" || die "port $UI_PORT (Streamlit) is taken; pick another with --ui-port"
export VRAG_POLICY_URL="$POLICY_URL" VRAG_SEARCH_URL="http://127.0.0.1:$SEARCH_PORT" VRAG_INDEX_DIR="$INDEX" \
       VRAG_MODEL="$MODEL" VRAG_API_KEY="$API_KEY" VRAG_POLICY_KIND="${POLICY_KIND:-}" \
       VRAG_SAMPLE_QUESTIONS="${VRAG_SAMPLE_QUESTIONS:-$SAMPLE_DIR/rag_dataset.json}"
echo "==> demo UI on http://$UI_HOST:$UI_PORT  (Ctrl-C stops everything)"
APP="demo/app.py"; [[ "$MODE" == "vimrag" ]] && APP="demo/vimrag_app.py"
"$PY" -m streamlit run "$APP" --server.address "$UI_HOST" --server.port "$UI_PORT" --server.headless true \
  --browser.gatherUsageStats false >"$LOG_DIR/ui.log" 2>&1 &
PIDS+=($!)
UI_PROBE="$UI_HOST"; [[ "$UI_HOST" == "0.0.0.0" || "$UI_HOST" == "::" ]] && UI_PROBE="127.0.0.1"
wait_healthy "http://$UI_PROBE:$UI_PORT/_stcore/health" "${PIDS[-1]}" "Streamlit UI" "$LOG_DIR/ui.log"
echo "==> ready: open http://$UI_PROBE:$UI_PORT"
wait "${PIDS[-1]}"
