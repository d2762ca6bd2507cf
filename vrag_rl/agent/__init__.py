"""The agent kit both agents share: the episode engine, the policy seam and its adapters, images, page cache,
events, the result base, the turn graph, the frontend (`run` / `stream` / `arun`) and the plugin registry.

An agent is a plugin on this kit (`vrag_rl.agent.plugins`): the VRAG agent lives in `vrag_rl.vrag`, VimRAG in
`vimrag`.
"""
