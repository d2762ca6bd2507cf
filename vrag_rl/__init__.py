"""VRAG: a visual retrieval-augmented reasoning agent and its RL training environment.

`from vrag_rl import VRAG` is the agent shared by the demo, the evaluation and the trainer. Modules that
moved keep their old import paths through `vrag_rl._moved` (deprecated).
"""
from search_engine.infra.torchvision_shim import install_torchvision_hook
from vrag_rl import _moved

install_torchvision_hook()
_moved.install()  # old module paths (before the rooms moved) import the new modules, with a DeprecationWarning

__all__ = ["VRAG"]


def __getattr__(name: str):
    if name == "VRAG":
        from vrag_rl.vrag.agent import VRAG

        return VRAG
    raise AttributeError(name)
