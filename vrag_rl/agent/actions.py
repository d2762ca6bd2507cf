"""Parse one model reply into a thought and one action — never raising on what a model may write.

Upstream crashed on a missing <think>, took the first action silently when there were two, and
accepted any bbox. Here every malformation becomes an `invalid` action with a reason the model
is shown, so the episode goes on (or ends cleanly after too many in a row).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Literal

ActionKind = Literal["search", "bbox", "answer", "invalid"]

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_ACTION = re.compile(r"<(search|bbox|answer)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_OPEN_ANSWER = re.compile(r"<answer>(.*)$", re.DOTALL | re.IGNORECASE)
_NUMBER = r"-?\d+(?:\.\d+)?"
_BBOX_NUMBERS = re.compile(_NUMBER)

MAX_QUERY_CHARS = 500


@dataclass
class ParsedReply:
    kind: ActionKind
    think: str | None = None
    queries: list[str] = field(default_factory=list)
    bbox: list[float] | None = None
    answer: str | None = None
    reason: str = ""  # why the reply is invalid
    warnings: list[str] = field(default_factory=list)  # tolerated problems (e.g. no <think>)


def parse_reply(text: str, max_queries: int = 4) -> ParsedReply:
    text = text or ""
    think_match = _THINK.search(text)
    think = think_match.group(1).strip() if think_match else None
    warnings = [] if think_match else ["no <think> block"]
    body = _THINK.sub(" ", text)
    actions = _ACTION.findall(body)
    if not actions:
        open_answer = _OPEN_ANSWER.search(body)
        if open_answer and open_answer.group(1).strip():  # cut off by max_tokens or a stop string
            return ParsedReply("answer", think, answer=open_answer.group(1).strip(),
                               warnings=warnings + ["unclosed <answer>"])
        return ParsedReply("invalid", think, reason="no <search>, <bbox> or <answer> action found", warnings=warnings)
    kinds = {kind.lower() for kind, _ in actions}
    if len(actions) > 1 and not kinds == {"answer"}:
        return ParsedReply("invalid", think, reason=f"{len(actions)} actions in one reply; write exactly one",
                           warnings=warnings)
    kind, content = actions[0][0].lower(), actions[0][1].strip()
    if kind == "answer":
        if not content:
            return ParsedReply("invalid", think, reason="empty <answer>", warnings=warnings)
        return ParsedReply("answer", think, answer=content, warnings=warnings)
    if kind == "search":
        queries, reason = parse_queries(content, max_queries)
        if reason:
            return ParsedReply("invalid", think, reason=reason, warnings=warnings)
        return ParsedReply("search", think, queries=queries, warnings=warnings)
    bbox, reason = parse_bbox(content)
    if reason:
        return ParsedReply("invalid", think, reason=reason, warnings=warnings)
    return ParsedReply("bbox", think, bbox=bbox, warnings=warnings)


def parse_queries(content: str, max_queries: int) -> tuple[list[str], str]:
    """One query, `a | b` or a JSON list of strings (RAG-R1 style parallel search)."""
    queries: list[str]
    if content.startswith("["):
        try:
            loaded = json.loads(content)
            queries = [str(q) for q in loaded] if isinstance(loaded, list) else [content]
        except json.JSONDecodeError:
            queries = [content]
    elif "|" in content:
        queries = content.split("|")
    else:
        queries = [content]
    queries = [" ".join(q.split()) for q in queries]
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
    except (json.JSONDecodeError, TypeError, ValueError):
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
