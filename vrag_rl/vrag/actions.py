"""Parse one model reply into a thought and one action — never raising on what a model may write.

Upstream crashed on a missing <think>, took the first action silently when there were two, and
accepted any bbox. Here every malformation becomes an `invalid` action with a reason the model
is shown, so the episode goes on (or ends cleanly after too many in a row).

The parser is linear in the reply's length: tags are found in one regex pass and each opening
tag is paired with the next closing tag of its kind by binary search. (A non-greedy
`<x>(.*?)</x>` search rescans the rest of the text from every unclosed tag: 64 KB of repeated
`<search>` took 5 s.) Replies longer than `MAX_REPLY_CHARS` are cut there first, with a warning.
"""
from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass, field
from typing import Literal

# What a reply asks for. The <bbox> tag asks for a crop: "crop" is the action's one name, here as in
# turn records, the credit graph and events (`vrag_rl.agent.result.TurnAction`).
ActionKind = Literal["search", "crop", "answer", "invalid"]

_TAG = re.compile(r"<(/?)(think|search|bbox|answer)\s*>", re.IGNORECASE)
_NUMBER = r"-?\d+(?:\.\d+)?"
_BBOX_NUMBERS = re.compile(_NUMBER)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# What json.loads (and float() of what it returns) raises on text a model may write: bad JSON
# (JSONDecodeError is a ValueError), an int over Python's 4300-digit limit (ValueError), nesting
# deeper than the recursion limit (RecursionError), an int too large for a float (OverflowError).
_JSON_FAILURES = (ValueError, RecursionError, OverflowError)

MAX_QUERY_CHARS = 500
MAX_REPLY_CHARS = 32_000


@dataclass
class ParsedReply:
    kind: ActionKind
    think: str | None = None
    queries: list[str] = field(default_factory=list)
    bbox: list[float] | None = None
    answer: str | None = None
    reason: str = ""  # why the reply is invalid
    warnings: list[str] = field(default_factory=list)  # tolerated problems (e.g. no <think>)


@dataclass
class _Blocks:
    think: str | None
    actions: list[tuple[str, str]]  # (kind, content) of complete action blocks, in order
    open_answer: str | None  # text after an unclosed <answer> (outside any complete block)


def _scan(text: str) -> _Blocks:
    """Complete <tag>...</tag> blocks left to right, each open tag paired with the next close of its kind."""
    tags = [(m.start(), m.end(), m.group(1) == "/", m.group(2).lower()) for m in _TAG.finditer(text)]
    closes: dict[str, list[tuple[int, int]]] = {}
    for start, end, closing, name in tags:
        if closing:
            closes.setdefault(name, []).append((start, end))
    think: str | None = None
    actions: list[tuple[str, str]] = []
    open_answer: str | None = None
    cursor = 0
    for start, end, closing, name in tags:
        if closing or start < cursor:
            continue
        candidates = closes.get(name, [])
        i = bisect.bisect_left(candidates, (end, -1))
        if i == len(candidates):
            if name == "answer" and open_answer is None:
                open_answer = text[end:]
            continue
        close_start, close_end = candidates[i]
        content = text[end:close_start]
        if name == "think":
            think = content.strip() if think is None else think
        else:
            actions.append((name, content))
        cursor = close_end
    return _Blocks(think, actions, open_answer)


