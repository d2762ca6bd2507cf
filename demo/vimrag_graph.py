"""The live memory graph panel of the VimRAG demo: the graph as Graphviz DOT, drawn by Streamlit.

`st.graphviz_chart` renders DOT with the Graphviz WASM build bundled inside Streamlit (no CDN at
run time: the demo works offline) and, being a native element, never triggers a rerun that would
cut a streaming episode short (interactive components such as React Flow do on mount). The DOT
is built with the `graphviz` package (no system Graphviz needed). Nodes by type — the question
(purple ellipse), search nodes (cyan boxes: id, query, summary, kept memory), the answer (orange);
the root→answer path in bold; hovering a node shows its full summary and memory (SVG tooltip).
Memory thumbnails are listed under the graph (`node_details`).
"""
from __future__ import annotations

import textwrap
from typing import Any

import streamlit as st

COLOURS = {"root": "#ede7f6", "search": "#e0f7fa", "answer": "#fff3e0"}
BORDERS = {"root": "#7e57c2", "search": "#00acc1", "answer": "#fb8c00"}
SHAPES = {"root": "ellipse", "search": "box", "answer": "ellipse"}
WRAP = 34


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(str(text).split()).replace("\\", "\\\\")  # Graphviz reads \l, \N... as escapes
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrap(text: str, limit: int) -> str:
    return "\n".join(textwrap.wrap(_short(text, limit), WRAP)) or " "


def node_label(node: dict[str, Any]) -> str:
    """The text inside a node (Graphviz escapes it: model text cannot become markup)."""
    if node["kind"] == "root":
        return "question\n" + _wrap(node["label"], 120)
    if node["kind"] == "answer":
        return "answer\n" + _wrap(node["label"], 80)
    parts = [f"{node['id']}: " + _wrap(node["label"], 70)]
    if node.get("summary"):
        parts.append("— " + _wrap(node["summary"], 90))
    if node.get("items"):
        parts.append("memory: " + ", ".join(i["label"] for i in node["items"]))
    return "\n".join(parts)


def node_tooltip(node: dict[str, Any]) -> str:
    lines = [node["label"]]
    if node.get("summary"):
        lines.append("summary: " + node["summary"])
    for item in node.get("items", []):
        lines.append(f"{item['label']}: {item['ref_id']} (priority {item['priority']:g})")
    return "\n".join(lines)[:1000]


def to_dot(graph: dict[str, Any]):
    """A `graphviz.Digraph` for a `MemoryGraph.export()` dict."""
    import graphviz

    dot = graphviz.Digraph("memory_graph", graph_attr={"rankdir": "TB", "bgcolor": "transparent", "nodesep": "0.3"},
                           node_attr={"fontname": "Helvetica", "fontsize": "10", "style": "filled,rounded",
                                      "margin": "0.12,0.06"},
                           edge_attr={"color": "#90a4ae", "arrowsize": "0.7"})
    on_path = {n["id"] for n in graph.get("nodes", []) if n.get("on_answer_path")}
    for node in graph.get("nodes", []):
        kind = node["kind"]
        dot.node(node["id"], node_label(node), shape=SHAPES[kind], fillcolor=COLOURS[kind], color=BORDERS[kind],
                 penwidth="2" if node["id"] in on_path else "1", tooltip=node_tooltip(node), id=f"node_{node['id']}")
    for edge in graph.get("edges", []):
        bold = edge["source"] in on_path and edge["target"] in on_path and graph.get("answer_id")
        dot.edge(edge["source"], edge["target"], **({"color": "#fb8c00", "penwidth": "2"} if bold else {}))
    return dot


def draw_graph(graph: dict[str, Any], slot=None) -> None:
    """Draw (or redraw, into `slot`) the graph."""
    target = slot if slot is not None else st
    if not graph.get("nodes"):
        target.caption("The memory graph appears here as the agent works.")
        return
    target.graphviz_chart(to_dot(graph), width="stretch")


def node_details(graph: dict[str, Any], thumbnails: dict[str, list]) -> None:
    """Full summaries and kept memory (thumbnails with provenance) per search node."""
    for node in graph.get("nodes", []):
        if node["kind"] != "search":
            continue
        marker = " ★" if node.get("on_answer_path") else ""
        with st.expander(f"{node['id']}{marker}: {_short(node['label'], 60)}", expanded=False):
            st.markdown(f"**Summary:** {node.get('summary') or '—'}")
            for item in node.get("items", []):
                where = (f"{item['time_range'][0]:g}–{item['time_range'][1]:g} s, frames at "
                         f"{', '.join(f'{t:g}' for t in item['key_timestamps'])} s" if item.get("time_range")
                         else (f"region {item['region']}" if item.get("region") else "whole page"))
                st.caption(f"{item['label']} — {item['ref_id']} ({where}), priority {item['priority']:g}")
            images = thumbnails.get(node["id"], [])
            if images:
                st.image([ref.image for ref in images], caption=[ref.image_id for ref in images], width=150)
