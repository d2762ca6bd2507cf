"""VimRAG end to end over real sockets: scripted and rule-based policy servers, the real search server."""
from __future__ import annotations

import json

import pytest

from testkit.loopback import LoopbackServer
from vimrag import VimRAG
from vimrag.stand_in import VimRAGRuleBasedBackend
from vrag_rl.serving.policy_server.app import create_app


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


SEARCH_TWO = ("<think>Two things to look up.</think>"
              + call("add_search_node", id="s1", query="Riverside district satisfaction score", parent_ids=["root"])
              + call("add_search_node", id="s2", query="Kestrel Ridge solar plant power", parent_ids=[]))


def memorize(*labels: str, useless: tuple[str, ...] = ()) -> str:
    entries = [{"information_id": label, "is_useful": True, "priority_score": 5 - n} for n, label in enumerate(labels)]
    entries += [{"information_id": label, "is_useful": False, "priority_score": 0} for label in useless]
    return ("<think>Picture 1 has the table.</think>"
            + call("summarize_and_memorize", summary="Riverside scores 7.4; Kestrel Ridge makes 410 MW.",
                   memorize=entries))


# The scripted server is stateless: it picks a script by a key in the first user message (which
# holds the graph JSON, so a key names a graph state) and a reply by the number of assistant
# messages in the request (the replies since the context was last rebuilt).
PENDING = '"summary":"(not summarised yet)"'
UNEXPECTED = "UNEXPECTED TURN"

@pytest.fixture(scope="module")
def standin_policy():
    server = LoopbackServer(create_app(VimRAGRuleBasedBackend(), "vimrag-rule-based")).start()
    yield server.url + "/v1"
    server.stop()


def test_scripted_episode_builds_the_graph_and_recovers_from_malformed_calls(scripted_policy, text_search_server):
    policy = scripted_policy({
        "Kestrel Ridge: 410 MW": ["<think>Both found.</think>" + call("add_answer_node", answer="7.4",
                                                                    parent_ids=["s1"])],
        '"query":"Kestrel Ridge solar plant power","summary":"(not summarised yet)"': [
            UNEXPECTED, UNEXPECTED, call("summarize_and_memorize", summary="Kestrel Ridge: 410 MW", memorize=[
                {"information_id": "Picture 4", "is_useful": True, "priority_score": 4}])],
        "Riverside scores 7.4": [UNEXPECTED, call("add_search_node", id="s2", query="Kestrel Ridge solar plant power",
                                                  parent_ids=["s1"])],
        PENDING: [UNEXPECTED, UNEXPECTED,
                  # cut off mid-call:
                  "<tool_call>{'name': 'summarize_and_memorize', 'arguments': {'summary': 'x', 'memorize': [",
                  memorize("Picture 1", "Picture 9", useless=("Picture 3",))],  # one unknown id: the rest is kept
        "district get?": ["I will just answer 7.4",  # no tool call at all
                          SEARCH_TWO.replace('"parent_ids": []', '"parent_ids": ["nowhere"]')],  # s2: unknown parent
    })
    agent = VimRAG(base_url=policy, search_url=text_search_server.url, search_top_k=3)
    result = agent.run("What satisfaction score did the Riverside district get?")
    assert result.status == "answered" and result.answer == "7.4", result.error
    errors = [e for e in result.events if e.type == "error"]
    assert [e.kind for e in errors] == ["invalid_action"] * 4 and not any(e.fatal for e in errors)
    assert "no <tool_call>" in errors[0].message
    assert "unknown parent(s) ['nowhere']" in errors[1].message
    assert "not closed" in errors[2].message
    assert "unknown information_id 'Picture 9'" in errors[3].message
    types = [e.type for e in result.events if e.type not in ("context", "think", "error")]
    assert types == ["start", "search", "search_done", "memorize", "search", "search_done", "memorize", "answer",
                     "finish"]
    graph = result.graph
    assert list(graph.nodes) == ["root", "s1", "s2", "answer"]
    assert graph.nodes["s2"].parent_ids == ["s1"] and graph.answer_path() == {"root", "s1", "answer"}
    s1 = graph.nodes["s1"]
    assert s1.retrieved_ids[0] == "metro_travel_survey_2024_4" and len(s1.retrieved_ids) == 3
    assert [(i.label, i.ref_id, i.priority) for i in s1.items] == [("Picture 1", "metro_travel_survey_2024_4", 5.0)]
    assert graph.nodes["s2"].items[0].ref_id == "solar_energy_brief_3"
    assert result.evidence == [{"node_id": "s1", "label": "Picture 1", "kind": "page",
                                "ref_id": "metro_travel_survey_2024_4", "doc_id": "metro_travel_survey_2024",
                                "page_number": 4, "region": None, "time_range": None, "key_timestamps": [],
                                "priority": 5.0}]
    steps = result.credit_graph
    assert steps.nodes["s1"].turn_indices == (1, 3) and steps.nodes["s2"].turn_indices == (4, 5)
    assert steps.nodes["s1"].evidence_ids == ("metro_travel_survey_2024_4",)
    # the rebuilt context: after memorising, the transcript is gone and the memory images come back
    contexts = [e for e in result.events if e.type == "context"]
    assert len(contexts) == 7
    assert contexts[4].stats["images"] == 1 and [m["label"] for m in contexts[4].memory] == ["Picture 1"]
    assert [m["label"] for m in contexts[6].memory] == ["Picture 1", "Picture 4"]
    assert contexts[2].stats["images"] == 3  # while the summary is due, the three results are in view
    json.dumps(result.to_dict())


