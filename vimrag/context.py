"""The context rebuilt from the graph every turn: instructions, question, graph JSON, memory images.

This is why VimRAG's context stays small: instead of a transcript that grows with every page
ever shown, each turn sends the system prompt, the question, the graph as compact JSON, and only
the top-energy memory items at the resolution their energy buys (`vimrag.energy`). Images are
resized with the project's `smart_resize` rule, so the pixels counted are the pixels sent.

`conversation_stats` measures any processor-form conversation the same way, so the VRAG
transcript and the VimRAG context are compared with one ruler (`scripts/compare_context.py`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from PIL import Image

from vimrag.energy import Allocation, EnergyConfig, allocate_pixels
from vimrag.graph import MemoryGraph, MemoryItem
from vimrag.prompts import VimPrompts
from vrag_rl.agent.events import Box
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policy import Message, image_part, text_part

CHARS_PER_TOKEN = 4.0  # no tokenizer offline: ~4 characters of English per BPE token (documented estimate)


@dataclass(frozen=True)
class ContextStats:
    """Size of one model call's input: text (characters, estimated tokens) and images (pixels, tokens)."""

    text_chars: int
    text_tokens: int
    images: int
    image_pixels: int
    image_tokens: int  # pixels / factor² (Qwen-VL: one token per merged factor×factor patch)

    @property
    def total_tokens(self) -> int:
        return self.text_tokens + self.image_tokens

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_tokens": self.total_tokens}


def conversation_stats(messages: list[Message], factor: int = 28) -> ContextStats:
    chars, images, pixels = 0, 0, 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                chars += len(part["text"])
            elif part.get("type") == "image":
                images += 1
                pixels += part["image"].width * part["image"].height
    return ContextStats(chars, math.ceil(chars / CHARS_PER_TOKEN), images, pixels, pixels // (factor * factor))


def provenance(item: MemoryItem) -> str:
    """A short human/model-readable origin of a memory item."""
    if item.kind == "video_segment" and item.time_range:
        stamps = ", ".join(f"{t:g}s" for t in item.key_timestamps)
        return (f"video {item.doc_id} {item.time_range[0]:g}-{item.time_range[1]:g}s"
                + (f", frames at {stamps}" if stamps else ""))
    where = f"document {item.doc_id} page {item.page_number}" if item.doc_id else item.ref_id
    if item.kind == "crop" and item.region:
        return f"{where}, region {item.region}"
    if item.kind == "text":
        return f"{where}: {item.text}"
    return where


def as_box(values: list[int] | list[float]) -> Box:
    """A region [x1, y1, x2, y2] (JSON lists) as the (x1, y1, x2, y2) int tuple images are cut with."""
    x1, y1, x2, y2 = (int(v) for v in values)
    return (x1, y1, x2, y2)


def item_views(item: MemoryItem, page_key: str, page: Image.Image, store: PageImageStore, factor: int,
               pixels_per_frame: int, min_pixels: int) -> list[tuple[str | None, Image.Image, str]]:
    """(caption, image, cache key) per image of an item at about `pixels_per_frame` pixels each.

    The budget is a target, not only a ceiling: a small crop with high energy is enlarged towards
    it (that is what makes a kept table row legible), between half the budget and the budget.
    """
    if item.kind == "text":
        return []
    boxes = item.frame_boxes if item.kind == "video_segment" else [
        list(item.region) if item.region else [0, 0, page.width, page.height]]
    captions = [f"<{t:g} seconds>" for t in item.key_timestamps] if item.kind == "video_segment" else [None]
    views = []
    for caption, box in zip(captions, boxes):
        lo = _lower_bound(box, factor, min_pixels, pixels_per_frame)
        image, key = store.view(page_key, page, as_box(box), factor, lo, pixels_per_frame)
        views.append((caption, image, key))
    return views


def _lower_bound(box: list[int], factor: int, min_pixels: int, budget: int) -> int:
    """Half the budget, unless enlarging a very thin box that far would overshoot the budget."""
    from vrag_rl.agent.images import smart_resize

    lo = max(min(min_pixels, budget), budget // 2)
    height, width = smart_resize(box[3] - box[1], box[2] - box[0], factor, lo, budget)
    return lo if height * width <= budget else min(min_pixels, budget)


def build_context(graph: MemoryGraph, pixels: Mapping[str, tuple[str, Image.Image]], store: PageImageStore,
                  energy: EnergyConfig | None = None, prompts: VimPrompts | None = None,
                  factor: int = 28) -> tuple[list[Message], list[Allocation]]:
    """[system, user(question, graph, memory)] for the current graph, and what memory went in.

    `pixels` maps a memory item id to (page cache key, decoded page or segment sheet); an item
    without pixels (a text passage, or pixels lost) is shown as text only.
    """
    energy = energy or EnergyConfig()
    prompts = prompts or VimPrompts()
    allocations = allocate_pixels(graph, energy)
    content: list[dict[str, Any]] = [text_part(prompts.question.format(question=graph.question) + "\n\n"
                                               + prompts.graph.format(graph=graph.prompt_json()))]
    if allocations:
        content.append(text_part("\n" + prompts.memory_header))
    for allocation in allocations:
        item = allocation.item
        content.append(text_part(prompts.memory_item.format(node_id=allocation.node_id, label=item.label,
                                                            provenance=provenance(item))))
        source = pixels.get(item.item_id)
        if source is None:
            continue
        for caption, image, key in item_views(item, source[0], source[1], store, factor,
                                              allocation.pixels_per_frame, energy.min_pixels):
            if caption:
                content.append(text_part(caption))
            content.append(image_part(image, f"{item.item_id}@{caption or 'image'}", key))
    content.append(text_part("\n" + prompts.next_step))
    return [{"role": "system", "content": prompts.system}, {"role": "user", "content": content}], allocations
