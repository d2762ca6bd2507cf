"""The Streamlit app's logic through streamlit.testing's AppTest, against the real servers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "demo" / "app.py")
QUESTION = "How much power does the Kestrel Ridge solar plant produce?"


@pytest.fixture()
def app_env(monkeypatch, text_search_server, text_index, sample_corpus, tmp_path):
    def configure(policy_url: str):
        monkeypatch.setenv("VRAG_POLICY_URL", policy_url)
        monkeypatch.setenv("VRAG_SEARCH_URL", text_search_server.url)
        monkeypatch.setenv("VRAG_INDEX_DIR", str(text_index))
        monkeypatch.setenv("VRAG_UPLOAD_DIR", str(tmp_path / "uploads"))
        monkeypatch.setenv("VRAG_MODEL", "scripted")
        monkeypatch.setenv("VRAG_SAMPLE_QUESTIONS", str(sample_corpus.dataset_path))
        app = AppTest.from_file(APP, default_timeout=120)
        app.run()
        assert not app.exception, app.exception
        return app

    return configure


def _ask(app, question: str):
    app.text_input(key="question").input(question)
    app.button(key="ask_button").click().run()
    assert not app.exception, app.exception
    return app


def test_episode_is_rendered_step_by_step(app_env, scripted_policy):
    policy = scripted_policy(default=[
        "<think>Find the plant.</think><search>Kestrel Ridge solar plant</search>",
        "<think>Zoom in.</think><bbox>[20, 20, 300, 200]</bbox>",
        "<think>It says 410 MW.</think><answer>410 MW</answer>",
    ])
    app = _ask(app_env(policy), QUESTION)
    markdown = " ".join(m.value for m in app.markdown)
    assert "Kestrel Ridge solar plant" in markdown and "Zoom" in markdown  # the search and the crop
    assert "Find the plant." in " ".join(c.value for c in app.caption)  # the thought
    assert app.success and "410 MW" in app.success[0].value
    assert "solar_energy_brief_3" in markdown  # evidence page
    captions = [c for image in app.image for c in image.captions]
    assert captions[0] == "retrieved page solar_energy_brief_3"  # the page, the page with the box, the crop
    # the two coordinate frames are named: the model's (the image it was shown) and the page's
    assert captions[1].startswith("where the agent looked (model frame, ") and captions[2].startswith("zoomed crop")
    assert "page pixels" in captions[2] and "model's frame" in markdown
    history = app.session_state["history"]
    assert history[0]["answer"] == "410 MW" and history[0]["status"] == "answered"
    types = [e["type"] for e in history[0]["trajectory"]]
    assert types == ["start", "think", "search", "search_results", "think", "crop", "think", "answer", "finish"]
    json.dumps(history[0])  # the download is valid JSON


def test_errors_are_shown_as_messages_not_tracebacks(app_env, scripted_policy):
    policy = scripted_policy(default=["nonsense without tags"])
    app = _ask(app_env(policy), "anything")
    assert app.warning and "invalid action" in app.warning[0].value
    assert any("invalid action" in e.value for e in app.error)  # the fatal one, in red
    assert app.session_state["history"][0]["status"] == "failed"


def test_unreachable_policy_is_reported(app_env):
    from testkit.loopback import free_port

    app = app_env(f"http://127.0.0.1:{free_port()}/v1")
    app.sidebar.slider(key="max_turns").set_value(2)
    app = _ask(app, "anything")
    assert any("policy failed" in e.value for e in app.error)


def test_history_and_settings(app_env, scripted_policy):
    policy = scripted_policy(default=["<search>bicycle</search>", "<answer>12%</answer>"])
    app = app_env(policy)
    app.sidebar.slider(key="top_k").set_value(3)
    _ask(app, "first question")
    app.sidebar.slider(key="top_k").set_value(2)
    _ask(app, "second question")
    history = app.session_state["history"]
    assert [h["question"] for h in history] == ["first question", "second question"]
    assert len(app.expander) >= 2  # corpus panel + history entries
    # the sidebar's top-k reached the search server: 3 hits for the first question, then 2
    hits = [[e["hits"] for e in h["trajectory"] if e["type"] == "search_results"][0][0] for h in history]
    assert [len(h) for h in hits] == [3, 2]


def test_max_turns_setting_bounds_the_episode(app_env, scripted_policy):
    """A policy that never answers: the slider's budget (2 turns, then the forced answer request) ends it."""
    policy = scripted_policy(default=["<search>bicycle</search>", "<search>solar</search>", "<search>revenue</search>",
                                      "<search>employees</search>", "<search>memo</search>"])
    app = app_env(policy)
    app.sidebar.slider(key="max_turns").set_value(2)
    _ask(app, "a question nobody answers")
    trajectory = app.session_state["history"][0]["trajectory"]
    assert sum(e["type"] == "search" for e in trajectory) == 2  # not 5: the budget stopped the searching
    assert trajectory[-1]["type"] == "finish"


def test_corpus_panel_lists_documents(app_env, scripted_policy):
    app = app_env(scripted_policy(default=["<answer>x</answer>"]))
    captions = " ".join(c.value for c in app.caption)
    assert "4 document(s), 12 page(s) indexed" in captions
    corpus = next(e for e in app.expander if e.label == "Corpus")
    assert corpus.proto.expanded  # open when the page loads: what is indexed, and where to add documents


