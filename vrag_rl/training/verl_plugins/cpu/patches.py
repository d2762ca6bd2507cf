"""What verl 0.9.1 needs changed to train on the CPU platform: each patch names the verl line it works around.

Applied by `register.py` only when `VERL_PLATFORM=cpu`; on a GPU the same code runs unpatched.
"""
from __future__ import annotations

import functools
from typing import Any

APPLIED: list[str] = []


def _patch_process_group_backend() -> None:
    """`verl/utils/distributed.py` ~89: the default backend is `f"cpu:gloo,{device}:{backend}"`, which on the CPU
    platform reads "cpu:gloo,cpu:gloo" — torch refuses a device named twice. One "gloo" serves both."""
    from verl.utils import distributed

    original = distributed.initialize_global_process_group_ray
    if getattr(original, "_vrag_cpu", False):
        return

    @functools.wraps(original)
    def initialize_global_process_group_ray(timeout_second: Any = None, backend: Any = None):
        return original(timeout_second=timeout_second, backend=backend or "gloo")

    initialize_global_process_group_ray._vrag_cpu = True  # type: ignore[attr-defined]
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray
    APPLIED.append("verl.utils.distributed.initialize_global_process_group_ray: backend gloo")


def apply_cpu_patches() -> list[str]:
    """Apply every CPU patch once; returns what was applied (for logs and tests)."""
    _patch_process_group_backend()
    return list(APPLIED)
