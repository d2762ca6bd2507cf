"""The evaluation runner with the real agent, policy server and search server (rule-based OCR policy)."""
from __future__ import annotations

from testkit.loopback import LoopbackServer
from vrag_rl.evaluation.runner import run_evaluation
from vrag_rl.scoring.qa_dataset import load_dataset


def test_evaluate_the_real_agent(sample_corpus, text_search_server, tmp_path):
    from vrag_rl import VRAG
    from vrag_rl.serving.policy_server.app import create_app
    from vrag_rl.serving.policy_server.rule_based import RuleBasedBackend

    examples = [e for e in load_dataset(sample_corpus.dataset_path) if "Kestrel" in e.query or "RouteFinder" in
                str(e.reference_answer) or "Riverside" in e.query]
    server = LoopbackServer(create_app(RuleBasedBackend(), "rule-based")).start()
    try:
        agent = VRAG(base_url=server.url + "/v1", search_url=text_search_server.url)
        summary = run_evaluation(agent, examples, concurrency=3, out_path=tmp_path / "eval.jsonl", progress=False)
    finally:
        server.stop()
    data = summary.to_dict()
    lines = (tmp_path / "eval.jsonl").read_text().splitlines()
    assert len(lines) == len(examples) == 3
    assert data["n_errors"] == 0 and data["status_counts"].get("answered") == 3
    assert data["metrics"]["recall@5"] == 1.0  # the agent looked at every reference page
    assert data["metrics"]["contains"] >= 2 / 3  # the OCR policy reads at least two answers off the pages
    text = summary.format_table()
    assert "recall" in text.lower() and "ndcg" in text.lower()


def test_the_stand_in_answers_every_sample_question_exactly(sample_corpus, text_search_server):
    """The demo's promise on its own corpus: the stand-in reader, reading the layouts the search server stored
    at ingestion, answers all of the sample corpus's questions word for word. Reader changes made for other
    people's documents broke two of them unnoticed once ("which region ... most" read 'largest region', the
    title "Most used travel apps" hid the superlative of "what is the most used travel app")."""
    from vrag_rl import VRAG
    from vrag_rl.scoring.metrics import exact_match
    from vrag_rl.serving.policy_server.app import create_app
    from vrag_rl.serving.policy_server.rule_based import RuleBasedBackend

    examples = load_dataset(sample_corpus.dataset_path)
    server = LoopbackServer(create_app(RuleBasedBackend(search_url=text_search_server.url), "rule-based")).start()
    try:
        with VRAG(base_url=server.url + "/v1", search_url=text_search_server.url, max_turns=6) as agent:
            answers = {ex.query: agent.run(ex.query).answer or "" for ex in examples}
    finally:
        server.stop()
    wrong = {ex.query: (answers[ex.query], ex.reference_answer) for ex in examples
             if not exact_match(answers[ex.query], ex.reference_answer)}
    assert len(examples) == 9 and not wrong, wrong
