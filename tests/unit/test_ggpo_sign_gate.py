"""GGPO's prune mask removes only the gradient sign the paper targets; GSPO is GGPO without the mask.

The paper's μ_t is stated for a binary reward: no positive reinforcement of dead ends in a positive sample, no
negative gradient for valuable retrieval in a negative one. With this project's composite reward (outcome +
format + retrieval, R = 0 on a format failure) the outcome r and the sign of the GRPO advantage can disagree; the
episodes below are the two cases the tiny task produced most (docs/algorithms_tiny.md).
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from vrag_rl.agent.credit_graph import CreditGraph, GraphNode
from vrag_rl.agent.result import TurnRecord
from vrag_rl.training.algos import AlgorithmSettings, algorithm_settings, ggpo_turn_mask, grpo_advantages
from vrag_rl.training.algos.ggpo import gate_by_advantage
from vrag_rl.training.algos.objective import policy_objective
from vrag_rl.training.rewards import RewardReference
from vrag_rl.training.rollout import Trajectory
from vrag_rl.training.train.trainer import LocalTrainer, PruneCounts
from vrag_rl.vrag.credit_graph import vrag_credit_graph
from vrag_rl.vrag.result import EpisodeResult

GOLD = "report_p7"
GGPO = AlgorithmSettings("ggpo")


def _graph() -> CreditGraph:
    """t0 a dead-end search (other page), t1 the search that found the gold page, t2 the answer built on t1."""
    return CreditGraph.build([GraphNode("t0", (), "search", (0,), ("other",)),
                              GraphNode("t1", (), "search", (1,), (GOLD,)),
                              GraphNode("t2", ("t1",), "answer", (2,), ())], answer_id="t2")


def test_the_gate_prunes_only_the_sign_the_rule_targets():
    graph = _graph()
    # the paper's literal mask (no advantages): r = 1 prunes the dead end, r = 0 the evidence search
    assert ggpo_turn_mask(graph, 3, True, {GOLD}) == [True, False, False]
    assert ggpo_turn_mask(graph, 3, False, {GOLD}) == [False, True, False]
    # the gradient those turns would get has the targeted sign: pruned as before
    assert ggpo_turn_mask(graph, 3, True, {GOLD}, [0.8] * 3) == [True, False, False]
    assert ggpo_turn_mask(graph, 3, False, {GOLD}, [-0.8] * 3) == [False, True, False]
    # the other sign (or none): kept, so it gets its gradient
    assert ggpo_turn_mask(graph, 3, True, {GOLD}, [-0.8] * 3) == [False] * 3
    assert ggpo_turn_mask(graph, 3, False, {GOLD}, [0.8] * 3) == [False] * 3
    assert ggpo_turn_mask(graph, 3, False, {GOLD}, [0.0] * 3) == [False] * 3
    # per-turn advantages (GiGPO-style turn credit): each turn is judged by its own
    assert gate_by_advantage([True, True, False], False, [-1.0, 0.5, -1.0]) == [True, False, False]
    with pytest.raises(ValueError):
        gate_by_advantage([True], True, [1.0, 1.0])


@pytest.mark.parametrize("outcomes", [[1, 0, 0, 1, 0, 0], [0, 1, 1, 1, 0, 1], [1, 0]])
def test_with_a_binary_reward_the_gate_is_the_papers_mask(outcomes):
    """R = r ∈ {0, 1} and a mixed group: r = 1 ⇔ A > 0, so the gated and the literal mask are the same."""
    advantages = grpo_advantages(torch.tensor(outcomes, dtype=torch.float32), ["g"] * len(outcomes))
    graph = _graph()
    for r, a in zip(outcomes, advantages):
        literal = ggpo_turn_mask(graph, 3, bool(r), {GOLD})
        assert ggpo_turn_mask(graph, 3, bool(r), {GOLD}, [float(a)] * 3) == literal


def _episode(turns: list[TurnRecord], outcome: float, total: float, pages: dict[str, str]) -> Trajectory:
    result = EpisodeResult(episode_id="e", question="q", answer="x", status="answered", evidence=[], events=[],
                           messages=[], images=[], turns=len(turns), elapsed_s=0.0, turn_records=turns,
                           credit_graph=vrag_credit_graph(turns, pages))
    spans = [(10 * i, 10 * i + 5) for i in range(len(turns))]
    t = Trajectory("g", 0, [1], [0] * 10 * len(turns), [1] * 10 * len(turns), [0.0] * 10 * len(turns), spans, [],
                   result)
    t.reward = SimpleNamespace(outcome=outcome, total=total)
    t.extra["reference"] = RewardReference(answer="x", reference_pages=[GOLD])
    return t


def _search(i: int, image: str) -> TurnRecord:
    return TurnRecord(index=i, action="search", reply="<search>k</search>", valid=True, shown_image_ids=[image])


def _answer(i: int) -> TurnRecord:
    return TurnRecord(index=i, action="answer", reply="<answer>x</answer>", valid=True)


def test_the_trainer_keeps_the_keyword_search_of_a_wrong_answer_that_scored_above_its_group():
    """The tiny task's commonest case: a wrong answer after the search that showed the gold page scores
    format + retrieval (0.1 + 0.2), above its group's wrong answers after other searches (0.1): A > 0. The
    literal mask pruned that search (no positive gradient for the right keyword) and kept the wrong answer's."""
    found = _episode([_search(0, "img"), _answer(1)], outcome=0.0, total=0.3, pages={"img": GOLD})
    missed = [_episode([_search(0, "img"), _answer(1)], outcome=0.0, total=0.1, pages={"img": "other"})
              for _ in range(2)]
    group = [found, *missed]
    advantages = [float(a) for a in grpo_advantages(torch.tensor([t.reward.total for t in group]), ["g"] * 3)]
    assert advantages[0] > 0
    trainer = SimpleNamespace(config=SimpleNamespace(algorithm_settings=lambda: GGPO))
    masks, counts = LocalTrainer._loss_masks(trainer, group, advantages)
    assert masks[0][0].tolist() == found.response_mask  # the keyword search keeps its (positive) gradient
    assert counts == PruneCounts(pruned=0, spared=1)
    assert found.pruned_turns(GGPO, 0.0, {GOLD}) == [0]  # what the literal mask (verl's loop today) prunes


