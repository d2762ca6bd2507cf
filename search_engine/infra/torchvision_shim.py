"""Make PyPI's CUDA-linked torchvision importable beside a CPU-only torch.

Why this exists: the torchvision wheel on PyPI links against libtorch_cuda; beside the CPU
build of torch its C extension fails to load, and `import torchvision` then dies while
registering fake kernels for `torchvision::nms` ("operator ... does not exist"). transformers'
Qwen-VL processors and colpali-engine import torchvision, so every visual model would break.
Declaring the two operator schemas before torchvision is imported lets its pure-Python parts
(transforms.v2, all that transformers needs) load; the C kernels stay unavailable, which this
project never uses.

The fix is installed as a lazy import hook: it costs nothing until something imports
torchvision, and it does nothing on a CUDA torch (which loads the real kernels).
"""
from __future__ import annotations

import importlib.abc
import sys

_library = None


def declare_torchvision_ops() -> None:
    """Declare torchvision's nms/qnms schemas if torch is CPU-only and they are missing."""
    global _library
    if _library is not None:
        return
    import torch

    if torch.version.cuda is not None or getattr(torch.version, "hip", None):
        return
    try:
        library = torch.library.Library("torchvision", "DEF")
        library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    except RuntimeError:  # already declared: torchvision's own extension loaded
        return
    _library = library


class _TorchvisionImportHook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):  # noqa: D401 - importlib protocol
        if name == "torchvision":
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
            declare_torchvision_ops()
        return None


def install_torchvision_hook() -> None:
    if "torchvision" in sys.modules:
        return
    if not any(isinstance(hook, _TorchvisionImportHook) for hook in sys.meta_path):
        sys.meta_path.insert(0, _TorchvisionImportHook())
