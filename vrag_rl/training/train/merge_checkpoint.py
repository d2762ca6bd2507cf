"""Merge a verl FSDP checkpoint into a Hugging Face model directory (for `vllm serve` and the demo).

    python scripts/merge_checkpoint.py checkpoints/vrag/grpo_qwen2_5_vl_7b --out models/vrag-7b-step100
    python -m vrag_rl.training.train.merge_checkpoint checkpoints/vrag/grpo_qwen2_5_vl_7b --step 50 \
        --out models/vrag-7b-step50
    vllm serve models/vrag-7b-step100 --port 8001          # then: ./run_demo.sh --policy-url http://127.0.0.1:8001/v1
    python scripts/merge_checkpoint.py checkpoints/vrag/grpo_qwen2_5_vl_3b_lora_24gb --out models/vrag-3b-lora
    vllm serve models/vrag-3b-lora --port 8001             # a LoRA run: the adapter is folded into the weights

The merge itself is verl's own `FSDPModelMerger` (the same code as `python -m verl.model_merger
merge --backend fsdp`); this module only finds the step to merge (the latest one by default,
from verl's `latest_checkpointed_iteration.txt`), checks that every shard is there before
loading gigabytes, writes into a temporary directory that is renamed into place only when the
merge succeeded, and loads the result back (config, processor, and — unless `--no-verify` —
the weights) so a broken output is reported here, not by vLLM later.

LoRA runs (`actor_rollout_ref.model.lora_rank` > 0): verl's merger writes the *base* weights plus a
`lora_adapter/` folder beside them, and `vllm serve <folder>` loads the weights and ignores the folder, so it
would serve the un-adapted model. `merge_lora_adapter` folds the adapter in with peft's `merge_and_unload`
(in float32, saved back in the checkpoint's dtype) and removes the folder: the output is plain merged weights
that transformers and vLLM load without peft. The adapter's scale comes from verl's `lora_train_meta.json`
beside the shards; a checkpoint without it (verl's merger then writes `lora_alpha: 0`, a no-op adapter) is
refused rather than silently merged into the base model.

Exit codes: 0 merged, 1 the merge or the verification failed, 2 bad arguments or checkpoint layout.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from search_engine.infra.cli_exit import exit_status

LATEST_FILE = "latest_checkpointed_iteration.txt"  # written by verl's trainer in trainer.default_local_dir
LORA_ADAPTER_DIR = "lora_adapter"  # where verl's merger puts a LoRA run's adapter, beside the base weights


class CheckpointLayoutError(ValueError):
    """The path is not a verl FSDP checkpoint (or a shard is missing); the message says what was expected."""


class LoraMergeError(RuntimeError):
    """A LoRA adapter could not be folded into the weights (no scale, or its weights did not load)."""


def find_actor_dir(path: Path, step: int | None = None) -> Path:
    """Accept the experiment dir (trainer.default_local_dir), a `global_step_N` dir, or its `actor` dir."""
    if not path.exists():
        raise CheckpointLayoutError(f"{path} does not exist")
    if (path / "fsdp_config.json").exists():
        return path
    if (path / "actor").is_dir():
        return find_actor_dir(path / "actor")
    steps = sorted((int(p.name.rsplit("_", 1)[-1]), p) for p in path.glob("global_step_*")
                   if p.name.rsplit("_", 1)[-1].isdigit())
    if not steps:
        if (path / "dist_ckpt").exists() or (path / "model").is_dir():
            raise CheckpointLayoutError(f"{path} looks like a Megatron checkpoint: use "
                                        "`python -m verl.model_merger merge --backend megatron`")
        raise CheckpointLayoutError(f"{path} holds no verl checkpoint (no fsdp_config.json, actor/ or global_step_*/)")
    if step is None:
        latest = path / LATEST_FILE
        step = int(latest.read_text().strip()) if latest.exists() else steps[-1][0]
    chosen = dict(steps).get(step)
    if chosen is None:
        raise CheckpointLayoutError(f"no global_step_{step} under {path}; available: {[s for s, _ in steps]}")
    return find_actor_dir(chosen)


def check_shards(actor_dir: Path) -> int:
    """Every rank's shard and the Hugging Face config must exist; returns the world size."""
    try:
        world_size = int(json.loads((actor_dir / "fsdp_config.json").read_text())["world_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointLayoutError(f"{actor_dir}/fsdp_config.json is unreadable or lacks world_size: {exc}") from exc
    missing = [f"model_world_size_{world_size}_rank_{r}.pt" for r in range(world_size)
               if not (actor_dir / f"model_world_size_{world_size}_rank_{r}.pt").is_file()]
    if missing:
        raise CheckpointLayoutError(f"{actor_dir} lacks {len(missing)} of {world_size} shard(s): {missing[:4]}"
                                    f"{' ...' if len(missing) > 4 else ''} (was the checkpoint copied completely?)")
    if not (actor_dir / "huggingface" / "config.json").is_file():
        raise CheckpointLayoutError(f"{actor_dir}/huggingface/config.json is missing (verl saves the model config "
                                    "and processor there; the merge needs them)")
    return world_size


def merge(actor_dir: Path, out: Path, overwrite: bool = False, verify: bool = True) -> Path:
    """Run verl's FSDP merger into a temporary sibling of `out`, verify, then move it into place."""
    from verl.model_merger.base_model_merger import ModelMergerConfig
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} exists and is not empty (pass --overwrite to replace it)")
    tmp = out.with_name(out.name + ".merging")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        config = ModelMergerConfig(operation="merge", backend="fsdp", local_dir=str(actor_dir), target_dir=str(tmp),
                                   hf_model_config_path=str(actor_dir / "huggingface"))
        merger = FSDPModelMerger(config)
        merger.merge_and_save()
        merger.cleanup()
        if (tmp / LORA_ADAPTER_DIR).is_dir():
            merge_lora_adapter(tmp, merger.get_transformers_auto_model_class())
        verify_model_dir(tmp, load_weights=verify)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        shutil.rmtree(out)
    tmp.replace(out)
    return out


def adapted_modules(adapter_tensors: dict[str, Any]) -> list[str]:
    """The module names (relative to the base model) that a peft adapter's tensors adapt, sorted."""
    prefix = "base_model.model."
    names = {key.split(".lora_", 1)[0] for key in adapter_tensors if ".lora_" in key}
    return sorted(name[len(prefix):] if name.startswith(prefix) else name for name in names)


def merge_lora_adapter(model_dir: Path, auto_class: Any) -> None:
    """Fold `model_dir/lora_adapter` into the weights of `model_dir` (peft's `merge_and_unload`), in place.

    Loads the base weights in float32, applies the adapter, checks every adapter tensor was loaded into the
    model (a key that does not match would otherwise leave peft's zero-initialised B: a silent no-op), merges,
    writes the merged weights in the checkpoint's dtype over the base ones and removes the adapter folder.
    """
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file

    adapter = model_dir / LORA_ADAPTER_DIR
    adapter_config = json.loads((adapter / "adapter_config.json").read_text())
    alpha, rank = adapter_config.get("lora_alpha"), adapter_config.get("r")
    if not alpha:
        raise LoraMergeError(
            f"the LoRA adapter has lora_alpha={alpha!r} (rank {rank}): the checkpoint's actor dir has no readable "
            "lora_train_meta.json, so verl's merger could not recover the scale, and merging would give back the base "
            "model. Write the run's values there, e.g. {\"r\": 64, \"lora_alpha\": 32, \"task_type\": \"CAUSAL_LM\"} "
            "(actor_rollout_ref.model.lora_rank / lora_alpha), and merge again")
    # verl 0.9.1's merger writes target_modules as the last name part of each adapted module, so an adapted
    # `visual.merger.mlp.0` becomes "0", which peft then matches against every `blocks.0` (a vision block, not a
    # Linear) and refuses. The adapter's own tensors name every module it adapts: target exactly those.
    adapter_config["target_modules"] = adapted_modules(load_file(adapter / "adapter_model.safetensors"))
    (adapter / "adapter_config.json").write_text(json.dumps(adapter_config, indent=1))
    base = auto_class.from_pretrained(model_dir, dtype="auto")
    dtype = next(base.parameters()).dtype
    peft_model = PeftModel.from_pretrained(base.float(), adapter)
    loaded = peft_model.state_dict()
    missing = []
    for key, value in load_file(adapter / "adapter_model.safetensors").items():
        name = key.replace(".weight", ".default.weight") if ".lora_" in key else key
        if name not in loaded or not torch.equal(loaded[name].float(), value.float()):
            missing.append(key)
    if missing:
        raise LoraMergeError(f"{len(missing)} adapter tensor(s) did not load into the model (e.g. {missing[:3]}): "
                             "the adapter's module names do not match the model's")
    merged = peft_model.merge_and_unload().to(dtype)
    for old in [*model_dir.glob("*.safetensors"), *model_dir.glob("*.safetensors.index.json")]:
        old.unlink()
    merged.save_pretrained(model_dir)
    shutil.rmtree(adapter)


def verify_model_dir(path: Path, load_weights: bool = True) -> None:
    """Load what `vllm serve` / the demo will load: the config, the processor and (optionally) the weights."""
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

    AutoConfig.from_pretrained(path)
    AutoProcessor.from_pretrained(path)
    if load_weights:
        AutoModelForImageTextToText.from_pretrained(path, dtype="auto")


cli = typer.Typer(add_completion=False, rich_markup_mode=None)


@cli.command()
def merge_command(
    checkpoint: Annotated[Path, typer.Argument(
        help="trainer.default_local_dir, a global_step_N dir or its actor dir")],
    out: Annotated[Path, typer.Option(help="Hugging Face model directory to write")],
    step: Annotated[int | None, typer.Option(min=0, help="which global_step to merge (default: the latest)")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite")] = False,
    verify: Annotated[bool, typer.Option(
        "--verify/--no-verify", help="load the merged weights back (config and processor are always checked)")
    ] = True,
) -> None:
    """Merge a verl FSDP checkpoint into a Hugging Face model directory (exit 0 merged, 1 failed, 2 bad layout)."""
    try:
        actor_dir = find_actor_dir(checkpoint, step)
        world_size = check_shards(actor_dir)
    except CheckpointLayoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    print(f"merging {actor_dir} ({world_size} shard(s)) into {out}")
    try:
        merge(actor_dir, out, overwrite=overwrite, verify=verify)
    except FileExistsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    except Exception as exc:  # noqa: BLE001 - report any failure of the merge or the reload, with its type
        print(f"error: merge failed: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    print(f"merged: {out}\n  serve it: vllm serve {out} --port 8001\n"
          f"  demo:     ./run_demo.sh --policy-url http://127.0.0.1:8001/v1 (or --policy-model {out})")


def main(argv: list[str] | None = None) -> int:
    """The command line (`scripts/merge_checkpoint.py`): returns the exit code instead of exiting, for tests."""
    return exit_status(cli, argv, "merge_checkpoint.py")


if __name__ == "__main__":
    sys.exit(main())
