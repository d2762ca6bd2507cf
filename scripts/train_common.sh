#!/usr/bin/env bash
# Shared body of scripts/train_*.sh: checks, Ray cluster (single node / head / join), search server,
# and verl's trainer launched with our Hydra config. Sourced by the train_*.sh scripts, which set
# VRAG_CONFIG_DEFAULT, MODEL_PATH_DEFAULT and N_GPUS_DEFAULT (and AGENT_LOOP_DEFAULT when their config's
# loop is not vrag_agent), then call `vrag_train_main "$@"`.
#
# Every path, port and size is an environment variable with a default (see `--help`). Anything of
# the form key=value on the command line is passed to Hydra as an override of the config.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

_vrag_defaults() {
  CONFIG="${VRAG_CONFIG:-$VRAG_CONFIG_DEFAULT}"
  MODEL_PATH="${MODEL_PATH:-$MODEL_PATH_DEFAULT}"
  TRAIN_FILE="${TRAIN_FILE:-$REPO_ROOT/data/rl/train.parquet}"
  VAL_FILE="${VAL_FILE:-$REPO_ROOT/data/rl/val.parquet}"
  NNODES="${NNODES:-1}"
  N_GPUS="${N_GPUS:-$N_GPUS_DEFAULT}"                 # GPUs per node
  SEARCH_PORT="${SEARCH_PORT:-8002}"
  SEARCH_BIND="${SEARCH_BIND:-127.0.0.1}"              # 0.0.0.0 when other nodes must reach it
  VRAG_SEARCH_URL="${VRAG_SEARCH_URL:-http://127.0.0.1:$SEARCH_PORT}"
  VRAG_INDEX="${VRAG_INDEX:-}"                         # set: start `vrag-search serve` on this index
  SEARCH_DEVICE="${SEARCH_DEVICE:-cpu}"                # the GPUs belong to the trainer by default
  SEARCH_WAIT_S="${SEARCH_WAIT_S:-300}"
  VRAG_JUDGE_URL="${VRAG_JUDGE_URL:-}"                 # OpenAI-compatible judge; empty: rule-based outcome
  VRAG_JUDGE_MODEL="${VRAG_JUDGE_MODEL:-qwen-max-latest}"
  CKPT_DIR="${CKPT_DIR:-$REPO_ROOT/checkpoints/vrag/$CONFIG}"
  RESUME_MODE="${RESUME_MODE:-auto}"                   # auto | disable | resume_path (with RESUME_FROM)
  RESUME_FROM="${RESUME_FROM:-}"
  TRAINER_LOGGER="${TRAINER_LOGGER:-console}"          # e.g. console,wandb
  RAY_PORT="${RAY_PORT:-6379}"
  RAY_HEAD="${RAY_HEAD:-0}"
  RAY_WAIT_S="${RAY_WAIT_S:-600}"
  AGENT_LOOP="${AGENT_LOOP_DEFAULT:-vrag_agent}"       # the loop this script's config trains; rows must name it
  ATTN_IMPL="${ATTN_IMPL:-auto}"                       # auto: flash_attention_2 where flash-attn imports, else sdpa
  DUMP_DIR="${DUMP_DIR:-}"                             # set (or --dump): verl's trajectory and validation dumps
  LOG_VAL_GENERATIONS="${LOG_VAL_GENERATIONS:-10}"     # with dumps: validation samples sent to the logger
  TRAIN_DEVICE="${TRAIN_DEVICE:-cuda}"                 # cuda | cpu (verl's trainer on the CPU: configs/verl/parts/cpu.yaml)
  PYTHON="${PYTHON:-}"
  if [[ -z "$PYTHON" ]]; then
    if [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then PYTHON="$REPO_ROOT/.venv/bin/python"; else PYTHON=python3; fi
  fi
  RAY_BIN="${RAY_BIN:-}"                               # the `ray` CLI of the same environment as PYTHON
  if [[ -z "$RAY_BIN" ]]; then
    if [[ -x "$(dirname "$PYTHON")/ray" ]]; then RAY_BIN="$(dirname "$PYTHON")/ray"; else RAY_BIN=ray; fi
  fi
}

_vrag_usage() {
  cat <<EOF
usage: $(basename "$0") [--dry-run] [--dump] [--head | --join HEAD_IP:PORT] [hydra.key=value ...]

Trains with verl's trainer and configs/verl/$VRAG_CONFIG_DEFAULT.yaml.
  --dry-run        print the checks, the command and the composed config; start nothing
  --head           start a Ray head on this node (multi-node: NNODES>1 implies it), then train;
                   the head is stopped (ray stop) when training ends
  --join ADDR      join the Ray cluster at ADDR as a worker node and block (run this on the other nodes)
  --dump           dump every step's trajectories (trainer.rollout_data_dir=DUMP_DIR/rollout, one JSONL per
                   step) and the validation generations (trainer.validation_data_dir=DUMP_DIR/validation;
                   trainer.log_val_generations=LOG_VAL_GENERATIONS samples to the logger); DUMP_DIR defaults
                   to CKPT_DIR/dumps. Setting DUMP_DIR alone turns the dumps on too.
  key=value        a Hydra override, e.g. trainer.total_epochs=2 data.train_batch_size=64
                   trainer.max_actor_ckpt_to_keep=5 (checkpoints kept; default 2, null keeps every one)

Environment (default):
  MODEL_PATH ($MODEL_PATH_DEFAULT)     TRAIN_FILE (data/rl/train.parquet)  VAL_FILE (data/rl/val.parquet)
  NNODES (1)  N_GPUS per node ($N_GPUS_DEFAULT)  CKPT_DIR (checkpoints/vrag/<config>)
  RESUME_MODE (auto | disable | resume_path + RESUME_FROM)  TRAINER_LOGGER (console)
  VRAG_SEARCH_URL (http://127.0.0.1:\$SEARCH_PORT)  SEARCH_PORT (8002)  VRAG_INDEX (unset: use a running server)
  SEARCH_BIND (127.0.0.1)  SEARCH_DEVICE (cpu)  SEARCH_WAIT_S (300)
  VRAG_JUDGE_URL (unset: rule-based outcome)  VRAG_JUDGE_MODEL (qwen-max-latest)  VRAG_JUDGE_API_KEY
  RAY_ADDRESS (join an existing cluster)  RAY_PORT (6379)  RAY_WAIT_S (600)  PYTHON (.venv/bin/python)
  RAY_BIN (the ray CLI beside PYTHON, else ray on PATH)
  ATTN_IMPL (auto: flash_attention_2 where flash-attn imports in PYTHON, else sdpa with remove-padding off;
             or flash_attention_2 | sdpa | eager)
  DUMP_DIR (unset: no dumps)  LOG_VAL_GENERATIONS (10)
  TRAIN_DEVICE (cuda | cpu: verl's trainer on the CPU platform with the transformers rollout backend `hf`; the
             config must compose configs/verl/parts/cpu.yaml, as the cpu_smoke_* configs do)
Rows: every row's agent_name must be $AGENT_LOOP (verl runs each row's loop; convert with
  python -m vrag_rl.training.data convert QA.json --agent-name $AGENT_LOOP --out FILE).
Several nodes (NNODES>1): VRAG_SEARCH_URL must be an address the other nodes reach (not loopback), and a server
  started here on VRAG_INDEX must listen on one (SEARCH_BIND=0.0.0.0).
EOF
}