def test_a_sample_question_is_one_click(app_env, scripted_policy):
    """The sample corpus's questions are buttons under the question box; a click fills the box and asks."""
    policy = scripted_policy({"Kestrel": ["<search>Kestrel Ridge solar plant</search>", "<answer>410 MW</answer>"]},
                             default=["<answer>x</answer>"])
    app = app_env(policy)
    samples = [b for b in app.button if b.key and b.key.startswith("sample_")]
    assert len(samples) == 9 and "Type a question first." not in [w.value for w in app.warning]
    kestrel = next(b for b in samples if b.label == QUESTION)
    kestrel.click().run()
    assert not app.exception, app.exception
    assert app.text_input(key="question").value == QUESTION  # the box holds the question asked
    assert app.success and "410 MW" in app.success[0].value
    history = app.session_state["history"]
    assert [h["question"] for h in history] == [QUESTION] and history[0]["answer"] == "410 MW"
    app.run()  # a rerun (any widget touched) does not ask it again
    assert len(app.session_state["history"]) == 1


def test_sample_questions_are_those_of_the_indexed_documents(sample_corpus, tmp_path):
    from demo.sample_questions import load_sample_questions

    everything = load_sample_questions(sample_corpus.dataset_path)
    assert len(everything) == 9 and everything[0] == "What was Acme Robotics' total revenue in 2023?"
    solar = load_sample_questions(sample_corpus.dataset_path, doc_ids=["solar_energy_brief"])
    assert solar == [QUESTION, "What was the installed solar capacity in 2023?"]
    assert load_sample_questions(sample_corpus.dataset_path, doc_ids=[]) == []  # a user's own index
    assert load_sample_questions(tmp_path / "none.json") == []  # no file: no buttons, no error
    (tmp_path / "bad.json").write_text("{not json")
    assert load_sample_questions(tmp_path / "bad.json") == []


def test_ingestion_progress_names_the_document_and_its_place():
    from demo.corpus_panel import progress_text

    position = {"/u/a.pdf": 1, "/u/b.pdf": 2}
    event = {"doc_id": "b", "source": "/u/b.pdf", "page": 3, "num_pages": 12, "stage": "pages"}
    fraction, text = progress_text(event, position, 2)
    assert text == "document 2 of 2 · b.pdf: page 3/12" and fraction == pytest.approx((1 + 3 / 12) / 2)
    assert progress_text({**event, "source": "/elsewhere/c.pdf"}, position, 2)[1] == "c.pdf: page 3/12"


def test_not_found_is_not_shown_as_an_answer(app_env, scripted_policy):
    policy = scripted_policy(default=["<search>zebra saddle colour</search>",
                                      "<answer>I could not find the answer in the documents.</answer>"])
    app = _ask(app_env(policy), "What colour is the zebra's saddle?")
    assert not app.success  # no green answer box
    assert any(w.value.startswith("**Not found:**") for w in app.warning)
    assert "Evidence" not in " ".join(m.value for m in app.markdown)
    assert any("none held the answer" in c.value for c in app.caption)


def test_not_found_shows_where_the_answer_probably_is(app_env, scripted_policy):
    policy = scripted_policy(default=[
        "<search>Kestrel Ridge solar plant</search>",
        "<think>The closest region; the answer is probably here.</think><bbox>[20, 20, 300, 200]</bbox>",
        "<answer>Sorry, I could not find the answer in the documents.</answer>"])
    app = _ask(app_env(policy), "Who built the Kestrel Ridge solar plant?")
    assert not app.success and any(w.value.startswith("**Not found:**") for w in app.warning)
    probable = [i.value for i in app.info if "probably here" in i.value]
    assert probable and "solar_energy_brief_3" in probable[0] and "page pixels" in probable[0]
    captions = [c for image in app.image for c in image.captions]
    assert captions[-1] == "probable region on solar_energy_brief_3"  # the page again, the region boxed


def test_the_page_says_which_policy_answers(app_env, monkeypatch):
    from testkit.loopback import LoopbackServer
    from vrag_rl.serving.policy_server.app import create_app
    from vrag_rl.serving.policy_server.scripted import ScriptedBackend

    stand_in = LoopbackServer(create_app(ScriptedBackend(default=["<answer>x</answer>"]), "rule-based")).start()
    model = LoopbackServer(create_app(ScriptedBackend(default=["<answer>x</answer>"]), "Qwen2.5-VL-7B")).start()
    try:
        app_env(stand_in.url + "/v1")  # search server, index and uploads configured
        monkeypatch.setenv("VRAG_MODEL", "")  # ask the endpoint which model it serves
        app = AppTest.from_file(APP, default_timeout=120)
        app.run()
        banner = app.warning[0].value
        assert "rule-based stand-in" in banner and "not a VLM" in banner and "--policy-url" in banner
        monkeypatch.setenv("VRAG_POLICY_URL", model.url + "/v1")
        app = AppTest.from_file(APP, default_timeout=120)
        app.run()
        assert any("model `Qwen2.5-VL-7B`" in i.value for i in app.info) and not app.warning
    finally:
        stand_in.stop()
        model.stop()
