"""The VRAG agent: a transcript that grows by one page image (or crop) per action, on the shared engine.

`VRAG` (agent.py) is the public class; `Episode` (loop.py) its turn logic and tools on the kit's
`EpisodeEngine`; `Transcript` (transcript.py) its memory; `Prompts` (prompts.py) every word it sends;
`AgentConfig` (config.py) its knobs; `EpisodeResult` (result.py) what it returns; `vrag_credit_graph`
(credit_graph.py) the rule that turns its records into the credit graph GGPO reads.
"""
from vrag_rl.vrag.config import AgentConfig
from vrag_rl.vrag.prompts import Prompts

__all__ = ["AgentConfig", "Prompts", "VRAG"]


def __getattr__(name: str):
    if name == "VRAG":  # lazily: the class pulls in the frontend and the HTTP clients
        from vrag_rl.vrag.agent import VRAG

        return VRAG
    raise AttributeError(name)
