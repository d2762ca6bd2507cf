"""verl 0.9.1's own trainer on CPU, without a fork: a platform, a transformers rollout backend and the few patches.

Why: a whole RL pipeline (data, Ray placement, FSDP2 actor, rollout server, agent loops, rewards, checkpoints,
resume) should be checked on a laptop or a CI runner before anyone rents GPUs. verl already takes its device,
process-group backend and Ray resource name from a platform registry, and its rollout backends from a replica
registry; this package fills both:

- `platform.PlatformCPU` ("cpu"): device `cpu`, backend `gloo`, Ray resource `GPU` (logical GPUs are only
  placement tokens: `ray_init.num_gpus`), a device module of no-op memory and stream calls (`device_module`);
- `hf_rollout`: the `hf` rollout backend, a Ray actor that generates with transformers (token ids and log-probs,
  images through the model's processor), its weights synced from the actor every step, sleep / wake-up / cache
  calls as no-ops (a CPU has no KV cache to free);
- `patches`: what verl needs changed on CPU, each patch naming the verl line it works around.

Importing this package registers nothing. `register.py` does, and is what `VERL_USE_EXTERNAL_MODULES` names;
`cpu_environment()` gives the environment that selects the platform (see docs/training_cluster.md, CPU mode).
"""
from __future__ import annotations

REGISTER_MODULE = "vrag_rl.training.verl_plugins.cpu.register"
BACKEND = "hf"  # actor_rollout_ref.rollout.name of the transformers rollout backend


def cpu_environment() -> dict[str, str]:
    """Environment variables that put verl's trainer (and every Ray worker it starts) on the CPU platform.

    - `VERL_USE_EXTERNAL_MODULES`: verl imports `register.py` in every process (`verl/__init__.py` ~49);
    - `VERL_PLATFORM=cpu`: platform detection would fall back to `nvidia` (`platform_manager.py` ~92, ~117);
    - `VERL_ENGINE_DEVICE=cuda`: the FSDP engine is registered for cuda/npu only
      (`workers/engine/fsdp/transformer_impl.py` ~1143); the engine's real device comes from the platform.
    """
    return {"VERL_USE_EXTERNAL_MODULES": REGISTER_MODULE, "VERL_PLATFORM": "cpu", "VERL_ENGINE_DEVICE": "cuda"}