# The actor's attention: verl's model config defaults to flash_attention_2 (verl/workers/config/model.py ~185),
# which "verl[vllm]" does not install. ATTN_IMPL=auto picks it where flash-attn imports in PYTHON (the nodes share
# one environment), sdpa otherwise; any other choice than flash_attention_2 also turns remove-padding off, as
# verl's Qwen2-VL remove-padding attention calls flash-attn's varlen kernel (verl/models/transformers/qwen2_vl.py
# ~233, patched in by monkey_patch.py ~407). Sets ATTN_CHOSEN, ATTN_NOTE (the preflight line) and ATTN_FAIL.
_vrag_attention() {
  ATTN_CHOSEN="" ATTN_NOTE="" ATTN_FAIL=""
  case "$ATTN_IMPL" in
    auto|flash_attention_2|sdpa|eager) ;;
    *) echo "ATTN_IMPL must be auto, flash_attention_2, sdpa or eager (got '$ATTN_IMPL')" >&2; return 2 ;;
  esac
  local out fa_ok=0 why=""
  if out=$("$PYTHON" -c 'import flash_attn; print(getattr(flash_attn, "__version__", "unknown"))' 2>&1); then
    fa_ok=1
  elif [[ "$out" == *"No module named 'flash_attn'"* ]]; then
    why="flash-attn is not installed in $PYTHON"
  else
    why="flash-attn does not import in $PYTHON: $(printf '%s\n' "$out" | tail -1)"
  fi
  case "$ATTN_IMPL" in
    auto)
      if (( fa_ok )); then ATTN_CHOSEN=flash_attention_2; ATTN_NOTE="flash_attention_2 (flash-attn $out)"
      else
        ATTN_CHOSEN=sdpa
        ATTN_NOTE="sdpa ($why; remove-padding off; for the faster kernels: pip install flash-attn --no-build-isolation on every node)"
      fi ;;
    flash_attention_2)
      ATTN_CHOSEN=flash_attention_2
      if (( fa_ok )); then ATTN_NOTE="flash_attention_2 (flash-attn $out; ATTN_IMPL)"
      else ATTN_FAIL="ATTN_IMPL=flash_attention_2 but flash_attn does not import in $PYTHON ($why): pip install flash-attn --no-build-isolation on every node, or ATTN_IMPL=auto to train with sdpa"
      fi ;;
    *) ATTN_CHOSEN="$ATTN_IMPL"; ATTN_NOTE="$ATTN_IMPL (ATTN_IMPL; remove-padding off)" ;;
  esac
}

