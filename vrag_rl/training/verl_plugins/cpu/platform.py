"""verl's platform for the CPU: device `cpu`, process groups on gloo, Ray's `GPU` resource as a placement token.

Why `GPU` as the Ray resource: verl's resource pools count GPU/NPU resources only
(`verl/single_controller/ray/base.py` ~228-241), so the CPU run gives Ray logical GPUs
(`ray_kwargs.ray_init.num_gpus`); they only place workers, no code reads a GPU through them.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

from vrag_rl.training.verl_plugins.cpu import device_module

PLATFORM_NAME = "cpu"


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """The CPU as verl's accelerator (selected with `VERL_PLATFORM=cpu`; never auto-detected)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # never chosen by auto-detection (it would shadow a real GPU): only by VERL_PLATFORM=cpu
        return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME

    def current_device(self) -> Any:
        # verl passes `get_device_id()` straight to `.to()` / `device=` (e.g. `utils/fsdp_utils.py` ~507, ~59,
        # `workers/engine/fsdp/transformer_impl.py` ~730); an int there means an accelerator index, which torch
        # refuses without one. The CPU device itself works in every one of those calls.
        import torch

        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        device_module.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        device_module.manual_seed_all(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None  # expandable segments etc. are CUDA allocator settings

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"  # Ray sets it for its logical GPUs; nothing on the CPU reads it

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def cudart(self) -> Any:
        return None
