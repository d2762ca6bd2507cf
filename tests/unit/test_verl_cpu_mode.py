"""verl's own trainer on the CPU (`vrag_rl/training/verl_plugins/cpu`) and the verl fixes a real run needed.

Real: verl 0.9.1's platform and rollout registries, its tensordict mini-batch split, its Qwen2-VL input-embedding
code, the tiny Qwen2.5-VL of `testkit` (real transformers classes, random weights) in the `hf` rollout server.
The end-to-end run (verl's trainer, Ray, FSDP2 on gloo, checkpoints, resume, merge, evaluation) is
`tests/integration/test_verl_cpu_smoke.py`.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("verl")

REPO = Path(__file__).resolve().parents[2]


def _in_cpu_process(code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with the CPU mode's environment (verl reads it at import)."""
    from vrag_rl.training.verl_plugins.cpu import cpu_environment

    env = {**os.environ, **cpu_environment()}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_the_cpu_environment_selects_the_platform_backend_and_rollout():
    proc = _in_cpu_process(
        "import torch, verl\n"
        "from verl.utils.device import get_device_name, get_nccl_backend, get_device_id, get_torch_device, "
        "get_resource_name\n"
        "from verl.workers.rollout.replica import get_rollout_replica_class\n"
        "from verl.workers.rollout.base import get_rollout_class\n"
        "print(get_device_name(), get_nccl_backend(), get_resource_name())\n"
        "print(torch.zeros(2).to(get_device_id()).device)\n"
        "m = get_torch_device(); m.empty_cache(); m.synchronize(); print(m.mem_get_info()[1] > 0)\n"
        "print(get_rollout_replica_class('hf').__name__, get_rollout_class('hf', 'async').__name__)\n"
        "from verl.utils import distributed; print(distributed.initialize_global_process_group_ray._vrag_cpu)\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")
    assert lines[0] == "cpu gloo GPU"  # Ray's GPU resource is only verl's placement token on the CPU
    assert lines[1] == "cpu"  # verl passes get_device_id() to .to(): the CPU device, never an accelerator index
    assert lines[2] == "True"
    assert lines[3] == "HFReplica HFServerAdapter"
    assert lines[4] == "True"  # the process-group backend patch (verl/utils/distributed.py ~89)


