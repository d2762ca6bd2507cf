"""Device and dtype choices shared by the GPU embedders, so every model follows one policy."""
from __future__ import annotations


def resolve_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    return device


def resolve_dtype(dtype: str, device: str):
    """bf16 on GPUs (the dtype ColQwen2 was trained in), fp32 on CPU where bf16 matmuls are slow."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    try:
        return {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
                "fp32": torch.float32, "float32": torch.float32}[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use auto, bf16, fp16 or fp32") from None


def batched(items, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]
