"""MemoryGraph: construction from a scripted episode, DAG rules, JSON round-trip, GGPO export."""
from __future__ import annotations

import json

import pytest

from vimrag.graph import GraphError, MemoryGraph, MemoryItem
from vrag_rl.agent.credit_graph import CreditGraph


def _page(node: str, label: str, ref: str, priority: float = 5, **extra) -> MemoryItem:
    return MemoryItem(item_id=f"{node}/{label}", kind=extra.pop("kind", "page"), label=label, ref_id=ref,
                      doc_id=ref.rsplit("_", 1)[0], page_number=int(ref.rsplit("_", 1)[1]), priority=priority, **extra)


def scripted_graph() -> MemoryGraph:
    """A three-search episode: a dead end, a refinement of it, and a parallel branch the answer uses."""
    graph = MemoryGraph("Which plant produces 410 MW?")
    graph.add_search_node("s1", "solar plant output", ["root"], turn_index=0)
    graph.summarize("s1", "Page 3 lists plants but is blurry.", [_page("s1", "Picture 1", "solar_brief_3", 3)],
                    turn_index=1)
    graph.add_search_node("s2", "Kestrel Ridge output", ["s1"], turn_index=2)
    graph.add_search_node("s3", "plant capacity table", [], turn_index=2)  # same turn: two searches at once
    graph.summarize("s2", "Kestrel Ridge produces 410 MW.",
                    [_page("s2", "Picture 2", "solar_brief_4", 5, kind="crop", region=[10, 20, 300, 80])],
                    turn_index=3)
    graph.summarize("s3", "nothing relevant", [], turn_index=3)
    graph.add_answer_node("Kestrel Ridge", ["s2"], turn_index=4)
    return graph


def test_graph_built_from_a_scripted_episode():
    graph = scripted_graph()
    assert list(graph.nodes) == ["root", "s1", "s2", "s3", "answer"]
    assert graph.nodes["s3"].parent_ids == ["root"]  # no parents given: the root
    assert graph.children("root") == ["s1", "s3"] and graph.out_degree("s1") == 1
    assert graph.answer_path() == {"root", "s1", "s2", "answer"}
    assert graph.answer == "Kestrel Ridge"
    view = graph.prompt_view()
    assert view[0] == {"id": "root", "content": "Initial query from user: Which plant produces 410 MW?"}
    assert view[2] == {"id": "s2", "parent_ids": ["s1"], "query": "Kestrel Ridge output",
                       "summary": "Kestrel Ridge produces 410 MW.", "memory": ["Picture 2"]}
    assert json.loads(graph.prompt_json()) == view
    export = graph.export()
    assert {(e["source"], e["target"]) for e in export["edges"]} == {
        ("root", "s1"), ("s1", "s2"), ("root", "s3"), ("s2", "answer")}
    assert [n["on_answer_path"] for n in export["nodes"]] == [True, True, True, False, True]


def test_credit_graph_export_for_ggpo():
    credit_graph = scripted_graph().to_credit_graph()
    assert isinstance(credit_graph, CreditGraph)
    assert credit_graph.answer_id == "answer"
    assert credit_graph.answer_path() == {"root", "s1", "s2", "answer"}
    nodes = credit_graph.nodes
    assert nodes["s1"].turn_indices == (0, 1) and nodes["s2"].turn_indices == (2, 3)
    assert nodes["s2"].evidence_ids == ("solar_brief_4",) and nodes["s3"].evidence_ids == ()
    assert nodes["s2"].kind == "search" and nodes["answer"].parent_ids == ("s2",)
    assert CreditGraph.from_dict(credit_graph.to_dict()).answer_path() == credit_graph.answer_path()


@pytest.mark.parametrize("parents, message", [
    (["nope"], "unknown parent"),
    (["s9", "root"], "unknown parent"),
    (["new"], "own parent"),
])
def test_unknown_and_self_parents_are_rejected(parents, message):
    graph = scripted_graph()
    before = graph.to_dict()
    graph.answer_id = None  # allow more nodes
    graph.nodes.pop("answer")
    with pytest.raises(GraphError, match=message):
        graph.add_search_node("new", "q", parents)
    assert "new" not in graph.nodes and graph.to_dict()["nodes"] == before["nodes"][:-1]


