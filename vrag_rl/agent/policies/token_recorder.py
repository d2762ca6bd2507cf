"""`TokenRecordingPolicy`: a Policy that generates from token ids and records the trajectory a trainer needs.

Why this exists: an RL trainer must train on exactly the tokens the model sampled and exactly the
pixels it saw. Re-tokenising the decoded text afterwards (upstream VRAG-RL did: it kept only the tag
blocks, appended EOS and re-tokenised) trains on tokens the model never produced, and finding the
observation spans by searching decoded text for chat markers (upstream's loss mask) drifts on BPE
merges. Here the trajectory is built while it happens:

- the first call renders the conversation (system + question) through the processor's chat
  template: that is `prompt_ids`;
- every model turn appends the sampled ids as they came from the generator (mask 1, logprobs kept);
- because the agent loop only ever *appends* messages, every later call renders only the new part
  — the chat template's closing of the model turn, the observation (text and images), the next
  generation prompt — and appends it with mask 0. The rendering is checked to be a pure extension of
  the previous one; a chat template that rewrites history (e.g. one that strips earlier reasoning)
  raises `PolicyError` instead of silently recording a conversation the model never saw.

Image placeholders are expanded by the processor itself, so `response_ids` holds exactly as many
image tokens as the images in `images` produce, in order; a trainer passes `images` through the
same processor to get `pixel_values` / `image_grid_thw` for the forward pass.

Caveat (the same as verl's tokenisation sanity check): the recorded ids equal the processor's
tokenisation of the whole conversation whenever the model's sampled ids are the canonical BPE
tokenisation of their text; a sampled non-canonical split is kept as sampled (that is what the model
did, and what must be trained on). `canonical_mismatch()` reports such turns.

Vision special tokens (`VISION_TOKENS`: image/video placeholders, vision start/end/pad) are never
accepted from the model, whatever the generator did to suppress them: a reply holding one raises
`PolicyError` before anything of it reaches the record, so the episode ends as an explicit failure
with the reason, and the ids always hold exactly as many image tokens as the images' features. (A
sampled `<|image_pad|>` would otherwise add one image token without pixels: the trainer's forward
raises "Image features and image tokens do not match" steps later — the crash other verl multimodal
agents report after 30-50 steps.) Generators should also keep them out of sampling (the local
generator suppresses them; the verl adapter sets `logit_bias`), so the guard is the last line.

One instance per episode: it holds that episode's trajectory.
"""
from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from PIL import Image

from vrag_rl.agent.policy import Message, PolicyError, PolicyReply, SamplingParams, message_images


@dataclass
class GenerateOutput:
    """What a "generate from ids" backend returns for one model turn."""

    token_ids: list[int]
    logprobs: list[float] | None = None
    finish_reason: str | None = None  # "stop" (ended with an end-of-turn token) or "length"


# the special tokens that mark images/videos in Qwen-VL style processors: a model turn must never contain one
VISION_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>")


def vision_token_ids(tokenizer: Any) -> dict[int, str]:
    """id → token of every `VISION_TOKENS` entry the tokenizer knows (added/special tokens included)."""
    found: dict[int, str] = {}
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    for token in VISION_TOKENS:
        token_id = vocab.get(token)
        if isinstance(token_id, int):
            found[token_id] = token
    return found


class VisionTokenError(PolicyError):
    """The model's reply holds a vision special token; the reply is rejected before it is recorded."""


def check_no_vision_tokens(ids: list[int], vision_ids: dict[int, str]) -> None:
    """Raise `VisionTokenError` naming the first vision special token in `ids` (a model turn's sampled ids)."""
    for position, token_id in enumerate(ids):
        if token_id in vision_ids:
            raise VisionTokenError(f"the model sampled the vision special token {vision_ids[token_id]} (id {token_id}) "
                                   f"at position {position} of its reply; a reply must not hold image placeholders "
                                   "(the ids would hold more image tokens than the images' features), so it is "
                                   "rejected and not recorded")


# prompt ids of the WHOLE conversation so far (incl. the generation prompt), sampling, the images of
# the conversation in order -> the sampled turn.
GenerateFn = Callable[[list[int], SamplingParams, list[Image.Image]], Awaitable[GenerateOutput]]


def turn_seed(seed: int | None, turn: int) -> int | None:
    """A per-turn seed derived from the episode's seed, so each turn samples differently but reproducibly."""
    if seed is None:
        return None
    digest = hashlib.blake2b(f"{seed}:{turn}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little")


