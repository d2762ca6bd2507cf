#!/usr/bin/env bash
# GGPO, Qwen3-VL-8B (VimRAG's backbone), 8x80 GB.
# Config: configs/verl/ggpo_qwen3_vl_8b.yaml. Usage and every environment variable: $0 --help.
#   single node:  bash scripts/train_ggpo_qwen3_vl_8b.sh
#   multi-node:   NNODES=2 bash scripts/train_ggpo_qwen3_vl_8b.sh        (head: starts Ray, waits for the workers)
#                 bash scripts/train_ggpo_qwen3_vl_8b.sh --join HEAD_IP:6379  (on every other node)
#   check only:   bash scripts/train_ggpo_qwen3_vl_8b.sh --dry-run
VRAG_CONFIG_DEFAULT=ggpo_qwen3_vl_8b
MODEL_PATH_DEFAULT=Qwen/Qwen3-VL-8B-Instruct
N_GPUS_DEFAULT=8
source "$(dirname "${BASH_SOURCE[0]}")/train_common.sh"
vrag_train_main "$@"
