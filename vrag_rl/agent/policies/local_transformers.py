"""`LocalTransformersGenerate`: a `GenerateFn` backed by an in-process transformers VLM.

`TokenRecordingPolicy(processor, LocalTransformersGenerate(model, processor))` is the in-process
policy the local trainer rolls out with: it generates from the recorded token ids (never from
re-rendered text), with the conversation's images really in the forward pass (`pixel_values` and
`image_grid_thw` from the same processor the trainer uses), and returns the sampled ids with their
log-probabilities.

Why the details:
- The image-token count of the ids is checked against the images before generating: a mismatch
  would otherwise be a shape error deep inside the model, or worse, a blind forward pass.
- Vision special tokens (image/video pad, vision start/end) are suppressed when sampling: a random
  or young model emits them, and the next forward then fails on image tokens without pixels.
- Log-probabilities are of the model's distribution at the sampling temperature
  (`log_softmax(logits / T)`), the quantity verl's actor recomputes (it divides logits by the
  rollout temperature); top-p only decides which token is drawn.
- Each call with a seed samples under `torch.random.fork_rng` with that seed, so a rollout is
  reproducible whatever order concurrent episodes reach the model in; a call without a seed draws from
  the process's generator and advances it (forking there would replay the same draws on every call, so
  every sample of a group would be the same). Calls are serialised by a lock and run in a worker thread,
  so the event loop keeps serving searches meanwhile.
"""
from __future__ import annotations

import asyncio
import contextlib
import copy
import threading
from typing import Any

from PIL import Image

from vrag_rl.agent.policies.token_recorder import VISION_TOKENS, GenerateOutput, vision_token_ids
from vrag_rl.agent.policy import PolicyError, SamplingParams

__all__ = ["VISION_TOKENS", "LocalTransformersGenerate", "expected_image_tokens", "image_token_id", "vision_inputs"]


def vision_inputs(processor: Any, images: list[Image.Image]) -> dict[str, Any]:
    """`pixel_values` and `image_grid_thw` of `images` through the processor's image processor ({} for none)."""
    if not images:
        return {}
    out = processor.image_processor(images=images, return_tensors="pt")
    return {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"]}


def expected_image_tokens(processor: Any, grid_thw: Any) -> int:
    """How many image-pad tokens the images of `grid_thw` expand to (t·h·w / merge²)."""
    merge = getattr(processor.image_processor, "merge_size", 2)
    return int(grid_thw.prod(-1).sum().item()) // (merge * merge)


def image_token_id(processor: Any, model: Any | None = None) -> int:
    if model is not None and getattr(model.config, "image_token_id", None) is not None:
        return int(model.config.image_token_id)
    return int(processor.tokenizer.convert_tokens_to_ids("<|image_pad|>"))


class LocalTransformersGenerate:
    """GenerateFn over `model.generate` (any transformers VLM whose processor has a Qwen-style image processor)."""

    def __init__(self, model: Any, processor: Any, device: str = "cpu", suppress_vision_tokens: bool = True,
                 stop_strings: tuple[str, ...] | list[str] = ()):
        import torch

        self._torch = torch
        self.model = model
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.device = device
        self.image_token = image_token_id(processor, model)
        vocab = self.tokenizer.get_vocab()
        self.suppressed = sorted(vision_token_ids(self.tokenizer)) if suppress_vision_tokens else []
        eos = model.generation_config.eos_token_id
        eos_ids = {eos} if isinstance(eos, int) else set(eos or [])
        im_end = vocab.get("<|im_end|>")
        if im_end is not None:
            eos_ids.add(im_end)
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        self.eos_ids = sorted(eos_ids)
        self.stop_strings = tuple(stop_strings)  # e.g. "</answer>": a turn ends right after its action tag
        self._lock = threading.Lock()

    async def __call__(self, prompt_ids: list[int], sampling: SamplingParams,
                       images: list[Image.Image]) -> GenerateOutput:
        return await asyncio.to_thread(self.generate_sync, prompt_ids, sampling, images)

    def generate_sync(self, prompt_ids: list[int], sampling: SamplingParams,
                      images: list[Image.Image]) -> GenerateOutput:
        torch = self._torch
        if not prompt_ids:
            raise PolicyError("generate called with no prompt ids")
        input_ids = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
        inputs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
        vision = vision_inputs(self.processor, images)
        n_tokens = int((input_ids == self.image_token).sum())
        expected = expected_image_tokens(self.processor, vision["image_grid_thw"]) if vision else 0
        if n_tokens != expected:
            raise PolicyError(f"the prompt holds {n_tokens} image tokens but its {len(images)} image(s) need "
                              f"{expected}: ids and images are out of step")
        inputs.update({k: v.to(self.device) for k, v in vision.items()})
        config = self._generation_config(sampling)
        seeded = torch.random.fork_rng(devices=[]) if sampling.seed is not None else contextlib.nullcontext()
        with self._lock, torch.inference_mode(), seeded:
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
            was_training = self.model.training
            self.model.eval()
            try:
                extra = {"tokenizer": self.tokenizer} if config.stop_strings else {}
                out = self.model.generate(**inputs, generation_config=config, **extra)
            finally:
                self.model.train(was_training)
        new = out.sequences[0, input_ids.shape[1]:]
        logits = torch.stack(out.logits, dim=1)[0].float()  # (new_tokens, vocab), before any processor
        if sampling.temperature > 0:
            logits = logits / sampling.temperature
        logprobs = torch.log_softmax(logits, -1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        ids = new.tolist()
        ended = bool(ids) and (ids[-1] in self.eos_ids or len(ids) < sampling.max_tokens)
        return GenerateOutput(token_ids=ids, logprobs=logprobs.tolist(), finish_reason="stop" if ended else "length")

    def _generation_config(self, sampling: SamplingParams):
        config = copy.deepcopy(self.model.generation_config)
        sample = sampling.temperature > 0 and sampling.top_p > 0
        config.do_sample = sample
        config.max_new_tokens = sampling.max_tokens
        config.max_length = None
        config.num_beams = 1
        config.num_return_sequences = 1
        config.temperature = sampling.temperature if sample else 1.0
        config.top_p = sampling.top_p if sample else 1.0
        config.top_k = None
        config.repetition_penalty = None
        config.suppress_tokens = self.suppressed or None
        config.eos_token_id = self.eos_ids
        config.stop_strings = list(dict.fromkeys(self.stop_strings + tuple(sampling.stop))) or None
        config.return_dict_in_generate = True
        config.output_logits = True
        if config.pad_token_id is None:
            config.pad_token_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None \
                else self.eos_ids[0]
        return config
