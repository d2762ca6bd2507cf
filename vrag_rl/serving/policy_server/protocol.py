"""The subset of OpenAI chat completions our policy servers speak (what `vllm serve` accepts).

The agent talks to vLLM in production and to these servers in tests and demos; modelling the
same request/response shapes means the agent cannot tell them apart. Bounds (messages, images,
bytes) exist because a policy server is reachable from other machines during RL rollouts.
"""
from __future__ import annotations

import base64
import binascii
import io
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal

from PIL import Image
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    field_validator,
    model_validator,
)

from search_engine.infra.http_guard import has_lone_surrogate, whole_number

MAX_MESSAGES = 256
MAX_IMAGES = 32
MAX_DATA_URL_CHARS = 20 * 2**20  # one data URL, as sent (base64 text), at most 20 MB
MAX_IMAGE_PIXELS = 64_000_000  # refuse decompression bombs before PIL allocates them
MAX_TOKENS_LIMIT = 8192
MAX_TOTAL_TEXT_CHARS = 1_000_000  # all text of a request: ~100 agent turns of prompts and replies
MAX_STOPS = 16
MAX_STOP_CHARS = 512

# The request's integer fields (see `whole_number`: an integral float is an integer, "5" and true are not).
if TYPE_CHECKING:  # a type built by a call is opaque to mypy: to it these are the ints they validate into
    TokenLimit = int
    OnlyOne = int
    Seed = int
    TopK = int
else:
    TokenLimit = whole_number(ge=1, le=MAX_TOKENS_LIMIT)
    OnlyOne = whole_number(ge=1, le=1)
    # ±2^53: the integers a JSON number holds exactly. Bounds near 2^64 are not even representable as the
    # float a JSON Schema validator compares with, so schema and server disagreed about 2^64 + 383.
    Seed = whole_number(ge=-(2**53), le=2**53)
    TopK = whole_number(ge=-1, le=1_000_000)

# upstream VRAG sends "data:image;base64," (no subtype)
_DATA_URL = re.compile(r"^data:image(?:/[a-zA-Z0-9.+-]+)?;base64,", re.IGNORECASE | re.ASCII)
_WRAP = re.compile(r"[ \t\r\n]+")  # MIME-style line breaks inside base64
# What `check_image_url` accepts, as a JSON-schema pattern (documented, not enforced by pydantic: a URL
# that does not fit gets the clearer 400 from check_image_url). The case-insensitive prefix is spelled
# out, since JSON-schema regexes have no flags.
_WS = "[ \\t\\r\\n]*"
_B64 = _WS + "[A-Za-z0-9+/]"
DATA_URL_PATTERN = (
    "^[dD][aA][tT][aA]:[iI][mM][aA][gG][eE](?:/[a-zA-Z0-9.+-]+)?;[bB][aA][sS][eE]64,"
    f"(?:{_B64 * 4})*(?:{_B64 * 2}{_WS}={_WS}=|{_B64 * 3}{_WS}=)?{_WS}$"
)


class BadRequest(ValueError):
    """A request that parsed but cannot be served (bad image, unknown script): the app answers 400."""


class BadImageError(BadRequest):
    """An image part that is not an inline base64 image we can decode."""


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class ImageURL(BaseModel):
    url: str = Field(..., max_length=MAX_DATA_URL_CHARS, json_schema_extra={"pattern": DATA_URL_PATTERN},
                     description="an inline `data:image/...;base64,...` URL; anything else (http, file) is "
                                 f"answered 400 and never fetched; at most {MAX_IMAGES} images per request")
    detail: str | None = None


class ImagePart(BaseModel):
    type: Literal["image_url"]
    image_url: ImageURL
    _raw: bytes | None = PrivateAttr(None)
    _image: Image.Image | None = PrivateAttr(None)

    def raw(self) -> bytes:
        """The image file's bytes (base64 checked once: the app validates before a backend decodes)."""
        if self._raw is None:
            self._raw = check_image_url(self.image_url.url)
        return self._raw

    def image(self) -> Image.Image:
        """The decoded RGB image, decoded at most once per request."""
        if self._image is None:
            self._image = decode_image_bytes(self.raw())
        return self._image


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        """All text of the message (text parts joined by newlines)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content or [] if isinstance(p, TextPart))

    def image_parts(self) -> list[ImagePart]:
        if isinstance(self.content, list):
            return [p for p in self.content if isinstance(p, ImagePart)]
        return []

    def image_urls(self) -> list[str]:
        return [p.image_url.url for p in self.image_parts()]


class StreamOptions(BaseModel):
    include_usage: StrictBool = False


@dataclass(frozen=True)
class GenerationParams:
    """What a backend needs from a request, without the HTTP model around it."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    seed: int | None = None
    top_k: int | None = None
    repetition_penalty: float | None = None


