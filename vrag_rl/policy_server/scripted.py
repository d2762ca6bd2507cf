"""Policies without a model: exact replays for tests and benchmarks (the OCR reader is in `rule_based`).

Both are stateless — everything they need is in the request's conversation — so one server
handles any number of concurrent episodes, as vLLM does. Token counts are whitespace-split
words: there is no tokenizer, and the agent only needs plausible, deterministic numbers.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vrag_rl.policy_server.protocol import BadRequest, ChatMessage, Generation, GenerationParams

NOT_FOUND = "I could not find the answer in the documents."
QUESTION_MARKER = "Question:"


# --------------------------------------------------------------------------------------------- conversation


def first_user_text(messages: Sequence[ChatMessage]) -> str:
    first = next((m for m in messages if m.role == "user"), None)
    return first.text() if first else ""


def question_of(messages: Sequence[ChatMessage]) -> str:
    """The episode's question: the first user message after its last "Question:" marker (the agent's
    template), else that whole message. The marker matters when the agent puts the instructions in
    the first user message (no system role): they are not part of the question."""
    text = first_user_text(messages)
    marker = text.rfind(QUESTION_MARKER)
    return text[marker + len(QUESTION_MARKER):].strip() if marker >= 0 else text.strip()


def count_words(messages: Sequence[ChatMessage]) -> int:
    return sum(len(m.text().split()) for m in messages)


def _limit(text: str, messages: Sequence[ChatMessage], params: GenerationParams) -> Generation:
    """Truncate to `max_tokens` words like a model that runs out of budget (finish_reason "length")."""
    words = text.split()
    finish = "stop"
    if len(words) > params.max_tokens:
        text, finish = " ".join(words[: params.max_tokens]), "length"
        words = words[: params.max_tokens]
    return Generation(text=text, prompt_tokens=count_words(messages), completion_tokens=len(words),
                      finish_reason=finish)


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
        return _limit(text, messages, params)


def _replies(value: Any, what: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"{what} must be a non-empty list of replies")
    return [str(v) for v in value]


# --------------------------------------------------------------------------------------------- rule-based

_MOVED = ("RuleBasedBackend", "content_terms", "words_of", "STOPWORDS")


def __getattr__(name: str):
    """The rule-based reader lives in `vrag_rl.policy_server.rule_based`; old imports from here keep working."""
    if name in _MOVED:
        from vrag_rl.policy_server import rule_based

        return getattr(rule_based, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
