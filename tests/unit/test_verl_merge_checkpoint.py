"""vrag_rl.training.train.merge_checkpoint (the CLI behind scripts/merge_checkpoint.py) over verl's own FSDP
merger, on a tiny Qwen2.5-VL checkpoint in verl's layout."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vrag_rl.training.train import merge_checkpoint

REPO = Path(__file__).resolve().parents[2]


def _fsdp_checkpoint(root: Path, model_dir: Path, step: int, world_size: int = 2) -> dict:
    """What verl's FSDPCheckpointManager writes for a model whose parameters are replicated plain tensors."""
    import torch
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(model_dir)
    with torch.no_grad():  # make the weights distinguishable from the base model's
        for param in model.parameters():
            param.add_(0.25 * step)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    _write_actor(root, model_dir, step, world_size, state)
    return state


def _write_actor(root: Path, model_dir: Path, step: int, world_size: int, state: dict,
                 lora_meta: dict | None = None) -> None:
    """verl's checkpoint layout: the HF config files, fsdp_config.json, one shard per rank, the latest step;
    `lora_meta` is what verl's FSDPCheckpointManager writes beside them for a peft model."""
    import torch

    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    for name in model_dir.iterdir():
        if name.suffix != ".safetensors":
            shutil.copy(name, actor / "huggingface" / name.name)
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world_size}))
    if lora_meta is not None:
        (actor / "lora_train_meta.json").write_text(json.dumps(lora_meta))
    for rank in range(world_size):
        torch.save(state, actor / f"model_world_size_{world_size}_rank_{rank}.pt")
    (root / merge_checkpoint.LATEST_FILE).write_text(str(step))


def test_merges_the_latest_step_into_a_loadable_model(tmp_path, tiny_qwen25vl_dir):
    pytest.importorskip("verl")  # the merge is verl's own merger; the layout checks below need no verl
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    root = tmp_path / "checkpoints" / "exp"
    _fsdp_checkpoint(root, tiny_qwen25vl_dir, step=1)
    state = _fsdp_checkpoint(root, tiny_qwen25vl_dir, step=2)
    out = tmp_path / "merged"
    assert merge_checkpoint.main([str(root), "--out", str(out)]) == 0
    merged = AutoModelForImageTextToText.from_pretrained(out)
    AutoProcessor.from_pretrained(out)
    merged_state = merged.state_dict()
    for key, value in state.items():  # the merger saves bf16: equal up to bf16 rounding
        torch.testing.assert_close(merged_state[key].float(), value.to(torch.bfloat16).float())
    assert not (tmp_path / "merged.merging").exists()
    # an existing output is never overwritten silently; an explicit step picks an older checkpoint
    assert merge_checkpoint.main([str(root), "--out", str(out)]) == 2
    assert merge_checkpoint.main([str(root), "--step", "1", "--out", str(out), "--overwrite", "--no-verify"]) == 0
    reloaded = AutoModelForImageTextToText.from_pretrained(out).state_dict()
    key = next(iter(state))
    assert not torch.equal(reloaded[key], merged_state[key])