class ChatCompletionRequest(BaseModel):
    # Unknown OpenAI/vLLM fields (user, logprobs, ...) are ignored, as vLLM ignores what it does not use.
    model_config = ConfigDict(extra="ignore")

    # Integers and booleans are strict (`n: "1"`, `stream: "yes"` are 422): the schema says integer/boolean.
    # An integral float (`max_tokens: 5.0`) is an integer, as JSON Schema's `integer` says (issue 21).
    model: str | None = Field(None, max_length=256)
    messages: list[ChatMessage] = Field(..., min_length=1, max_length=MAX_MESSAGES,
                                        description=f"at most {MAX_IMAGES} images and {MAX_TOTAL_TEXT_CHARS} "
                                                    "characters of text in all")
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, ge=0.0, le=1.0)
    max_tokens: TokenLimit | None = 512
    max_completion_tokens: TokenLimit | None = None
    stop: Annotated[str, Field(max_length=MAX_STOP_CHARS)] | Annotated[
        list[Annotated[str, Field(max_length=MAX_STOP_CHARS)]], Field(max_length=MAX_STOPS)] | None = None
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    n: OnlyOne = Field(1, description="only n=1 is supported")
    seed: Seed | None = None  # ±2^53 (see Seed)
    # vLLM extensions the RL trainer sends through `extra_body`
    top_k: TopK | None = None
    repetition_penalty: float | None = Field(None, gt=0.0, le=10.0)

    @field_validator("messages")
    @classmethod
    def _bounded_images(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        count = sum(len(m.image_parts()) for m in messages)
        if count > MAX_IMAGES:
            raise ValueError(f"{count} images in one request; at most {MAX_IMAGES}")
        return messages

    @model_validator(mode="after")
    def _bounded_valid_text(self) -> ChatCompletionRequest:
        """All text together is bounded, and must be valid Unicode: a lone surrogate (`"\\ud800"` in JSON)
        cannot be encoded for a tokenizer, nor echoed back by a scripted reply."""
        texts = [m.text() for m in self.messages] + [self.model or ""] + self.stop_list()
        if sum(len(t) for t in texts) > MAX_TOTAL_TEXT_CHARS:
            raise ValueError(f"more than {MAX_TOTAL_TEXT_CHARS} characters of text in one request")
        if any(has_lone_surrogate(t) for t in texts):
            raise ValueError("text is not valid Unicode (lone surrogate)")
        return self

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [s for s in ([self.stop] if isinstance(self.stop, str) else self.stop) if s]

    def token_limit(self) -> int:
        return self.max_completion_tokens or self.max_tokens or 512

    def params(self) -> GenerationParams:
        return GenerationParams(temperature=self.temperature, top_p=self.top_p, max_tokens=self.token_limit(),
                                stop=tuple(self.stop_list()), seed=self.seed, top_k=self.top_k,
                                repetition_penalty=self.repetition_penalty)


class Generation(BaseModel):
    """A backend's reply: the text and what it cost, in the backend's own token unit."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: Literal["stop", "length"] = "stop"


class ResponseMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: ResponseMessage
    finish_reason: Literal["stop", "length"]


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


def _completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


class ChatCompletionResponse(BaseModel):
    id: str = Field(default_factory=_completion_id)
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[Choice]
    usage: Usage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=lambda: int(time.time()))
    owned_by: str = "vrag"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


def check_image_url(url: str) -> bytes:
    """The raw bytes of an inline image; anything else is refused, since the server never fetches a URL
    someone hands it (that would let any client make it reach into the network it sits in)."""
    match = _DATA_URL.match(url)
    if not match:
        if url.lower().startswith(("http://", "https://", "file:", "ftp://")):
            raise BadImageError("only data:image/...;base64 URLs are accepted (remote image URLs are not fetched)")
        raise BadImageError("image_url must be a data:image/...;base64,... URL")
    payload = url[match.end():]
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        unwrapped = _WRAP.sub("", payload)  # line-wrapped (MIME-style) base64 is still base64
        if unwrapped != payload:
            try:
                return base64.b64decode(unwrapped, validate=True)
            except (binascii.Error, ValueError):
                pass
        raise BadImageError(f"malformed base64 in an image data URL: {exc}") from None


def decode_data_url(url: str) -> Image.Image:
    """A `data:image/...;base64,` URL as an RGB PIL image; `BadImageError` for anything else."""
    return decode_image_bytes(check_image_url(url))


def decode_image_bytes(raw: bytes) -> Image.Image:
    try:
        with Image.open(io.BytesIO(raw)) as image:
            if image.width * image.height > MAX_IMAGE_PIXELS:
                raise BadImageError(f"image too large: {image.width}x{image.height} pixels")
            return image.convert("RGB")
    except BadImageError:
        raise
    except Exception as exc:  # noqa: BLE001 - PIL raises many types for undecodable data
        raise BadImageError(f"not a decodable image: {type(exc).__name__}: {exc}") from None


def apply_stop(text: str, stop: str | list[str] | tuple[str, ...] | None) -> tuple[str, bool]:
    """Cut at the earliest stop string (the stop string itself excluded, as OpenAI and vLLM do)."""
    if not stop:
        return text, False
    stops = [stop] if isinstance(stop, str) else [s for s in stop if s]
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
