"""VimRAG as a plugin of the kit's generic rooms (entry point `vrag_rl.agents: vimrag`, see
`vrag_rl.agent.plugins`): its settings types, its CPU stand-in policy and its verl agent loop."""
from __future__ import annotations

from typing import Any

from vimrag.config import VimRAGConfig
from vimrag.prompts import VimPrompts
from vrag_rl.agent.plugins import AgentPlugin


def _stand_in_backend(search_url: str | None = None) -> Any:
    from vimrag.stand_in import VimRAGRuleBasedBackend  # the reader and MiniLM load only when asked for

    return VimRAGRuleBasedBackend(search_url=search_url)


def _register_verl() -> None:
    import vimrag.verl_agent_loop  # noqa: F401  (registers `vimrag_agent` in verl's agent-loop registry)


PLUGIN = AgentPlugin(name="vimrag", config_type=VimRAGConfig, prompts_type=VimPrompts,
                     stand_in="vimrag-rule-based", stand_in_backend=_stand_in_backend,
                     register_verl=_register_verl)
