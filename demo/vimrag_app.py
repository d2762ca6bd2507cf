"""VimRAG demo: ask a question, watch the memory graph grow as the agent searches, memorises and answers.

Run through `./run_demo.sh vimrag` (it starts the search server and, without an endpoint or a
DASHSCOPE_API_KEY, the CPU stand-in policy), or `streamlit run demo/vimrag_app.py` with
VRAG_POLICY_URL / VRAG_SEARCH_URL pointing at running servers.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import streamlit as st

from demo.render import page_style
from demo.sample_questions import load_sample_questions, sample_question_buttons, take_clicked_question
from demo.vimrag_graph import draw_graph, node_details

IMAGE_WIDTH = 200


def _env_flag(name: str) -> bool | None:
    value = os.environ.get(name, "").strip().lower()
    return None if not value else value in ("1", "true", "yes", "on")


@dataclass
class VimSettings:
    policy_url: str = field(default_factory=lambda: os.environ.get("VRAG_POLICY_URL", "http://127.0.0.1:8001/v1"))
    model: str = field(default_factory=lambda: os.environ.get("VRAG_MODEL", ""))
    api_key: str = field(default_factory=lambda: os.environ.get("VRAG_API_KEY", ""))
    search_url: str = field(default_factory=lambda: os.environ.get("VRAG_SEARCH_URL", "http://127.0.0.1:8002"))
    enable_thinking: bool = field(default_factory=lambda: bool(_env_flag("VIMRAG_ENABLE_THINKING")))
    stream: bool = field(default_factory=lambda: bool(_env_flag("VIMRAG_STREAM")))
    max_turns: int = 20
    top_k: int = 3
    memory_pixels: int = 5 * 256 * 32 * 32
    memory_top_k: int = 5

    def agent(self):
        from vimrag import EnergyConfig, VimRAG

        return VimRAG(base_url=self.policy_url, search_url=self.search_url, model=self.model or None,
                      api_key=self.api_key or None, max_turns=self.max_turns, search_top_k=self.top_k,
                      enable_thinking=self.enable_thinking or None, stream=self.stream,
                      energy=EnergyConfig(total_pixels=self.memory_pixels, memory_top_k=self.memory_top_k))


def sidebar() -> VimSettings:
    d = VimSettings()
    with st.sidebar:
        st.header("Settings")
        policy_url = st.text_input("Policy endpoint (OpenAI-compatible)", d.policy_url)
        model = st.text_input("Model name (empty: ask the server)", d.model)
        api_key = st.text_input("API key", d.api_key, type="password")
        search_url = st.text_input("Search server", d.search_url)
        thinking = st.toggle("Enable thinking", d.enable_thinking)
        stream = st.toggle("Stream (SSE)", d.stream)
        max_turns = st.slider("Max turns", 5, 30, d.max_turns)
        top_k = st.slider("Search top-k", 1, 10, d.top_k)
        memory_pixels = st.number_input("Memory pixel budget", 28 * 28 * 4, 8_000_000, d.memory_pixels, step=32 * 32)
        memory_top_k = st.slider("Memory items per context", 1, 10, d.memory_top_k)
    return VimSettings(policy_url, model, api_key, search_url, thinking, stream, max_turns, top_k, int(memory_pixels),
                       memory_top_k)


@st.cache_data(ttl=30, show_spinner=False)
def indexed_documents(search_url: str) -> list[str] | None:
    """The search server's document ids (which sample questions it can answer); None when it cannot say."""
    import httpx

    try:
        response = httpx.get(search_url.rstrip("/") + "/documents", timeout=5)
        response.raise_for_status()
        return [str(d["doc_id"]) for d in response.json()]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None


# ---- the reasoning log ---------------------------------------------------------------------------------------


