"""The agent kit both agents share: the episode engine, the policy seam and its adapters, images, page cache,
events, the result base, the step graph and the frontend (`run` / `stream` / `arun`).

The VRAG agent (its loop, transcript, prompts and config) is in `vrag_rl.vrag`; VimRAG's in `vimrag`. The
names this package used to export (`AgentConfig`, `Prompts`) still resolve here, with a DeprecationWarning.
"""
from typing import Any

from vrag_rl import _moved


def __getattr__(name: str) -> Any:
    return _moved.moved_attribute(__name__, name)
