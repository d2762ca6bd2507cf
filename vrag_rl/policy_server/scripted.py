"""Policies without a model: exact replays for tests and benchmarks, and an OCR rule-based reader.

Both are stateless — everything they need is in the request's conversation — so one server
handles any number of concurrent episodes, as vLLM does. Token counts are whitespace-split
words: there is no tokenizer, and the agent only needs plausible, deterministic numbers.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from search_engine.text_extraction import OcrLine, ocr_lines
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
    def from_file(cls, path: str | Path) -> "ScriptedBackend":
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

STOPWORDS = frozenset(
    "a about according after all also am an and any are as at be been being before but by can could did do does "
    "doing during each for from get got had has have having he her here his how i if in into is it its me much many "
    "my no not of on or our over she should so some than that the their them then there these they this those to "
    "under up us was we were what when where which while who whom whose why will with would you your".split()
)
_WORD = re.compile(r"[0-9a-z]+(?:[.,'’%][0-9a-z%]+)*%?")
_BBOX = re.compile(r"<bbox>", re.IGNORECASE)
_SEARCH = re.compile(r"<search>", re.IGNORECASE)
_QUOTED_LINE = re.compile(r'The line "(.*?)" ', re.DOTALL)


def _stem(word: str) -> str:
    """Crude plural/verb -s folding, so "produces" matches "produce" and "plants" matches "plant"."""
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) and not word[-2].isdigit():
        word = word[:-1]
    return word


def words_of(text: str) -> list[str]:
    """Lowercased words without punctuation (numbers such as 7.4, 1,870 or 47% stay whole)."""
    return _WORD.findall(text.lower())


def content_terms(text: str) -> list[str]:
    """The words that carry meaning, stemmed, in order, without repeats."""
    seen: dict[str, None] = {}
    for word in words_of(text):
        if word not in STOPWORDS:
            seen.setdefault(_stem(word), None)
    return list(seen)


def best_line(lines: Sequence[OcrLine], terms: Sequence[str]) -> OcrLine | None:
    """The line sharing most question terms; ties go to the line higher on the page.

    A line made only of question words (a title, a table header) cannot hold the answer, so any
    matching line that says something more ranks above it.
    """
    wanted = set(terms)
    best, best_key = None, None
    for line in lines:  # top to bottom: strict ">" keeps the higher line on ties
        line_terms = set(content_terms(line.text))
        overlap = len(wanted & line_terms)
        if overlap == 0:
            continue
        key = (bool(line_terms - wanted), overlap)
        if best_key is None or key > best_key:
            best, best_key = line, key
    return best


def answer_from_line(line: str, question: str) -> str:
    """The line without the words the question already has ("Riverside 7.4" → "7.4"); whole line if nothing is left."""
    asked = {_stem(w) for w in words_of(question)}
    kept = [w for w in line.split() if not (words_of(w) and all(_stem(x) in asked for x in words_of(w)))]
    answer = " ".join(kept).strip(" :;,-|")
    return answer or line.strip()


def _clean(text: str) -> str:
    """OCR text inside our reply must not open or close an action tag."""
    return text.replace("<", "(").replace(">", ")").replace('"', "'")


class RuleBasedBackend:
    """Reads the pages it is shown with tesseract: search the question → zoom on the line that best
    matches it → answer from the zoomed crop. A CPU-only stand-in for a VLM, so the demo and the
    benchmarks exercise every action on real images, in the coordinates of the image sent.
    """

    def __init__(self, padding: int = 40, lang: str = "eng", max_searches: int = 2):
        # one tesseract process per core at most: more only makes every request slower
        self.max_concurrency = max(1, os.cpu_count() or 1)
        self.padding = padding
        self.lang = lang
        self.max_searches = max_searches  # the question, then one reformulation

    def generate(self, messages: list[ChatMessage], params: GenerationParams) -> Generation:
        return _limit(self.decide(messages), messages, params)

    def decide(self, messages: Sequence[ChatMessage]) -> str:
        question = question_of(messages)
        terms = content_terms(question)
        assistant = [m for m in messages if m.role == "assistant"]
        searches = sum(1 for m in assistant if _SEARCH.search(m.text()))
        last_assistant = assistant[-1].text() if assistant else ""
        last_user = messages[-1] if messages and messages[-1].role == "user" else None
        images = last_user.image_parts() if last_user else []

        if not images:
            seen_image = any(m.image_parts() for m in messages if m.role == "user")
            if not seen_image and searches == 0:
                return f"<think>I need to find a page that answers this.</think><search>{question}</search>"
            if last_user is not None and "final answer" in last_user.text().lower():
                return f"<think>I must answer now and have nothing reliable.</think><answer>{NOT_FOUND}</answer>"
            return self._give_up(question, searches)

        image = images[-1].image()
        lines = ocr_lines(image, self.lang)
        line = best_line(lines, terms)
        if _BBOX.search(last_assistant):  # this image is the crop we asked for
            text = line.text if line else _quoted_line(last_assistant)
            if not text:
                return f"<think>The zoomed region does not say.</think><answer>{NOT_FOUND}</answer>"
            text = _clean(text)
            answer = _clean(answer_from_line(text, question))
            return f'<think>The zoomed region reads "{text}".</think><answer>{answer}</answer>'
        if line is None:
            return self._give_up(question, searches)
        x1, y1, x2, y2 = line.box
        p = self.padding
        box = [max(0, x1 - p), max(0, y1 - p), min(image.width, x2 + p), min(image.height, y2 + p)]
        return (f'<think>The line "{_clean(line.text)}" matches the question; I will zoom in to read it.</think>'
                f"<bbox>[{box[0]}, {box[1]}, {box[2]}, {box[3]}]</bbox>")

    def _give_up(self, question: str, searches: int) -> str:
        query = " ".join(dict.fromkeys(w for w in words_of(question) if w not in STOPWORDS))
        if searches < self.max_searches and query:
            return f"<think>Nothing useful yet; the key words may find another page.</think><search>{query}</search>"
        return f"<think>The pages I saw do not answer this.</think><answer>{NOT_FOUND}</answer>"


def _quoted_line(reply: str) -> str:
    """The line our previous turn chose, when OCR of the crop finds nothing matching (a tight crop reads worse)."""
    match = _QUOTED_LINE.search(reply)
    return match.group(1) if match else ""
