"""The subset of OpenAI chat completions our policy servers speak (what `vllm serve` accepts)."""
from __future__ import annotations

import base64
import binascii
import io
import re
import time
import uuid
from typing import Literal, Union

from PIL import Image
from pydantic import BaseModel, Field, field_validator

MAX_MESSAGES = 256
MAX_IMAGES = 32
MAX_DATA_URL_BYTES = 20 * 2**20

_DATA_URL = re.compile(r"^data:image(/[a-zA-Z0-9.+-]+)?;base64,(.*)$", re.DOTALL)


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class ImageURL(BaseModel):
    url: str = Field(..., max_length=MAX_DATA_URL_BYTES * 4 // 3 + 100)
    detail: str | None = None


class ImagePart(BaseModel):
    type: Literal["image_url"]
    image_url: ImageURL


ContentPart = Union[TextPart, ImagePart]


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content or [] if isinstance(p, TextPart))

    def image_urls(self) -> list[str]:
        if isinstance(self.content, list):
            return [p.image_url.url for p in self.content if isinstance(p, ImagePart)]
        return []


class ChatCompletionRequest(BaseModel):
    model: str | None = None
    messages: list[ChatMessage] = Field(..., min_length=1, max_length=MAX_MESSAGES)
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(512, ge=1, le=8192)
    max_completion_tokens: int | None = Field(None, ge=1, le=8192)
    stop: str | list[str] | None = None
    stream: bool = False
    n: int = Field(1, ge=1, le=1, description="only n=1 is supported")
    seed: int | None = None

    @field_validator("messages")
    @classmethod
    def _bounded_images(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        count = sum(len(m.image_urls()) for m in messages)
        if count > MAX_IMAGES:
            raise ValueError(f"{count} images in one request; at most {MAX_IMAGES}")
        return messages

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else [s for s in self.stop if s]

    def token_limit(self) -> int:
        return self.max_completion_tokens or self.max_tokens or 512


class Generation(BaseModel):
    text: str
    prompt_tokens: int
    completion_tokens: int
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


class ChatCompletionResponse(BaseModel):
    id: str = Field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex[:24]}")
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


class BadImageError(ValueError):
    pass


def decode_data_url(url: str) -> Image.Image:
    """Only inline base64 images: the server never fetches a URL someone hands it."""
    match = _DATA_URL.match(url)
    if not match:
        raise BadImageError("only data:image/...;base64 URLs are accepted (remote image URLs are not fetched)")
    try:
        raw = base64.b64decode(match.group(2), validate=False)
    except (binascii.Error, ValueError) as exc:
        raise BadImageError(f"malformed base64 image: {exc}") from exc
    if len(raw) > MAX_DATA_URL_BYTES:
        raise BadImageError("image larger than 20 MB")
    try:
        image = Image.open(io.BytesIO(raw))
        image.load()
    except Exception as exc:  # noqa: BLE001 - PIL raises many types
        raise BadImageError(f"not a decodable image: {exc}") from exc
    return image.convert("RGB")


def apply_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """Cut at the earliest stop string (excluded, as OpenAI does)."""
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
