"""An in-process VLM (Qwen2.5-VL, Qwen2-VL, ...) through transformers, for CPU users and tests.

vLLM is the production server; this one exists so the whole system runs where vLLM cannot
(a laptop, CI) and serves the tiny random Qwen2.5-VL the tests build offline.
"""
from __future__ import annotations

from pathlib import Path

from vrag_rl.policy_server.protocol import ChatCompletionRequest, ChatMessage, Generation, TextPart, decode_data_url

_VISION_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")


class TransformersBackend:
    def __init__(self, model: str, device: str = "auto", dtype: str = "auto", min_pixels: int | None = None,
                 max_pixels: int | None = 512 * 28 * 28):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        from search_engine.embedders._torch_utils import resolve_device, resolve_dtype

        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        try:
            self.processor = AutoProcessor.from_pretrained(model)
            self.model = AutoModelForImageTextToText.from_pretrained(model, dtype=self.dtype).to(self.device).eval()
        except OSError as exc:
            hint = "" if Path(model).exists() else " (not a local folder; downloading needs network and no HF_HUB_OFFLINE)"
            raise RuntimeError(f"could not load the policy model {model!r}{hint}: {exc}") from exc
        image_processor = getattr(self.processor, "image_processor", None)
        if image_processor is not None:
            if max_pixels:
                image_processor.max_pixels = max_pixels
            if min_pixels:
                image_processor.min_pixels = min_pixels
        tokenizer = self.processor.tokenizer
        ids = [tokenizer.convert_tokens_to_ids(t) for t in _VISION_TOKENS]
        self._banned = [[i] for i in ids if isinstance(i, int) and i >= 0 and i != tokenizer.unk_token_id]
        self._torch = torch

    def _chat(self, messages: list[ChatMessage]):
        chat, images = [], []
        for message in messages:
            if isinstance(message.content, str) or message.content is None:
                chat.append({"role": message.role, "content": [{"type": "text", "text": message.content or ""}]})
                continue
            parts = []
            for part in message.content:
                if isinstance(part, TextPart):
                    parts.append({"type": "text", "text": part.text})
                else:
                    images.append(decode_data_url(part.image_url.url))
                    parts.append({"type": "image"})
            chat.append({"role": message.role, "content": parts})
        return chat, images

    def generate(self, messages: list[ChatMessage], request: ChatCompletionRequest) -> Generation:
        torch = self._torch
        chat, images = self._chat(messages)
        prompt = self.processor.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        inputs = self.processor(text=[prompt], images=images or None, return_tensors="pt").to(self.device)
        limit = request.token_limit()
        sample = request.temperature > 0
        kwargs = dict(max_new_tokens=limit, do_sample=sample, bad_words_ids=self._banned or None,
                      pad_token_id=self.processor.tokenizer.pad_token_id)
        if sample:
            kwargs.update(temperature=request.temperature, top_p=request.top_p)
        if request.seed is not None:
            torch.manual_seed(request.seed)
        with torch.inference_mode():
            output = self.model.generate(**inputs, **kwargs)
        new_tokens = output[0, inputs["input_ids"].shape[1]:]
        text = self.processor.tokenizer.decode(new_tokens, skip_special_tokens=True)
        eos = self.processor.tokenizer.eos_token_id
        ended = len(new_tokens) > 0 and int(new_tokens[-1]) == eos
        finish = "length" if len(new_tokens) >= limit and not ended else "stop"
        return Generation(text=text, prompt_tokens=int(inputs["input_ids"].shape[1]),
                          completion_tokens=int(len(new_tokens)), finish_reason=finish)
