"""Fixes to verl 0.9.1 that a real run needs on any device, applied by `register.py` in every worker.

Each fix names the verl line it works around and changes nothing else; `APPLIED` lists what ran.

- Text-only batches of Qwen2-VL / Qwen2.5-VL (`verl/models/transformers/qwen2_vl.py` ~388-394): when a micro-batch
  holds no image (every episode of it answered without a search, or was cut before the first page), verl runs the
  vision tower on a dummy patch and adds `0.0 * image_embeds.mean()` so every rank's graph holds the vision
  weights. With transformers 5 the tower returns a `BaseModelOutputWithPooling`, not a tensor, and `.mean()`
  raises — the first all-text micro-batch kills the actor. verl unpacks that output two branches above
  (`unpack_visual_output`); the fix makes the dummy call see the same unpacked tensor.
- 3D position ids of equal-length rows (`verl/utils/tensordict_utils.py` ~910, `maybe_fix_3d_position_ids`):
  Qwen-VL rows carry (4, L_i) position ids, stored as a jagged tensor ragged along L. When every row of a batch
  has the same L, torch's `as_nested_tensor` has no dimension that varies and makes the *first* one ragged
  (values (B*4, L), offsets 0, 4, 8, ...); verl's fix-up then declares dimension 2 ragged, and the actor's
  mini-batch split (`index_select_tensor_dict` ~495) fails with "split_sizes expects ... to sum exactly to ...".
  The fix rebuilds such a tensor ragged along L; a tensor already ragged along L gets verl's own fix-up.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any

APPLIED: list[str] = []


@contextmanager
def _tower_returns_embeddings(visual: Any):
    """Within the block, `visual(...)` returns its pooled embeddings (a tensor) instead of an output object."""
    from verl.utils.transformers_compat import unpack_visual_output

    forward = visual.forward

    def embeddings_only(*args: Any, **kwargs: Any):
        return unpack_visual_output(forward(*args, **kwargs))[0]

    visual.forward = embeddings_only
    try:
        yield
    finally:
        del visual.forward  # the class's forward again


def fix_text_only_vision_batches() -> None:
    """Wrap verl's `qwen2_vl._get_input_embeds` so its text-only branch gets a tensor from the vision tower."""
    from verl.models.transformers import qwen2_vl

    original = qwen2_vl._get_input_embeds
    if getattr(original, "_vrag_fix", False):
        return

    @functools.wraps(original)
    def _get_input_embeds(model: Any, input_ids: Any, attention_mask: Any = None, pixel_values: Any = None,
                          pixel_values_videos: Any = None, *args: Any, **kwargs: Any):
        if pixel_values is None and pixel_values_videos is None:
            with _tower_returns_embeddings(model.visual):
                return original(model, input_ids, attention_mask, pixel_values, pixel_values_videos, *args, **kwargs)
        return original(model, input_ids, attention_mask, pixel_values, pixel_values_videos, *args, **kwargs)

    _get_input_embeds._vrag_fix = True  # type: ignore[attr-defined]
    qwen2_vl._get_input_embeds = _get_input_embeds
    APPLIED.append("verl.models.transformers.qwen2_vl._get_input_embeds: text-only batches under transformers 5")


def fix_position_ids_layout(data: Any) -> None:
    """verl's `maybe_fix_3d_position_ids`, right also when every row has the same length (see the module docstring)."""
    from verl.utils.tensordict_utils import nested_tensor_from_tensor_list

    if "position_ids" not in data.keys():
        return
    position_ids = data["position_ids"]
    if not (position_ids.is_nested and position_ids.dim() == 3):
        return
    values, offsets = position_ids.values(), position_ids.offsets()
    total = int(offsets[-1])
    if values.dim() == 2 and total == values.shape[1]:  # ragged along L (what verl expects): only the index
        position_ids._ragged_idx = 2
    elif values.dim() == 2 and total == values.shape[0]:  # ragged along the 4 rows: rebuild ragged along L
        rows = [values[int(a):int(b)] for a, b in zip(offsets[:-1], offsets[1:])]
        data["position_ids"] = nested_tensor_from_tensor_list(rows, ragged_idx=2)


_POSITION_FIX_USERS = ("verl.utils.tensordict_utils", "verl.workers.engine_workers", "verl.workers.engine.base",
                       "verl.workers.engine_workers_tinker")


def fix_equal_length_position_ids() -> None:
    """Put `fix_position_ids_layout` in place of verl's fix-up, in its module and in those that imported it by name."""
    import sys

    from verl.utils import tensordict_utils

    original = tensordict_utils.maybe_fix_3d_position_ids
    if getattr(original, "_vrag_fix", False):
        return
    fix_position_ids_layout._vrag_fix = True  # type: ignore[attr-defined]
    for name in _POSITION_FIX_USERS:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "maybe_fix_3d_position_ids", None) is original:
            setattr(module, "maybe_fix_3d_position_ids", fix_position_ids_layout)  # noqa: B010  (any of those modules)
    APPLIED.append("verl.utils.tensordict_utils.maybe_fix_3d_position_ids: rows of equal length")


def apply_verl_fixes() -> list[str]:
    """Apply every fix once; returns what was applied."""
    fix_text_only_vision_batches()
    fix_equal_length_position_ids()
    return list(APPLIED)
