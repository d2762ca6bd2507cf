"""GGPO on hand-built VRAG episodes: the answer builds on every step the model could have read.

A correct episode must never prune the step whose page holds the evidence (the previous rule, "the
answer builds on the step that showed the last image", pruned the search that found the gold page when
the model searched once more before answering). Dead ends — steps that put nothing into the context —
are still pruned; in a wrong episode the steps that showed the gold page are kept out of the negative
gradient.
"""
from __future__ import annotations

import pytest

from vrag_rl.agent.credit_graph import ROOT_ID, CreditGraph, GraphNode
from vrag_rl.agent.result import TurnRecord
from vrag_rl.training.algos import AlgorithmSettings, ggpo_turn_mask
from vrag_rl.training.rollout import Trajectory
from vrag_rl.vrag.credit_graph import vrag_credit_graph
from vrag_rl.vrag.result import EpisodeResult

GOLD = "report_p7"
GGPO = AlgorithmSettings("ggpo")


def search(i: int, *images: str) -> TurnRecord:
    return TurnRecord(index=i, action="search", reply="<search>q</search>", valid=True, shown_image_ids=list(images))


def crop(i: int, source: str, image: str) -> TurnRecord:
    return TurnRecord(index=i, action="crop", reply="<bbox>[0,0,9,9]</bbox>", valid=True, shown_image_ids=[image],
                      crop_source_image_id=source)


def answer(i: int) -> TurnRecord:
    return TurnRecord(index=i, action="answer", reply="<answer>x</answer>", valid=True)


def invalid(i: int) -> TurnRecord:
    return TurnRecord(index=i, action="invalid", reply="hm", valid=False)


def trajectory(turns: list[TurnRecord], pages: dict[str, str]) -> Trajectory:
    graph = vrag_credit_graph(turns, pages)
    result = EpisodeResult(episode_id="e", question="q", answer="x", status="answered", evidence=[], events=[],
                           messages=[], images=[], turns=len(turns), elapsed_s=0.0, turn_records=turns,
                           credit_graph=graph)
    spans = [(10 * i, 10 * i + 5) for i in range(len(turns))]
    return Trajectory("g", 0, [1], [0] * 10 * len(turns), [1] * 10 * len(turns), [0.0] * 10 * len(turns), spans, [],
                      result)


def pruned(t: Trajectory, correct: bool) -> list[int]:
    return t.pruned_turns(GGPO, 1.0 if correct else 0.0, {GOLD})


def last_image_rule(turns: list[TurnRecord], pages: dict[str, str]) -> CreditGraph:
    """The previous rule, for contrast: the answer builds on the step that showed the last image."""
    graph = vrag_credit_graph(turns, pages)
    last = next(f"t{t.index}" for t in reversed(turns) if t.shown_image_ids)
    nodes = [GraphNode(n.node_id, (last,) if n.kind == "answer" else n.parent_ids, n.kind, n.turn_indices,
                      n.evidence_ids) for n in graph.non_root_nodes()]
    return CreditGraph.build(nodes, graph.answer_id)


def test_gold_found_first_then_a_wasted_search():
    turns, pages = [search(0, "img-0"), search(1, "img-1"), answer(2)], {"img-0": GOLD, "img-1": "brochure_p2"}
    t = trajectory(turns, pages)
    assert t.credit_graph.nodes["t2"].parent_ids == ("t0", "t1")
    assert pruned(t, correct=True) == []  # the gold search keeps its positive gradient
    assert pruned(t, correct=False) == [0]  # a wrong answer: the gold search is spared the negative gradient
    # the previous rule pruned exactly the step that found the evidence
    assert ggpo_turn_mask(last_image_rule(turns, pages), 3, True, {GOLD}) == [True, False, False]


def test_gold_found_last():
    turns, pages = [search(0, "img-0"), search(1, "img-1"), answer(2)], {"img-0": "brochure_p2", "img-1": GOLD}
    t = trajectory(turns, pages)
    assert pruned(t, correct=True) == [] and pruned(t, correct=False) == [1]


def test_crop_of_the_gold_page():
    turns = [search(0, "img-0"), search(1, "img-1"), crop(2, "img-0", "img-2"), answer(3)]
    pages = {"img-0": GOLD, "img-1": "brochure_p2", "img-2": GOLD}
    t = trajectory(turns, pages)
    graph = t.credit_graph
    assert graph.nodes["t2"].parent_ids == ("t0",) and graph.nodes["t2"].evidence_ids == (GOLD,)
    assert graph.nodes["t3"].parent_ids == ("t0", "t1", "t2")
    assert pruned(t, correct=True) == []
    assert pruned(t, correct=False) == [0, 2]  # the search and the crop that showed the gold page


def test_steps_that_added_nothing_are_still_pruned_in_a_correct_episode():
    turns = [search(0), invalid(1), search(2, "img-0"), answer(3)]  # an empty search, an invalid reply
    t = trajectory(turns, {"img-0": GOLD})
    assert t.credit_graph.nodes["t3"].parent_ids == ("t2",)
    assert pruned(t, correct=True) == [0, 1] and pruned(t, correct=False) == [2]
    assert t.pruned_turns(AlgorithmSettings("grpo"), 1.0, {GOLD}) == []  # GRPO prunes nothing


def test_an_answer_with_nothing_read_builds_on_the_root_and_no_answer_prunes_every_step_if_called_correct():
    t = trajectory([invalid(0), answer(1)], {})
    assert t.credit_graph.nodes["t1"].parent_ids == (ROOT_ID,)
    assert pruned(t, correct=True) == [0]
    unanswered = trajectory([search(0, "img-0"), search(1, "img-1")], {"img-0": GOLD, "img-1": GOLD})
    assert unanswered.credit_graph.answer_id is None and pruned(unanswered, correct=False) == [0, 1]


@pytest.mark.parametrize("threshold, outcome, expected", [(0.5, 0.6, []), (1.0, 0.6, [0])])
def test_the_threshold_decides_which_branch_of_the_rule_applies(threshold, outcome, expected):
    from vrag_rl.training.algos import GGPOSettings

    turns, pages = [search(0, "img-0"), search(1, "img-1"), answer(2)], {"img-0": GOLD, "img-1": "brochure_p2"}
    settings = AlgorithmSettings("ggpo", GGPOSettings(threshold))
    assert trajectory(turns, pages).pruned_turns(settings, outcome, {GOLD}) == expected

