"""One GGPO (and GRPO) objective and one settings vocabulary for the local trainer and the verl plugin.

- the loss: the local trainer's `policy_objective`, summed over one-trajectory micro-batches as the
  trainer runs it, equals verl 0.9.1's own actor loss (`verl.workers.utils.losses.ppo_loss`, what its
  engine workers call under both trainers) on the same batch — value and gradient — with the actor
  settings of our composed verl configs and the denominators verl's trainer passes
  (`batch_num_tokens`, `global_batch_size = ppo_mini_batch_size × n`, fully pruned sequences included);
- the settings: the local YAML and the verl `vrag:` section read into the same `AlgorithmSettings`, the
  same config prunes the same turns through the local trainer's mask code and the verl agent loop's
  call, and the old keys still load with a deprecation warning.
"""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("verl")

from vrag_rl.agent.result import TurnRecord  # noqa: E402
from vrag_rl.training.algos import AlgorithmSettings, AlgorithmSettingsError, algorithm_settings, policy_objective  # noqa: E402
from vrag_rl.training.rewards import RewardReference  # noqa: E402
from vrag_rl.training.rollout import Trajectory  # noqa: E402
from vrag_rl.vrag.credit_graph import vrag_credit_graph  # noqa: E402
from vrag_rl.vrag.result import EpisodeResult

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "configs" / "verl"


def _composed(name: str):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name=name)
    OmegaConf.resolve(cfg)
    return cfg