_vrag_command() {
  CMD=("$PYTHON" -m verl.trainer.main_ppo "--config-path=$REPO_ROOT/configs/verl" "--config-name=$CONFIG"
    "actor_rollout_ref.model.path=$MODEL_PATH"
    "data.train_files=$TRAIN_FILE" "data.val_files=$VAL_FILE"
    "trainer.nnodes=$NNODES" "trainer.n_gpus_per_node=$N_GPUS"
    "trainer.default_local_dir=$CKPT_DIR" "trainer.resume_mode=$RESUME_MODE"
    "trainer.logger=[$TRAINER_LOGGER]"
    "vrag.search.url=$VRAG_SEARCH_URL"
    "reward.custom_reward_function.path=$REPO_ROOT/vrag_rl/training/verl_plugins/reward.py")
  if [[ -n "$VRAG_JUDGE_URL" ]]; then
    CMD+=("vrag.judge.base_url=$VRAG_JUDGE_URL" "vrag.judge.model=$VRAG_JUDGE_MODEL")
  fi
  if [[ -n "$RESUME_FROM" ]]; then CMD+=("trainer.resume_from_path=$RESUME_FROM"); fi
  CMD+=("++actor_rollout_ref.model.override_config.attn_implementation=$ATTN_CHOSEN")
  if [[ "$ATTN_CHOSEN" != flash_attention_2 ]]; then CMD+=("actor_rollout_ref.model.use_remove_padding=false"); fi
  if [[ -n "$DUMP_DIR" ]]; then
    CMD+=("trainer.rollout_data_dir=$DUMP_DIR/rollout" "trainer.validation_data_dir=$DUMP_DIR/validation"
      "trainer.log_val_generations=$LOG_VAL_GENERATIONS")
  fi
  CMD+=("${OVERRIDES[@]}")   # last: the user's key=value wins over everything above
  local o
  for o in "${OVERRIDES[@]}"; do  # a loop named on the command line is the one the rows must name
    case "$o" in actor_rollout_ref.rollout.agent.default_agent_loop=*) AGENT_LOOP="${o#*=}" ;; esac
  done
}

# "loopback" when the URL's host is a loopback or unspecified address (or localhost), else "ok".
_url_scope() {
  local host="${1#*://}"
  host="${host%%/*}"; host="${host##*@}"
  if [[ "$host" == \[* ]]; then host="${host#[}"; host="${host%%]*}"; else host="${host%%:*}"; fi
  host="${host,,}"
  case "$host" in
    ""|localhost|*.localhost|127.*|0.0.0.0|::|::1|0:0:0:0:0:0:0:1) echo loopback ;;
    *) echo ok ;;
  esac
}

_search_healthy() {
  "$PYTHON" - "$VRAG_SEARCH_URL" <<'EOF' >/dev/null 2>&1
import sys, httpx
sys.exit(0 if httpx.get(sys.argv[1].rstrip("/") + "/health", timeout=5).status_code == 200 else 1)
EOF
}

