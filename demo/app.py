"""VRAG demo: ask a question, watch the agent think, search, zoom and answer.

Run through ./run_demo.sh (it starts the search and policy servers), or
`streamlit run demo/app.py` with VRAG_POLICY_URL / VRAG_SEARCH_URL pointing at running servers.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st  # noqa: E402

from demo.corpus_panel import corpus_panel  # noqa: E402
from demo.render import render_event  # noqa: E402
from demo.settings import DemoSettings  # noqa: E402


@st.cache_resource(max_entries=4, show_spinner=False)
def _cached_agent(policy_url: str, model: str, api_key: str, search_url: str):
    from vrag_rl import VRAG

    return VRAG(base_url=policy_url, search_url=search_url, model=model or None, api_key=api_key or None)


def make_agent(settings: DemoSettings):
    """The agent behind the page, kept across questions (its HTTP clients, decoded pages and image
    encodings are reused); per-question knobs go to `stream()`. Another agent plugs in here as long
    as it streams typed events."""
    return _cached_agent(settings.policy_url, settings.model, settings.api_key, settings.search_url)


def sidebar() -> DemoSettings:
    defaults = DemoSettings()
    with st.sidebar:
        st.header("Settings")
        policy_url = st.text_input("Policy endpoint (OpenAI-compatible)", defaults.policy_url, key="policy_url")
        model = st.text_input("Model name (empty: ask the server)", defaults.model, key="model")
        api_key = st.text_input("API key", defaults.api_key, type="password", key="api_key")
        search_url = st.text_input("Search server", defaults.search_url, key="search_url")
        max_turns = st.slider("Max turns", 1, 20, defaults.max_turns, key="max_turns")
        top_k = st.slider("Search top-k", 1, 20, defaults.top_k, key="top_k")
        min_pixels = st.number_input("Min pixels per image", 28 * 28, 4096 * 28 * 28, defaults.min_pixels, step=28 * 28,
                                     key="min_pixels")
        max_pixels = st.number_input("Max pixels per image", 28 * 28, 4096 * 28 * 28, defaults.max_pixels,
                                     step=28 * 28, key="max_pixels")
        crop_padding = st.number_input("Crop padding (page px)", 0, 500, defaults.crop_padding, key="crop_padding")
    if max_pixels < min_pixels:
        st.sidebar.error("max pixels must be at least min pixels; using min pixels for both")
        max_pixels = min_pixels
    return DemoSettings(policy_url=policy_url, model=model, api_key=api_key, search_url=search_url,
                        index_dir=defaults.index_dir, upload_dir=defaults.upload_dir, max_turns=max_turns,
                        top_k=top_k, min_pixels=int(min_pixels), max_pixels=int(max_pixels),
                        crop_padding=int(crop_padding))


def run_question(settings: DemoSettings, question: str) -> None:
    events = []
    with st.container(border=True):
        st.markdown(f"### {question}")
        try:
            for event in make_agent(settings).stream(question, **settings.episode_overrides()):
                events.append(event)
                render_event(event)
        except Exception as exc:  # noqa: BLE001 - the user sees a message, not a stack trace
            st.error(f"the agent stopped: {exc}")
    finish = next((e for e in reversed(events) if e.type == "finish"), None)
    answer = next((e.answer for e in reversed(events) if e.type == "answer"), None)
    st.session_state.history.append({
        "question": question,
        "answer": answer,
        "status": finish.status if finish else "failed",
        "trajectory": [e.to_dict() for e in events],
    })


def history_panel() -> None:
    history = st.session_state.history
    if not history:
        return
    st.divider()
    st.subheader("History")
    for i, item in enumerate(reversed(history)):
        index = len(history) - 1 - i
        with st.expander(f"{item['question']} → {item['answer'] or item['status']}", expanded=False):
            st.download_button("Download trajectory (JSON)", json.dumps(item, indent=1), key=f"download_{index}",
                               file_name=f"trajectory_{index + 1}.json", mime="application/json")


def main() -> None:
    st.set_page_config(page_title="VRAG demo", page_icon="🔎", layout="wide")
    st.session_state.setdefault("history", [])
    settings = sidebar()
    st.title("VRAG — visual retrieval-augmented reasoning")
    st.caption("The agent searches the page images, zooms into the region that holds the answer, and answers "
               "with its evidence.")
    corpus_panel(settings)
    with st.form("ask", clear_on_submit=False):
        question = st.text_input("Question", key="question",
                                 placeholder="e.g. What satisfaction score did the Riverside district get?")
        submitted = st.form_submit_button("Ask")
    if submitted:
        if not question.strip():
            st.warning("Type a question first.")
        else:
            run_question(settings, question.strip())
    history_panel()


main()
