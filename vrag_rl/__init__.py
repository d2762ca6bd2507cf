"""VRAG: a visual retrieval-augmented reasoning agent and its RL training environment.

`from vrag_rl import VRAG` is the agent shared by the demo, the evaluation and the trainer.
"""
from search_engine.infra.environment import require_project_environment
from search_engine.infra.torchvision_shim import install_torchvision_hook

require_project_environment("vrag_rl")  # run by a Python without the project's packages: say to activate .venv
install_torchvision_hook()

__all__ = ["VRAG"]


def __getattr__(name: str):
    if name == "VRAG":
        from vrag_rl.vrag.agent import VRAG

        return VRAG
    raise AttributeError(name)
