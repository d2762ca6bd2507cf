"""An in-process VLM (Qwen2.5-VL, Qwen2-VL, ...) through transformers, for CPU users and tests.

vLLM is the production server; this one exists so the whole system runs where vLLM cannot
(a laptop, CI) and serves the tiny random Qwen2.5-VL the tests build offline, through the same
`from_pretrained` path a hub id takes.
"""
from __future__ import annotations

import copy
import os
import threading
from pathlib import Path
from typing import Any, Literal, cast

from search_engine.infra.devices import resolve_device, resolve_dtype
from search_engine.infra.torchvision_shim import install_torchvision_hook
from vrag_rl.agent.policies.token_recorder import VISION_TOKENS
from vrag_rl.serving.policy_server.protocol import BadRequest, ChatMessage, Generation, GenerationParams, TextPart

install_torchvision_hook()  # Qwen-VL processors import torchvision; a CPU torch needs the shim first

# Generating one of VISION_TOKENS (defined once, by the token recorder that rejects them) from text
# alone makes the next forward look for an image that is not there: they are suppressed in sampling.
class TransformersBackend:
    """`AutoProcessor` + `AutoModelForImageTextToText` behind the `Backend` protocol.

    One generation at a time (`max_concurrency = 1` for the app's queue, plus a lock for direct
    callers): a model's forward is not re-entrant and a seed set for one request must not leak
    into another.
    """

    max_concurrency = 1

    def __init__(self, model_path_or_id: str, device: str = "auto", dtype: str = "auto",
                 max_pixels: int | None = 512 * 28 * 28, min_pixels: int | None = 256 * 28 * 28):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.model_path = str(model_path_or_id)
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        _check_reachable(self.model_path)
        pixel_kwargs = {k: v for k, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels)) if v}
        try:
            self.processor = AutoProcessor.from_pretrained(self.model_path, **pixel_kwargs)
            # Any: an Auto class resolves to the checkpoint's own model class only at run time
            self.model = cast(Any, AutoModelForImageTextToText.from_pretrained(self.model_path, dtype=self.dtype))
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"could not load the policy model {self.model_path!r}: {exc}") from exc
        self.model.to(self.device).eval()
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.suppressed = _token_ids(self.tokenizer, VISION_TOKENS)
        config = getattr(self.model.config, "text_config", self.model.config)
        self.context_length = int(getattr(config, "max_position_embeddings", 0) or 0) or None
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        self._lock = threading.Lock()
        self._torch = torch

    # ----------------------------------------------------------------------------------- prompt

    def to_chat(self, messages: list[ChatMessage]) -> tuple[list[dict], list]:
        """OpenAI messages → the processor's chat format, with the images in the order they appear."""
        chat: list[dict[str, Any]] = []
        images: list = []
        for message in messages:
            if not isinstance(message.content, list):
                chat.append({"role": message.role, "content": message.content or ""})
                continue
            parts = []
            for part in message.content:
                if isinstance(part, TextPart):
                    parts.append({"type": "text", "text": part.text})
                else:
                    images.append(part.image())
                    parts.append({"type": "image"})
            chat.append({"role": message.role, "content": parts})
        return chat, images

    def encode(self, messages: list[ChatMessage]):
        chat, images = self.to_chat(messages)
        try:
            prompt = self.processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
            inputs = self.processor(text=[prompt], images=images or None, return_tensors="pt")
        except (ValueError, TypeError) as exc:  # e.g. an image with an extreme aspect ratio
            raise BadRequest(f"the model's processor rejected the conversation: {exc}") from None
        return inputs.to(self.device)

    # ----------------------------------------------------------------------------------- generate

    def generate(self, messages: list[ChatMessage], params: GenerationParams) -> Generation:
        inputs = self.encode(messages)  # outside the lock: image preprocessing can overlap another generation
        prompt_tokens = int(inputs["input_ids"].shape[1])
        limit = params.max_tokens
        if self.context_length:
            room = self.context_length - prompt_tokens
            if room < 1:
                raise BadRequest(f"the prompt has {prompt_tokens} tokens; "
                                 f"this model's context is {self.context_length}")
            limit = min(limit, room)
        config = self._generation_config(params, limit)
        torch = self._torch
        with self._lock, torch.inference_mode():
            if params.seed is not None:
                torch.manual_seed(params.seed)
            kwargs = {"tokenizer": self.tokenizer} if config.stop_strings else {}
            output = self.model.generate(**inputs, generation_config=config, **kwargs)
        new_tokens = output[0, prompt_tokens:].tolist()
        ended = bool(new_tokens) and new_tokens[-1] in self.eos_ids
        text = self.tokenizer.decode(new_tokens, skip_special_tokens=True)
        finish: Literal["stop", "length"] = "length" if len(new_tokens) >= limit and not ended else "stop"
        return Generation(text=text, prompt_tokens=prompt_tokens, completion_tokens=len(new_tokens),
                          finish_reason=finish)

    def _generation_config(self, params: GenerationParams, limit: int):
        """The model's own defaults (eos ids, repetition penalty), with the request's sampling on top.

        top_k is switched off unless asked for: OpenAI's API has none, and Qwen2.5-VL's shipped
        config (top_k=1) would silently turn every sampled RL rollout greedy.
        """
        config = copy.deepcopy(self.model.generation_config)
        sample = params.temperature > 0 and params.top_p > 0
        config.do_sample = sample
        config.max_new_tokens = limit
        config.max_length = None
        config.num_return_sequences = 1
        config.num_beams = 1
        config.temperature = params.temperature if sample else 1.0
        config.top_p = params.top_p if sample else 1.0
        config.top_k = params.top_k if sample and params.top_k and params.top_k > 0 else None
        if params.repetition_penalty is not None:
            config.repetition_penalty = params.repetition_penalty
        config.suppress_tokens = self.suppressed or None
        config.stop_strings = list(params.stop) or None
        if config.pad_token_id is None:
            config.pad_token_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None \
                else next(iter(self.eos_ids), None)
        return config


def _token_ids(tokenizer, tokens) -> list[int]:
    vocab = tokenizer.get_vocab()
    return [vocab[t] for t in tokens if t in vocab]


def _check_reachable(model: str) -> None:
    """Fail in one clear sentence, before transformers' long offline/network traces, when the model cannot be had."""
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise RuntimeError(f"could not load the policy model {model!r}: the folder has no config.json")
        return
    looks_like_path = model.startswith(("/", ".", "~")) or model.count("/") > 1 or os.sep in model.replace("/", "")
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    if looks_like_path:
        raise RuntimeError(f"could not load the policy model {model!r}: no such folder")
    if offline:
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model, "config.json")
        except Exception:  # noqa: BLE001 - an odd id is reported below like a missing one
            cached = None
        if not isinstance(cached, str):
            raise RuntimeError(f"could not load the policy model {model!r}: not a local folder, not in the "
                               "Hugging Face cache, and HF_HUB_OFFLINE=1 forbids downloading it")
