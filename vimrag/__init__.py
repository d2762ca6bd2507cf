"""VimRAG, the memory-graph agent (reasoning as a DAG of multimodal memory nodes).

Not implemented yet: it is planned as its own issue and builds on `vrag_rl.agent`'s loop,
image handling and event stream. Importing this package gives no agent today.
"""
