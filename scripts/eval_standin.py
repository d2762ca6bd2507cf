"""How well does the CPU demo's rule-based stand-in answer? Runs the real agent against it.

Starts the search server (over an index, built from the bundled sample corpus when none is given)
and the rule-based policy server on loopback ports, asks every question of a `rag_dataset.json`
through `vrag_rl.VRAG`, and prints each answer with exact match, containment, token F1 and whether
the right page was looked at. A benchmark, not a test: it prints numbers.

    python scripts/eval_standin.py                                  # sample corpus (builds data/index/sample_eval)
    python scripts/eval_standin.py --index DIR --dataset rag_dataset.json --lang chi_sim+eng
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from search_engine.infra.cli_exit import exit_status

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help=(__doc__ or "").splitlines()[0])
def evaluate(
    index: str = "data/index/sample_eval",
    dataset: Annotated[str | None, typer.Option(help="rag_dataset.json (default: the sample corpus's)")] = None,
    lang: Annotated[str | None, typer.Option(help="OCR languages of the stand-in (default: its own)")] = None,
    max_turns: int = 6,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON summary line at the end")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="print the stand-in's thoughts too")] = False,
    only: Annotated[str | None, typer.Option(help="ask only the questions containing this text")] = None,
    ocr_only: Annotated[bool, typer.Option(
        "--ocr-only", help="the stand-in OCRs the images it is sent (default: it reads the page layouts the search "
                           "server stored at ingestion, as in the demo)")] = False,
) -> None:
    """Serve the index and the stand-in, ask every question, print each answer's scores and the means."""
    from search_engine.api import create_app as search_app
    from search_engine.engine import SearchEngine
    from testkit.loopback import LoopbackServer
    from vrag_rl import VRAG
    from vrag_rl.scoring.metrics import contains_match, exact_match, token_f1
    from vrag_rl.scoring.qa_dataset import load_dataset
    from vrag_rl.serving.policy_server.app import create_app as policy_app
    from vrag_rl.serving.policy_server.rule_based import RuleBasedBackend

    if dataset is None:
        from search_engine.sample_corpus import generate_sample_corpus

        corpus = generate_sample_corpus("data/sample_corpus/pdf")
        dataset = str(corpus.dataset_path)
        if not (Path(index) / "manifest.json").exists():
            from search_engine.ingest import Ingestor

            Ingestor(index, visual_model=None, text_model="minilm", progress=False).add(corpus.files)
    search = LoopbackServer(search_app(engine=SearchEngine.load(index), expose_paths=True)).start()
    backend = RuleBasedBackend(lang=lang, search_url="" if ocr_only else search.url)
    policy = LoopbackServer(policy_app(backend, "rule-based")).start()
    examples = [e for e in load_dataset(dataset) if not only or only in e.query]
    totals = {"em": 0.0, "contains": 0.0, "f1": 0.0, "page": 0.0}
    started = time.perf_counter()
    try:
        with VRAG(base_url=policy.url + "/v1", search_url=search.url, max_turns=max_turns) as agent:
            for ex in examples:
                result = agent.run(ex.query)
                answer = result.answer or ""
                em, cm, f1 = (exact_match(answer, ex.reference_answer), contains_match(answer, ex.reference_answer),
                              token_f1(answer, ex.reference_answer))
                looked = set(result.retrieved_ranked or [])
                page = float(bool(looked & set(ex.reference_page_ids))) if ex.reference_page_ids else 0.0
                for key, value in zip(totals, (em, cm, f1, page)):
                    totals[key] += value
                if verbose:
                    for event in result.events:
                        if event.type in ("think", "search", "crop"):
                            print("   ", event.type, {k: v for k, v in event.to_dict().items()
                                                      if k in ("text", "queries", "bbox")})
                print(f"{'OK ' if cm else 'BAD'} {ex.query}\n    answer: {answer!r}  reference: "
                      f"{ex.reference_answer!r}  em={em:.0f} f1={f1:.2f} page={page:.0f}")
    finally:
        policy.stop()
        search.stop()
    n = max(1, len(examples))
    summary = {k: round(v / n, 3) for k, v in totals.items()} | {"n": len(examples),
                                                                 "seconds": round(time.perf_counter() - started, 1)}
    print(f"\n{len(examples)} questions: exact match {summary['em']:.2f}, contains {summary['contains']:.2f}, "
          f"token F1 {summary['f1']:.2f}, right page looked at {summary['page']:.2f} ({summary['seconds']} s)")
    if as_json:
        print(json.dumps(summary))


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="eval_standin.py")


if __name__ == "__main__":
    sys.exit(main())
