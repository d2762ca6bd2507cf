"""Helpers shared by the embedders; the device/dtype policy itself lives in `search_engine.infra.devices`."""
from __future__ import annotations

from search_engine.infra.devices import resolve_device, resolve_dtype

__all__ = ["batched", "resolve_device", "resolve_dtype"]


def batched(items, size: int):
    """Consecutive slices of `items` of at most `size`."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