def render_event(event, thumbnails: dict[str, list]) -> None:
    kind = event.type
    if kind == "think":
        with st.expander(f"thinking (step {event.turn})", expanded=False):
            st.write(event.text)
    elif kind == "search":
        parents = ", ".join(event.parent_ids)
        st.markdown(f"**New node `{event.node_id}`** ← {parents}: search `{event.query}`")
    elif kind == "search_done":
        if not event.items:
            st.info(f"{event.node_id}: nothing found")
            return
        st.caption(f"{event.node_id} retrieved: " + ", ".join(
            f"{i['label']} = {i['ref_id']}" + (f" ({i['time_range'][0]:g}–{i['time_range'][1]:g} s)"
                                                if i.get("time_range") else "") for i in event.items))
        st.image([ref.image for ref in event.shown], width=IMAGE_WIDTH,
                 caption=[f"{ref.image_id} · {ref.page_id}" for ref in event.shown])
    elif kind == "memorize":
        st.markdown(f"**Memorised** ({', '.join(event.node_ids)}): {event.summary}")
        for node_id in event.node_ids:
            thumbnails.setdefault(node_id, [])
        owners = {i["label"]: i["item_id"].split("/", 1)[0] for i in event.items}
        for ref in event.thumbnails:  # image_id: "Picture 2" or "Video 1 <12 seconds>"
            label = " ".join(ref.image_id.split()[:2])
            thumbnails.setdefault(owners.get(label, event.node_ids[0]), []).append(ref)
        if event.thumbnails:
            st.image([ref.image for ref in event.thumbnails], width=IMAGE_WIDTH,
                     caption=[ref.image_id for ref in event.thumbnails])
    elif kind == "context":
        s = event.stats
        st.caption(f"context for step {event.turn}: {s['total_tokens']:,} tokens (text ≈{s['text_tokens']:,}, "
                   f"{s['images']} images, {s['image_pixels']:,} px)"
                   + (" · memory: " + ", ".join(f"{m['node_id']}/{m['label']} ({m['pixels']:,} px)"
                                                for m in event.memory) if event.memory else ""))
    elif kind == "answer":
        st.success(f"**Answer:** {event.answer}" + (" (forced at the step budget)" if event.forced else ""))
        if event.evidence:
            st.markdown("**Evidence** (memory on the answer path)\n" + "\n".join(
                f"- `{e['ref_id']}` ({e['label']}, node {e['node_id']})" for e in event.evidence))
    elif kind == "error":
        (st.error if event.fatal else st.warning)(f"{event.kind.replace('_', ' ')}: {event.message}")
    elif kind == "max_turns":
        st.error(event.message or "turn budget spent")
    elif kind == "finish":
        st.caption(f"{event.status} in {event.turns} turn(s), {event.elapsed_s:.1f} s")


def show_episode(question: str, events, thumbnails: dict[str, list], store: list) -> dict:
    """Render an episode's events (live from the agent, or stored ones after a rerun); returns the final graph."""
    graph: dict = {}
    st.markdown(f"### {question}")
    log_column, graph_column = st.columns([1, 1])
    with graph_column:
        st.subheader("Memory graph")
        graph_slot = st.empty()
    try:
        with log_column:
            st.subheader("Reasoning")
            for event in events:
                store.append(event)
                render_event(event, thumbnails)
                if getattr(event, "graph", None):
                    graph = event.graph
                    draw_graph(graph, graph_slot)
    except Exception as exc:  # noqa: BLE001 - the user sees a message, not a stack trace
        st.error(f"the agent stopped: {exc}")
    with graph_column:
        node_details(graph, thumbnails)
    return graph


def run_question(settings: VimSettings, question: str) -> None:
    events: list = []
    graph = show_episode(question, settings.agent().stream(question), {}, events)
    finish = next((e for e in reversed(events) if e.type == "finish"), None)
    answer = next((e.answer for e in reversed(events) if e.type == "answer"), None)
    st.session_state.last = {"question": question, "events": events}
    st.session_state.history.append({"question": question, "answer": answer,
                                     "status": finish.status if finish else "failed", "graph": graph,
                                     "trajectory": [e.to_dict() for e in events]})


def history_panel() -> None:
    history = st.session_state.history
    if not history:
        return
    st.divider()
    st.subheader("History")
    for index in range(len(history) - 1, -1, -1):
        item = history[index]
        with st.expander(f"{item['question']} → {item['answer'] or item['status']}", expanded=False):
            st.download_button("Download trajectory and graph (JSON)", json.dumps(item, indent=1),
                               key=f"download_{index}", file_name=f"vimrag_{index + 1}.json",
                               mime="application/json")


def main() -> None:
    st.set_page_config(page_title="VimRAG demo", page_icon="🧠", layout="wide")
    page_style()
    st.session_state.setdefault("history", [])
    settings = sidebar()
    st.title("VimRAG — reasoning as a memory graph")
    st.caption("Each step the agent sees the question, the graph so far and only its most useful memories "
               "(pages, crops, video frames) at a resolution set by their energy; the graph grows on the right.")
    kind = os.environ.get("VRAG_POLICY_KIND", "").strip()
    if kind and settings.policy_url == os.environ.get("VRAG_POLICY_URL"):
        st.info(f"Policy: the {kind}. Give `./run_demo.sh vimrag --policy-url URL --model NAME`, or set "
                "DASHSCOPE_API_KEY, for a real VLM.")
    clicked = take_clicked_question()  # a sample button filled the box and asks it on this run
    with st.form("ask", clear_on_submit=False):
        question = st.text_input("Question", key="question",
                                 placeholder="e.g. How much power does the Kestrel Ridge solar plant produce?")
        submitted = st.form_submit_button("Ask", key="ask_button")
    sample_question_buttons(load_sample_questions(doc_ids=indexed_documents(settings.search_url)))
    if clicked or (submitted and question.strip()):
        run_question(settings, (clicked or question).strip())
    else:
        if submitted:
            st.warning("Type a question first.")
        last = st.session_state.get("last")
        if last:  # a rerun (a widget touched): show the last episode again instead of losing it
            show_episode(last["question"], list(last["events"]), {}, [])
    history_panel()


main()
