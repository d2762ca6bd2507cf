"""Our Hydra configs compose over verl 0.9.1's own `ppo_trainer` and pass verl's own validation.

Each config is composed with Hydra exactly as `python -m verl.trainer.main_ppo --config-path
configs/verl --config-name NAME` does, then checked by verl's `validate_config` and turned into
verl's config dataclasses (actor, ref — with the key remapping verl's worker applies —, rollout,
algorithm), which reject unknown keys; the `vrag:` section goes through `plugin_settings`.
"""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf, open_dict

from vrag_rl.training.verl_plugins.settings import PluginSettingsError, plugin_settings

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs" / "verl"
CONFIGS = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


@functools.cache
def _composed(name: str, overrides: tuple[str, ...] = ()):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name=name, overrides=list(overrides))
    OmegaConf.resolve(cfg)
    return cfg


def _compose(name: str, overrides: list[str] | None = None):
    """A fresh copy (tests may edit it) of the composed config; Hydra composes each one once."""
    return _composed(name, tuple(overrides or ())).copy()


def _edited(name: str, **values):
    cfg = _compose(name)
    with open_dict(cfg):
        for key, value in values.items():
            OmegaConf.update(cfg, key.replace("__", "."), value, force_add=True)
    return cfg


def _verl_validate(cfg) -> dict:
    """What verl checks before and while it builds the workers, on CPU."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    checked = cfg
    if cfg.actor_rollout_ref.model.lora_rank > 0 and importlib.util.find_spec("vllm") is None:
        # validate_config imports vLLM to round the LoRA rank; without vLLM (this CPU machine) check the
        # rank against verl's own fallback list of vLLM's MaxLoRARanks instead, and validate the rest.
        assert cfg.actor_rollout_ref.model.lora_rank in (1, 8, 16, 32, 64, 128, 256, 320, 512)
        checked = cfg.copy()
        checked.actor_rollout_ref.rollout.name = "sglang"
    validate_config(checked, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    ref = cfg.actor_rollout_ref.ref.copy()
    with open_dict(ref):  # verl.workers.engine_workers does this remap before building the ref config
        ref.ppo_mini_batch_size = cfg.actor_rollout_ref.actor.ppo_mini_batch_size
        ref.ppo_micro_batch_size = ref.pop("log_prob_micro_batch_size", None)
        ref.ppo_micro_batch_size_per_gpu = ref.pop("log_prob_micro_batch_size_per_gpu", None)
        ref.use_dynamic_bsz = ref.pop("log_prob_use_dynamic_bsz", False)
        ref.ppo_max_token_len_per_gpu = ref.pop("log_prob_max_token_len_per_gpu", None)
    return {
        "actor": omega_conf_to_dataclass(cfg.actor_rollout_ref.actor),
        "ref": omega_conf_to_dataclass(ref),
        "rollout": omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout),
        "algorithm": omega_conf_to_dataclass(cfg.algorithm),
    }


def test_the_expected_settings_exist():
    assert CONFIGS == ["cpu_smoke_ggpo_vimrag", "cpu_smoke_grpo_vrag", "ggpo_qwen2_5_vl_7b", "ggpo_qwen3_vl_8b",
                       "ggpo_vimrag_qwen2_5_vl_7b", "grpo_qwen2_5_vl_3b_lora_24gb", "grpo_qwen2_5_vl_7b",
                       "grpo_qwen3_vl_8b", "smoke_grpo_qwen2_5_vl_3b_1gpu"]


def _algorithm_of(name: str) -> str:
    return name.removeprefix("cpu_").removeprefix("smoke_").split("_")[0]


def test_the_cpu_configs_run_verl_on_the_cpu_platform():
    """parts/cpu.yaml: the hf rollout backend, FSDP2 without offload, sdpa, one logical GPU, one storage unit."""
    for name in ("cpu_smoke_grpo_vrag", "cpu_smoke_ggpo_vimrag"):
        cfg = _compose(name)
        assert cfg.actor_rollout_ref.rollout.name == "hf" and cfg.trainer.device == "cpu"
        assert cfg.actor_rollout_ref.actor.strategy == "fsdp2"
        assert not cfg.actor_rollout_ref.actor.fsdp_config.param_offload
        assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
        assert not cfg.actor_rollout_ref.model.use_remove_padding
        assert cfg.ray_kwargs.ray_init.num_gpus == cfg.trainer.n_gpus_per_node == 1
        assert cfg.transfer_queue.backend.SimpleStorage.num_data_storage_units == 1
        assert cfg.trainer.save_freq == 1  # the smoke compares step 1's checkpoint with the initial weights


@pytest.mark.parametrize("name", CONFIGS)
def test_config_composes_and_validates_against_verl(name):
    cfg = _compose(name)
    built = _verl_validate(cfg)
    settings = plugin_settings(cfg)
    vimrag = "vimrag" in name  # one row per step: verl's grpo estimator (v1) for both algorithms
    assert built["rollout"].agent.default_agent_loop == ("vimrag_agent" if vimrag else "vrag_agent")
    assert cfg.actor_rollout_ref.model.external_lib == "vrag_rl.training.verl_plugins.register"
    assert settings.algorithm == _algorithm_of(name)
    assert built["algorithm"].adv_estimator == ("grpo" if vimrag else settings.algorithm)
    assert cfg.reward.custom_reward_function.path == "vrag_rl/training/verl_plugins/reward.py"
    assert (CONFIG_DIR.parents[1] / cfg.reward.custom_reward_function.path).is_file()
    assert cfg.trainer.use_v1  # verl 0.9.1's default trainer path, kept by every config
    if _algorithm_of(name) == "ggpo":
        assert built["actor"].policy_loss.loss_mode == "gspo"
        assert built["actor"].loss_agg_mode == "seq-mean-token-mean"
    if "qwen3" in name:
        assert settings.agent.resize_factor == 32 and cfg.data.image_patch_size == 16
    # retention: save_freq 25 with no limit fills the disk (a 7B checkpoint with optimiser state is ~84 GB)
    assert cfg.trainer.max_actor_ckpt_to_keep == 2
    assert _compose(name, ["trainer.max_actor_ckpt_to_keep=5"]).trainer.max_actor_ckpt_to_keep == 5


def test_upstream_hyperparameters_translated_for_the_7b_grpo_run():
    cfg = _compose("grpo_qwen2_5_vl_7b")
    built = _verl_validate(cfg)
    settings = plugin_settings(cfg)
    actor, rollout = built["actor"], built["rollout"]
    assert cfg.data.train_batch_size == 32 and rollout.n == 5  # upstream: 32 prompts, n_agent 5
    assert actor.optim.lr == 1e-6 and actor.optim.lr_warmup_steps == 5
    assert actor.use_kl_loss and actor.kl_loss_coef == 0.01 and actor.kl_loss_type == "low_var_kl"
    assert actor.entropy_coeff == 0 and actor.clip_ratio == 0.2 and actor.ppo_micro_batch_size_per_gpu == 1
    assert actor.fsdp_config.param_offload and actor.fsdp_config.optimizer_offload
    assert rollout.tensor_model_parallel_size == 2 and rollout.gpu_memory_utilization == 0.6
    assert rollout.max_model_len == 10240 and rollout.limit_images == 25 and rollout.temperature == 1.0
    assert rollout.val_kwargs.temperature == 0 and not rollout.val_kwargs.do_sample
    assert settings.agent.max_turns == 4 and settings.agent.max_tokens == 2048
    assert (settings.agent.min_pixels, settings.agent.max_pixels) == (256 * 28 * 28, 512 * 28 * 28)
    reward = settings.reward_config()
    assert (reward.outcome, reward.format, reward.retrieval, reward.zero_on_format_failure) == (0.7, 0.1, 0.2, True)
    assert cfg.algorithm.kl_ctrl.kl_coef == 0.0 and not cfg.algorithm.use_kl_in_reward and not cfg.critic.enable
    assert (cfg.trainer.save_freq, cfg.trainer.test_freq, cfg.trainer.n_gpus_per_node) == (25, 25, 8)


def test_single_24gb_gpu_config_uses_lora_on_one_gpu():
    cfg = _compose("grpo_qwen2_5_vl_3b_lora_24gb")
    built = _verl_validate(cfg)
    assert cfg.trainer.n_gpus_per_node == 1 and built["rollout"].tensor_model_parallel_size == 1
    assert cfg.actor_rollout_ref.model.lora_rank == 64 and built["rollout"].load_format == "safetensors"
    assert cfg.actor_rollout_ref.model.path == "Qwen/Qwen2.5-VL-3B-Instruct"


def test_typos_and_contradictions_fail_loudly():
    with pytest.raises(ConfigCompositionException):
        _compose("grpo_qwen2_5_vl_7b", ["actor_rollout_ref.actor.ppo_mini_batch_szie=3"])
    cfg = _compose("grpo_qwen2_5_vl_7b")
    with open_dict(cfg):
        cfg.vrag.agent.max_turn = 3
    with pytest.raises(PluginSettingsError, match="max_turn"):
        plugin_settings(cfg)
    with pytest.raises(PluginSettingsError, match="adv_estimator"):
        plugin_settings(_edited("grpo_qwen2_5_vl_7b", algorithm__adv_estimator="ggpo"))
    with pytest.raises(PluginSettingsError, match="max_model_len"):
        plugin_settings(_edited("grpo_qwen2_5_vl_7b", data__max_response_length=16384))
    with pytest.raises(PluginSettingsError, match="score_in_loop"):
        plugin_settings(_edited("ggpo_qwen2_5_vl_7b", vrag__score_in_loop=False))
    with pytest.raises(PluginSettingsError, match="weights"):
        plugin_settings(_edited("grpo_qwen2_5_vl_7b", vrag__reward__outcome=-1))
    bad_batch = _edited("grpo_qwen2_5_vl_7b", actor_rollout_ref__actor__ppo_mini_batch_size=64)  # > 32 prompts
    with pytest.raises(ValueError, match="ppo_mini_batch_size"):
        _verl_validate(bad_batch)


def test_the_smoke_config_is_two_small_v1_steps_on_one_gpu():
    cfg = _compose("smoke_grpo_qwen2_5_vl_3b_1gpu")
    built = _verl_validate(cfg)
    assert cfg.trainer.use_v1 and cfg.trainer.total_training_steps == 2 and cfg.trainer.save_freq == 2
    assert cfg.trainer.n_gpus_per_node == 1 and built["rollout"].tensor_model_parallel_size == 1
    assert built["rollout"].name == "vllm" and cfg.actor_rollout_ref.model.path == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert cfg.data.max_prompt_length + cfg.data.max_response_length <= built["rollout"].max_model_len


@pytest.mark.parametrize("use_v1", [True, False])
def test_both_trainer_paths_compose_and_validate(use_v1):
    """verl's v1 trainer (TransferQueue, the default) and its v0 trainer take the same configs."""
    cfg = _compose("grpo_qwen2_5_vl_7b", [f"trainer.use_v1={str(use_v1).lower()}"])
    _verl_validate(cfg)
    assert cfg.trainer.use_v1 is use_v1 and plugin_settings(cfg).algorithm == "grpo"