# Every check runs and every failure is listed; returns the number of failures.
_vrag_checks() {
  local mode="$1" failures=0 msg
  _fail() { echo "[check] FAIL: $1" >&2; failures=$((failures + 1)); }
  _ok() { echo "[check] ok: $1"; }
  local needed="verl vrag_rl hydra ray" missing
  ROLLOUT_BACKEND="$(_config_rollout)"
  if [[ "$mode" == run ]]; then  # vLLM only where the config's rollout backend is vLLM (hf: the transformers one)
    needed="$needed transfer_queue"; [[ "$ROLLOUT_BACKEND" == vllm ]] && needed="$needed vllm"
  fi
  missing=$("$PYTHON" -c 'import importlib.util as u, sys; print(" ".join(m for m in sys.argv[1:] if u.find_spec(m) is None))' $needed 2>&1) \
    || missing="(python '$PYTHON' does not run: $missing)"
  if [[ -z "$missing" ]]; then _ok "python environment ($PYTHON)"; else
    _fail "python '$PYTHON' lacks: $missing (install the project; on GPU nodes also \"verl[vllm]==0.9.1\", which brings vLLM and TransferQueue for verl's rollout and v1 trainer)"
  fi
  for f in "$TRAIN_FILE" "$VAL_FILE"; do
    if msg=$("$PYTHON" -m vrag_rl.training.data check "$f" --agent-name "$AGENT_LOOP" 2>&1); then _ok "$msg"; else
      _fail "dataset $f: ${msg#error: } (build it with: python -m vrag_rl.training.data convert QA.json --agent-name $AGENT_LOOP --out $f)"; fi
  done
  if [[ -n "$ATTN_FAIL" ]]; then _fail "$ATTN_FAIL"; else _ok "attention: $ATTN_NOTE"; fi
  if [[ -d "$MODEL_PATH" ]]; then
    if [[ -f "$MODEL_PATH/config.json" ]]; then _ok "model $MODEL_PATH"; else
      _fail "model directory $MODEL_PATH has no config.json (not a Hugging Face model directory)"; fi
  elif [[ "$MODEL_PATH" == /* || "$MODEL_PATH" == .* ]]; then
    _fail "model $MODEL_PATH does not exist"
  elif "$PYTHON" -c "import sys; from huggingface_hub import try_to_load_from_cache as f; sys.exit(0 if isinstance(f(sys.argv[1], 'config.json'), str) else 1)" "$MODEL_PATH" 2>/dev/null; then
    _ok "model $MODEL_PATH (in the Hugging Face cache)"
  elif [[ "${HF_HUB_OFFLINE:-0}" == 1 ]]; then
    _fail "model $MODEL_PATH is not in the Hugging Face cache and HF_HUB_OFFLINE=1 (download it or set MODEL_PATH to a local directory)"
  else
    _ok "model $MODEL_PATH (not cached: every node will download it from the Hub)"
  fi
  if [[ -n "$VRAG_INDEX" ]]; then
    if [[ -f "$VRAG_INDEX/manifest.json" ]]; then _ok "search index $VRAG_INDEX (the server will be started)"; else
      _fail "VRAG_INDEX=$VRAG_INDEX is not a search index (no manifest.json; build one with vrag-search ingest)"; fi
  elif _search_healthy; then
    _ok "search server $VRAG_SEARCH_URL"
  else
    _fail "no search server answers at $VRAG_SEARCH_URL/health (start one with: vrag-search serve --index INDEX --port $SEARCH_PORT, or set VRAG_INDEX to have this script start it)"
  fi
  if (( NNODES > 1 )); then  # the head's health check cannot see what the other nodes will reach
    if [[ "$(_url_scope "$VRAG_SEARCH_URL")" != ok ]]; then
      _fail "NNODES=$NNODES but VRAG_SEARCH_URL=$VRAG_SEARCH_URL is a loopback address: it answers on this node only, so every search of the rollout workers on the other nodes would fail and the run would train on zero rewards (serve search where every node reaches it: SEARCH_BIND=0.0.0.0 VRAG_SEARCH_URL=http://HEAD_IP:$SEARCH_PORT)"
    fi
    if [[ -n "$VRAG_INDEX" && ( "$SEARCH_BIND" == 127.* || "$SEARCH_BIND" == localhost || "$SEARCH_BIND" == ::1 ) ]]; then
      _fail "NNODES=$NNODES and VRAG_INDEX is set but SEARCH_BIND=$SEARCH_BIND: the search server this script starts would listen on loopback only, out of reach of the other nodes (set SEARCH_BIND=0.0.0.0)"
    fi
  fi
  if [[ -n "$VRAG_JUDGE_URL" && -z "${VRAG_JUDGE_API_KEY:-}" ]]; then
    echo "[check] note: VRAG_JUDGE_URL is set but VRAG_JUDGE_API_KEY is empty (fine for a local judge without a key)"
  fi
  if [[ "$TRAIN_DEVICE" == cpu ]]; then
    local rollout="$ROLLOUT_BACKEND"
    if [[ "$rollout" == hf ]]; then
      _ok "CPU mode: verl's platform 'cpu' (gloo), rollout backend hf, N_GPUS=$N_GPUS logical GPU(s) for Ray's placement"
    else
      _fail "TRAIN_DEVICE=cpu but the config's actor_rollout_ref.rollout.name is '$rollout': compose configs/verl/parts/cpu.yaml (rollout hf), as configs/verl/cpu_smoke_*.yaml do"
    fi
    return "$failures"
  fi
  local gpus=0
  if command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
  if (( gpus >= N_GPUS )); then _ok "$gpus GPU(s) on this node (N_GPUS=$N_GPUS)"; else
    _fail "this node has $gpus NVIDIA GPU(s) but N_GPUS=$N_GPUS (verl's trainer needs CUDA GPUs; nvidia-smi -L lists them)"; fi
  return "$failures"
}

# The rollout backend the composed config (with the command line's overrides) names.
_config_rollout() {
  "$PYTHON" - "$REPO_ROOT/configs/verl" "$CONFIG" "${OVERRIDES[@]}" <<'EOF' 2>&1 | tail -1
import sys
from hydra import compose, initialize_config_dir
with initialize_config_dir(config_dir=sys.argv[1], version_base=None):
    cfg = compose(config_name=sys.argv[2], overrides=[o for o in sys.argv[3:] if o.startswith("actor_rollout_ref.rollout.name=")])
print(cfg.actor_rollout_ref.rollout.name)
EOF
}

# TRAIN_DEVICE=cpu: the environment that puts verl (and every Ray worker it starts) on the CPU platform
# (vrag_rl/training/verl_plugins/cpu: VERL_PLATFORM, VERL_ENGINE_DEVICE, VERL_USE_EXTERNAL_MODULES). On a GPU, a
# config with the transformers rollout backend (hf) needs only the module that registers it.
_cpu_environment() {
  local line
  if [[ "$TRAIN_DEVICE" != cpu ]]; then
    [[ "${ROLLOUT_BACKEND:-}" == hf ]] || return 0
    export VERL_USE_EXTERNAL_MODULES="$("$PYTHON" -c 'from vrag_rl.training.verl_plugins.cpu import REGISTER_MODULE as m; print(m)')"
    return 0
  fi
  while IFS= read -r line; do export "${line?}"; done < <("$PYTHON" -c 'from vrag_rl.training.verl_plugins.cpu import cpu_environment as e
for k, v in e().items(): print(f"{k}={v}")')
  export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" TOKENIZERS_PARALLELISM="${TOKENIZERS_PARALLELISM:-false}"
}

_start_search() {
  [[ -n "$VRAG_INDEX" ]] || return 0
  if _search_healthy; then echo "[search] a server already answers at $VRAG_SEARCH_URL"; return 0; fi
  local log="$CKPT_DIR/search_server.log"
  mkdir -p "$CKPT_DIR"
  echo "[search] starting vrag-search serve on $SEARCH_BIND:$SEARCH_PORT (log: $log)"
  "$PYTHON" -m search_engine.cli serve --index "$VRAG_INDEX" --host "$SEARCH_BIND" --port "$SEARCH_PORT" \
    --device "$SEARCH_DEVICE" >"$log" 2>&1 &
  SEARCH_PID=$!
  local waited=0
  until _search_healthy; do
    if ! kill -0 "$SEARCH_PID" 2>/dev/null; then
      echo "[search] the server exited during start-up; last lines of $log:" >&2; tail -20 "$log" >&2; return 1
    fi
    if (( waited >= SEARCH_WAIT_S )); then echo "[search] not healthy after ${SEARCH_WAIT_S}s ($log)" >&2; return 1; fi
    sleep 2; waited=$((waited + 2))
  done
  echo "[search] healthy at $VRAG_SEARCH_URL"
}

_cleanup() {
  if [[ -n "${SEARCH_PID:-}" ]] && kill -0 "$SEARCH_PID" 2>/dev/null; then kill "$SEARCH_PID"; wait "$SEARCH_PID" 2>/dev/null || true; fi
  if [[ "${STARTED_RAY_HEAD:-0}" == 1 ]]; then "$RAY_BIN" stop >/dev/null 2>&1 || true; fi
}

_ray_head() {
  local head_cmd=("$RAY_BIN" start --head "--port=$RAY_PORT" "--num-gpus=$N_GPUS" --dashboard-host=0.0.0.0)
  if [[ "$DRY_RUN" == 1 ]]; then echo "[ray] would run: ${head_cmd[*]}; then wait for $NNODES node(s) x $N_GPUS GPU(s)"; return 0; fi
  "${head_cmd[@]}"
  STARTED_RAY_HEAD=1
  export RAY_ADDRESS="127.0.0.1:$RAY_PORT"
  echo "[ray] head started; on each other node run: $(basename "$0") --join $(hostname -I 2>/dev/null | awk '{print $1}'):$RAY_PORT"
  "$PYTHON" - "$NNODES" "$N_GPUS" "$RAY_WAIT_S" <<'EOF'
import sys, time, ray
nodes, gpus, wait = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
ray.init(address="auto", logging_level="ERROR")
deadline = time.time() + wait
while True:
    alive = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU", 0) >= gpus]
    if len(alive) >= nodes:
        print(f"[ray] {len(alive)} node(s) with {gpus} GPU(s) joined"); break
    if time.time() > deadline:
        sys.exit(f"[ray] only {len(alive)} of {nodes} node(s) joined within {wait:.0f}s")
    time.sleep(5)
EOF
}

vrag_train_main() {
  _vrag_defaults
  DRY_RUN=0
  local join=""
  OVERRIDES=()
  while (($#)); do
    case "$1" in
      --dry-run) DRY_RUN=1 ;;
      --dump) DUMP_DIR="${DUMP_DIR:-$CKPT_DIR/dumps}" ;;
      --head) RAY_HEAD=1 ;;
      --join) [[ $# -ge 2 ]] || { echo "--join needs HEAD_IP:PORT" >&2; return 2; }; join="$2"; shift ;;
      -h|--help) _vrag_usage; return 0 ;;
      *=*) OVERRIDES+=("$1") ;;
      *) echo "unknown argument: $1 (Hydra overrides look like key=value)" >&2; _vrag_usage >&2; return 2 ;;
    esac
    shift
  done
  cd "$REPO_ROOT"

  if [[ -n "$join" ]]; then
    local join_cmd=("$RAY_BIN" start "--address=$join" "--num-gpus=$N_GPUS" --block)
    if [[ "$DRY_RUN" == 1 ]]; then echo "[ray] would run: ${join_cmd[*]}"; return 0; fi
    command -v nvidia-smi >/dev/null 2>&1 || { echo "[check] FAIL: no NVIDIA GPU on this node (nvidia-smi missing)" >&2; return 1; }
    exec "${join_cmd[@]}"
  fi

  case "$TRAIN_DEVICE" in cuda|cpu) ;; *) echo "TRAIN_DEVICE must be cuda or cpu (got '$TRAIN_DEVICE')" >&2; return 2 ;; esac
  _vrag_attention || return 2
  _vrag_command
  local failures=0
  if [[ "$DRY_RUN" == 1 ]]; then
    _vrag_checks dry-run || failures=$?
    (( failures == 0 )) || echo "[dry-run] $failures check(s) would stop a real run"
  else
    _vrag_checks run || failures=$?
    if (( failures > 0 )); then echo "[train] $failures check(s) failed: nothing was started" >&2; return 1; fi
  fi

  trap _cleanup EXIT
  if (( NNODES > 1 )) || [[ "$RAY_HEAD" == 1 ]]; then
    _ray_head
  elif [[ -n "${RAY_ADDRESS:-}" ]]; then
    echo "[ray] using the cluster at RAY_ADDRESS=$RAY_ADDRESS"
  else
    echo "[ray] single node: verl starts a local Ray instance"
  fi

  if [[ -n "$DUMP_DIR" ]]; then
    echo "[train] trajectory dumps: $DUMP_DIR/rollout/<step>.jsonl; validation generations: $DUMP_DIR/validation/<step>.jsonl (and $LOG_VAL_GENERATIONS to the logger)"
  fi
  printf '[train] command:'; printf ' %q' "${CMD[@]}"; echo
  if [[ "$DRY_RUN" == 1 ]]; then
    echo "[dry-run] composed config:"
    "${CMD[@]}" --cfg job --resolve
    return $?
  fi
  _start_search
  _cpu_environment
  mkdir -p "$CKPT_DIR"
  export VRAG_JUDGE_API_KEY="${VRAG_JUDGE_API_KEY:-}"
  "${CMD[@]}"
}
