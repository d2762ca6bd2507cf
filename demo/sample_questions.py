"""Sample questions as buttons: one click fills the question box and asks.

The questions come from a question file in upstream's `rag_dataset.json` layout — by default the
sample corpus's (`run_demo.sh` passes its path as VRAG_SAMPLE_QUESTIONS) — and only those whose
document is in the index are offered, so a user's own index does not get questions it cannot answer.
"""
from __future__ import annotations

import inspect
import json
import os
from collections.abc import Iterable
from pathlib import Path

import streamlit as st

from search_engine.corpus import doc_id_for

DEFAULT_FILE = "data/sample_corpus/pdf/rag_dataset.json"
ASK_KEY = "_sample_question_to_ask"  # session state: the question a button asked, read once by the app
# each button as wide as its column, its whole question on as many lines as it needs (Streamlit ≥ 1.50 names
# these `width` and `wrap`; before, `use_container_width`, and labels wrapped by themselves)
_BUTTON_PARAMETERS = inspect.signature(st.button).parameters
BUTTON_LAYOUT = (dict(width="stretch", wrap=True) if {"width", "wrap"} <= set(_BUTTON_PARAMETERS)
                 else dict(use_container_width=True))


def questions_file() -> Path:
    return Path(os.environ.get("VRAG_SAMPLE_QUESTIONS") or DEFAULT_FILE)


def load_sample_questions(path: str | Path | None = None, doc_ids: Iterable[str] | None = None,
                          limit: int = 9) -> list[str]:
    """Up to `limit` questions of the file (`{"examples": [{"query", "meta_info": {"file_name"}}]}`, or a
    plain list of such examples), keeping those whose document is among `doc_ids` when that is given.
    A missing or unreadable file gives no questions: the buttons are a convenience, never an error."""
    try:
        data = json.loads(Path(path or questions_file()).read_text())
    except (OSError, ValueError):
        return []
    examples = data.get("examples", []) if isinstance(data, dict) else data
    known = set(doc_ids) if doc_ids is not None else None
    questions: list[str] = []
    for example in examples if isinstance(examples, list) else []:
        if not isinstance(example, dict) or not isinstance(example.get("query"), str):
            continue
        file_name = (example.get("meta_info") or {}).get("file_name") or ""
        if known is not None and file_name and doc_id_for(file_name) not in known:
            continue
        if example["query"].strip() and example["query"] not in questions:
            questions.append(example["query"].strip())
    return questions[:limit]


def _ask(question: str, input_key: str) -> None:
    # a callback runs before the rerun draws the widgets, so the question box may still be written here
    st.session_state[input_key] = question
    st.session_state[ASK_KEY] = question


def sample_question_buttons(questions: list[str], input_key: str = "question", columns: int = 3) -> None:
    """A grid of buttons, one per question; a click puts the question into the box `input_key` and
    asks it (`take_clicked_question` returns it on the rerun the click starts)."""
    if not questions:
        return
    st.caption("Try a sample question:")
    grid = st.columns(min(columns, len(questions)))
    for i, question in enumerate(questions):
        with grid[i % len(grid)]:
            st.button(question, key=f"sample_{i}", on_click=_ask, args=(question, input_key), **BUTTON_LAYOUT)


def take_clicked_question() -> str | None:
    """The question a sample button asked on this run, once (None when no button was clicked)."""
    return st.session_state.pop(ASK_KEY, None)
