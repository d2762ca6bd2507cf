"""A policy without a model: exact replays for tests and benchmarks (the CPU stand-in reader is
`rule_based`, over `vrag_rl.reader`).

Stateless — everything it needs is in the request's conversation — so one server handles any number
of concurrent episodes, as vLLM does. Token counts are whitespace-split words (`conversation`).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vrag_rl.serving.policy_server.conversation import NOT_FOUND, limit_words, question_of
from vrag_rl.serving.policy_server.protocol import BadRequest, ChatMessage, Generation, GenerationParams

__all__ = ["NOT_FOUND", "ScriptedBackend", "question_of"]


# --------------------------------------------------------------------------------------------- scripted


class ScriptedBackend:
    """Replays scripted replies: which script by a key in the question, which reply by the turn.

    The turn is the number of assistant messages already in the request, so concurrent episodes
    never share state; past the end of a script its last reply repeats (an agent that keeps going
    gets a stable answer rather than an error).
    """

    def __init__(self, scripts: Mapping[str, Sequence[str]] | None = None, default: Sequence[str] | None = None):
        self.scripts = {str(k): _replies(v, f"script {k!r}") for k, v in (scripts or {}).items()}
        self.default = _replies(default, "default") if default is not None else None
        if not self.scripts and not self.default:
            raise ValueError("a scripted policy needs at least one script or a default")

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedBackend:
        """Load `{"scripts": {key: [replies]}, "default": [replies]}` from JSON or YAML."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read script file {path}: {exc}") from None
        try:
            if path.suffix.lower() in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text)
            else:
                data = json.loads(text)
        except Exception as exc:  # noqa: BLE001 - json and yaml raise different types
            raise ValueError(f"script file {path} is not valid {path.suffix.lstrip('.') or 'JSON'}: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("scripts", {}), dict):
            raise ValueError(f'script file {path} must hold {{"scripts": {{key: [replies]}}, "default": [replies]}}')
        return cls(scripts=data.get("scripts") or {}, default=data.get("default"))

    def script_for(self, messages: Sequence[ChatMessage]) -> list[str] | None:
        """The first script whose key occurs in the question (not the instructions around it), else the default."""
        question = question_of(messages)
        return next((s for key, s in self.scripts.items() if key in question), self.default)

    def generate(self, messages: list[ChatMessage], params: GenerationParams) -> Generation:
        script = self.script_for(messages)
        if not script:
            raise BadRequest(f"no script matches the question {question_of(messages)[:80]!r} and there is no default")
        step = sum(1 for m in messages if m.role == "assistant")
        text = script[min(step, len(script) - 1)].replace("{question}", question_of(messages))
        return limit_words(text, messages, params)


def _replies(value: Any, what: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"{what} must be a non-empty list of replies")
    return [str(v) for v in value]