def test_layout_errors_are_named_before_anything_loads(tmp_path, tiny_qwen25vl_dir, capsys):
    root = tmp_path / "exp"
    assert merge_checkpoint.main([str(root), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    root.mkdir()
    assert merge_checkpoint.main([str(root), "--out", str(tmp_path / "o")]) == 2
    assert "holds no verl checkpoint" in capsys.readouterr().err
    _fsdp_checkpoint(root, tiny_qwen25vl_dir, step=3, world_size=2)
    assert merge_checkpoint.main([str(root), "--step", "7", "--out", str(tmp_path / "o")]) == 2
    assert "no global_step_7 under" in capsys.readouterr().err
    (root / "global_step_3" / "actor" / "model_world_size_2_rank_1.pt").unlink()
    assert merge_checkpoint.main([str(root / "global_step_3"), "--out", str(tmp_path / "o")]) == 2
    assert "lacks 1 of 2 shard(s): ['model_world_size_2_rank_1.pt']" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_script_is_the_module_cli(tmp_path):
    """scripts/merge_checkpoint.py runs the module's main: same exit codes, same messages."""
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "merge_checkpoint.py"), str(tmp_path / "none"),
                           "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def _lora_fsdp_checkpoint(root: Path, model_dir: Path, step: int = 1, world_size: int = 2,
                          meta: bool = True) -> tuple[dict, dict, set[str]]:
    """verl's layout for a LoRA run (`lora_rank` > 0): the peft-wrapped model's full state in every shard
    (`...base_layer.weight`, `...lora_A.default.weight`) and `lora_train_meta.json` beside them. One layer's
    adapter is trained (lora_B non-zero); every other adapter keeps peft's zero lora_B."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    base = AutoModelForImageTextToText.from_pretrained(model_dir)
    base_state = {k: v.detach().clone() for k, v in base.state_dict().items()}
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    trained = set()
    torch.manual_seed(step)
    with torch.no_grad():
        for name, module in model.named_modules():
            if name.endswith("layers.0.self_attn.q_proj") and hasattr(module, "lora_B"):
                module.lora_B["default"].weight.normal_(0.0, 0.5)
                trained.add(name.removeprefix("base_model.model.") + ".weight")
    assert trained
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    _write_actor(root, model_dir, step, world_size, state,
                 {"r": 8, "lora_alpha": 16, "task_type": "CAUSAL_LM"} if meta else None)
    return base_state, state, trained


def test_a_lora_checkpoint_merges_into_weights_that_vllm_serves_without_the_adapter(tmp_path, tiny_qwen25vl_dir):
    """`vllm serve <merged>` loads the folder's weights and ignores an adapter beside them: the merge must fold
    the adapter in (peft's merge_and_unload). The merged weights differ from the base exactly where the adapter is
    non-zero, by W + alpha/r * B @ A, and the folder loads with transformers with peft unavailable."""
    pytest.importorskip("verl")
    pytest.importorskip("peft")
    import torch
    from transformers import AutoModelForImageTextToText

    root = tmp_path / "checkpoints" / "lora"
    base_state, state, trained = _lora_fsdp_checkpoint(root, tiny_qwen25vl_dir)
    out = tmp_path / "merged"
    assert merge_checkpoint.main([str(root), "--out", str(out)]) == 0
    assert not (out / "lora_adapter").exists() and not (out / "adapter_config.json").exists()
    merged = AutoModelForImageTextToText.from_pretrained(out).state_dict()
    assert set(merged) == set(base_state) and not any("lora" in k for k in merged)
    for key, base in base_state.items():
        if key in trained:
            prefix = "base_model.model." + key.removesuffix(".weight")
            a, b = state[prefix + ".lora_A.default.weight"], state[prefix + ".lora_B.default.weight"]
            expected = base + (16 / 8) * (b @ a)
            assert not torch.allclose(merged[key].float(), base.to(torch.bfloat16).float())  # the adapter is in
            torch.testing.assert_close(merged[key].float(), expected, atol=1e-2, rtol=1e-2)  # bf16 on disk
        else:  # zero adapters and every other weight: the base, up to the merger's bf16 rounding
            torch.testing.assert_close(merged[key].float(), base.to(torch.bfloat16).float())
    probe = ("import sys; sys.modules['peft'] = None\n"  # importing peft now fails: transformers alone loads it
             "from transformers import AutoModelForImageTextToText\n"
             f"m = AutoModelForImageTextToText.from_pretrained({str(out)!r})\n"
             f"w = dict(m.named_parameters())[{next(iter(trained))!r}]\n"
             "print('LOADED', float(w.float().abs().sum()))\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "LOADED" in proc.stdout, proc.stderr[-3000:]
    key = next(iter(trained))
    assert float(proc.stdout.split("LOADED")[1]) == pytest.approx(float(merged[key].float().abs().sum()), rel=1e-3)


def test_a_lora_checkpoint_without_its_alpha_is_refused(tmp_path, tiny_qwen25vl_dir, capsys):
    """Without lora_train_meta.json verl's merger writes lora_alpha 0: merged, that is the base model again."""
    pytest.importorskip("verl")
    pytest.importorskip("peft")
    root = tmp_path / "checkpoints" / "lora"
    _lora_fsdp_checkpoint(root, tiny_qwen25vl_dir, meta=False)
    assert merge_checkpoint.main([str(root), "--out", str(tmp_path / "merged")]) == 1
    err = capsys.readouterr().err
    assert "lora_alpha" in err and "lora_train_meta.json" in err
    assert not (tmp_path / "merged").exists() and not (tmp_path / "merged.merging").exists()


def test_the_lora_merge_targets_exactly_the_modules_the_adapter_adapts():
    """verl 0.9.1's merger writes target_modules as last name parts ("0" for `visual.merger.mlp.0`), which peft
    matches against every `blocks.0`; the merge takes the module names from the adapter's tensors instead."""
    tensors = {"base_model.model.model.visual.merger.mlp.0.lora_A.weight": 0,
               "base_model.model.model.visual.merger.mlp.0.lora_B.weight": 0,
               "base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight": 0,
               "base_model.model.lm_head.weight": 0}
    assert merge_checkpoint.adapted_modules(tensors) == ["model.language_model.layers.0.self_attn.q_proj",
                                                         "model.visual.merger.mlp.0"]
