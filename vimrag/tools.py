"""The VimRAG tool protocol: `<tool_call>{json}</tool_call>` blocks in the model's reply.

Three tools (upstream's names and arguments):

* `add_search_node {id, query, parent_ids}` — a new node and its retrieval. Several calls in one
  reply are searched together as one batch (upstream allowed one search per context rebuild).
* `summarize_and_memorize {summary, memorize: [{information_id, is_useful, priority_score,
  key_timestamp, region}], node_id?}` — what the retrieval found and which items to keep.
  `summarize` (upstream's spelling) is accepted for `summary`; `region` ([x1, y1, x2, y2] in the
  image as shown) keeps a crop instead of the whole page (our extension).
* `add_answer_node {answer, parent_ids}` — the final answer.

Parsing is tolerant where models are sloppy (JSON5: single quotes, trailing commas, comments;
`arguments` given as a JSON string; `parameters` for `arguments`; a bare `{"name": ...}` object
without the tags) and strict about meaning: every problem becomes a short message the agent
hands back to the model, never an exception. JSON5 via the `json5` package (upstream used it too).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import json5

TOOL_NAMES = ("add_search_node", "summarize_and_memorize", "add_answer_node")
MAX_CALLS = 8  # per reply: more is a runaway generation, not a plan
MAX_CALL_CHARS = 20_000

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class MemorizeEntry:
    information_id: str
    is_useful: bool
    priority: float
    key_timestamps: list[float] = field(default_factory=list)
    region: list[float] | None = None


@dataclass
class ParsedTurn:
    think: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # problems to report back to the model

    @property
    def valid(self) -> bool:
        return bool(self.calls) and not self.errors


def parse_turn(text: str) -> ParsedTurn:
    """Split a reply into its thought and its tool calls; malformed calls become `errors`."""
    parsed = ParsedTurn()
    thoughts = _THINK.findall(text or "")
    parsed.think = "\n".join(t.strip() for t in thoughts).strip()
    if not thoughts and "</think>" in (text or ""):  # thinking models often omit the opening tag
        parsed.think = text.split("</think>", 1)[0].strip()
    body = _THINK.sub("", text or "")
    if "</think>" in body:
        body = body.split("</think>", 1)[1]
    blocks = [m.group(0) for m in _CALL.finditer(body)]
    raw_calls = [m.group(1) for m in _CALL.finditer(body)]
    if not raw_calls:
        stripped = body.strip()
        if stripped.startswith("{") and '"name"' in stripped:  # the tags forgotten, the JSON right
            raw_calls, blocks = [stripped], [stripped]
        else:
            parsed.errors.append("no <tool_call>{...}</tool_call> found; call exactly one of "
                                 + ", ".join(TOOL_NAMES))
            return parsed
    if len(raw_calls) > MAX_CALLS:
        parsed.errors.append(f"{len(raw_calls)} tool calls in one reply; at most {MAX_CALLS}")
        raw_calls = raw_calls[:MAX_CALLS]
    for number, (raw, block) in enumerate(zip(raw_calls, blocks), start=1):
        if not block.lower().endswith("</tool_call>") and block.lower().startswith("<tool_call>"):
            parsed.errors.append(f"tool call {number} is not closed with </tool_call> (was the reply cut off?)")
            continue
        call, error = _parse_call(raw.strip())
        if error:
            parsed.errors.append(f"tool call {number}: {error}")
        elif call is not None:
            parsed.calls.append(call)
    return parsed


def _parse_call(raw: str) -> tuple[ToolCall | None, str]:
    if len(raw) > MAX_CALL_CHARS:
        return None, f"longer than {MAX_CALL_CHARS} characters"
    raw = _FENCE.sub("", raw).strip()
    if not raw:
        return None, "empty; write a JSON object {\"name\": ..., \"arguments\": {...}}"
    try:
        data = json.loads(raw)
    except ValueError:
        try:
            data = json5.loads(raw)
        except (ValueError, RecursionError) as exc:
            return None, f"not valid JSON ({str(exc)[:120]})"
    if not isinstance(data, dict):
        return None, "must be a JSON object {\"name\": ..., \"arguments\": {...}}"
    name = data.get("name")
    if name not in TOOL_NAMES:
        return None, f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}"
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json5.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            return None, f"`arguments` of {name} is a string that is not JSON ({str(exc)[:120]})"
    if not isinstance(arguments, dict):
        return None, f"`arguments` of {name} must be an object"
    return ToolCall(name, arguments), ""


# ---- argument checks, per tool -------------------------------------------------------------------------


def _str_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError(f"`{what}` must be a list of node ids")


def search_args(call: ToolCall) -> tuple[str, str, list[str]]:
    """(id, query, parent_ids) of an add_search_node call; ValueError with a message for the model."""
    args = call.arguments
    node_id, query = args.get("id"), args.get("query")
    if not isinstance(node_id, (str, int)) or isinstance(node_id, bool) or str(node_id).strip() == "":
        raise ValueError("add_search_node needs an `id` (a short new node id such as \"search_1\")")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("add_search_node needs a non-empty `query` string")
    return str(node_id).strip(), query.strip(), _str_list(args.get("parent_ids"), "parent_ids")


def answer_args(call: ToolCall) -> tuple[str, list[str]]:
    args = call.arguments
    answer = args.get("answer")
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(answer)
    if not isinstance(answer, str) or not answer.strip():
        raise ValueError("add_answer_node needs a non-empty `answer` string")
    return answer.strip(), _str_list(args.get("parent_ids"), "parent_ids")


def memorize_args(call: ToolCall) -> tuple[str, list[MemorizeEntry], str | None]:
    """(summary, entries, node_id) of a summarize_and_memorize call."""
    args = call.arguments
    summary = args.get("summary", args.get("summarize", ""))
    if not isinstance(summary, str):
        raise ValueError("`summary` of summarize_and_memorize must be a string")  # noqa: TRY004 - feedback for the model
    node_id = args.get("node_id")
    if node_id is not None and not isinstance(node_id, str):
        raise ValueError("`node_id` must be a string")
    raw_entries = args.get("memorize", [])
    if isinstance(raw_entries, dict):
        raw_entries = [raw_entries]
    if not isinstance(raw_entries, list):
        raise ValueError("`memorize` must be a list of {information_id, is_useful, priority_score}")  # noqa: TRY004 - feedback for the model
    entries = []
    for n, raw in enumerate(raw_entries, start=1):
        if not isinstance(raw, dict):
            raise ValueError(f"memorize entry {n} must be an object")  # noqa: TRY004 - feedback for the model
        info = raw.get("information_id")
        if not isinstance(info, str) or not info.strip():
            raise ValueError(f"memorize entry {n} needs an `information_id` such as \"Picture 1\" or \"Video 1\"")
        useful = raw.get("is_useful", True)
        if isinstance(useful, str):
            useful = useful.strip().lower() in ("true", "yes", "1")
        priority = raw.get("priority_score", 3 if useful else 0)
        try:
            priority = float(priority)
        except (TypeError, ValueError):
            raise ValueError(f"priority_score of {info!r} must be a number 0-5") from None
        if not 0 <= priority <= 5:
            raise ValueError(f"priority_score of {info!r} is {priority:g}; it must be within 0-5")
        stamps = raw.get("key_timestamp", raw.get("key_timestamps", []))
        if isinstance(stamps, (int, float)) and not isinstance(stamps, bool):
            stamps = [stamps]
        if not isinstance(stamps, list) or not all(isinstance(s, (int, float)) and not isinstance(s, bool)
                                                   for s in stamps):
            raise ValueError(f"key_timestamp of {info!r} must be a list of seconds")
        region = raw.get("region")
        if region is not None and not (isinstance(region, list) and len(region) == 4 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in region)):
            raise ValueError(f"region of {info!r} must be [x1, y1, x2, y2]")
        entries.append(MemorizeEntry(_normalise_label(info), bool(useful), priority, [float(s) for s in stamps],
                                     [float(v) for v in region] if region else None))
    return summary.strip(), entries, node_id


def _normalise_label(label: str) -> str:
    """"picture_2", "Picture2", "picture 2" → "Picture 2" (models paraphrase labels)."""
    match = re.fullmatch(r"\s*(picture|video|text)[\s_:#-]*(\d+)\s*", label, re.IGNORECASE)
    return f"{match.group(1).capitalize()} {int(match.group(2))}" if match else label.strip()
