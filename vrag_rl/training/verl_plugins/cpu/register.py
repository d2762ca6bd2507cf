"""Registers the CPU platform and the `hf` rollout backend with verl; named by `VERL_USE_EXTERNAL_MODULES`.

verl imports this module in every process that imports verl (`verl/__init__.py` ~49), the Ray workers
included, so the registries hold our entries wherever verl looks them up. Registering changes nothing by
itself: the platform is chosen by `VERL_PLATFORM=cpu` and the backend by `actor_rollout_ref.rollout.name=hf`.
"""
from __future__ import annotations

import os

from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.replica import RolloutReplicaRegistry

from vrag_rl.training.verl_plugins.cpu import BACKEND
from vrag_rl.training.verl_plugins.cpu import platform as _platform  # noqa: F401  (registers "cpu")
from vrag_rl.training.verl_plugins.cpu.patches import apply_cpu_patches


# hf_rollout is imported only when verl asks for the backend: a Ray worker that unpickles its server class imports
# hf_rollout first, which imports verl, which imports this module; importing hf_rollout here would be circular.
def _load_hf_replica():
    from vrag_rl.training.verl_plugins.cpu.hf_rollout import HFReplica

    return HFReplica


RolloutReplicaRegistry.register(BACKEND, _load_hf_replica)
# verl's worker-side adapters are a plain dict of "module.Class" names (`verl/workers/rollout/base.py` ~89)
rollout_base._ROLLOUT_REGISTRY[(BACKEND, "async")] = "vrag_rl.training.verl_plugins.cpu.hf_rollout.HFServerAdapter"

if os.environ.get("VERL_PLATFORM", "").strip().lower() == _platform.PLATFORM_NAME:
    apply_cpu_patches()
