"""The `hf` rollout backend of verl: a Ray actor that generates with transformers, weights synced from the actor.

Why: verl's rollout backends are vLLM, SGLang and TensorRT-LLM (`verl/workers/rollout/replica.py` ~388-390),
none of which runs on a CPU. verl keeps the backend behind two registries, so a backend is three classes:

- `HFRolloutServer` — what `vLLMHttpServer` is to vLLM: one Ray actor per replica that owns a copy of the
  model and answers verl's `LLMServerClient` (`generate(prompt_ids, sampling_params, request_id, image_data)`
  → `TokenOutput` with token ids and log-probs). Generation is the project's `LocalTransformersGenerate`
  (the demo's and the local trainer's in-process policy), so prompts with images go through the model's own
  processor. `sleep` / `wake_up` / KV-cache calls are no-ops: there is no KV cache to free between requests.
- `HFReplica` — the `RolloutReplica` that starts that actor beside the trainer's workers (same node; on a GPU
  node it sees the first worker's GPU, as vLLM's server does).
- `HFServerAdapter` — the `BaseRollout` inside the trainer's hybrid worker: `update_weights` gathers the
  actor's full tensors (every rank takes part in FSDP's gather) and rank 0 hands them to the server, which
  loads them with `load_state_dict(strict=False)` and refuses names it does not know (a silent partial sync
  would train one model and sample another).

Generation is one request at a time per server (a lock): on a CPU, batching buys nothing for a tiny model,
and a GPU user wanting throughput uses vLLM.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from vrag_rl.training.verl_plugins.cpu import BACKEND

logger = logging.getLogger(__name__)

SERVER_PREFIX = f"{BACKEND}_server"


def server_name(replica_rank: int, node_rank: int = 0, suffix: str = "") -> str:
    """The Ray actor name of a replica's server (the adapter finds it by this name, as vLLM's does)."""
    return f"{SERVER_PREFIX}_{replica_rank}_{node_rank}{suffix}"


def _sampling(params: dict[str, Any], max_model_len: int, prompt_len: int):
    """verl's `sampling_params` dict as the project's `SamplingParams` (what vLLM would honour of it)."""
    from vrag_rl.agent.policy import SamplingParams

    room = max_model_len - prompt_len
    if room < 1:
        raise ValueError(f"prompt length ({prompt_len}) leaves no room to generate within max_model_len "
                         f"({max_model_len})")
    max_tokens = int(params.get("max_tokens") or params.get("max_new_tokens") or room)
    seed = params.get("seed")
    return SamplingParams(temperature=float(params.get("temperature", 1.0)), top_p=float(params.get("top_p", 1.0)),
                          max_tokens=max(1, min(max_tokens, room)), stop=tuple(params.get("stop") or ()),
                          seed=int(seed) if seed is not None else None)


class HFRolloutServer:
    """verl's rollout server, in transformers (see the module docstring). Wrapped with `ray.remote` by `HFReplica`."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int = 0, node_rank: int = 0,
                 device: str = "cpu") -> None:
        from transformers import AutoModelForImageTextToText, AutoProcessor

        from vrag_rl.agent.policies.local_transformers import LocalTransformersGenerate

        self.config = config
        self.replica_rank, self.node_rank = replica_rank, node_rank
        path = model_config.local_path if getattr(model_config, "local_path", None) else model_config.path
        self.device = device
        dtype = torch.float32 if device == "cpu" else torch.bfloat16
        model: Any = AutoModelForImageTextToText.from_pretrained(path, dtype=dtype)
        self.model = model.to(device).eval()
        self.processor = AutoProcessor.from_pretrained(path)
        self.generator = LocalTransformersGenerate(self.model, self.processor, device=device)
        self.max_model_len = int(getattr(config, "max_model_len", None) or
                                 (config.prompt_length + config.response_length))
        self.global_steps: int | None = None
        self.weight_syncs = 0
        self.requests = 0
        self._lock = asyncio.Lock()

    # --- what verl's LLMServerClient and replica call -------------------------------------------------------
    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       image_data: list[Any] | None = None, video_data: list[Any] | None = None,
                       **kwargs: Any) -> TokenOutput:
        """Token ids in, token ids and log-probs out (`vLLMHttpServer.generate`'s contract)."""
        if video_data:
            raise ValueError("the hf rollout backend takes images, not video")
        ids = [int(t) for t in prompt_ids]
        sampling = _sampling(dict(sampling_params or {}), self.max_model_len, len(ids))
        async with self._lock:  # one generation at a time on this model copy
            out = await asyncio.to_thread(self.generator.generate_sync, ids, sampling, list(image_data or []))
        self.requests += 1
        return TokenOutput(token_ids=out.token_ids, log_probs=out.logprobs, stop_reason="completed",
                           num_preempted=0, extra_fields={"global_steps": self.global_steps, "num_cached_tokens": 0})

    async def update_weights(self, named_tensors: list[tuple[str, torch.Tensor]],
                             global_steps: int | None = None) -> dict[str, int]:
        """Load the actor's tensors; names the model does not have are an error, never skipped."""
        state = {name: tensor for name, tensor in named_tensors}
        async with self._lock:
            own = self.model.state_dict()
            unknown = sorted(set(state) - set(own))
            if unknown:
                raise KeyError(f"weight sync: {len(unknown)} name(s) the rollout model does not have, e.g. "
                               f"{unknown[:3]}")
            with torch.no_grad():
                for name, tensor in state.items():
                    own[name].copy_(tensor.to(own[name].dtype))
        self.weight_syncs += 1
        if global_steps is not None:
            self.global_steps = int(global_steps)
        return {"tensors": len(state), "model_tensors": len(own)}

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = int(global_steps)

    async def stats(self) -> dict[str, Any]:
        """Requests served and weight syncs taken (for the smoke's summary and tests)."""
        return {"requests": self.requests, "weight_syncs": self.weight_syncs, "global_steps": self.global_steps}

    async def get_server_address(self) -> tuple[str, int]:
        return "127.0.0.1", 0  # no HTTP endpoint: verl's agent loops reach the server through its Ray handle

    # no KV cache and no weights to offload between requests: verl's memory calls are no-ops here
    async def wake_up(self, tags: list[str] | None = None) -> None: ...
    async def sleep(self) -> None: ...
    async def clear_kv_cache(self) -> None: ...
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def wait_for_requests_to_drain(self) -> None:
        async with self._lock:
            return None
    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict:
        return {"aborted_count": 0, "request_ids": []}  # a generation is never interrupted midway here
    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict:
        return {"aborted": False, "request_id": request_id}
    async def resume_generation(self) -> None: ...
    async def start_profile(self, **kwargs: Any) -> None: ...
    async def stop_profile(self) -> None: ...


