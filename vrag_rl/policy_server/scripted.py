"""Policies without a model: exact replays for tests and benchmarks, and an OCR rule-based reader.

Both are stateless — everything they need is in the request's conversation — so one server
handles any number of concurrent episodes, as vLLM does.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from vrag_rl.policy_server.protocol import ChatCompletionRequest, ChatMessage, Generation, decode_data_url


def question_of(messages: list[ChatMessage]) -> str:
    """The question of an episode: the first user message, after its last "Question:" marker."""
    first_user = next((m for m in messages if m.role == "user"), None)
    text = first_user.text() if first_user else ""
    marker = text.rfind("Question:")
    return text[marker + len("Question:"):].strip() if marker >= 0 else text.strip()


def _count_words(messages: list[ChatMessage]) -> int:
    return sum(len(m.text().split()) + 256 * len(m.image_urls()) for m in messages)


class ScriptedBackend:
    """Replays scripted replies: script chosen by a key found in the question, step = assistant turns so far."""

    def __init__(self, scripts: dict[str, list[str]] | None = None, default: list[str] | None = None):
        self.scripts = scripts or {}
        self.default = default
        if not self.scripts and not self.default:
            raise ValueError("a scripted policy needs at least one script or a default")

    @classmethod
    def from_file(cls, path: str | Path) -> "ScriptedBackend":
        text = Path(path).read_text(encoding="utf-8")
        if str(path).endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
        return cls(scripts=data.get("scripts", {}), default=data.get("default"))

    def generate(self, messages: list[ChatMessage], request: ChatCompletionRequest) -> Generation:
        question = question_of(messages)
        script = next((s for key, s in self.scripts.items() if key in question), self.default)
        if not script:
            raise ValueError(f"no script matches the question {question[:80]!r} and there is no default")
        step = sum(1 for m in messages if m.role == "assistant")
        text = script[min(step, len(script) - 1)].replace("{question}", question)
        words = text.split()
        limit = request.token_limit()
        finish = "stop"
        if len(words) > limit:
            text, finish = " ".join(words[:limit]), "length"
        return Generation(text=text, prompt_tokens=_count_words(messages), completion_tokens=min(len(words), limit),
                          finish_reason=finish)


_BBOX_IN_REPLY = re.compile(r"<bbox>", re.IGNORECASE)
_SEARCH_IN_REPLY = re.compile(r"<search>", re.IGNORECASE)
NOT_FOUND = "I could not find the answer in the documents."


class RuleBasedBackend:
    """Reads the pages it is shown with tesseract: search the question → zoom on the line that best
    matches it → answer from the zoomed crop. A CPU-only stand-in for a VLM, so the demo and the
    benchmarks exercise every action on real images."""

    def __init__(self, padding: int = 40, max_searches: int = 2):
        self.padding = padding
        self.max_searches = max_searches

    def generate(self, messages: list[ChatMessage], request: ChatCompletionRequest) -> Generation:
        text = self._decide(messages)
        return Generation(text=text, prompt_tokens=_count_words(messages), completion_tokens=len(text.split()))

    def _decide(self, messages: list[ChatMessage]) -> str:
        from search_engine.lexical import tokenize

        question = question_of(messages)
        terms = set(tokenize(question))
        searches = sum(1 for m in messages if m.role == "assistant" and _SEARCH_IN_REPLY.search(m.text()))
        last_user = next((m for m in reversed(messages) if m.role == "user"), None)
        last_assistant = next((m for m in reversed(messages) if m.role == "assistant"), None)
        images = last_user.image_urls() if last_user else []
        if searches == 0:
            return f"<think>I need a page about this question.</think><search>{question}</search>"
        if not images:
            return self._give_up(terms, searches)
        image = decode_data_url(images[-1])
        lines = _ocr_lines(image)
        best = _best_line(lines, terms)
        zoomed = last_assistant is not None and _BBOX_IN_REPLY.search(last_assistant.text())
        if zoomed:
            if best is None:
                return f"<think>The zoomed region does not say.</think><answer>{NOT_FOUND}</answer>"
            answer = _answer_from_line(best.text, terms)
            return f"<think>The zoomed region reads: {best.text}</think><answer>{answer}</answer>"
        if best is None:
            return self._give_up(terms, searches)
        x1, y1, x2, y2 = best.box
        p = self.padding
        box = [max(0, x1 - p), max(0, y1 - p), min(image.width, x2 + p), min(image.height, y2 + p)]
        return (f"<think>The line \"{best.text}\" looks relevant; I will zoom in to read it.</think>"
                f"<bbox>{json.dumps(box)}</bbox>")

    def _give_up(self, terms: set[str], searches: int) -> str:
        if searches < self.max_searches and terms:
            return f"<think>Nothing useful yet; a shorter query may help.</think><search>{' '.join(sorted(terms))}</search>"
        return f"<think>The documents I saw do not answer this.</think><answer>{NOT_FOUND}</answer>"


def _ocr_lines(image):
    from search_engine.text_extraction import ocr_lines

    return ocr_lines(image)


def _best_line(lines, terms: set[str]):
    from search_engine.lexical import tokenize

    best, best_score = None, 0
    for line in lines:
        score = len(terms & set(tokenize(line.text)))
        if score > best_score:
            best, best_score = line, score
    return best


def _answer_from_line(line: str, terms: set[str]) -> str:
    from search_engine.lexical import tokenize

    kept = [w for w in line.split() if not (set(tokenize(w)) & terms)]
    answer = " ".join(kept).strip(" :,-")
    return answer or line