def parse_reply(text: str, max_queries: int = 4) -> ParsedReply:
    """The reply's thought and its one action, or an `invalid` action with the reason."""
    text = text if isinstance(text, str) else ""
    warnings: list[str] = []
    if len(text) > MAX_REPLY_CHARS:
        text = text[:MAX_REPLY_CHARS]
        warnings.append(f"reply cut at {MAX_REPLY_CHARS} characters")
    blocks = _scan(text)
    think = blocks.think
    if think is None:
        warnings.append("no <think> block")
    actions = blocks.actions
    if not actions:
        if blocks.open_answer is not None and blocks.open_answer.strip():  # cut off by max_tokens or a stop
            return _answer(blocks.open_answer, think, warnings + ["unclosed <answer>"])
        return ParsedReply("invalid", think, reason="no <search>, <bbox> or <answer> action found", warnings=warnings)
    kinds = {kind for kind, _ in actions}
    if len(actions) > 1 and kinds != {"answer"}:
        return ParsedReply("invalid", think, reason=f"{len(actions)} actions in one reply; write exactly one",
                           warnings=warnings)
    kind, content = actions[0][0], actions[0][1].strip()
    if kind == "answer":
        return _answer(content, think, warnings)
    if kind == "search":
        queries, reason = parse_queries(content, max_queries)
        if reason:
            return ParsedReply("invalid", think, reason=reason, warnings=warnings)
        return ParsedReply("search", think, queries=queries, warnings=warnings)
    bbox, reason = parse_bbox(content)
    if reason:
        return ParsedReply("invalid", think, reason=reason, warnings=warnings)
    return ParsedReply("crop", think, bbox=bbox, warnings=warnings)


def _answer(content: str, think: str | None, warnings: list[str]) -> ParsedReply:
    """An answer is text: no control characters, no action tags inside, not empty."""
    if _TAG.search(content):
        return ParsedReply("invalid", think, reason="the <answer> contains action tags; answer in plain text",
                           warnings=warnings)
    cleaned = _CONTROL.sub("", content).strip()
    if not cleaned:
        return ParsedReply("invalid", think, reason="empty <answer>", warnings=warnings)
    return ParsedReply("answer", think, answer=cleaned, warnings=warnings)


def parse_queries(content: str, max_queries: int) -> tuple[list[str], str]:
    """One query, `a | b` or a JSON list of strings (RAG-R1 style parallel search)."""
    queries: list[str]
    if content.startswith("["):
        try:
            loaded = json.loads(content)
            queries = [str(q) for q in loaded] if isinstance(loaded, list) else [content]
        except _JSON_FAILURES:
            queries = [content]
    elif "|" in content:
        queries = content.split("|")
    else:
        queries = [content]
    queries = [" ".join(_CONTROL.sub(" ", q).split()) for q in queries]
    queries = list(dict.fromkeys(q for q in queries if q))
    if not queries:
        return [], "empty <search> query"
    if len(queries) > max_queries:
        return [], f"{len(queries)} queries in one search; at most {max_queries}"
    too_long = [q for q in queries if len(q) > MAX_QUERY_CHARS]
    if too_long:
        return [], f"a query longer than {MAX_QUERY_CHARS} characters"
    return queries, ""


def parse_bbox(content: str) -> tuple[list[float] | None, str]:
    """Four finite numbers (x1, y1, x2, y2), with x1 < x2 and y1 < y2 after reordering."""
    try:
        loaded = json.loads(content)
        if isinstance(loaded, dict):
            loaded = loaded.get("bbox") or loaded.get("bbox_2d")
        if isinstance(loaded, list) and len(loaded) == 1 and isinstance(loaded[0], list):
            loaded = loaded[0]
        values = [float(v) for v in loaded] if isinstance(loaded, list) else None
    except (*_JSON_FAILURES, TypeError):
        values = None
    if values is None:  # tolerate "(10, 20, 30, 40)" or "10 20 30 40"
        numbers = _BBOX_NUMBERS.findall(content)
        values = [float(v) for v in numbers] if len(numbers) == 4 else None
    if values is None or len(values) != 4:
        return None, f"<bbox> must hold four numbers [x1, y1, x2, y2], got {content[:60]!r}"
    if not all(math.isfinite(v) for v in values):
        return None, "<bbox> coordinates must be finite numbers"
    x1, y1, x2, y2 = values
    x1, x2 = min(x1, x2), max(x1, x2)
    y1, y2 = min(y1, y2), max(y1, y2)
    if x2 - x1 < 1 or y2 - y1 < 1:
        return None, "<bbox> has zero width or height"
    return [x1, y1, x2, y2], ""