def _batch(seed: int):
    """Four sequences of different prompt/response lengths, observation tokens masked, one fully pruned."""
    g = torch.Generator().manual_seed(seed)
    prompt_lens, response_lens = [5, 3, 7, 4], [9, 12, 6, 10]
    masks = []
    for length in response_lens:
        mask = torch.ones(length)
        mask[length // 3: length // 3 + 2] = 0  # an observation
        masks.append(mask)
    masks[2] = torch.zeros(response_lens[2])  # every turn pruned (GGPO) or an empty response
    rows = []
    for mask, length in zip(masks, response_lens):
        old = -torch.rand(length, generator=g) - 0.05
        rows.append({"mask": mask, "old": old, "new": old + 0.3 * torch.randn(length, generator=g),
                     "ref": old + 0.2 * torch.randn(length, generator=g), "entropy": torch.rand(length, generator=g),
                     "adv": torch.full((length,), float(torch.randn(1, generator=g)))})
    return prompt_lens, response_lens, rows


def _verl_loss(actor_config, prompt_lens, response_lens, rows, new_logprobs):
    """verl's ppo_loss on the batch laid out as its engine hands it over (no padding, nested tensors)."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.losses import ppo_loss

    def nested(values):
        return torch.nested.nested_tensor(values, layout=torch.jagged)

    flat_logprob, flat_entropy = [], []
    for p, new, row in zip(prompt_lens, new_logprobs, rows):
        # model outputs cover prompt + response; position t holds the log-prob of token t + 1
        flat_logprob += [torch.zeros(p - 1), new, torch.zeros(1)]
        flat_entropy += [torch.zeros(p - 1), row["entropy"], torch.zeros(1)]
    data = TensorDict({
        "prompts": nested([torch.ones(p, dtype=torch.long) for p in prompt_lens]),
        "responses": nested([torch.ones(r, dtype=torch.long) for r in response_lens]),
        "response_mask": nested([row["mask"] for row in rows]),
        "old_log_probs": nested([row["old"] for row in rows]),
        "advantages": nested([row["adv"] * row["mask"] for row in rows]),
        "ref_log_prob": nested([row["ref"] for row in rows]),
    }, batch_size=[len(rows)])
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=int(sum(row["mask"].sum() for row in rows)),
                         global_batch_size=len(rows))  # what verl's trainer and engine set for a mini-batch
    output = {"log_probs": torch.cat(flat_logprob), "entropy": torch.cat(flat_entropy)}
    loss, _metrics = ppo_loss(actor_config, output, data)
    return loss


@pytest.mark.parametrize("config_name", ["grpo_qwen2_5_vl_7b", "ggpo_qwen2_5_vl_7b"])
@pytest.mark.parametrize("seed", [0, 1])
def test_local_objective_equals_verls_actor_loss_on_the_same_batch(config_name, seed):
    from verl.utils.config import omega_conf_to_dataclass

    from vrag_rl.training.verl_plugins.settings import plugin_settings

    cfg = _composed(config_name)
    settings = plugin_settings(cfg).algorithm_settings
    cfg.actor_rollout_ref.actor.entropy_coeff = 0.003  # exercise the entropy term too (0 in our configs)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert (actor.policy_loss.loss_mode, actor.loss_agg_mode) == (settings.loss_mode, settings.loss_agg_mode)
    prompt_lens, response_lens, rows = _batch(seed)

    verl_new = [row["new"].clone().requires_grad_(True) for row in rows]
    verl_loss = _verl_loss(actor, prompt_lens, response_lens, rows, verl_new)
    verl_loss.backward()

    # the local trainer: one trajectory per micro-batch, the mini-batch's counts as denominators
    batch_tokens = float(sum(row["mask"].sum() for row in rows))
    local_new = [row["new"].clone().requires_grad_(True) for row in rows]
    local_loss = torch.zeros(())
    for row, new in zip(rows, local_new):
        if row["mask"].sum() == 0:
            continue  # the trainer skips a fully masked trajectory (no forward): it adds 0 to the numerator
        loss, _ = policy_objective(new[None], row["old"][None], row["adv"][None], row["mask"][None], settings,
                                   batch_tokens=batch_tokens, batch_sequences=len(rows),
                                   ref_log_prob=row["ref"][None], kl_coef=actor.kl_loss_coef,
                                   entropy=row["entropy"][None], entropy_coef=actor.entropy_coeff,
                                   clip_low=actor.clip_ratio_low, clip_high=actor.clip_ratio_high,
                                   clip_ratio_c=actor.clip_ratio_c)
        loss.backward()
        local_loss = local_loss + loss.detach()
    torch.testing.assert_close(local_loss, verl_loss.detach(), atol=1e-6, rtol=1e-5)
    for ours, theirs, row in zip(local_new, verl_new, rows):
        grad = ours.grad if ours.grad is not None else torch.zeros_like(theirs.grad)
        torch.testing.assert_close(grad, theirs.grad, atol=1e-7, rtol=1e-5)
        assert grad[row["mask"] == 0].abs().sum() == 0


def test_ggpo_divides_by_every_sequence_of_the_mini_batch_as_verls_trainer():
    """verl's trainer passes global_batch_size (all sequences): a fully pruned sequence dilutes the loss."""
    settings = AlgorithmSettings("ggpo")
    logp = torch.full((1, 4), -1.0)
    adv, mask = torch.full((1, 4), 2.0), torch.ones(1, 4)
    one, _ = policy_objective(logp, logp, adv, mask, settings, batch_tokens=4, batch_sequences=1)
    two, _ = policy_objective(logp, logp, adv, mask, settings, batch_tokens=4, batch_sequences=2)
    assert float(one) == pytest.approx(-2.0) and float(two) == pytest.approx(-1.0)


def _trajectory_with_a_wasted_turn() -> tuple[Trajectory, RewardReference]:
    turns = [TurnRecord(0, "search", "<search>a</search>", True, shown_image_ids=["img-0"]),
             TurnRecord(1, "invalid", "hm", False),
             TurnRecord(2, "answer", "<answer>x</answer>", True)]
    result = EpisodeResult(episode_id="e", question="q", answer="x", status="answered", evidence=[], events=[],
                           messages=[], images=[], turns=3, elapsed_s=0.0, turn_records=turns,
                           credit_graph=vrag_credit_graph(turns, {"img-0": "gold_p1"}))
    t = Trajectory("g", 0, [1, 2], [5] * 30, [1] * 30, [-0.1] * 30, [(0, 10), (10, 20), (20, 30)], [], result)
    t.reward = SimpleNamespace(outcome=0.6)  # a graded outcome: correct at the shared default threshold 0.5
    reference = RewardReference(answer="x", reference_pages=["gold_p1"])
    t.extra["reference"] = reference
    return t, reference


def test_the_same_config_prunes_the_same_turns_locally_and_under_verl(tmp_path):
    from vrag_rl.training.train.config import load_config
    from vrag_rl.training.train.trainer import LocalTrainer
    from vrag_rl.training.verl_plugins.settings import plugin_settings

    local = load_config(REPO / "configs" / "local" / "tiny_ggpo.yaml", model="m", tasks="t",
                        output_dir=str(tmp_path), search_url="http://127.0.0.1:1")
    cluster = plugin_settings(_composed("ggpo_qwen2_5_vl_7b"))
    assert local.algorithm_settings() == cluster.algorithm_settings == AlgorithmSettings("ggpo")
    t, reference = _trajectory_with_a_wasted_turn()
    # the local trainer's mask code, and the verl agent loop's call (VRAGAgentLoop.run); the local trainer gates
    # the mask by the advantage's sign, which for this correct episode is positive: the same turns
    masks, counts = LocalTrainer._loss_masks(SimpleNamespace(config=local), [t], [0.5])
    under_verl = t.loss_mask(t.pruned_turns(cluster.algorithm_settings, t.reward.outcome, reference.reference_pages))
    assert counts.pruned == 1 and masks[0][0].tolist() == under_verl == [1] * 10 + [0] * 10 + [1] * 10


def test_unknown_or_misplaced_keys_are_refused_with_the_right_key_named(tmp_path):
    import yaml

    from vrag_rl.training.train.config import load_config
    from vrag_rl.training.verl_plugins.settings import PluginSettingsError, plugin_settings

    data = yaml.safe_load((REPO / "configs" / "local" / "tiny_ggpo.yaml").read_text())
    data.pop("algorithm"), data.pop("ggpo")
    for wrong, hint in (({"algo": "ggpo"}, "did you mean algorithm?"),
                        ({"correct_threshold": 0.7}, "did you mean ggpo.correct_threshold?")):
        path = tmp_path / "wrong.yaml"
        path.write_text(yaml.safe_dump({**data, **wrong}))
        with pytest.raises(ValueError, match=re.escape(hint)):
            load_config(path, model="m", tasks="t", output_dir=str(tmp_path), search_url="u")

    cfg = _composed("ggpo_qwen2_5_vl_7b")
    from omegaconf import open_dict

    with open_dict(cfg):
        del cfg.vrag.ggpo["correct_threshold"]
        cfg.vrag.ggpo.threshold = 0.7
    with pytest.raises(PluginSettingsError, match=re.escape("did you mean vrag.ggpo.correct_threshold?")):
        plugin_settings(cfg)
    with pytest.raises(AlgorithmSettingsError, match=r"\(0, 1\]"):
        algorithm_settings({"ggpo": {"correct_threshold": 0}})
    with pytest.raises(AlgorithmSettingsError, match="algorithm must be one of"):
        algorithm_settings({"algorithm": "ppo"})


def test_a_verl_config_whose_loss_is_not_the_algorithms_is_refused():
    from omegaconf import open_dict

    from vrag_rl.training.verl_plugins.settings import PluginSettingsError, plugin_settings

    cfg = _composed("ggpo_qwen2_5_vl_7b")
    with open_dict(cfg):
        cfg.actor_rollout_ref.actor.loss_agg_mode = "token-mean"
    with pytest.raises(PluginSettingsError, match="seq-mean-token-mean"):
        plugin_settings(cfg)
