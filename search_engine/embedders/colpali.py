"""Late-interaction visual embedders (ColQwen2, ColQwen2.5, ColPali, ColSmol) through colpali-engine.

colpali-engine owns the models and processors; this module only picks the right pair for a
checkpoint, batches, and trims padding rows so the index stores exactly the tokens that score.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from search_engine.embedders._torch_utils import batched, resolve_device, resolve_dtype
from search_engine.embedders.base import EmbedderSpec

log = logging.getLogger(__name__)

# kind -> (model class, processor class) in colpali_engine.models
COLPALI_CLASSES: dict[str, tuple[str, str]] = {
    "colqwen2": ("ColQwen2", "ColQwen2Processor"),
    "colqwen2.5": ("ColQwen2_5", "ColQwen2_5_Processor"),
    "colpali": ("ColPali", "ColPaliProcessor"),
    "colsmol": ("ColIdefics3", "ColIdefics3Processor"),
}

_MODEL_TYPE_TO_KIND = {"qwen2_vl": "colqwen2", "qwen2_5_vl": "colqwen2.5", "paligemma": "colpali",
                       "idefics3": "colsmol"}


def detect_colpali_kind(model: str) -> str:
    """Pick the colpali-engine class for a hub id or a local checkpoint.

    A local checkpoint says what it is in config.json (or adapter_config.json for the LoRA
    releases such as vidore/colqwen2-v1.0); a hub id is recognised by its name.
    """
    path = Path(model)
    if path.is_dir():
        for name in ("config.json", "adapter_config.json"):
            cfg_file = path / name
            if cfg_file.exists():
                cfg = json.loads(cfg_file.read_text())
                model_type = cfg.get("model_type")
                if model_type in _MODEL_TYPE_TO_KIND:
                    return _MODEL_TYPE_TO_KIND[model_type]
                base = cfg.get("base_model_name_or_path")
                if base:
                    return detect_colpali_kind(base)
    lowered = model.lower()
    for marker, kind in (("colqwen2.5", "colqwen2.5"), ("colqwen2_5", "colqwen2.5"), ("colqwen2", "colqwen2"),
                         ("colpali", "colpali"), ("colsmol", "colsmol"), ("colidefics", "colsmol")):
        if marker in lowered:
            return kind
    raise ValueError(
        f"cannot tell which ColPali-family model {model!r} is; pass kind= one of {sorted(COLPALI_CLASSES)}"
    )


class ColPaliEmbedder:
    """Multi-vector page/query embeddings scored by MaxSim (128-d per token for ColQwen2)."""

    def __init__(self, model: str = "vidore/colqwen2-v1.0", kind: str | None = None, device: str = "auto",
                 dtype: str = "auto", batch_size: int = 4, max_pixels: int | None = None):
        import colpali_engine.models as cm
        import torch

        self.kind = kind or detect_colpali_kind(model)
        model_cls_name, proc_cls_name = COLPALI_CLASSES[self.kind]
        self.device = resolve_device(device)
        self.torch_dtype = resolve_dtype(dtype, self.device)
        self.batch_size = batch_size
        model_cls, proc_cls = getattr(cm, model_cls_name), getattr(cm, proc_cls_name)
        try:
            self.model = model_cls.from_pretrained(model, torch_dtype=self.torch_dtype, device_map=self.device).eval()
            self.processor = proc_cls.from_pretrained(model)
        except OSError as exc:
            raise RuntimeError(
                f"could not load {model!r} ({self.kind}): {exc}. Give a local path, or make sure the hub is "
                "reachable (HF_HUB_OFFLINE unset) and the weights are downloaded."
            ) from exc
        if max_pixels is not None and hasattr(self.processor, "image_processor"):
            self.processor.image_processor.max_pixels = max_pixels
        self._torch = torch
        dim = int(getattr(self.model, "dim", 128))
        self.spec = EmbedderSpec(kind=self.kind, model=str(model), modality="image", multi_vector=True, dim=dim)

    def _run(self, batch) -> list[np.ndarray]:
        batch = batch.to(self.model.device)
        with self._torch.inference_mode():
            out = self.model(**batch)
        mask = batch["attention_mask"].bool()
        return [out[i][mask[i]].float().cpu().numpy().astype(np.float32) for i in range(out.shape[0])]

    def embed_images(self, images: Sequence[Image.Image]) -> list[np.ndarray]:
        results: list[np.ndarray] = []
        for chunk in batched(list(images), self.batch_size):
            results.extend(self._run(self.processor.process_images([im.convert("RGB") for im in chunk])))
        return results

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        results: list[np.ndarray] = []
        for chunk in batched(list(queries), max(self.batch_size, 16)):
            results.extend(self._run(self.processor.process_queries(list(chunk))))
        return results

    def embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        raise TypeError("ColPali-family models embed page images, not page text")
