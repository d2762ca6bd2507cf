"""GGPO on VimRAG's memory graph (μ_t per turn), trajectory-level normalisation, the GiGPO-style turn credit.

Hand-built memory graphs (the real `vimrag.graph.MemoryGraph`, exported by the training view
`memory_credit_graph`): the expected μ_t are written out by hand from the paper's definition.
"""
from __future__ import annotations

import pytest
import torch

from vimrag.graph import MemoryGraph, MemoryItem
from vimrag.rollout import memory_credit_graph, turn_state_keys
from vrag_rl.agent.result import TurnRecord
from vrag_rl.training.algos.ggpo import ggpo_turn_mask, turn_nodes
from vrag_rl.training.algos.gigpo import combine, discounted_turn_returns, gigpo_turn_advantages
from vrag_rl.training.algos.grpo import grpo_advantages, trajectory_advantages

REF = "acme_annual_report_2023_2"


def item(node: str, label: str, ref: str) -> MemoryItem:
    return MemoryItem(item_id=f"{node}/{label}", kind="page", label=label, ref_id=ref, priority=5)


def dead_end_graph() -> MemoryGraph:
    """turn 0: add s1 (retrieves the reference page); 1: memorise s1; 2: add s2 under root (another page);
    3: memorise s2 — nothing builds on it; 4: an unusable reply (no node); 5: answer built on s1."""
    graph = MemoryGraph("What was the revenue?")
    graph.add_search_node("s1", "revenue", ["root"], turn_index=0)
    graph.nodes["s1"].retrieved_ids = [REF]
    graph.summarize("s1", "the table", [item("s1", "Picture 1", REF)], turn_index=1)
    graph.add_search_node("s2", "robotics", ["root"], turn_index=2)
    graph.nodes["s2"].retrieved_ids = ["acme_annual_report_2023_1"]
    graph.summarize("s2", "a cover page", [], turn_index=3)
    graph.add_answer_node("$341 million", ["s1"], turn_index=5)
    return graph


def test_success_drops_the_dead_end_branch_and_the_unusable_turn():
    graph = memory_credit_graph(dead_end_graph())
    assert turn_nodes(graph, 6) == [("s1",), ("s1",), ("s2",), ("s2",), (), ("answer",)]
    # r = 1: μ_t = 1[v_t ∉ P_ans]; P_ans = {root, s1, answer}
    assert ggpo_turn_mask(graph, 6, True, [REF]) == [False, False, True, True, True, False]


def test_failure_spares_the_valuable_retrieval():
    graph = memory_credit_graph(dead_end_graph())
    # r = 0: μ_t = 1[v_t ∈ R_val]; only s1's retrieval returned the reference page
    assert ggpo_turn_mask(graph, 6, False, [REF]) == [True, True, False, False, False, False]
    # with no reference hit nothing is spared: every turn keeps its negative gradient
    assert ggpo_turn_mask(graph, 6, False, ["other_page"]) == [False] * 6


def test_a_retrieval_counts_even_when_the_page_was_not_memorised():
    """R_val is "the retrieval returned a reference page" — the memorised items alone would miss this node."""
    graph = MemoryGraph("q")
    graph.add_search_node("s1", "revenue", turn_index=0)
    graph.nodes["s1"].retrieved_ids = ["x", REF]
    graph.summarize("s1", "nothing useful", [], turn_index=1)
    graph.add_answer_node("wrong", ["s1"], turn_index=2)
    assert ggpo_turn_mask(memory_credit_graph(graph), 3, False, [REF]) == [True, True, False]
    assert graph.to_credit_graph().nodes["s1"].evidence_ids == ()  # the evaluation view lists memorised items only


