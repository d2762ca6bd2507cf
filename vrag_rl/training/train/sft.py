"""SFT warm start: good trajectories → a messages + images JSON → the same token record as RL.

The file format is the multimodal "ShareGPT / messages" format LLaMA-Factory and TRL read
(upstream VRAG-RL's `search_sft.json` is in it), so the data also trains with those tools:

    [{"messages": [{"role": "system", "content": "..."},
                   {"role": "user", "content": "Question: ..."},
                   {"role": "assistant", "content": "<think>...</think><search>...</search>"},
                   {"role": "user", "content": "Search result for \\"q\\": page p_2.<image>"},
                   {"role": "assistant", "content": "<think>...</think><answer>...</answer>"}],
      "images": ["images/0000_0.png"]}, ...]

`<image>` marks where each image sits, in order; image paths are relative to the JSON file. Images
are the exact pixels the model was shown (resized view or crop), saved losslessly as PNG.

Training replays each record through a `TokenRecordingPolicy` whose generator returns the recorded
assistant text's tokens: the prompt/observation tokens get mask 0 and only the model turns mask 1 —
the same ids, masks and images an RL rollout of that conversation records, so SFT and RL share the
forward pass and the loss sees the model's turns only.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from PIL import Image

from vrag_rl.agent.events import ImageRef
from vrag_rl.agent.policies.token_recorder import GenerateOutput, TokenRecordingPolicy
from vrag_rl.agent.policy import SamplingParams, image_part, text_part

IMAGE_TOKEN = "<image>"


@dataclass
class SFTSample:
    """One SFT conversation as token ids, mask and images (the fields a training forward needs)."""

    group_id: str
    index: int
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    images: list[Image.Image] = field(default_factory=list)


class TranscriptResult(Protocol):
    """What an SFT record is written from: an episode that kept one growing conversation (VRAG's
    `EpisodeResult`: `messages` with images as `{"type": "image_ref", "image_id"}`, and those images)."""

    @property
    def episode_id(self) -> str: ...

    @property
    def messages(self) -> list[dict[str, Any]]: ...

    @property
    def images(self) -> list[ImageRef]: ...


def episode_to_record(result: TranscriptResult, image_dir: Path, prefix: str, rel_to: Path) -> dict[str, Any]:
    """One finished episode → one messages+images record (its images written under `image_dir`)."""
    image_dir.mkdir(parents=True, exist_ok=True)
    by_id = {ref.image_id: ref for ref in result.images}
    messages: list[dict[str, Any]] = []
    paths: list[str] = []
    for message in result.messages:
        content = message["content"]
        if isinstance(content, list):
            text = ""
            for part in content:
                if part.get("type") == "image_ref":
                    ref = by_id[part["image_id"]]
                    if ref.image is None:
                        raise ValueError(f"episode {result.episode_id}: image {ref.image_id} has no pixels to save")
                    path = image_dir / f"{prefix}_{len(paths)}.png"
                    ref.image.save(path)
                    paths.append(str(path.relative_to(rel_to)))
                    text += IMAGE_TOKEN
                else:
                    text += part.get("text", "")
            content = text
        messages.append({"role": message["role"], "content": content})
    return {"messages": messages, "images": paths}


def write_sft_file(results: Sequence[TranscriptResult], path: str | Path) -> int:
    """Write the episodes as an SFT JSON file (images beside it in `<stem>_images/`); returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image_dir = path.parent / f"{path.stem}_images"
    records = [episode_to_record(r, image_dir, f"{i:05d}", path.parent) for i, r in enumerate(results)]
    path.write_text(json.dumps(records, ensure_ascii=False, indent=1))
    return len(records)


def load_sft_file(path: str | Path) -> list[dict[str, Any]]:
    """Read and check an SFT file: roles, `<image>` count == images, image files present."""
    path = Path(path)
    records = json.loads(path.read_text())
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected a JSON list of records")
    errors = []
    for i, record in enumerate(records):
        messages, images = record.get("messages"), record.get("images", [])
        if not isinstance(messages, list) or not any(m.get("role") == "assistant" for m in messages):
            errors.append(f"record {i}: no assistant turn")
            continue
        marks = sum(str(m.get("content", "")).count(IMAGE_TOKEN) for m in messages)
        if marks != len(images):
            errors.append(f"record {i}: {marks} {IMAGE_TOKEN} marks for {len(images)} images")
        missing = [p for p in images if not (path.parent / p).is_file()]
        if missing:
            errors.append(f"record {i}: missing image files {missing[:3]}")
    if errors:
        raise ValueError(f"{path}: " + "; ".join(errors[:20]))
    return records


def _processor_messages(record: dict[str, Any], base: Path) -> list[dict[str, Any]]:
    images = iter(record.get("images", []))
    out = []
    for n, message in enumerate(record["messages"]):
        content = message["content"]
        if message["role"] == "user" and IMAGE_TOKEN in content:
            parts: list[dict[str, Any]] = []
            for k, piece in enumerate(content.split(IMAGE_TOKEN)):
                if k:
                    image = Image.open(base / next(images)).convert("RGB")
                    parts.append(image_part(image, f"img-{n}-{k}", f"sft-{n}-{k}"))
                if piece:
                    parts.append(text_part(piece))
            content = parts
        out.append({"role": message["role"], "content": content})
    return out


def record_to_sample(record: dict[str, Any], processor: Any, base: Path, index: int = 0) -> SFTSample:
    """Replay a record through the token recorder: exact ids, mask 1 on the assistant turns only."""
    messages = _processor_messages(record, base)
    tokenizer = processor.tokenizer
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    replies = [m["content"] for m in messages if m["role"] == "assistant"]

    async def replay(_ids: list[int], _sampling: SamplingParams, _images: list[Image.Image]) -> GenerateOutput:
        ids = tokenizer(replies.pop(0), add_special_tokens=False)["input_ids"] + [end]
        return GenerateOutput(ids, None, "stop")

    recorder = TokenRecordingPolicy(processor, replay)

    async def drive() -> None:
        for i, message in enumerate(messages):
            if message["role"] == "assistant":
                reply = await recorder.complete(messages[:i], SamplingParams())
                if reply.text != message["content"]:
                    raise ValueError(f"record {index}: assistant turn {message['content'][:60]!r} does not survive "
                                     "tokenisation unchanged")

    asyncio.run(drive())
    return SFTSample(f"sft-{index}", index, recorder.prompt_ids, recorder.response_ids, recorder.response_mask,
                     recorder.images)
