"""The VimRAG Streamlit page driven by Streamlit's AppTest against real servers on loopback:
the episode streams into the reasoning log, the memory graph is drawn, the answer shown, and a
rerun (any widget touched) shows the last episode again instead of losing it."""
from __future__ import annotations

from pathlib import Path

import pytest

from testkit.loopback import LoopbackServer

APP = str(Path(__file__).resolve().parents[2] / "demo" / "vimrag_app.py")


@pytest.fixture()
def standin_url():
    from vimrag.stand_in import VimRAGRuleBasedBackend
    from vrag_rl.serving.policy_server.app import create_app

    server = LoopbackServer(create_app(VimRAGRuleBasedBackend(), "vimrag-rule-based")).start()
    yield server.url + "/v1"
    server.stop()


def test_vimrag_page_streams_graph_and_answer(monkeypatch, standin_url, text_search_server):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("VRAG_POLICY_URL", standin_url)
    monkeypatch.setenv("VRAG_SEARCH_URL", text_search_server.url)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception and at.title[0].value.startswith("VimRAG")
    at.text_input(key="question").input("What satisfaction score did the Riverside district get?")
    at.button(key="ask_button").click().run()
    assert not at.exception, at.exception
    assert any("7.4" in s.value for s in at.success)
    charts = at.get("graphviz_chart")
    assert len(charts) == 1
    dot = charts[0].proto.spec
    assert "search_1" in dot and "answer" in dot and "root -> search_1" in dot
    assert any("New node `search_1`" in m.value for m in at.markdown)
    assert any("Memorised" in m.value for m in at.markdown)
    at.run()  # a rerun without a new question: the last episode is still shown
    assert any("7.4" in s.value for s in at.success) and len(at.get("graphviz_chart")) == 1
    assert len(at.session_state["history"]) == 1


def test_vimrag_sample_question_is_one_click(monkeypatch, standin_url, text_search_server, sample_corpus):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("VRAG_POLICY_URL", standin_url)
    monkeypatch.setenv("VRAG_SEARCH_URL", text_search_server.url)
    monkeypatch.setenv("VRAG_SAMPLE_QUESTIONS", str(sample_corpus.dataset_path))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    samples = [b for b in at.button if b.key and b.key.startswith("sample_")]
    assert len(samples) == 9
    question = "What satisfaction score did the Riverside district get?"
    next(b for b in samples if b.label == question).click().run()
    assert not at.exception, at.exception
    assert at.text_input(key="question").value == question
    assert any("7.4" in s.value for s in at.success)
    assert [h["question"] for h in at.session_state["history"]] == [question]
