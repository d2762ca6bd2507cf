"""OpenAI-compatible policy servers: transformers-backed VLM, scripted replay, rule-based OCR reader.

Names load lazily: importing the package (for the protocol models, or the scripted backends in a
test) must not pay for importing torch and transformers.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "create_app": "vrag_rl.serving.policy_server.app",
    "Backend": "vrag_rl.serving.policy_server.app",
    "ScriptedBackend": "vrag_rl.serving.policy_server.scripted",
    "RuleBasedBackend": "vrag_rl.serving.policy_server.rule_based",
    "TransformersBackend": "vrag_rl.serving.policy_server.transformers_backend",
    "ChatCompletionRequest": "vrag_rl.serving.policy_server.protocol",
    "ChatMessage": "vrag_rl.serving.policy_server.protocol",
    "Generation": "vrag_rl.serving.policy_server.protocol",
    "GenerationParams": "vrag_rl.serving.policy_server.protocol",
    "BadRequest": "vrag_rl.serving.policy_server.protocol",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
