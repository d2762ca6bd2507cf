"""VimRAG's memory: the memory graph, the pixels of what it memorised, and the retrieved items
waiting to be memorised — and the context rebuilt from them for every model call.

What the model sees next is `build_context(graph)` (instructions, question, the graph as JSON, the
top-energy memory images) plus this step's *tail*: the model's reply and, while a search waits for
its summary, the search results in a `<tool_response>`. Once nothing waits, the tail is dropped and
the next context comes from the graph alone — so the context is rebuilt, not appended to
(so its rollout records each model call as its own sample). The evidence
is the memorised items on the root → answer path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from search_engine.types import SearchHit
from vimrag.context import build_context
from vimrag.energy import Allocation, EnergyConfig
from vimrag.graph import MemoryGraph, MemoryItem
from vimrag.prompts import VimPrompts
from vimrag.tools import MemorizeEntry
from vrag_rl.agent.credit_graph import CreditGraph
from vrag_rl.agent.events import ImageRef
from vrag_rl.agent.images import map_bbox_to_page
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policy import Message, text_part
from vrag_rl.agent.result import TurnRecord


@dataclass
class Candidate:
    """A retrieved item the model may memorise, by its label ("Picture 3")."""

    label: str
    node_id: str
    hit: SearchHit
    kind: str  # "page" or "video_segment"
    page_key: str = ""
    page: Image.Image | None = None
    shown: list[ImageRef] = field(default_factory=list)
    frame_times: list[float] = field(default_factory=list)
    frame_boxes: list[list[int]] = field(default_factory=list)

    def view(self) -> dict[str, Any]:
        """What a UI shows of the candidate (no pixels)."""
        meta = self.hit.metadata or {}
        view = {"label": self.label, "kind": self.kind, "ref_id": self.hit.page_id, "doc_id": self.hit.doc_id,
                "page_number": self.hit.page_number, "score": self.hit.score}
        if self.kind == "video_segment":
            view.update(time_range=[meta.get("start_s"), meta.get("end_s")], frame_times=self.frame_times)
        return view


class GraphMemory:
    """See the module doc. Implements `vrag_rl.agent.engine.Memory`."""

    def __init__(self, question: str, prompts: VimPrompts, pages: PageImageStore, energy: EnergyConfig,
                 resize_factor: int):
        self.graph = MemoryGraph(question)
        self.prompts, self.pages, self.energy, self.resize_factor = prompts, pages, energy, resize_factor
        self.pixels: dict[str, tuple[str, Image.Image]] = {}  # memory item id → (page key, page or sheet)
        self.candidates: dict[str, Candidate] = {}
        self.pending: list[str] = []  # searched nodes waiting for their summary
        self.tail: list[Message] = []  # this step's messages after the rebuilt context
        self.allocations: list[Allocation] = []  # the memory that went into the last context
        self._labels = {"page": 0, "video_segment": 0}

    # ---- the Memory interface ------------------------------------------------------------------------------
    def context(self) -> list[Message]:
        messages, self.allocations = build_context(self.graph, self.pixels, self.pages, self.energy, self.prompts,
                                                   self.resize_factor)
        return messages + self.tail

    def add_reply(self, text: str) -> None:
        self.tail.append({"role": "assistant", "content": text})

    def add_feedback(self, text: str) -> None:
        self.tail.append({"role": "user", "content": [text_part(text)]})

    def evidence(self) -> list[dict[str, Any]]:
        """Memorised items on the root→answer path (all memorised items when there is no answer)."""
        path = self.graph.answer_path() or set(self.graph.nodes)
        return [{"node_id": n.node_id, "label": i.label, "kind": i.kind, "ref_id": i.ref_id, "doc_id": i.doc_id,
                 "page_number": i.page_number, "region": i.region, "time_range": i.time_range,
                 "key_timestamps": i.key_timestamps, "priority": i.priority}
                for n, i in self.graph.items() if n.node_id in path]

    def credit_graph(self, records: list[TurnRecord]) -> CreditGraph:
        """The memory graph itself (its nodes name the turns that made them; `records` add nothing)."""
        return self.graph.to_credit_graph()

    # ---- what the tools do to it ------------------------------------------------------------------------------
    def add_observation(self, content: list[dict[str, Any]]) -> None:
        """A tool result (the searches' `<tool_response>`): shown until the step's summary."""
        self.tail.append({"role": "user", "content": content})

    def settle(self, keep_reply: bool) -> None:
        """After a reply's tools ran: with nothing waiting, the next context is the graph alone (plus the
        reply, when `keep_reply`, so the model sees what it wrote beside the feedback on it)."""
        if not self.pending:
            self.tail = [self.tail[-1]] if keep_reply else []

    def new_candidate(self, node_id: str, hit: SearchHit) -> Candidate:
        kind = "video_segment" if (hit.metadata or {}).get("kind") == "video_segment" else "page"
        self._labels[kind] += 1
        label = f"{'Video' if kind == 'video_segment' else 'Picture'} {self._labels[kind]}"
        return Candidate(label, node_id, hit, kind)

    def memorize(self, targets: list[str], summary: str, entries: list[MemorizeEntry],
                 turn_index: int) -> tuple[list[MemoryItem], list[str]]:
        """Summarise the `targets` nodes and keep the useful entries' items; (stored items, problems)."""
        by_node: dict[str, list[MemoryItem]] = {t: [] for t in targets}
        problems = []
        for entry in entries:
            candidate = self.candidates.get(entry.information_id)
            if candidate is None or candidate.node_id not in by_node:
                known = [c.label for c in self.candidates.values() if c.node_id in by_node]
                problems.append(f"unknown information_id {entry.information_id!r} (known: {known})")
                continue
            if not entry.is_useful or entry.priority <= 0:
                continue
            try:
                item = _memory_item(candidate, entry)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            by_node[candidate.node_id].append(item)
            assert candidate.page is not None  # a candidate is registered only once its pixels are fetched
            self.pixels[item.item_id] = (candidate.page_key, candidate.page)
        stored: list[MemoryItem] = []
        for target, items in by_node.items():
            items = list({i.item_id: i for i in items}.values())  # the same label twice: keep the last
            self.graph.summarize(target, summary, items, turn_index=turn_index)
            stored.extend(items)
            self.pending.remove(target)
        return stored, problems


