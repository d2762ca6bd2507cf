"""Render agent events with Streamlit. One function per event type; unknown types are shown as JSON,
so a new agent's events appear (plainly) before anyone writes a renderer for them."""
from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import streamlit as st

from vrag_rl.agent.events import AgentEvent
from vrag_rl.agent.images import draw_box

# Pages and crops are drawn as wide as their column (a page and its crop side by side, two pages per row at
# least), never wider, at their own aspect ratio. A fixed width in pixels (440, before) ran past a narrow
# column, and a page that is mostly white paper then read as a small drawing in a tall blank frame.
# Streamlit >= 1.46 sizes elements with `width="stretch"`; before, with `use_container_width=True`.
IMAGE_LAYOUT: dict[str, Any] = (dict(width="stretch")
                                if isinstance(inspect.signature(st.image).parameters["width"].default, str)
                                else dict(use_container_width=True))
# White pages on a white app have no visible edge: give every page and crop a thin frame of its own.
PAGE_STYLE = """<style>
[data-testid="stImage"] img { border: 1px solid rgba(49, 51, 63, 0.25); border-radius: 2px;
                              box-shadow: 0 1px 4px rgba(49, 51, 63, 0.12); }
</style>"""


def page_style() -> None:
    """Draw the frame around page images (call once per run, before the images)."""
    st.markdown(PAGE_STYLE, unsafe_allow_html=True)


def render_think(event) -> None:
    st.markdown(f"**Thinking** (turn {event.turn})")
    st.caption(event.text)


def render_search(event) -> None:
    st.markdown("**Search:** " + " | ".join(f"`{q}`" for q in event.queries))


def render_search_results(event) -> None:
    if not event.shown:
        st.info(f"No new page: {event.message}")
        return
    columns = st.columns(max(2, len(event.shown)))
    for column, ref in zip(columns, event.shown):
        with column:
            st.image(ref.image, caption=f"retrieved page {ref.page_id}", **IMAGE_LAYOUT)


def render_crop(event) -> None:
    source, crop = event.source, event.crop
    width, height = source.shown_size
    page_w, page_h = source.page_size
    st.markdown(f"**Zoom** into `{[round(v) for v in event.bbox]}` of {source.page_id} — in the model's frame "
                f"(the {width}×{height} image it was shown)")
    left, right = st.columns(2)
    with left:
        st.image(draw_box(source.image, tuple(int(v) for v in event.bbox), width=4),
                 caption=f"where the agent looked (model frame, {width}×{height})", **IMAGE_LAYOUT)
    with right:
        st.image(crop.image, caption=f"zoomed crop — page pixels {list(crop.page_box)} of the {page_w}×{page_h} page",
                 **IMAGE_LAYOUT)


# Phrasings of "the documents do not say" (the stand-in's own, and common VLM ones): shown as a
# not-found result, not as an answer with evidence.
_NOT_FOUND = re.compile(r"\b(could not|couldn't|cannot|can't|unable to|did not|didn't) (find|locate|determine)\b|"
                        r"\b(not|no) (found|mentioned|stated|available|information|answer)\b", re.IGNORECASE)


def is_not_found(answer: str) -> bool:
    """Whether an answer says that the documents do not hold the answer."""
    return bool(_NOT_FOUND.search(answer or "")) and len(answer) < 200


def render_answer(event) -> None:
    pages = [e["page_id"] for e in event.evidence]
    if is_not_found(event.answer):
        st.warning(f"**Not found:** {event.answer}")
        if pages:
            st.caption("Pages looked at (none held the answer): " + ", ".join(f"`{p}`" for p in pages))
        return
    st.success(f"**Answer:** {event.answer}" + (" (forced at the turn budget)" if event.forced else ""))
    if event.evidence:
        lines = [f"- `{e['page_id']}`" + (f" — zoomed regions (page pixels) {e['crops']}" if e["crops"] else "")
                 for e in event.evidence]
        st.markdown("**Evidence**\n" + "\n".join(lines))


def render_probable_region(answer, last_crop) -> None:
    """Under a not-found answer: the last region the agent zoomed into, highlighted on its page — where the
    answer probably is, though no page stated it (the stand-in zooms there before it gives up)."""
    if last_crop is None or not is_not_found(answer.answer):
        return
    source = last_crop.source
    st.info(f"**The answer is probably here:** the region the agent zoomed into last, on {source.page_id} "
            f"(page pixels {list(last_crop.crop.page_box)}).")
    st.image(draw_box(source.image, tuple(int(v) for v in last_crop.bbox), width=4),
             caption=f"probable region on {source.page_id}", **IMAGE_LAYOUT)


def render_error(event) -> None:
    text = f"{event.kind.replace('_', ' ')}: {event.message}"
    (st.error if event.fatal else st.warning)(text)


def render_finish(event) -> None:
    st.caption(f"{event.status} in {event.turns} turn(s), {event.elapsed_s:.1f} s")


RENDERERS: dict[str, Callable[[Any], None]] = {
    "think": render_think,
    "search": render_search,
    "search_results": render_search_results,
    "crop": render_crop,
    "answer": render_answer,
    "error": render_error,
    "finish": render_finish,
    "start": lambda event: None,
}


def render_event(event: AgentEvent) -> None:
    renderer = RENDERERS.get(event.type)
    if renderer is None:
        st.json(event.to_dict(), expanded=False)
    else:
        renderer(event)
