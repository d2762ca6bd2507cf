"""Training: from episodes to gradient steps.

`rollout/` records many episodes as trajectories (tokens, masks, images, credit graphs); `rewards/` scores them
(retrieval NDCG, format, outcome through `vrag_rl.scoring`); `algos/` turns rewards into advantages and losses
(GRPO, GGPO, GiGPO-style; one `AlgorithmSettings`); `train/` is the local trainer (and SFT, checkpoints);
`verl_plugins/` adapts the same pieces to verl; `data/` converts QA datasets and trajectories into training
files. Agents built on the kit (VimRAG) plug in by name (`vrag_rl.agent.plugins`); nothing here imports them.
"""
