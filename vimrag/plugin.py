"""VimRAG as a plugin of the kit's generic rooms (entry point `vrag_rl.agents: vimrag`, see
`vrag_rl.agent.plugins`): the memory-graph agent, its stand-in, its per-turn rollout, its trainer and its verl
agent loop, each named here and imported only when a room asks for it."""
from __future__ import annotations

from vimrag.config import VimRAGConfig
from vimrag.prompts import VimPrompts
from vrag_rl.agent.plugins import AgentPlugin

PLUGIN = AgentPlugin(
    name="vimrag",
    config_type=VimRAGConfig,
    prompts_type=VimPrompts,
    agent="vimrag.agent:VimRAG",
    episode="vimrag.agent:VimEpisode",
    rollout="vimrag.rollout:rollout_vim_batch",
    trainer="vimrag.trainer:VimRAGTrainer",
    verl_loop="vimrag.verl_agent_loop",
    verl_loop_name="vimrag_agent",
    rows_per_turn=True,
    stand_in="vimrag-rule-based",
    stand_in_backend="vimrag.stand_in:VimRAGRuleBasedBackend",
)
