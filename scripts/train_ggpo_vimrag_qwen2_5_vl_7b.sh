#!/usr/bin/env bash
# GGPO on the VimRAG memory-graph agent (vimrag_agent: one row per step, GSPO + the memory-graph prune mask), Qwen2.5-VL-7B, 8x80 GB.
# Rows: python -m vrag_rl.training.data convert ... --agent-name vimrag_agent (the checks refuse other rows:
# verl runs each row's agent_name, so VRAG rows would train the VRAG loop under this config).
# Config: configs/verl/ggpo_vimrag_qwen2_5_vl_7b.yaml. Usage and every environment variable: $0 --help.
#   single node:  bash scripts/train_ggpo_vimrag_qwen2_5_vl_7b.sh
#   multi-node:   NNODES=2 bash scripts/train_ggpo_vimrag_qwen2_5_vl_7b.sh        (head: starts Ray, waits for the workers)
#                 bash scripts/train_ggpo_vimrag_qwen2_5_vl_7b.sh --join HEAD_IP:6379  (on every other node)
#   check only:   bash scripts/train_ggpo_vimrag_qwen2_5_vl_7b.sh --dry-run
VRAG_CONFIG_DEFAULT=ggpo_vimrag_qwen2_5_vl_7b
MODEL_PATH_DEFAULT=Qwen/Qwen2.5-VL-7B-Instruct
N_GPUS_DEFAULT=8
AGENT_LOOP_DEFAULT=vimrag_agent   # its config's actor_rollout_ref.rollout.agent.default_agent_loop
source "$(dirname "${BASH_SOURCE[0]}")/train_common.sh"
vrag_train_main "$@"
