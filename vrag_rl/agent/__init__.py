"""The VRAG agent loop: shared by the demo, the evaluation and the RL rollout."""
from vrag_rl.agent.config import AgentConfig
from vrag_rl.agent.prompts import Prompts

__all__ = ["AgentConfig", "Prompts"]
