"""Single-vector visual embedders in the Qwen-VL family: Qwen3-VL-Embedding and GVE.

Both embed an image or a text with a Qwen-VL backbone and take the last token's hidden state
as the embedding (last-token pooling), L2-normalised. transformers ships the backbones
(`Qwen3VLModel`, `Qwen2_5_VLModel`), so one class loads either through `AutoModel`; a page is one
vector, so the index scores it with a FAISS inner-product index instead of MaxSim.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image

from search_engine.embedders._torch_utils import batched, resolve_device, resolve_dtype
from search_engine.embedders.base import EmbedderSpec

DEFAULT_INSTRUCTIONS = {
    "query": "Retrieve the document page that answers the question.",
    "document": "Represent this document page for retrieval.",
}


class LastTokenVLEmbedder:
    def __init__(self, model: str, kind: str = "qwen3-vl-embedding", device: str = "auto", dtype: str = "auto",
                 batch_size: int = 4, max_pixels: int | None = 1280 * 28 * 28, instructions: dict | None = None):
        import torch
        from transformers import AutoConfig, AutoModel, AutoModelForImageTextToText, AutoProcessor

        self.device = resolve_device(device)
        self.torch_dtype = resolve_dtype(dtype, self.device)
        try:
            architectures = AutoConfig.from_pretrained(model).architectures or []
            if any(a.endswith("ForConditionalGeneration") for a in architectures):
                # Released with the LM head: load as saved, embed with the backbone inside it.
                full = AutoModelForImageTextToText.from_pretrained(model, dtype=self.torch_dtype)
                backbone = full.model
            else:
                backbone = AutoModel.from_pretrained(model, dtype=self.torch_dtype)
            self.model = backbone.to(self.device).eval()
            self.processor = AutoProcessor.from_pretrained(model)
        except OSError as exc:
            raise RuntimeError(f"could not load {model!r}: {exc}") from exc
        self.processor.tokenizer.padding_side = "left"  # last position is then the last real token
        if max_pixels is not None and hasattr(self.processor, "image_processor"):
            self.processor.image_processor.max_pixels = max_pixels
        self.batch_size = batch_size
        self.instructions = {**DEFAULT_INSTRUCTIONS, **(instructions or {})}
        self._torch = torch
        cfg = self.model.config
        dim = int(getattr(cfg, "text_config", cfg).hidden_size)
        self.spec = EmbedderSpec(kind=kind, model=str(model), modality="image", multi_vector=False, dim=dim)

    def _messages(self, instruction: str, text: str | None, image: Image.Image | None) -> list[dict]:
        content = []
        if image is not None:
            content.append({"type": "image"})
        if text:
            content.append({"type": "text", "text": text})
        return [{"role": "system", "content": [{"type": "text", "text": instruction}]},
                {"role": "user", "content": content}]

    def _embed(self, prompts: list[str], images: list[Image.Image] | None) -> np.ndarray:
        torch = self._torch
        kwargs = {"text": prompts, "padding": True, "return_tensors": "pt"}
        if images:
            kwargs["images"] = images
        batch = self.processor(**kwargs).to(self.device)
        with torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state
        pooled = hidden[:, -1, :]
        return torch.nn.functional.normalize(pooled.float(), dim=-1).cpu().numpy()

    def _template(self, messages) -> str:
        return self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for chunk in batched(list(queries), max(self.batch_size, 16)):
            prompts = [self._template(self._messages(self.instructions["query"], q, None)) for q in chunk]
            out.extend(row[None, :] for row in self._embed(prompts, None))
        return out

    def embed_images(self, images: Sequence[Image.Image]) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for chunk in batched(list(images), self.batch_size):
            prompts = [self._template(self._messages(self.instructions["document"], None, im)) for im in chunk]
            out.extend(row[None, :] for row in self._embed(prompts, [im.convert("RGB") for im in chunk]))
        return out

    def embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        raise TypeError("this embedder is registered for page images")
