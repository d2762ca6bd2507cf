"""One device and dtype policy for every model in the project (embedders, the transformers policy).

`resolve_device("auto")`: CUDA when available, else Apple's MPS when available, else CPU; a device
named explicitly but absent is a clear error (not a crash deep inside torch). `resolve_dtype("auto",
device)`: bf16 on CUDA (what ColQwen2 and Qwen2.5-VL were trained in), fp16 on MPS (its bf16 support
is partial), fp32 on CPU (bf16 matmuls there are slow).
"""
from __future__ import annotations

_DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16", "half": "float16",
           "fp32": "float32", "float32": "float32", "float": "float32"}


def _mps_available(torch) -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def resolve_device(device: str = "auto", allow_mps: bool = True) -> str:
    """The torch device to use; `allow_mps=False` keeps "auto" off MPS for a caller that runs better on CPU."""
    import torch

    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if allow_mps and _mps_available(torch):
            return "mps"
        return "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but CUDA is not available")
    if device == "mps" and not _mps_available(torch):
        raise RuntimeError("device 'mps' requested but MPS is not available")
    return device


def resolve_dtype(dtype: str, device: str):
    """A torch dtype from a name (auto, bf16/bfloat16, fp16/float16/half, fp32/float32/float)."""
    import torch

    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16
        return torch.float16 if device.startswith("mps") else torch.float32
    try:
        return getattr(torch, _DTYPES[dtype.lower()])
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use auto, bf16, fp16 or fp32") from None
