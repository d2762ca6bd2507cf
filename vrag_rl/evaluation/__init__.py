"""Offline evaluation of the VRAG agent: a concurrent runner that scores episodes (`runner`), its CLI
(`vrag-eval`, `cli`), and the scores of the real-document benchmark (`document_bench`).

Datasets, metrics and the LLM judge live in `vrag_rl.scoring` (the RL reward uses them too): import them
from there.
"""