def _memory_item(candidate: Candidate, entry: MemorizeEntry) -> MemoryItem:
    hit, meta, page = candidate.hit, candidate.hit.metadata or {}, candidate.page
    assert page is not None
    base: dict[str, Any] = {"label": candidate.label, "ref_id": hit.page_id, "doc_id": hit.doc_id,
                            "page_number": hit.page_number, "priority": min(5.0, entry.priority),
                            "image_url": hit.image_url, "page_size": [page.width, page.height]}
    item_id = f"{candidate.node_id}/{candidate.label}"
    if candidate.kind == "video_segment":
        start, end = float(meta.get("start_s", 0.0)), float(meta.get("end_s", 0.0))
        picked = list(range(len(candidate.frame_times)))
        if entry.key_timestamps:  # nearest frame to each asked second (upstream matched 1-decimal strings)
            times = candidate.frame_times
            picked = sorted({min(picked, key=lambda i: abs(times[i] - t)) for t in entry.key_timestamps})
        return MemoryItem(item_id=item_id, kind="video_segment", time_range=[start, end],
                          key_timestamps=[candidate.frame_times[i] for i in picked],
                          frame_boxes=[candidate.frame_boxes[i] for i in picked], **base)
    if entry.region is not None:
        shown = candidate.shown[0]
        box, _ = map_bbox_to_page(entry.region, shown.shown_size, shown.page_box, shown.page_size, 0, 28)
        return MemoryItem(item_id=item_id, kind="crop", region=list(box), **base)
    return MemoryItem(item_id=item_id, kind="page", **base)
