"""Moved to `vrag_rl.scoring.qa_dataset` (shared with the training-data converter); this path keeps old
imports working."""
from vrag_rl.scoring.qa_dataset import (
    EvalExample,
    doc_id_for_file,
    load_dataset,
    parse_example,
    read_dataset_records,
)

__all__ = ["EvalExample", "doc_id_for_file", "load_dataset", "parse_example", "read_dataset_records"]
