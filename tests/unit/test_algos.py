"""GRPO / GGPO / losses: hand-computed values, and equality with verl 0.9.1's own functions."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vrag_rl.agent.credit_graph import CreditGraph, GraphNode
from vrag_rl.training.algos import (
    aggregate,
    entropy_from_logits,
    ggpo_node_mask,
    ggpo_turn_mask,
    grpo_advantages,
    low_var_kl,
    ppo_clip_loss,
)


# --------------------------------------------------------------------------------------------------- GRPO
def test_grpo_hand_values():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.7])
    groups = ["q0", "q0", "q0", "q0", "q1"]
    adv = grpo_advantages(rewards, groups)
    std = math.sqrt(4 * 0.25 / 3)  # unbiased std of [1, 0, 0, 1]
    a = 0.5 / (std + 1e-6)  # = 0.866025...
    assert adv[:4].tolist() == pytest.approx([a, -a, -a, a], abs=1e-6)
    assert adv[4].item() == pytest.approx(0.7 / (1 + 1e-6), abs=1e-7)  # a group of one: mean 0, std 1
    dr = grpo_advantages(rewards, groups, norm_by_std=False)
    assert dr.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0.7], abs=1e-7)
    same = grpo_advantages(torch.tensor([0.3, 0.3]), ["a", "a"])
    assert same.tolist() == [0.0, 0.0]  # no signal when every rollout scores the same
    with pytest.raises(ValueError):
        grpo_advantages(rewards, groups[:3])


@pytest.mark.parametrize("norm", [True, False])
def test_grpo_equals_verl(norm):
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    gen = torch.Generator().manual_seed(0)
    for trial in range(5):
        groups = [f"q{i}" for i in torch.randint(0, 6, (40,), generator=gen).tolist()] + ["solo"]
        rewards = torch.rand(len(groups), generator=gen) * (1 if trial else 0)  # trial 0: all-equal groups
        length = 7
        mask = (torch.rand(len(groups), length, generator=gen) > 0.3).float()
        token_rewards = torch.zeros(len(groups), length)
        token_rewards[:, -1] = rewards
        verl_adv, _ = compute_grpo_outcome_advantage(token_rewards, mask, np.array(groups, dtype=object),
                                                     norm_adv_by_std_in_grpo=norm)
        ours = grpo_advantages(rewards, groups, norm_by_std=norm).unsqueeze(-1) * mask
        assert torch.allclose(ours, verl_adv, atol=1e-6, rtol=0)


# --------------------------------------------------------------------------------------------------- GGPO
def _graph():
    # t0: search showing x_1 (a dead end); t1: search showing a_1; t2: crop of t1's page; t3: answer from t2
    return CreditGraph.build([
        GraphNode("t0", (), "search", (0,), ("x_1",)),
        GraphNode("t1", (), "search", (1,), ("a_1",)),
        GraphNode("t2", ("t1",), "crop", (2,), ("a_1",)),
        GraphNode("t3", ("t2",), "answer", (3,), ()),
    ], answer_id="t3")


def test_ggpo_mask_hand_values():
    graph = _graph()
    # r = 1: prune what is off the root→answer path {t1, t2, t3}
    assert ggpo_node_mask(graph, True, {"a_1"}) == {"t0": True, "t1": False, "t2": False, "t3": False}
    # r = 0: prune the steps that retrieved reference evidence
    assert ggpo_node_mask(graph, False, {"a_1"}) == {"t0": False, "t1": True, "t2": True, "t3": False}
    assert ggpo_node_mask(graph, False, {"z_9"}) == {"t0": False, "t1": False, "t2": False, "t3": False}
    assert ggpo_turn_mask(graph, 4, True, {"a_1"}) == [True, False, False, False]
    assert ggpo_turn_mask(graph, 4, False, {"a_1"}) == [False, True, True, False]
    # a turn no node names (the fifth) is judged as a node neither on the path nor evidence: μ = 1[r = 1]
    assert ggpo_turn_mask(graph, 5, False, {"a_1"}) == [False, True, True, False, False]
    assert ggpo_turn_mask(graph, 5, True, {"a_1"}) == [True, False, False, False, True]
    with pytest.raises(ValueError):
        ggpo_turn_mask(graph, 2, True, set())


def test_ggpo_takes_any_graph_and_multi_turn_steps():
    # a VimRAG-like graph: a memory node spanning two turns, with two parents
    graph = CreditGraph.build([
        GraphNode("s1", (), "search", (0,), ("p",)), GraphNode("s2", (), "search", (1,), ("q",)),
        GraphNode("m", ("s1", "s2"), "memorize", (2, 3), ("p",)), GraphNode("ans", ("m",), "answer", (4,)),
        GraphNode("dead", (), "search", (5,), ("r",)),
    ], answer_id="ans")
    assert ggpo_turn_mask(graph, 6, True, set()) == [False, False, False, False, False, True]
    assert ggpo_turn_mask(graph, 6, False, {"p"}) == [True, False, True, True, False, False]
    no_answer = CreditGraph.build([GraphNode("s1", (), "search", (0,), ("p",))])
    assert ggpo_node_mask(no_answer, True, set()) == {"s1": True}


# ------------------------------------------------------------------------------------------------- losses
def test_ppo_clip_token_hand_values():
    log_prob = torch.log(torch.tensor([[1.5, 0.5]]))
    old = torch.zeros(1, 2)
    adv = torch.tensor([[1.0, -1.0]])
    loss, metrics = ppo_clip_loss(log_prob, old, adv, torch.ones(1, 2))
    # token 0: max(-1.5, -1.2) = -1.2; token 1: max(0.5, 0.8) = 0.8 (dual clip bound 3 not reached)
    assert loss.item() == pytest.approx((-1.2 + 0.8) / 2)
    assert metrics["clipfrac"] == pytest.approx(1.0)
    masked, _ = ppo_clip_loss(log_prob, old, adv, torch.tensor([[1.0, 0.0]]))
    assert masked.item() == pytest.approx(-1.2)
    # gradient accumulation: two halves with the batch's token count sum to the whole
    half1, _ = ppo_clip_loss(log_prob[:, :1], old[:, :1], adv[:, :1], torch.ones(1, 1), denominator=2)
    half2, _ = ppo_clip_loss(log_prob[:, 1:], old[:, 1:], adv[:, 1:], torch.ones(1, 1), denominator=2)
    assert (half1 + half2).item() == pytest.approx(loss.item())


def test_gspo_segment_ratio_hand_values():
    # one sequence, two segments (turns): log-ratios [ln 2, 0 | 0, 0] → segment ratios sqrt(2) and 1
    log_prob = torch.tensor([[math.log(2.0), 0.0, 0.0, 0.0]], requires_grad=True)
    old = torch.zeros(1, 4)
    adv = torch.full((1, 4), 1.0)
    seg = torch.tensor([[0, 0, 1, 1]])
    loss, _ = ppo_clip_loss(log_prob, old, adv, torch.ones(1, 4), level="sequence", segment_ids=seg, clip_high=1.0)
    # per-segment token means: -sqrt(2) and -1; mean over the 2 segments
    assert loss.item() == pytest.approx((-math.sqrt(2) - 1) / 2, abs=1e-6)
    loss.backward()
    # d/dlogp_t of -s·π_t/sg(π_t): -s / (segment length · segments)
    assert log_prob.grad.tolist()[0] == pytest.approx([-math.sqrt(2) / 4] * 2 + [-1 / 4] * 2, abs=1e-6)
    # GGPO: prune segment 0 from the mask, normalise by the unpruned segment count (2)
    pruned, _ = ppo_clip_loss(log_prob.detach(), old, adv, torch.tensor([[0, 0, 1, 1]]), level="sequence",
                              segment_ids=seg, denominator=2)
    assert pruned.item() == pytest.approx(-0.5)


def test_losses_equal_verl():
    from verl.trainer.ppo import core_algos as ca
    from verl.utils.torch_functional import entropy_from_logits as verl_entropy
    from verl.workers.config.actor import ActorConfig

    gen = torch.Generator().manual_seed(1)
    old = -torch.rand(6, 9, generator=gen) * 3
    new = old + torch.randn(6, 9, generator=gen) * 0.3
    adv = torch.randn(6, 1, generator=gen).expand(6, 9).contiguous()
    mask = (torch.rand(6, 9, generator=gen) > 0.25).float()
    config = ActorConfig(strategy="fsdp", ppo_micro_batch_size_per_gpu=1, use_dynamic_bsz=False, rollout_n=1)
    ours, _ = ppo_clip_loss(new, old, adv, mask)
    theirs, _ = ca.compute_policy_loss_vanilla(old, new, adv, mask, "token-mean", config)
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-6)
    ours, _ = ppo_clip_loss(new, old, adv, mask, level="sequence")
    theirs, _ = ca.compute_policy_loss_gspo(old, new, adv, mask, "seq-mean-token-mean", config)
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-6)
    assert torch.allclose(low_var_kl(new, old), ca.kl_penalty(new, old, "low_var_kl"), atol=1e-6)
    logits = torch.randn(3, 5, 11, generator=gen)
    assert torch.allclose(entropy_from_logits(logits), verl_entropy(logits), atol=1e-5)
    assert aggregate(torch.ones(2, 3), torch.tensor([[1, 1, 0], [1, 0, 0]]), "seq-mean-token-mean").item() == 1.0


def test_low_var_kl_hand_value():
    # r = π_ref/π = e^{-1}: KL_k3 = r - log r - 1 = e^{-1} + 1 - 1
    assert low_var_kl(torch.tensor([0.0]), torch.tensor([-1.0])).item() == pytest.approx(math.exp(-1))
    assert low_var_kl(torch.tensor([-0.5]), torch.tensor([-0.5])).item() == 0.0
    uniform = torch.zeros(4)
    assert entropy_from_logits(uniform).item() == pytest.approx(math.log(4))


def test_trajectory_loss_mask_zeroes_only_the_pruned_turns():
    from vrag_rl.training.rollout import Trajectory
    from vrag_rl.vrag.result import EpisodeResult

    trajectory = Trajectory(group_id="q", index=0, prompt_ids=[], response_ids=list(range(9)),
                            response_mask=[1, 1, 0, 0, 1, 1, 0, 1, 1], response_logprobs=[0.0] * 9,
                            turn_spans=[(0, 2), (4, 6), (7, 9)], images=[], result=EpisodeResult.failure("q", "x"))
    assert trajectory.loss_mask([]) == trajectory.response_mask
    assert trajectory.loss_mask([1]) == [1, 1, 0, 0, 0, 0, 0, 1, 1]
    assert trajectory.loss_mask([0, 2]) == [0, 0, 0, 0, 1, 1, 0, 0, 0]
    assert trajectory.response_mask == [1, 1, 0, 0, 1, 1, 0, 1, 1]  # the record itself is left as sampled
