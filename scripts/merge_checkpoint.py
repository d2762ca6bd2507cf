#!/usr/bin/env python
"""Merge a verl FSDP checkpoint into a Hugging Face model directory; see `vrag_rl.training.train.merge_checkpoint`.

    python scripts/merge_checkpoint.py checkpoints/vrag/grpo_qwen2_5_vl_7b --out models/vrag-7b-step100
"""
import sys

from vrag_rl.training.train.merge_checkpoint import main

if __name__ == "__main__":
    sys.exit(main())