class TokenRecordingPolicy:
    """Policy over a `GenerateFn`; after the episode read `prompt_ids`, `response_ids`, `response_mask`,
    `response_logprobs`, `images` and `turn_spans`.
    """

    def __init__(self, processor: Any, generate: GenerateFn):
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.generate = generate
        self.prompt_ids: list[int] = []
        self.response_ids: list[int] = []
        self.response_mask: list[int] = []
        self.response_logprobs: list[float] = []
        self.images: list[Image.Image] = []
        self.turn_spans: list[tuple[int, int]] = []
        self.finish_reasons: list[str | None] = []
        self._n_messages = 0  # messages already rendered into the record
        self._rendered = ""  # the chat-template text of those messages (incl. the generation prompt)
        self._last_reply: str | None = None
        self._eos_ids = _end_of_turn_ids(self.tokenizer)
        self.vision_ids = vision_token_ids(self.tokenizer)

    # ---- the Policy interface --------------------------------------------------------------------------
    async def complete(self, messages: list[Message], sampling: SamplingParams) -> PolicyReply:
        self._append_context(messages)
        turn = len(self.turn_spans)
        sampling = replace(sampling, seed=turn_seed(sampling.seed, turn))
        context = self.prompt_ids + self.response_ids
        out = await self.generate(list(context), sampling, list(self.images))
        if not isinstance(out, GenerateOutput) or not isinstance(out.token_ids, list):
            raise PolicyError(f"the generate function returned {type(out).__name__}, not a GenerateOutput")
        ids = [int(t) for t in out.token_ids]
        logprobs = [float(v) for v in out.logprobs] if out.logprobs is not None else [0.0] * len(ids)
        if len(logprobs) != len(ids):
            raise PolicyError(f"the generate function returned {len(logprobs)} logprobs for {len(ids)} tokens")
        check_no_vision_tokens(ids, self.vision_ids)  # before anything of the reply is recorded
        start = len(self.response_ids)
        self.response_ids.extend(ids)
        self.response_mask.extend([1] * len(ids))
        self.response_logprobs.extend(logprobs)
        self.turn_spans.append((start, len(self.response_ids)))
        self.finish_reasons.append(out.finish_reason)
        text = self.tokenizer.decode(_strip_end(ids, self._eos_ids), skip_special_tokens=True)
        self._last_reply = text
        return PolicyReply(text=text, finish_reason=out.finish_reason, prompt_tokens=len(context),
                           completion_tokens=len(ids), token_ids=ids, logprobs=out.logprobs)

    async def aclose(self) -> None:
        return None

    # ---- rendering -----------------------------------------------------------------------------------------
    def _append_context(self, messages: list[Message]) -> None:
        """Render what was appended since the last call (mask 0) and add it to the record."""
        if not self.turn_spans:
            text = self._template(messages, add_generation_prompt=True)
            images = message_images(messages)
            self.prompt_ids = self._tokenize(text, images)
            self.images = list(images)
            self._rendered, self._n_messages = text, len(messages)
            return
        if len(messages) <= self._n_messages or messages[self._n_messages].get("role") != "assistant":
            raise PolicyError("the conversation was not extended by the model's reply: the token recorder needs "
                              "messages that are only ever appended to")
        if messages[self._n_messages].get("content") != self._last_reply:
            raise PolicyError("the assistant message differs from the reply the policy gave; the recorded "
                              "tokens would not match the conversation")
        last_reply = self._last_reply
        assert last_reply is not None, "generate() records a reply with every turn span"
        with_reply = self._template(messages[: self._n_messages + 1], add_generation_prompt=False)
        full = self._template(messages, add_generation_prompt=True)
        if not with_reply.startswith(self._rendered + last_reply) or not full.startswith(with_reply):
            raise PolicyError("the chat template re-renders earlier turns differently (not append-only); "
                              "the trajectory cannot be recorded token by token")
        closing = with_reply[len(self._rendered) + len(last_reply):]  # e.g. "<|im_end|>\n"
        start, end = self.turn_spans[-1]
        if end > start and self.response_ids[end - 1] in self._eos_ids:
            eos_text = self.tokenizer.decode([self.response_ids[end - 1]])
            closing = closing.removeprefix(eos_text)  # the model already produced the end-of-turn token
        new_messages = messages[self._n_messages + 1:]
        images = message_images(new_messages)
        ids = self._tokenize(closing + full[len(with_reply):], images)
        self.response_ids.extend(ids)
        self.response_mask.extend([0] * len(ids))
        self.response_logprobs.extend([0.0] * len(ids))
        self.images.extend(images)
        self._rendered, self._n_messages = full, len(messages)

    def _template(self, messages: list[Message], add_generation_prompt: bool) -> str:
        return self.processor.apply_chat_template(template_form(messages), add_generation_prompt=add_generation_prompt,
                                                  tokenize=False)

    def _tokenize(self, text: str, images: list[Image.Image]) -> list[int]:
        if not text:
            return []
        if images:
            encoded = self.processor(text=[text], images=images, return_tensors=None)
        else:
            encoded = self.tokenizer(text, add_special_tokens=False)
        ids = encoded["input_ids"]
        return list(ids[0] if ids and isinstance(ids[0], list) else ids)

    # ---- inspection ------------------------------------------------------------------------------------------
    def canonical_mismatch(self) -> list[int]:
        """Indices of model turns whose sampled ids differ from the tokenisation of their decoded text."""
        bad = []
        for i, (start, end) in enumerate(self.turn_spans):
            ids = _strip_end(self.response_ids[start:end], self._eos_ids)
            text = self.tokenizer.decode(ids)
            if self.tokenizer(text, add_special_tokens=False)["input_ids"] != ids:
                bad.append(i)
        return bad

    @property
    def num_model_tokens(self) -> int:
        return sum(self.response_mask)


def template_form(messages: list[Message]) -> list[dict[str, Any]]:
    """Drop the PIL objects and ids from image parts: chat templates only need `{"type": "image"}`."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [{"type": "image"} if p.get("type") == "image" else {"type": "text", "text": p.get("text", "")}
                       for p in content]
        out.append({"role": message["role"], "content": content})
    return out


def _end_of_turn_ids(tokenizer: Any) -> set[int]:
    ids = set()
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>") if hasattr(tokenizer, "convert_tokens_to_ids") else None
    if isinstance(im_end, int) and im_end != getattr(tokenizer, "unk_token_id", None):
        ids.add(im_end)
    return ids


def _strip_end(ids: list[int], eos_ids: set[int]) -> list[int]:
    return ids[:-1] if ids and ids[-1] in eos_ids else ids


_template_form = template_form  # the earlier private name (vrag_rl.training.train.sft and tests import it)
