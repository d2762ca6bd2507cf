#!/usr/bin/env bash
# GGPO (GSPO + the credit-graph prune mask), Qwen2.5-VL-7B, 8x80 GB.
# Config: configs/verl/ggpo_qwen2_5_vl_7b.yaml. Usage and every environment variable: $0 --help.
#   single node:  bash scripts/train_ggpo_qwen2_5_vl_7b.sh
#   multi-node:   NNODES=2 bash scripts/train_ggpo_qwen2_5_vl_7b.sh        (head: starts Ray, waits for the workers)
#                 bash scripts/train_ggpo_qwen2_5_vl_7b.sh --join HEAD_IP:6379  (on every other node)
#   check only:   bash scripts/train_ggpo_qwen2_5_vl_7b.sh --dry-run
VRAG_CONFIG_DEFAULT=ggpo_qwen2_5_vl_7b
MODEL_PATH_DEFAULT=Qwen/Qwen2.5-VL-7B-Instruct
N_GPUS_DEFAULT=8
source "$(dirname "${BASH_SOURCE[0]}")/train_common.sh"
vrag_train_main "$@"