def test_cycles_are_rejected():
    graph = MemoryGraph("q")
    graph.add_search_node("a", "first")
    graph.add_search_node("b", "second", ["a"])
    graph.add_search_node("c", "third", ["b"])
    with pytest.raises(GraphError, match="cycle"):
        graph.add_edge("a", "c")  # a → b → c → a
    with pytest.raises(GraphError, match="cycle"):
        graph.add_edge("b", "b")
    graph.add_edge("c", "a")  # an extra parent that keeps it acyclic is fine
    assert graph.nodes["c"].parent_ids == ["b", "a"]
    data = graph.to_dict()
    data["nodes"][1]["parent_ids"] = ["c"]  # a written cycle in JSON is caught on load
    with pytest.raises(GraphError, match=r"cycle through \['a', 'b', 'c'\]"):
        MemoryGraph.from_dict(data)
    data["nodes"][1]["parent_ids"] = ["ghost"]
    with pytest.raises(GraphError, match="unknown parent"):
        MemoryGraph.from_dict(data)


def test_bad_ids_and_duplicates_and_second_answer():
    graph = MemoryGraph("q")
    graph.add_search_node("s1", "x")
    for bad in ("s1", "root", "answer", "", "a b", "../x", 7):
        with pytest.raises(GraphError):
            graph.add_search_node(bad, "x")
    with pytest.raises(GraphError, match="non-empty query"):
        graph.add_search_node("s2", "  ")
    graph.add_answer_node("42", ["s1"])
    with pytest.raises(GraphError, match="already has an answer"):
        graph.add_answer_node("43", ["s1"])
    with pytest.raises(GraphError, match="already has an answer"):
        graph.add_search_node("s3", "late")
    with pytest.raises(GraphError, match="priority"):
        MemoryItem(item_id="x", kind="page", label="Picture 1", ref_id="d_1", priority=6)


def test_json_round_trip_keeps_everything():
    graph = scripted_graph()
    graph.summarize("s3", "a video", [MemoryItem(item_id="s3/Video 1", kind="video_segment", label="Video 1",
                                                 ref_id="clip_2", doc_id="clip", page_number=2, priority=4,
                                                 time_range=[10.0, 20.0], key_timestamps=[12.0],
                                                 frame_boxes=[[0, 0, 64, 48]])])
    text = graph.to_json()
    again = MemoryGraph.from_json(text)
    assert again.to_dict() == graph.to_dict()
    assert again.answer_path() == graph.answer_path()
    item = again.nodes["s3"].items[0]
    assert item.time_range == [10.0, 20.0] and item.key_timestamps == [12.0]
    assert again.nodes["s2"].items[0].region == [10, 20, 300, 80]
    with pytest.raises(GraphError, match="not JSON"):
        MemoryGraph.from_json("{nope")


def test_ggpo_masks_read_the_memory_graph():
    """The RL core's GGPO mask consumes the exported graph: dead ends pruned when right, evidence steps when wrong."""
    from vrag_rl.training.algos.ggpo import ggpo_node_mask, ggpo_turn_mask

    graph = scripted_graph()
    steps = graph.to_credit_graph()
    assert ggpo_node_mask(steps, True, set()) == {"s1": False, "s2": False, "s3": True, "answer": False}
    assert ggpo_node_mask(steps, False, {"solar_brief_4"}) == {"s1": False, "s2": True, "s3": False,
                                                              "answer": False}
    # turns 2 and 3 belong to s2 and s3 together (two searches in one step): pruned only if both are
    assert ggpo_turn_mask(steps, 5, True, set()) == [False, False, False, False, False]
    assert ggpo_turn_mask(steps, 5, False, {"solar_brief_4", "solar_brief_3"}) == [True, True, False, False, False]
