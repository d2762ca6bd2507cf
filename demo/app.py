"""VRAG demo: ask a question, watch the agent think, search, zoom and answer.

Run through ./run_demo.sh (it starts the search and policy servers), or
`streamlit run demo/app.py` with VRAG_POLICY_URL / VRAG_SEARCH_URL pointing at running servers.
"""
from __future__ import annotations

import json

import httpx
import streamlit as st

from demo.corpus_panel import corpus_panel
from demo.render import page_style, render_event, render_probable_region
from demo.sample_questions import load_sample_questions, sample_question_buttons, take_clicked_question
from demo.settings import DemoSettings


@st.cache_resource(max_entries=4, show_spinner=False)
def _cached_agent(policy_url: str, model: str, api_key: str, search_url: str):
    from vrag_rl import VRAG

    return VRAG(base_url=policy_url, search_url=search_url, model=model or None, api_key=api_key or None)


def make_agent(settings: DemoSettings):
    """The agent behind the page, kept across questions (its HTTP clients, decoded pages and image
    encodings are reused); per-question knobs go to `stream()`. Another agent plugs in here as long
    as it streams typed events."""
    return _cached_agent(settings.policy_url, settings.model, settings.api_key, settings.search_url)


STAND_IN_ID = "rule-based"
STAND_IN = "the rule-based stand-in (OCR + MiniLM extractive reader), not a VLM"
PLUG_IN = ("For real reasoning plug in a VLM: `./run_demo.sh --policy-url http://HOST:8001/v1 --model NAME` "
           "(vLLM, DashScope's compatible mode or any OpenAI-compatible API), or enter an endpoint in the sidebar.")


@st.cache_data(ttl=30, show_spinner=False)
def served_models(policy_url: str, api_key: str) -> tuple[list[str], str]:
    """The model ids the policy endpoint lists at /models, and an error text when it cannot be asked."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(policy_url.rstrip("/") + "/models", headers=headers, timeout=5)
        response.raise_for_status()
        return [str(m.get("id")) for m in response.json().get("data", [])], ""
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return [], str(exc)[:200]


def describe_policy(settings: DemoSettings) -> tuple[str, bool]:
    """(what answers, in words; whether it is the CPU stand-in rather than a VLM)."""
    models, error = served_models(settings.policy_url, settings.api_key)
    name = settings.model or (models[0] if models else "")
    if name == STAND_IN_ID or (settings.policy_kind and "stand-in" in settings.policy_kind and not settings.model):
        return f"{STAND_IN} at {settings.policy_url}", True
    if error and not name:
        return f"the endpoint {settings.policy_url} (not answering /models: {error})", False
    return f"model `{name or '?'}` at {settings.policy_url}" + (f" — {settings.policy_kind}" if settings.policy_kind
                                                                 else ""), False


def policy_banner(settings: DemoSettings) -> None:
    """Say plainly which policy answers, and how to plug in a real one when it is the stand-in."""
    text, stand_in = describe_policy(settings)
    if stand_in:
        st.warning(f"**Answering: {text}.** It reads the pages with OCR and answers with a value or the whole "
                   f"line it found; it does not reason. {PLUG_IN}", icon="⚙️")
    else:
        st.info(f"**Answering:** {text}", icon="🧠")


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
                        index_dir=defaults.index_dir, upload_dir=defaults.upload_dir,
                        policy_kind=defaults.policy_kind if policy_url == defaults.policy_url else "",
                        max_turns=max_turns,
                        top_k=top_k, min_pixels=int(min_pixels), max_pixels=int(max_pixels),
                        crop_padding=int(crop_padding))


def run_question(settings: DemoSettings, question: str) -> None:
    events = []
    with st.container(border=True):
        st.markdown(f"### {question}")
        try:
            last_crop = None
            for event in make_agent(settings).stream(question, **settings.episode_overrides()):
                events.append(event)
                render_event(event)
                if event.type == "crop":
                    last_crop = event
                elif event.type == "answer":
                    render_probable_region(event, last_crop)
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
    page_style()
    st.session_state.setdefault("history", [])
    settings = sidebar()
    st.title("VRAG — visual retrieval-augmented reasoning")
    st.caption("The agent searches the page images, zooms into the region that holds the answer, and answers "
               "with its evidence.")
    policy_banner(settings)
    documents = corpus_panel(settings)
    clicked = take_clicked_question()  # a sample button filled the box and asks it on this run
    with st.form("ask", clear_on_submit=False):
        question = st.text_input("Question", key="question",
                                 placeholder="e.g. What satisfaction score did the Riverside district get?")
        submitted = st.form_submit_button("Ask", key="ask_button")
    doc_ids = None if documents is None else [d["doc_id"] for d in documents]
    sample_question_buttons(load_sample_questions(doc_ids=doc_ids))
    if submitted or clicked:
        question = clicked or question
        if not question.strip():
            st.warning("Type a question first.")
        else:
            run_question(settings, question.strip())
    history_panel()


main()
