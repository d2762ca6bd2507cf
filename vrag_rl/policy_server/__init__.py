"""OpenAI-compatible policy servers: transformers-backed, scripted replay, rule-based OCR reader.

Importing the package does not import torch; the backends load lazily.
"""
__all__ = ["create_app", "ScriptedBackend", "RuleBasedBackend", "TransformersBackend"]


def __getattr__(name: str):
    if name == "create_app":
        from vrag_rl.policy_server.app import create_app

        return create_app
    if name in ("ScriptedBackend", "RuleBasedBackend"):
        from vrag_rl.policy_server import scripted

        return getattr(scripted, name)
    if name == "TransformersBackend":
        from vrag_rl.policy_server.transformers_backend import TransformersBackend

        return TransformersBackend
    raise AttributeError(name)
