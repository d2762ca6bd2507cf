"""The context rebuilt from the graph: what goes in, and that it stays within the pixel budget."""
from __future__ import annotations

import json

from PIL import Image

from vimrag.context import build_context, conversation_stats
from vimrag.energy import EnergyConfig
from vimrag.graph import MemoryGraph, MemoryItem
from vrag_rl.agent.page_images import PageImageStore
from vrag_rl.agent.policy import message_images


def _memory_graph():
    g = MemoryGraph("What is the Kestrel code?")
    pixels = {}
    page = Image.new("RGB", (1600, 1200), "white")
    sheet = Image.new("RGB", (640, 240), "gray")
    for n in range(1, 7):
        node = f"s{n}"
        g.add_search_node(node, f"query {n}", [f"s{n - 1}"] if n > 1 else ["root"])
        if n == 3:
            item = MemoryItem(item_id=f"{node}/Video 1", kind="video_segment", label="Video 1", ref_id="clip_2",
                              doc_id="clip", page_number=2, priority=5, time_range=[10.0, 20.0],
                              key_timestamps=[12.0, 14.0], frame_boxes=[[0, 0, 320, 240], [320, 0, 640, 240]])
            pixels[item.item_id] = ("clip_2@sheet", sheet)
        else:
            item = MemoryItem(item_id=f"{node}/Picture {n}", kind="crop" if n == 6 else "page", label=f"Picture {n}",
                              ref_id=f"doc_{n}", doc_id="doc", page_number=n, priority=n % 5 + 1,
                              region=[100, 100, 900, 500] if n == 6 else None)
            pixels[item.item_id] = (f"doc_{n}@page", page)
        g.summarize(node, f"summary {n}", [item])
    return g, pixels


def test_context_holds_question_graph_and_top_memory_within_budget():
    graph, pixels = _memory_graph()
    energy = EnergyConfig(memory_top_k=4, total_pixels=600_000, max_pixels_image=300_000, max_pixels_video=100_000)
    messages, allocations = build_context(graph, pixels, PageImageStore(), energy, factor=28)
    assert [m["role"] for m in messages] == ["system", "user"]
    texts = [p["text"] for p in messages[1]["content"] if p["type"] == "text"]
    assert texts[0].startswith("Question: What is the Kestrel code?\n\n### Memory graph\n")
    assert json.loads(texts[0].split("\n")[3]) == graph.prompt_view()
    assert len(allocations) == 4  # top-k of six items
    images = message_images(messages)
    video = next(a for a in allocations if a.item.kind == "video_segment")
    assert "<12 seconds>" in texts and "<14 seconds>" in texts  # both kept frames, each labelled
    assert len(images) == 3 + 2
    for allocation in allocations:
        assert allocation.pixels <= (100_000 if allocation.item.kind == "video_segment" else 300_000)
    assert sum(i.width * i.height for i in images) <= energy.total_pixels
    assert all(i.width % 28 == 0 and i.height % 28 == 0 for i in images)
    assert any(f"Node: {video.node_id} | Video 1: video clip 10-20s, frames at 12s, 14s" == t for t in texts)
    crop = next((a for a in allocations if a.item.kind == "crop"), None)
    if crop is not None:
        assert any("region [100, 100, 900, 500]" in t for t in texts)
    stats = conversation_stats(messages, 28)
    assert stats.images == 5 and stats.image_pixels == sum(i.width * i.height for i in images)
    assert stats.image_tokens == stats.image_pixels // 784 and stats.text_tokens > 0


def test_empty_graph_context_is_text_only():
    messages, allocations = build_context(MemoryGraph("q?"), {}, PageImageStore())
    assert allocations == [] and message_images(messages) == []
    assert "Memory graph" in messages[1]["content"][0]["text"]
