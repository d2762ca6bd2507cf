"""The `torch.<device>` module verl calls on the CPU platform: memory, stream and RNG calls that mean nothing on a CPU.

Why a module of our own: verl calls `get_torch_device().<fn>` (empty_cache, synchronize, mem_get_info,
memory_allocated, get_rng_state, ...) wherever a GPU would need it; `torch.cpu` has only some of these
(`current_stream`, `synchronize`, `Stream`, `Event`, `device_count`), so the rest are answered here: nothing
to free, host memory for `mem_get_info`, the CPU generator's state for the RNG calls.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.cpu import Event, Stream, current_stream, device_count, stream  # noqa: F401  (verl calls these)

__all__ = ["Event", "Stream", "current_stream", "device_count", "stream", "empty_cache", "synchronize",
           "is_available", "set_device", "current_device", "mem_get_info", "memory_allocated", "memory_reserved",
           "max_memory_allocated", "max_memory_reserved", "reset_peak_memory_stats", "get_rng_state",
           "set_rng_state", "manual_seed", "manual_seed_all", "ipc_collect", "set_per_process_memory_fraction",
           "get_device_name"]


def empty_cache() -> None:
    """Nothing is cached on the CPU."""


def synchronize(device: Any = None) -> None:
    """CPU work is synchronous."""


def is_available() -> bool:
    return True


def set_device(device: Any) -> None:
    """One CPU device; nothing to select."""


def current_device() -> int:
    return 0


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of host memory, as `torch.cuda.mem_get_info` gives them for a GPU."""
    import psutil

    memory = psutil.virtual_memory()
    return int(memory.available), int(memory.total)


def memory_allocated(device: Any = None) -> int:
    return 0


def memory_reserved(device: Any = None) -> int:
    return 0


def max_memory_allocated(device: Any = None) -> int:
    return 0


def max_memory_reserved(device: Any = None) -> int:
    return 0


def reset_peak_memory_stats(device: Any = None) -> None:
    """No allocator statistics on the CPU."""


def get_rng_state(device: Any = None) -> torch.Tensor:
    return torch.get_rng_state()


def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
    torch.set_rng_state(state)


def manual_seed(seed: int) -> None:
    torch.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    torch.manual_seed(seed)


def ipc_collect() -> None:
    """No CUDA IPC handles on the CPU."""


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Host memory is not partitioned."""


def get_device_name(device: Any = None) -> str:
    return "cpu"