def test_a_turn_touching_a_kept_and_a_dropped_node_is_kept():
    """Turn 3 memorises the dead end s2 and opens s3, which the answer builds on: it keeps its gradient."""
    graph = MemoryGraph("q")
    graph.add_search_node("s1", "a", turn_index=0)
    graph.summarize("s1", "x", [], turn_index=1)
    graph.add_search_node("s2", "b", ["s1"], turn_index=2)
    graph.summarize("s2", "dead end", [], turn_index=3)
    graph.add_search_node("s3", "c", ["s1"], turn_index=3)
    graph.summarize("s3", "found", [], turn_index=4)
    graph.add_answer_node("y", ["s3"], turn_index=5)
    assert ggpo_turn_mask(memory_credit_graph(graph), 6, True, []) == [False, False, True, False, False, False]


def test_bad_turn_index_is_an_error():
    with pytest.raises(ValueError, match="names turn 5"):
        turn_nodes(memory_credit_graph(dead_end_graph()), 5)


def test_normalisation_is_over_trajectories_not_turns():
    """Group g: a 5-turn failure (reward 0) and a 1-turn success (reward 1). Over trajectories the two get
    ±1/√2 (unbiased std of {0, 1}); counting turn rows would make the long failure five samples of the group."""
    advantages = trajectory_advantages([0.0, 1.0], ["g", "g"], [5, 1])
    assert [len(a) for a in advantages] == [5, 1]
    assert advantages[0] == pytest.approx([-0.70710654] * 5, abs=1e-6)
    assert advantages[1] == pytest.approx([0.70710654], abs=1e-6)
    turn_rows = grpo_advantages(torch.tensor([0.0] * 5 + [1.0]), ["g"] * 6)  # what normalising over turns gives
    assert float(turn_rows[-1]) == pytest.approx(2.0412, abs=1e-3)  # the lone success would weigh ~3x more
    # groups stay separate; Dr.GRPO only centres
    assert trajectory_advantages([1.0, 0.0, 0.5], ["a", "a", "b"], [1, 1, 2], norm_by_std=False) == [
        [0.5], [-0.5], [0.5, 0.5]]


def test_gigpo_turn_groups_compare_turns_from_the_same_state():
    # three trajectories of one group: all start in state A; two reach state B (same sub-query, same pages)
    keys = [["A", "B", "C1"], ["A", "B"], ["A", "D"]]
    rewards = [1.0, 0.0, 0.0]
    turn = gigpo_turn_advantages(keys, rewards, ["g"] * 3, gamma=0.5)
    returns_a = [discounted_turn_returns(r, len(k), 0.5)[0] for k, r in zip(keys, rewards)]
    assert returns_a == [0.25, 0.0, 0.0]
    expected_a = (torch.tensor(returns_a) - torch.tensor(returns_a).mean()) / (torch.tensor(returns_a).std() + 1e-6)
    assert [s[0] for s in turn] == pytest.approx(expected_a.tolist(), abs=1e-6)
    # state B: returns 0.5 (trajectory 0, one turn before its end) vs 0.0 → ±1/√2
    assert turn[0][1] == pytest.approx(0.7071, abs=1e-3) and turn[1][1] == pytest.approx(-0.7071, abs=1e-3)
    assert turn[0][2] == 0.0 and turn[2][1] == 0.0  # states reached once: no turn-level comparison
    # a different group never shares a state group
    assert gigpo_turn_advantages([["A"], ["A"]], [1.0, 0.0], ["g", "h"]) == [[0.0], [0.0]]
    assert combine([[1.0, 1.0]], [[0.5, -0.5]], weight=2.0) == [[2.0, 0.0]]


def test_state_keys_are_the_sub_queries_and_pages_so_far():
    records = [TurnRecord(index=0, action="search", reply="", valid=True, queries=["Revenue "], retrieved=[[REF]]),
               TurnRecord(index=1, action="memorize", reply="", valid=True)]
    keys = turn_state_keys(records, 3)
    assert keys[0] == ((), frozenset())
    assert keys[1] == keys[2] == (("revenue",), frozenset({REF}))
