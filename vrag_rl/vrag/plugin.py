"""The VRAG agent as a plugin of the kit's generic rooms (entry point `vrag_rl.agents: vrag`, see
`vrag_rl.agent.plugins`): a transcript that grows by one page image per action, its tools, its stand-in, its
rollout, its trainer and its verl agent loop, each named here and imported only when a room asks for it."""
from __future__ import annotations

from vrag_rl.agent.plugins import AgentPlugin
from vrag_rl.vrag.config import AgentConfig
from vrag_rl.vrag.prompts import Prompts

PLUGIN = AgentPlugin(
    name="vrag",
    config_type=AgentConfig,
    prompts_type=Prompts,
    agent="vrag_rl.vrag.agent:VRAG",
    episode="vrag_rl.vrag.loop:Episode",
    rollout="vrag_rl.vrag.rollout:rollout_batch",
    trainer="vrag_rl.training.train.trainer:LocalTrainer",  # one growing conversation = one sequence: the default
    verl_loop="vrag_rl.vrag.verl_agent_loop",
    verl_loop_name="vrag_agent",
    stand_in="rule-based",
    stand_in_backend="vrag_rl.serving.policy_server.rule_based:RuleBasedBackend",
)
