"""What the model-free policies (scripted replay, the CPU stand-ins) read from a request: the question, the
turn, the pages shown; and how they word a reply's budget. One place for the stand-ins' shared helpers.

The agent's words come from `vrag_rl.vrag.prompts`, which owns them: the question marker, the search
result line (which names the page id), the forced-answer note and the no-answer text are derived from
its templates here, never copied.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from vrag_rl.serving.policy_server.protocol import ChatMessage, Generation, GenerationParams
from vrag_rl.vrag.prompts import FORCE_ANSWER_TEXT, NO_ANSWER_FALLBACK, QUESTION_TEMPLATE, SEARCH_RESULT_TEXT

NOT_FOUND = NO_ANSWER_FALLBACK
QUESTION_MARKER = QUESTION_TEMPLATE.split("{question}")[0].strip()  # "Question:"
_SEARCH_RESULT = re.compile(
    re.escape(SEARCH_RESULT_TEXT).replace(re.escape("{query}"), ".*?")
    .replace(re.escape("{page_id}"), r"(?P<page>\S+?)") + r"\s*$", re.DOTALL)


def first_user_text(messages: Sequence[ChatMessage]) -> str:
    first = next((m for m in messages if m.role == "user"), None)
    return first.text() if first else ""


def question_of(messages: Sequence[ChatMessage]) -> str:
    """The episode's question: the first user message after its last question marker (the agent's
    template), else that whole message. The marker matters when the agent puts the instructions in
    the first user message (no system role): they are not part of the question."""
    text = first_user_text(messages)
    marker = text.rfind(QUESTION_MARKER)
    return text[marker + len(QUESTION_MARKER):].strip() if marker >= 0 else text.strip()


def page_id_of(text: str) -> str | None:
    """The page id the agent's search-result line names ("Search result for "q": page doc_3."), else None."""
    match = _SEARCH_RESULT.search(text.strip())
    return match.group("page") if match else None


def forced_to_answer(message: ChatMessage | None) -> bool:
    """Whether the agent's last message says the steps are used up and an answer is due now."""
    return message is not None and FORCE_ANSWER_TEXT.split(".")[0] in message.text()


def count_words(messages: Sequence[ChatMessage]) -> int:
    return sum(len(m.text().split()) for m in messages)


def limit_words(text: str, messages: Sequence[ChatMessage], params: GenerationParams) -> Generation:
    """Truncate to `max_tokens` words like a model that runs out of budget (finish_reason "length").
    Token counts are whitespace-split words: there is no tokenizer, and the agent only needs plausible,
    deterministic numbers."""
    words = text.split()
    finish: Literal["stop", "length"] = "stop"
    if len(words) > params.max_tokens:
        text, finish = " ".join(words[: params.max_tokens]), "length"
        words = words[: params.max_tokens]
    return Generation(text=text, prompt_tokens=count_words(messages), completion_tokens=len(words),
                      finish_reason=finish)
