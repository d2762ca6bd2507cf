"""A CPU stand-in policy for the VimRAG tool protocol (`vrag-policy serve --backend vimrag-rule-based`).

It reads pages with the same extractive reader as the VRAG stand-in (`vrag_rl.reader`: layouts from
the search server by page id, or OCR of the image; table cells by their headers, the shortest span of
the best sentence, a figure's labels and caption), but speaks the memory-graph protocol of
`vimrag.tools`:

1. no search yet → `add_search_node` with the question, under the root;
2. a `<tool_response>` is waiting → read every picture and video frame in it, and
   `summarize_and_memorize`: the summary quotes the evidence and the answer it gives, the item holding
   it is memorised with priority 5 (a picture as the region the answer came from, a video with the
   timestamp of the frame), the others are marked not useful;
3. otherwise → read the memory images of the rebuilt context (the kept region, now shown zoomed by its
   energy's pixel budget): a supported answer is given (`add_answer_node` built on the node that kept
   it); failing that, the answer a summary in the graph JSON recorded; else one more search with the
   key words, built on the previous node; else the no-answer text of `vimrag.prompts`.

Stateless (everything is in the request), so one server serves any number of episodes. Not a
model: it exists so that `./run_demo.sh vimrag` works with no GPU and no API key, and so tests
have a real protocol partner beside the scripted replay.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from PIL import Image

from vimrag.prompts import (
    FORCE_ANSWER_TEXT,
    GRAPH_TEMPLATE,
    MEMORY_ITEM,
    NO_ANSWER_FALLBACK,
    QUESTION_TEMPLATE,
    RESULTS_HEADER,
)
from vrag_rl.reader import Reading
from vrag_rl.reader.question import question_form
from vrag_rl.reader.spans import answer_span
from vrag_rl.reader.terms import search_terms
from vrag_rl.serving.policy_server.conversation import limit_words
from vrag_rl.serving.policy_server.protocol import ChatMessage, Generation, GenerationParams, ImagePart, TextPart
from vrag_rl.serving.policy_server.rule_based import RuleBasedBackend, sharpen

NOT_FOUND = NO_ANSWER_FALLBACK
_QUESTION = re.compile("^" + re.escape(QUESTION_TEMPLATE.split("{question}")[0]) + r"\s*(.+)$", re.MULTILINE)
GRAPH_MARKER = GRAPH_TEMPLATE.split("{graph}")[0]
_RESULTS = re.compile(re.escape(RESULTS_HEADER.split("{node_id}")[0]) + r"(\S+)")
_MEMORY_NODE = re.compile("^" + re.escape(MEMORY_ITEM.split("{node_id}")[0]) + r"(\S+) \| ")
_FORCED = FORCE_ANSWER_TEXT.split(".")[0]
_LABEL = re.compile(r"^(Picture|Video) (\d+):", re.MULTILINE)
_PAGE_ID = re.compile(r"\(([^()\s]+)\)\s*$")
_FRAME = re.compile(r"^<([0-9.]+) seconds>$")
_SUMMARY = re.compile(r'reads "(?P<evidence>.*?)", which gives "(?P<answer>.*?)"')


def _clean(text: str) -> str:
    """Page text placed in JSON strings and read back later: no quotes or tags."""
    return re.sub(r"\s+", " ", text.replace('"', "'").replace("<", "(").replace(">", ")")).strip()


def _call(name: str, arguments: dict) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "</tool_call>"


class VimRAGRuleBasedBackend:
    """The VimRAG CPU stand-in (see the module doc); `lang`, `embedder` and `search_url` as
    `RuleBasedBackend`, whose reader and layout source it uses."""

    def __init__(self, lang: str | None = None, max_searches: int = 2, embedder: Any | None = "minilm",
                 search_url: str | None = None, padding: int = 12):
        self.max_concurrency = max(1, os.cpu_count() or 1)
        self.max_searches = max_searches
        self.padding = padding
        self._pages = RuleBasedBackend(lang=lang, embedder=embedder, search_url=search_url)

    def generate(self, messages: list[ChatMessage], params: GenerationParams) -> Generation:
        return limit_words(self.decide(messages), messages, params)

    def decide(self, messages: Sequence[ChatMessage]) -> str:
        first = next((m for m in messages if m.role == "user"), None)
        text = first.text() if first else ""
        match = _QUESTION.search(text)
        question = match.group(1).strip() if match else text.strip()[:500]
        response = next((m for m in reversed(messages) if m.role == "user" and "<tool_response>" in m.text()), None)
        if response is not None:
            return self._summarize(response, question)
        forced = bool(messages) and _FORCED in messages[-1].text()
        return self._next_step(_graph_of(text), question, forced=forced, first=first)

    def _read(self, question: str, page_id: str | None, image: Image.Image) -> Reading | None:
        layout = self._pages.layouts.shown(page_id, image)
        return self._pages.reader.read(question, layout)

    # ---- after a search: read the results, keep the useful one ----------------------------------------
    def _summarize(self, response: ChatMessage, question: str) -> str:
        node = _RESULTS.search(response.text())
        label, stamp, page_id = None, None, None
        best: tuple[Reading, str, float | None, tuple[int, int]] | None = None
        labels: list[str] = []
        for part in response.content if isinstance(response.content, list) else []:
            if isinstance(part, TextPart):
                head = _LABEL.match(part.text.strip())
                if head:
                    label, stamp = f"{head.group(1)} {head.group(2)}", None
                    found = _PAGE_ID.search(part.text.strip()) if head.group(1) == "Picture" else None
                    page_id = found.group(1) if found else None
                    labels.append(label)
                frame = _FRAME.match(part.text.strip())
                if frame:
                    stamp = float(frame.group(1))
            elif isinstance(part, ImagePart) and label is not None:
                image = part.image()
                reading = self._read(question, page_id if stamp is None else None, image)
                if reading is not None and (best is None or reading.score > best[0].score):
                    best = (reading, label, stamp, image.size)
        memorize = []
        if best is None:
            summary = "None of the results answers: " + " ".join(search_terms(question)[:6]) + "."
        else:
            reading, label, stamp, (width, height) = best
            summary = f'{label} reads "{_clean(reading.evidence)}", which gives "{_clean(reading.answer)}".'
            entry: dict = {"information_id": label, "is_useful": True, "priority_score": 5}
            if label.startswith("Video") and stamp is not None:
                entry["key_timestamp"] = [stamp]
            elif label.startswith("Picture"):
                # keep the region the answer came from: the rebuilt context shows it zoomed, where small
                # print becomes legible
                x1, y1, x2, y2 = reading.box
                p = self.padding
                entry["region"] = [max(0, int(x1) - p), max(0, int(y1) - p), min(width, int(x2 + 0.999) + p),
                                   min(height, int(y2 + 0.999) + p)]
            memorize.append(entry)
        memorize += [{"information_id": other, "is_useful": False, "priority_score": 0}
                     for other in dict.fromkeys(labels) if best is None or other != best[1]]
        arguments = {"summary": summary, "memorize": memorize}
        if node:
            arguments["node_id"] = node.group(1)
        thought = "I read every result and keep the one that answers." if best else "Nothing here answers it."
        return f"<think>{thought}</think>" + _call("summarize_and_memorize", arguments)

    # ---- with the graph: answer, or search again ----------------------------------------------------------
    def _memory_answer(self, message: ChatMessage, question: str, graph: list[dict]) -> tuple[str, Reading] | None:
        """(node id, reading) from the memory images of the rebuilt context: the answer a node's summary
        recorded, re-read in its memory image (the kept region, zoomed: sharper than the result it was
        read from), else whatever the image itself answers; the best reading first."""
        summaries = {n["id"]: _SUMMARY.search(n.get("summary", "")) for n in graph}
        node = None
        best: tuple[str, Reading] | None = None
        for part in message.content if isinstance(message.content, list) else []:
            if isinstance(part, TextPart):
                match = _MEMORY_NODE.match(part.text.strip())
                if match:
                    node = match.group(1)
            elif isinstance(part, ImagePart) and node is not None:
                image = part.image()
                quoted = summaries.get(node)
                answer = quoted.group("answer") if quoted else ""
                reading: Reading | None
                if quoted:
                    recorded = Reading(answer, quoted.group("evidence"), (0, 0, *image.size), "", "text", score=1.0,
                                       coverage=1.0, legible=bool(answer_span(answer, question,
                                                                              question_form(question))[1]))
                    reading = sharpen(recorded, self._pages.layouts.ocr_lines_layout(image), question)
                else:
                    reading = self._read(question, None, image)
                if reading is not None and reading.legible and (best is None or reading.score > best[1].score):
                    best = (node, reading)
        return best

    def _next_step(self, graph: list[dict], question: str, forced: bool,
                   first: ChatMessage | None = None) -> str:
        remembered = self._memory_answer(first, question, graph) if first is not None else None
        if remembered is not None:
            node, reading = remembered
            return (f'<think>The memory of node {node} reads "{_clean(reading.evidence)}", which answers the '
                    f"question.</think>" + _call("add_answer_node", {"answer": _clean(reading.answer),
                                                                       "parent_ids": [node]}))
        searches = [n for n in graph if "query" in n]
        for node in reversed(searches):  # what a summary recorded, the latest first
            quoted = _SUMMARY.search(node.get("summary", ""))
            if quoted and answer_span(quoted.group("answer"), question, question_form(question))[1]:
                return (f'<think>Node {node["id"]} found "{quoted.group("evidence")}", which answers the '
                        f"question.</think>" + _call("add_answer_node", {"answer": quoted.group("answer"),
                                                                           "parent_ids": [node["id"]]}))
        if not forced and len(searches) < self.max_searches:
            if not searches:
                return ("<think>I need to search for this first.</think>"
                        + _call("add_search_node", {"id": "search_1", "query": question, "parent_ids": ["root"]}))
            keywords = " ".join(search_terms(question)) or question
            previous = searches[-1]["id"]
            return (f"<think>{previous} did not find it; the key words may.</think>"
                    + _call("add_search_node", {"id": f"search_{len(searches) + 1}", "query": keywords,
                                                "parent_ids": [previous]}))
        parents = [n["id"] for n in searches] or ["root"]
        return ("<think>The searches did not find the answer.</think>"
                + _call("add_answer_node", {"answer": NOT_FOUND, "parent_ids": parents}))


def _graph_of(text: str) -> list[dict]:
    start = text.find(GRAPH_MARKER)
    if start < 0:
        return []
    try:
        graph = json.loads(text[start + len(GRAPH_MARKER):].split("\n", 1)[0])
    except ValueError:
        return []
    return [n for n in graph if isinstance(n, dict) and "id" in n] if isinstance(graph, list) else []