def test_several_searches_in_one_step(scripted_policy, text_search_server):
    policy = scripted_policy({
        "Riverside scores 7.4": [call("add_answer_node", answer="410 MW", parent_ids=["s1", "s2"])],
        PENDING: [UNEXPECTED, memorize("Picture 1", "Picture 2")],
        "produce?": [SEARCH_TWO]})
    result = VimRAG(base_url=policy, search_url=text_search_server.url, search_top_k=1).run(
        "How much power does the Kestrel Ridge solar plant produce?")
    assert result.status == "answered" and result.answer == "410 MW"
    searches = [e for e in result.events if e.type == "search"]
    assert [(e.node_id, e.turn) for e in searches] == [("s1", 1), ("s2", 1)]  # one step, one batch
    done = [e for e in result.events if e.type == "search_done"]
    assert [d.items[0]["ref_id"] for d in done] == ["metro_travel_survey_2024_4", "solar_energy_brief_3"]
    graph = result.graph
    assert graph.nodes["s1"].summary == graph.nodes["s2"].summary  # one summary for both waiting nodes
    assert [i.label for i in graph.nodes["s2"].items] == ["Picture 2"]  # each item goes to its own node
    assert graph.answer_path() == {"root", "s1", "s2", "answer"}


def test_failures_are_statuses_never_exceptions(scripted_policy, text_search_server):
    stuck = scripted_policy(default=["no tools here"])
    result = VimRAG(base_url=stuck, search_url=text_search_server.url, max_invalid_actions=2).run("anything?")
    assert result.status == "failed" and "unusable replies" in result.error
    loop = scripted_policy(default=[call("add_search_node", id="s1", query="x"),
                                    call("summarize_and_memorize", summary="nothing", memorize=[])])
    result = VimRAG(base_url=loop, search_url=text_search_server.url, max_turns=3).run("anything?")
    assert result.status == "failed" and result.events[-2].type == "max_turns"
    result = VimRAG(base_url=loop, search_url="http://127.0.0.1:9", search_retries=0, max_turns=3).run("x?")
    assert result.status == "failed" and any(e.type == "error" and e.kind == "search_failed" for e in result.events)
    result = VimRAG(base_url="http://127.0.0.1:9/v1", search_url=text_search_server.url, policy_retries=0).run("x?")
    assert result.status == "failed" and "unreachable" in result.error
    assert VimRAG(base_url=loop, search_url=text_search_server.url).run("   ").status == "failed"


def test_streaming_adapter_over_sse(scripted_policy, text_search_server):
    reply = "<think>short</think>" + call("add_answer_node", answer="nothing", parent_ids=[])
    policy = scripted_policy(default=[reply])
    result = VimRAG(base_url=policy, search_url=text_search_server.url, stream=True, enable_thinking=True).run("q?")
    assert result.status == "answered" and result.answer == "nothing"
    assert [e.text for e in result.events if e.type == "think"] == ["short"]


@pytest.mark.parametrize("question, answer, page", [
    ("What satisfaction score did the Riverside district get?", "7.4", "metro_travel_survey_2024_4"),
    ("How much power does the Kestrel Ridge solar plant produce?", "410 MW", "solar_energy_brief_3"),
])
def test_cpu_standin_answers_through_the_graph(standin_policy, text_search_server, question, answer, page):
    result = VimRAG(base_url=standin_policy, search_url=text_search_server.url).run(question)
    assert result.status == "answered", result.error
    assert result.answer == answer  # the amount itself, not the sentence around it
    graph = result.graph
    assert graph.answer_path() >= {"root", "search_1", "answer"}
    item = graph.nodes["search_1"].items[0]
    assert item.ref_id == page and item.kind == "crop" and item.priority == 5
    assert not [e for e in result.events if e.type == "error"]


def test_vrag_policy_cli_serves_the_standin():
    from vrag_rl.serving.policy_server.cli import ServeOptions, build_app

    app = build_app(ServeOptions(backend="vimrag-rule-based"))
    assert app.state.model_name == "vimrag-rule-based"


def test_an_unfetchable_result_is_reported_and_skipped(scripted_policy, text_index, tmp_path):
    import shutil

    from search_engine.api import create_app
    from search_engine.engine import SearchEngine

    index = tmp_path / "index"
    shutil.copytree(text_index, index)
    engine = SearchEngine.load(index)
    engine.page_image_path("metro_travel_survey_2024_4").unlink()  # the best hit's image is gone
    server = LoopbackServer(create_app(engine=engine)).start()
    try:
        policy = scripted_policy({
            "Riverside scores 7.4": [call("add_answer_node", answer="7.4", parent_ids=["s1"])],
            PENDING: [UNEXPECTED, memorize("Picture 2")],
            "district get?": [call("add_search_node", id="s1", query="Riverside district satisfaction score")]})
        result = VimRAG(base_url=policy, search_url=server.url, search_top_k=2, search_retries=0).run(
            "What satisfaction score did the Riverside district get?")
    finally:
        server.stop()
    assert result.status == "answered", result.error
    errors = [e for e in result.events if e.type == "error"]
    assert [(e.kind, e.fatal) for e in errors] == [("search_failed", False)]
    assert "metro_travel_survey_2024_4" in errors[0].message
    done = next(e for e in result.events if e.type == "search_done")
    assert [i["label"] for i in done.items] == ["Picture 2"]  # the model is shown what could be fetched
    assert result.graph.nodes["s1"].retrieved_ids[0] == "metro_travel_survey_2024_4"
