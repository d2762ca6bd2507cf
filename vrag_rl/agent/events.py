"""Typed step events of an episode: what a UI renders, what a trajectory log stores.

Every event is a dataclass with a `type` tag and `to_dict()` giving JSON-safe data, so the
Streamlit demo, the evaluation logs and the RL rollout all read the same stream. Images are
referenced by `ImageRef` (page id, file path, crop box in page pixels); the PIL image itself
rides along in `ImageRef.image` for in-process consumers and is never serialised.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from PIL import Image

Box = tuple[int, int, int, int]

# How an episode can end (`vrag_rl.agent.result.EPISODE_STATUSES` lists them).
EpisodeStatus = Literal["answered", "forced_answer", "token_budget", "failed"]


@dataclass
class ImageRef:
    """An image the model was shown: a full page or a crop of one.

    `page_box` is the crop's region in the original page's pixel frame (the full page when the
    image is not a crop); `shown_size` is the (width, height) the model actually received, in
    which its next <bbox> coordinates are written.
    """

    image_id: str  # "img-0", "img-1", ... in the order shown to the model
    page_id: str
    image_path: str  # the page image as results name it: its URL on the search server, else the page id
    page_size: tuple[int, int]  # (width, height) of the original page
    page_box: Box  # (x1, y1, x2, y2) in page pixels
    shown_size: tuple[int, int]
    is_crop: bool = False
    parent_image_id: str | None = None  # the image the crop was cut from
    image: Image.Image | None = field(default=None, repr=False, compare=False)
    cache_key: str | None = field(default=None, repr=False, compare=False)  # names these exact pixels

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("image", "cache_key")}


@dataclass
class AgentEvent:
    type: str = field(init=False, default="event")
    turn: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = _to_jsonable(value)
        return out


def _to_jsonable(value: Any) -> Any:
    if isinstance(value, ImageRef):
        return value.to_dict()
    if isinstance(value, AgentEvent):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_jsonable(v) for k, v in value.items()}
    if hasattr(value, "__dataclass_fields__"):
        return _to_jsonable(asdict(value))
    return value


@dataclass
class EpisodeStarted(AgentEvent):
    type: str = field(init=False, default="start")
    episode_id: str = ""
    question: str = ""


@dataclass
class ThinkEvent(AgentEvent):
    type: str = field(init=False, default="think")
    text: str = ""


@dataclass
class SearchEvent(AgentEvent):
    """The model asked for a search (one or several queries, RAG-R1 style)."""

    type: str = field(init=False, default="search")
    queries: list[str] = field(default_factory=list)


@dataclass
class SearchResultsEvent(AgentEvent):
    """What the engine returned, and which new page image(s) the model is now shown."""

    type: str = field(init=False, default="search_results")
    queries: list[str] = field(default_factory=list)
    hits: list[list[dict[str, Any]]] = field(default_factory=list)  # per query: page_id, score, ...
    shown: list[ImageRef] = field(default_factory=list)
    message: str = ""  # e.g. "all results were already seen"


@dataclass
class CropEvent(AgentEvent):
    """A <bbox> was applied: `bbox` as the model wrote it (in the source image's shown frame)."""

    type: str = field(init=False, default="crop")
    bbox: list[float] = field(default_factory=list)
    source: ImageRef | None = None
    crop: ImageRef | None = None


@dataclass
class AnswerEvent(AgentEvent):
    type: str = field(init=False, default="answer")
    answer: str = ""
    evidence: list[dict[str, Any]] = field(default_factory=list)  # page_id, crops (page boxes)
    forced: bool = False  # True when the turn budget ran out and the answer was demanded


ErrorKind = Literal[
    "invalid_action",  # malformed model output; the model was told and the episode goes on
    "search_failed",
    "policy_failed",
    "budget_exhausted",
    "internal",
]


@dataclass
class ErrorEvent(AgentEvent):
    type: str = field(init=False, default="error")
    kind: ErrorKind = "internal"
    message: str = ""
    fatal: bool = False  # True: the episode ends without an answer


@dataclass
class EpisodeFinished(AgentEvent):
    type: str = field(init=False, default="finish")
    status: EpisodeStatus = "answered"
    answer: str | None = None
    turns: int = 0
    elapsed_s: float = 0.0
    error: str | None = None  # why the episode failed (None when it answered)