def test_without_the_cpu_platform_verl_is_untouched():
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_PLATFORM", "VERL_USE_EXTERNAL_MODULES")}
    env["VERL_USE_EXTERNAL_MODULES"] = "vrag_rl.training.verl_plugins.cpu.register"
    proc = subprocess.run([sys.executable, "-c",
                           "import verl\nfrom verl.utils import distributed\n"
                           "from verl.plugin.platform.platform_manager import PlatformRegistry\n"
                           "from verl.workers.rollout.replica import RolloutReplicaRegistry\n"
                           "print(hasattr(distributed.initialize_global_process_group_ray, '_vrag_cpu'))\n"
                           "print('cpu' in PlatformRegistry.registered_names(),"
                           " 'hf' in RolloutReplicaRegistry._registry)\n"
                           "from vrag_rl.training.verl_plugins.cpu.platform import PlatformCPU\n"
                           "print(PlatformCPU().is_platform_available(use_smi_check=True))\n"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # registered (harmless) but never auto-detected, and no patch applied without VERL_PLATFORM=cpu
    assert proc.stdout.split("\n")[:3] == ["False", "True True", "False"]


def test_equal_length_rows_split_into_mini_batches():
    """verl's fix-up declared dimension 2 ragged on a tensor torch had made ragged along the 4 rows (all L equal)."""
    from tensordict import TensorDict
    from verl.utils.tensordict_utils import index_select_tensor_dict

    from vrag_rl.training.verl_plugins.verl_fixes import fix_position_ids_layout

    for lengths in ([5, 5, 5], [5, 7, 3]):
        parts = [torch.arange(4 * n).reshape(4, n) + 100 * i for i, n in enumerate(lengths)]
        data = TensorDict({"position_ids": torch.nested.as_nested_tensor(parts, layout=torch.jagged)}, batch_size=[3])
        fix_position_ids_layout(data)
        picked = index_select_tensor_dict(data, torch.tensor([2, 0]))["position_ids"].unbind()
        assert torch.equal(picked[0], parts[2]) and torch.equal(picked[1], parts[0])


def test_verls_own_fixup_fails_on_equal_length_rows():
    """The bug the fix is for, shown on verl's code as shipped (if verl fixes it, this test tells us to drop ours)."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils

    parts = [torch.arange(20).reshape(4, 5) for _ in range(3)]
    data = TensorDict({"position_ids": torch.nested.as_nested_tensor(parts, layout=torch.jagged)}, batch_size=[3])
    _verl_original_fixup()(data)
    with pytest.raises(RuntimeError):  # torch: "split_with_sizes expects ..." or "Expected cond to be True"
        tensordict_utils.index_select_tensor_dict(data, torch.tensor([0]))


def _verl_original_fixup():
    def maybe_fix_3d_position_ids(data):  # verl/utils/tensordict_utils.py ~910, as shipped
        if "position_ids" in data.keys() and data["position_ids"].dim() == 3 and data["position_ids"].is_nested:
            data["position_ids"]._ragged_idx = 2
    return maybe_fix_3d_position_ids


def test_a_text_only_batch_runs_the_vision_tower_dummy(tmp_path):
    """verl/models/transformers/qwen2_vl.py ~394 calls .mean() on the tower's output object under transformers 5."""
    from transformers import AutoModelForImageTextToText
    from verl.models.transformers import qwen2_vl

    from testkit.tiny_models import build_tiny_qwen25vl
    from vrag_rl.training.verl_plugins import verl_fixes

    model = AutoModelForImageTextToText.from_pretrained(build_tiny_qwen25vl(tmp_path / "m")).eval()
    ids = torch.tensor([[5, 6, 7, 8]])
    verl_fixes.fix_text_only_vision_batches()
    embeds, _ = qwen2_vl._get_input_embeds(model.model, ids, torch.ones_like(ids))
    assert embeds.shape[:2] == (1, 4) and torch.isfinite(embeds).all()
    assert "forward" not in vars(model.model.visual)  # the tower's own forward is back after the call
    original = qwen2_vl._get_input_embeds.__wrapped__
    with pytest.raises(AttributeError, match="mean"):
        original(model.model, ids, torch.ones_like(ids))


def _server(tmp_path: Path):
    from testkit.tiny_models import build_tiny_qwen25vl
    from vrag_rl.training.verl_plugins.cpu.hf_rollout import HFRolloutServer

    path = build_tiny_qwen25vl(tmp_path / "model")
    config = SimpleNamespace(max_model_len=256, prompt_length=128, response_length=128)
    return HFRolloutServer(config, SimpleNamespace(path=str(path), local_path=None))


def test_the_hf_rollout_server_answers_verls_generate_contract(tmp_path):
    server = _server(tmp_path)
    prompt = server.processor.tokenizer("hello world", add_special_tokens=False)["input_ids"]
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": 0, "max_tokens": 12}
    outs = [asyncio.run(server.generate(prompt_ids=prompt, sampling_params=params, request_id=str(i)))
            for i in range(3)]
    for out in outs:
        assert 1 <= len(out.token_ids) <= 12 and len(out.log_probs) == len(out.token_ids)
        assert all(lp <= 0 for lp in out.log_probs) and out.stop_reason == "completed"
        assert "global_steps" in out.extra_fields
    # no seed: every request draws new samples (a forked generator replayed the same tokens for a whole group)
    assert len({tuple(o.token_ids) for o in outs}) > 1
    seeded = [asyncio.run(server.generate(prompt_ids=prompt, sampling_params={**params, "seed": 7}, request_id="s"))
              for _ in range(2)]
    assert seeded[0].token_ids == seeded[1].token_ids
    with pytest.raises(ValueError, match="no room"):
        asyncio.run(server.generate(prompt_ids=[5] * 256, sampling_params=params, request_id="long"))


def test_the_hf_rollout_server_loads_synced_weights_and_refuses_unknown_names(tmp_path):
    server = _server(tmp_path)
    name, tensor = next(iter(server.model.state_dict().items()))
    changed = torch.full_like(tensor, 0.5)
    result = asyncio.run(server.update_weights([(name, changed)], global_steps=3))
    assert result["tensors"] == 1 and torch.equal(server.model.state_dict()[name], changed)
    assert asyncio.run(server.stats())["global_steps"] == 3
    with pytest.raises(KeyError, match="does not have"):
        asyncio.run(server.update_weights([("not.a.weight", changed)]))


def test_the_adapter_refuses_lora_adapters_and_other_wire_formats():
    from vrag_rl.training.verl_plugins.cpu.hf_rollout import HFServerAdapter

    adapter = HFServerAdapter.__new__(HFServerAdapter)
    adapter.has_server = True
    with pytest.raises(ValueError, match="lora.merge"):
        asyncio.run(adapter.update_weights(iter([]), peft_config={"r": 8}))
    with pytest.raises(ValueError, match="named_tensors"):
        asyncio.run(adapter.update_weights(iter([]), wire_format="delta_flush"))
