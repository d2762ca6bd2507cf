#!/usr/bin/env bash
# GRPO with LoRA, Qwen2.5-VL-3B, ONE 24 GB GPU.
# Config: configs/verl/grpo_qwen2_5_vl_3b_lora_24gb.yaml. Usage and every environment variable: $0 --help.
#   single node:  bash scripts/train_grpo_qwen2_5_vl_3b_lora.sh
#   multi-node:   NNODES=2 bash scripts/train_grpo_qwen2_5_vl_3b_lora.sh        (head: starts Ray, waits for the workers)
#                 bash scripts/train_grpo_qwen2_5_vl_3b_lora.sh --join HEAD_IP:6379  (on every other node)
#   check only:   bash scripts/train_grpo_qwen2_5_vl_3b_lora.sh --dry-run
VRAG_CONFIG_DEFAULT=grpo_qwen2_5_vl_3b_lora_24gb
MODEL_PATH_DEFAULT=Qwen/Qwen2.5-VL-3B-Instruct
N_GPUS_DEFAULT=1
source "$(dirname "${BASH_SOURCE[0]}")/train_common.sh"
vrag_train_main "$@"