def test_the_trainer_keeps_the_penalty_of_a_malformed_turn_in_a_right_answer():
    """A right answer after a malformed turn scores 0 (the format gate), below its group: A < 0. The literal mask
    pruned the malformed turn (off the answer path) and so removed exactly its negative gradient."""
    malformed = TurnRecord(index=0, action="invalid", reply="hm", valid=False)
    gated = _episode([malformed, _search(1, "img"), _answer(2)], outcome=1.0, total=0.0, pages={"img": GOLD})
    clean = _episode([_search(0, "img"), _answer(1)], outcome=1.0, total=1.0, pages={"img": GOLD})
    advantages = [float(a) for a in grpo_advantages(torch.tensor([0.0, 1.0]), ["g", "g"])]
    trainer = SimpleNamespace(config=SimpleNamespace(algorithm_settings=lambda: GGPO))
    masks, counts = LocalTrainer._loss_masks(trainer, [gated, clean], advantages)
    assert masks[0][0].tolist() == gated.response_mask and counts == PruneCounts(pruned=0, spared=1)
    # with a positive advantage the dead end is still pruned: the paper's case
    masks, counts = LocalTrainer._loss_masks(trainer, [gated], [1.0])
    assert masks[0][0, :5].sum() == 0 and counts == PruneCounts(pruned=1, spared=0)


def test_gspo_is_ggpo_without_the_mask():
    gspo = algorithm_settings({"algorithm": "gspo"})
    assert not gspo.prunes and (gspo.loss_mode, gspo.loss_agg_mode) == (GGPO.loss_mode, GGPO.loss_agg_mode)
    t = _episode([TurnRecord(index=0, action="invalid", reply="hm", valid=False), _answer(1)], 1.0, 0.1, {})
    assert t.pruned_turns(gspo, 1.0, {GOLD}, 1.0) == [] and t.pruned_turns(GGPO, 1.0, {GOLD}, 1.0) == [0]
    log_prob, old = torch.tensor([[-0.5, -1.0, -2.0]]), torch.tensor([[-0.6, -1.0, -1.5]])
    adv, mask = torch.full((1, 3), 0.7), torch.ones(1, 3)
    ours, _ = policy_objective(log_prob, old, adv, mask, gspo, batch_tokens=3, batch_sequences=1)
    theirs, _ = policy_objective(log_prob, old, adv, mask, GGPO, batch_tokens=3, batch_sequences=1)
    assert float(ours) == pytest.approx(float(theirs))
