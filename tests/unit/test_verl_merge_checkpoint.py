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
    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    for name in model_dir.iterdir():
        if name.suffix != ".safetensors":
            shutil.copy(name, actor / "huggingface" / name.name)
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world_size}))
    for rank in range(world_size):
        torch.save(state, actor / f"model_world_size_{world_size}_rank_{rank}.pt")
    (root / merge_checkpoint.LATEST_FILE).write_text(str(step))
    return state


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