def _updates_and_split_trajectories(cfg, turns: list[int], dp_size: int = 8) -> tuple[int, int]:
    """What verl 0.9.1's v1 trainer does with one step's rows (one row per turn, `turns[i]` rows for trajectory
    i): pad to its required multiple (`PPOTrainer._get_required_batch_multiple`, the rule of
    `upsample_batch_to_divisible_size`), reorder the rows across dp ranks (`_balance_batch`: here the worst case,
    round-robin), then cut each rank's rows into mini-batches with `tensordict_utils.make_iterator` at
    `ppo_mini_batch_size * rollout.n / dp` rows (`_update_actor`, `train_mini_batch`). Returns the optimiser
    updates per step and how many trajectories have rows in more than one mini-batch."""
    import math
    from types import SimpleNamespace

    import torch
    from tensordict import TensorDict
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer
    from verl.utils import tensordict_utils as tu

    trainer = SimpleNamespace(config=cfg, use_critic=False, global_steps=1)
    multiple = PPOTrainer._get_required_batch_multiple(trainer, dp_size)
    owners = [t for t, n in enumerate(turns) for _ in range(n)]
    owners += [-1] * (math.ceil(len(owners) / multiple) * multiple - len(owners))  # verl's padding rows
    mini_rows = cfg.actor_rollout_ref.actor.ppo_mini_batch_size * cfg.actor_rollout_ref.rollout.n
    batches_of: dict[int, set[tuple[int, int]]] = {}
    updates = 0
    for rank in range(dp_size):
        rows = torch.tensor(owners[rank::dp_size])
        td = TensorDict({"owner": rows}, batch_size=[len(rows)])
        minis = list(tu.make_iterator(td, mini_batch_size=mini_rows // dp_size, epochs=1, seed=0))
        updates = max(updates, len(minis))
        for index, mini in enumerate(minis):
            for owner in mini["owner"].tolist():
                batches_of.setdefault(owner, set()).add(index)
    split = sum(1 for owner, minis in batches_of.items() if owner >= 0 and len(minis) > 1)
    return updates, split


def test_vimrag_mini_batches_hold_whole_trajectories_and_one_update_per_step():
    """VimRAG trains one row per turn; verl's v1 trainer cuts mini-batches by rows. With the VRAG settings the
    updates per step grow with the episode length and a trajectory's turns land in several mini-batches; the
    VimRAG config makes one mini-batch hold every row of a step, whatever the episodes' lengths."""
    from vimrag.verl_agent_loop import vimrag_plugin_settings

    cfg = _compose("ggpo_vimrag_qwen2_5_vl_7b")
    _verl_validate(cfg)  # verl accepts ppo_mini_batch_size > train_batch_size (use_dynamic_bsz)
    vim = vimrag_plugin_settings(cfg)
    trajectories = cfg.data.train_batch_size * cfg.actor_rollout_ref.rollout.n
    longest = vim.agent.max_turns + 1  # one more model call forces the answer
    for turns in ([1] * trajectories, [longest] * trajectories, [1 + i % longest for i in range(trajectories)]):
        assert _updates_and_split_trajectories(cfg, turns) == (1, 0), turns
    # the same rows under the row-counting mini-batch of the VRAG settings: what the VimRAG config fixes
    row_counted = _edited("ggpo_vimrag_qwen2_5_vl_7b", actor_rollout_ref__actor__ppo_mini_batch_size=8,
                          actor_rollout_ref__actor__use_dynamic_bsz=False)
    short, _ = _updates_and_split_trajectories(row_counted, [1] * trajectories)
    long, split = _updates_and_split_trajectories(row_counted, [longest] * trajectories)
    assert long > short and split > 0
    with pytest.raises(PluginSettingsError, match="ppo_mini_batch_size=352"):
        vimrag_plugin_settings(row_counted)


def test_vimrag_mini_batch_check_names_what_to_set():
    from vimrag.verl_agent_loop import vimrag_plugin_settings

    more = _compose("ggpo_vimrag_qwen2_5_vl_7b", ["data.train_batch_size=64"])
    with pytest.raises(PluginSettingsError, match=r"ppo_mini_batch_size=704 .*64 prompts x \(10 \+ 1\) turns"):
        vimrag_plugin_settings(more)
    vimrag_plugin_settings(_compose("ggpo_vimrag_qwen2_5_vl_7b",
                                    ["data.train_batch_size=64", "actor_rollout_ref.actor.ppo_mini_batch_size=704"]))
    with pytest.raises(PluginSettingsError, match="use_dynamic_bsz"):
        vimrag_plugin_settings(_edited("ggpo_vimrag_qwen2_5_vl_7b", actor_rollout_ref__actor__use_dynamic_bsz=False))
    with pytest.raises(PluginSettingsError, match="ppo_max_token_len_per_gpu"):
        vimrag_plugin_settings(_edited("ggpo_vimrag_qwen2_5_vl_7b",
                                       actor_rollout_ref__actor__ppo_max_token_len_per_gpu=4096))
    with pytest.raises(PluginSettingsError, match="data-parallel"):
        vimrag_plugin_settings(_edited("ggpo_vimrag_qwen2_5_vl_7b", trainer__n_gpus_per_node=7))