class HFReplica(RolloutReplica):
    """One `HFRolloutServer` per replica, placed on the node of the replica's first worker."""

    def get_ray_class_with_init_args(self):  # pragma: no cover - only the hybrid mode is supported
        raise NotImplementedError("the hf rollout backend runs in verl's hybrid mode (rollout beside the actor)")

    async def launch_servers(self) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        from verl.utils.device import get_device_name, get_resource_name

        if not self.workers:
            raise RuntimeError("the hf rollout backend needs the trainer's workers (verl's hybrid mode)")
        node_id, accelerator = await self.workers[0].__ray_call__.remote(
            lambda self: (ray.get_runtime_context().get_node_id(),
                          (ray.get_runtime_context().get_accelerator_ids().get(get_resource_name()) or ["0"])[0]))
        device = get_device_name()
        env: dict[str, str] = {}
        if device != "cpu":  # share the first worker's GPU, as vLLM's server does in hybrid mode
            from verl.plugin.platform import get_platform

            env = {var: "1" for var in get_platform().ray_noset_envvars()}
            env[get_platform().visible_devices_envvar()] = str(accelerator)
        name = server_name(self.replica_rank, 0, self.name_suffix)
        server: Any = ray.remote(HFRolloutServer).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            runtime_env={"env_vars": env}, name=name, max_concurrency=self.max_concurrency, num_cpus=0,
        ).remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank,
                 device="cpu" if device == "cpu" else f"{device}:0")
        await server.stats.remote()  # the model is loaded: fail here, not in the first rollout
        self.servers = [server]
        self._server_handle = server
        self._server_address = name


class HFServerAdapter(BaseRollout):
    """The hybrid worker's side of the `hf` backend: weight sync to the replica's server (rank 0 sends)."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        world = self.config.tensor_model_parallel_size * self.config.data_parallel_size * \
            self.config.pipeline_model_parallel_size
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.has_server = rank % world == 0
        self.sleep_level = 1
        self._server: Any = None

    def _server_handle(self) -> Any:
        if self._server is None:
            self._server = ray.get_actor(server_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    @torch.no_grad()
    async def update_weights(self, weights: Any, wire_format: str = "named_tensors",
                             global_steps: int | None = None, peft_config: Any = None, **kwargs: Any) -> None:
        """Every rank walks the generator (FSDP gathers collectively); rank 0 sends the full tensors."""
        if wire_format != "named_tensors":
            raise ValueError(f"the hf rollout backend takes wire_format='named_tensors', not {wire_format!r}")
        if peft_config is not None:
            raise ValueError("the hf rollout backend syncs full weights: set actor_rollout_ref.model.lora.merge=true "
                             "for LoRA (verl merges the adapter before the sync)")
        started = time.perf_counter()
        tensors: list[tuple[str, torch.Tensor]] = []
        for name, tensor in weights:
            full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
            if self.has_server:
                tensors.append((name, full.detach().to("cpu", copy=True)))
        if not self.has_server:
            return None
        result = await self._server_handle().update_weights.remote(tensors, global_steps)
        logger.info("hf rollout: %s tensors synced in %.2fs", result["tensors"], time.perf_counter() - started)
        return None
