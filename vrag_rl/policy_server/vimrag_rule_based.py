"""A CPU stand-in policy for the VimRAG tool protocol (`vrag-policy serve --backend vimrag-rule-based`).

It reads the images it is sent with tesseract, like the VRAG rule-based policy (whose public
word helpers it reuses: `content_terms`, `words_of`, `STOPWORDS`), but speaks the memory-graph
protocol of `vimrag.tools`:

1. no search yet → `add_search_node` with the question, under the root;
2. a `<tool_response>` is waiting → OCR every picture and video frame in it, find the line that
   best matches the question, and `summarize_and_memorize`: the summary quotes that line, the item
   holding it is memorised with priority 5 (a picture as the crop around the line, a video with the
   timestamp of the frame), the others are marked not useful;
3. otherwise → OCR the memory images of the rebuilt context (the kept row, now shown zoomed by its
   energy's pixel budget): a line that matches and says more than the question answers
   (`add_answer_node` built on the node that kept it); failing that, a summary in the graph JSON
   that quotes such a line; else one more search with the key words, built on the previous node;
   else "not found".

Stateless (everything is in the request), so one server serves any number of episodes. Not a
model: it exists so that `./run_demo.sh vimrag` works with no GPU and no API key, and so tests
have a real protocol partner beside the scripted replay.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence

from search_engine.text_extraction import OcrLine, ocr_lines
from vrag_rl.policy_server.protocol import (
    ChatMessage,
    Generation,
    GenerationParams,
    ImagePart,
    TextPart,
)
from vrag_rl.policy_server.scripted import (
    NOT_FOUND,
    STOPWORDS,
    _limit,
    content_terms,
    words_of,
)

_QUESTION = re.compile(r"^Question:\s*(.+)$", re.MULTILINE)
GRAPH_MARKER = "### Memory graph\n"
_LABEL = re.compile(r"^(Picture|Video) (\d+):", re.MULTILINE)
_FRAME = re.compile(r"^<([0-9.]+) seconds>$")
_NODE = re.compile(r'Results of node (\S+) \(query')
_QUOTE = re.compile(r'reads "(.*?)"')
_MEMORY_NODE = re.compile(r"^Node: (\S+) \| ")


def _clean(text: str) -> str:
    """OCR text placed in JSON strings and read back later: no quotes or tags."""
    return re.sub(r"\s+", " ", text.replace('"', "'").replace("<", "(").replace(">", ")")).strip()


def entity_terms(question: str) -> set[str]:
    """Terms of the question's names and numbers ("Riverside", "Kestrel Ridge", "2023"): the row
    that answers a question almost always carries its entity, while its other words are the
    table's or the chart's subject, printed in titles and headers."""
    words = question.split()[1:]  # the first word is capitalised anyway
    return {t for w in words if w[:1].isupper() or any(c.isdigit() for c in w) for t in content_terms(w)}


def best_line(lines: Sequence[OcrLine], terms: Sequence[str], entities: set[str] = frozenset(),
              pool: Sequence[OcrLine] | None = None) -> tuple[OcrLine | None, tuple]:
    """The line that best matches the question, and its ranking key (compare keys across images).

    Terms are weighted by how rare they are among the lines of `pool` (every image being compared;
    default: these lines) — a word in every line, like a table's subject, says little, a row label
    says a lot — and entity terms three times; ties go to a line that says more than the question,
    then to one with a number, then to the higher line.
    """
    wanted = set(terms)
    pool_terms = [set(content_terms(line.text)) for line in (lines if pool is None else pool)]
    df = {t: sum(1 for lt in pool_terms if t in lt) for t in wanted}
    best, best_key = None, None
    for line in lines:
        have = set(content_terms(line.text))
        overlap = wanted & have
        if not overlap:
            continue
        score = sum((math.log((1 + len(pool_terms)) / (1 + df[t])) + 1) * (3 if t in entities else 1)
                    for t in overlap)
        key = (round(score, 6), bool(have - wanted), any(c.isdigit() for c in line.text))
        if best_key is None or key > best_key:
            best, best_key = line, key
    return best, (best_key or ())


def answer_from_line(line: str, question: str) -> str:
    """The line without the words the question already has ("Riverside 7.4" → "7.4")."""
    asked = set(content_terms(question)) | set(words_of(question))
    kept = [w for w in line.split() if not (content_terms(w) and set(content_terms(w)) <= asked)
            and not (words_of(w) and set(words_of(w)) <= asked)]
    rest = " ".join(kept).strip(" :;,-|")
    return quantity_in(rest, question) or rest or line.strip()


_QUANTITY_QUESTION = re.compile(r"\b(how (much|many)|what (score|share|percentage|number|amount|value|code)|"
                                r"how (long|far|big|large|high))\b", re.IGNORECASE)
_YEAR = re.compile(r"^(19|20)\d\d[.,;:]?$")
_UNIT = re.compile(r"^(%|percent|[a-z]{1,3}|million|billion|thousand|dollars?|euros?|points?)[.,;:]?$", re.IGNORECASE)


def quantity_in(text: str, question: str) -> str:
    """For a question asking for an amount, the first number in `text` with its unit ("commissioned in
    2022, 410 MW." → "410 MW"); years are skipped unless the question asks about time. "" if none."""
    if not _QUANTITY_QUESTION.search(question):
        return ""
    tokens = text.split()
    for i, token in enumerate(tokens):
        if not any(c.isdigit() for c in token) or (_YEAR.match(token) and "year" not in question.lower()):
            continue
        value = token.rstrip(".,;:")
        if i + 1 < len(tokens) and _UNIT.match(tokens[i + 1]) and not any(c.isdigit() for c in tokens[i + 1]):
            value += " " + tokens[i + 1].rstrip(".,;:")
        return value
    return ""


def _call(name: str, arguments: dict) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "</tool_call>"


class VimRAGRuleBasedBackend:
    def __init__(self, lang: str = "eng", max_searches: int = 2):
        self.max_concurrency = max(1, os.cpu_count() or 1)
        self.lang = lang
        self.max_searches = max_searches

    def generate(self, messages: list[ChatMessage], params: GenerationParams) -> Generation:
        return _limit(self.decide(messages), messages, params)

    def decide(self, messages: Sequence[ChatMessage]) -> str:
        first = next((m for m in messages if m.role == "user"), None)
        text = first.text() if first else ""
        match = _QUESTION.search(text)
        question = match.group(1).strip() if match else text.strip()[:500]
        response = next((m for m in reversed(messages) if m.role == "user" and "<tool_response>" in m.text()), None)
        if response is not None:
            return self._summarize(response, question)
        graph = _graph_of(text)
        return self._next_step(graph, question, forced="add_answer_node now" in messages[-1].text(), first=first)

    # ---- after a search: read the results, keep the useful one ----------------------------------------
    def _summarize(self, response: ChatMessage, question: str) -> str:
        terms = content_terms(question)
        node = _NODE.search(response.text())
        label, stamp = None, None
        seen: list[tuple[str, float | None, list[OcrLine], tuple[int, int]]] = []  # (label, second, lines, size)
        labels: list[str] = []
        for part in response.content if isinstance(response.content, list) else []:
            if isinstance(part, TextPart):
                head = _LABEL.match(part.text.strip())
                if head:
                    label, stamp = f"{head.group(1)} {head.group(2)}", None
                    labels.append(label)
                frame = _FRAME.match(part.text.strip())
                if frame:
                    stamp = float(frame.group(1))
            elif isinstance(part, ImagePart) and label is not None:
                image = part.image()
                seen.append((label, stamp, ocr_lines(image, self.lang), image.size))
        pool = [line for _, _, lines, _ in seen for line in lines]
        best = None  # (key, label, second, line, image size)
        for label, stamp, lines, size in seen:
            line, key = best_line(lines, terms, entity_terms(question), pool)
            if line is not None and (best is None or key > best[0]):
                best = (key, label, stamp, line, size)
        memorize = []
        if best is None:
            summary = "None of the results mentions " + ", ".join(terms[:6]) + "."
        else:
            _, label, stamp, line, (width, height) = best
            summary = f'{label} reads "{_clean(line.text)}".'
            entry: dict = {"information_id": label, "is_useful": True, "priority_score": 5}
            if label.startswith("Video") and stamp is not None:
                entry["key_timestamp"] = [stamp]
            elif label.startswith("Picture"):
                # keep the row the line sits in (a table's value is often a separate cell to its right):
                # the rebuilt context then shows this strip zoomed, where small print becomes legible
                _, y1, _, y2 = line.box
                p = max(2, (y2 - y1) // 2)  # half a line: the row, not its neighbours
                entry["region"] = [0, max(0, y1 - p), width, min(height, y2 + p)]
            memorize.append(entry)
        memorize += [{"information_id": other, "is_useful": False, "priority_score": 0}
                     for other in dict.fromkeys(labels) if best is None or other != best[1]]
        arguments = {"summary": summary, "memorize": memorize}
        if node:
            arguments["node_id"] = node.group(1)
        thought = "I read every result and keep the one that answers." if best else "Nothing here answers it."
        return f"<think>{thought}</think>" + _call("summarize_and_memorize", arguments)

    # ---- with the graph: answer, or search again ----------------------------------------------------------
    def _memory_answer(self, message: ChatMessage, question: str) -> tuple[str, str, str] | None:
        """(node id, line, answer) from the memory images of the rebuilt context, best line first."""
        terms = content_terms(question)
        node = None
        seen: list[tuple[str, list[OcrLine]]] = []
        for part in message.content if isinstance(message.content, list) else []:
            if isinstance(part, TextPart):
                match = _MEMORY_NODE.match(part.text.strip())
                if match:
                    node = match.group(1)
            elif isinstance(part, ImagePart) and node is not None:
                seen.append((node, ocr_lines(part.image(), self.lang)))
        pool = [line for _, lines in seen for line in lines]
        best = None
        for node, lines in seen:
            line, key = best_line(lines, terms, entity_terms(question), pool)
            if line is None:
                continue
            text = _clean(line.text)
            if answer_from_line(text, question) == text:  # the label alone: read its whole row (the strip)
                text = _clean(" ".join(item.text for item in lines))
            answer = answer_from_line(text, question)
            if answer != text and (best is None or key > best[0]):
                best = (key, node, text, answer)
        return best[1:] if best else None

    def _next_step(self, graph: list[dict], question: str, forced: bool,
                   first: ChatMessage | None = None) -> str:
        terms = content_terms(question)
        remembered = self._memory_answer(first, question) if first is not None else None
        if remembered is not None:
            node, line, answer = remembered
            return (f'<think>The memory of node {node} reads "{line}", which answers the question.</think>'
                    + _call("add_answer_node", {"answer": _clean(answer), "parent_ids": [node]}))
        searches = [n for n in graph if "query" in n]
        found = None  # (overlap, node id, quoted line)
        for node in searches:
            quoted = _QUOTE.search(node.get("summary", ""))
            if quoted and answer_from_line(quoted.group(1), question) != quoted.group(1).strip():
                overlap = len(set(terms) & set(content_terms(quoted.group(1))))
                if overlap and (found is None or overlap > found[0]):
                    found = (overlap, node["id"], quoted.group(1))
        if found is not None:
            answer = _clean(answer_from_line(found[2], question))
            return (f'<think>Node {found[1]} found "{found[2]}", which answers the question.</think>'
                    + _call("add_answer_node", {"answer": answer, "parent_ids": [found[1]]}))
        if not forced and len(searches) < self.max_searches:
            if not searches:
                return ("<think>I need to search for this first.</think>"
                        + _call("add_search_node", {"id": "search_1", "query": question, "parent_ids": ["root"]}))
            keywords = " ".join(dict.fromkeys(w for w in words_of(question) if w not in STOPWORDS)) or question
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
