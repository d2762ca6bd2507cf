"""How well does the CPU demo's rule-based stand-in answer? Runs the real agent against it.

Starts the search server (over an index, built from the bundled sample corpus when none is given)
and the rule-based policy server on loopback ports, asks every question of a `rag_dataset.json`
through `vrag_rl.VRAG`, and prints each answer with exact match, containment, token F1 and whether
the right page was looked at. A benchmark, not a test: it prints numbers.

    python scripts/eval_standin.py                                  # sample corpus (builds data/index/sample_eval)
    python scripts/eval_standin.py --index DIR --dataset rag_dataset.json --lang chi_sim+eng
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="data/index/sample_eval")
    parser.add_argument("--dataset", default=None, help="rag_dataset.json (default: the sample corpus's)")
    parser.add_argument("--lang", default=None, help="OCR languages of the stand-in (default: its own)")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--json", action="store_true", help="print one JSON summary line at the end")
    parser.add_argument("--verbose", action="store_true", help="print the stand-in's thoughts too")
    parser.add_argument("--only", default=None, help="ask only the questions containing this text")
    parser.add_argument("--ocr-only", action="store_true",
                        help="the stand-in OCRs the images it is sent (default: it reads the page layouts the "
                             "search server stored at ingestion, as in the demo)")
    args = parser.parse_args(argv)

    from search_engine.api import create_app as search_app
    from search_engine.engine import SearchEngine
    from testkit.loopback import LoopbackServer
    from vrag_rl import VRAG
    from vrag_rl.policy_server.app import create_app as policy_app
    from vrag_rl.policy_server.rule_based import RuleBasedBackend
    from vrag_rl.scoring.metrics import contains_match, exact_match, token_f1
    from vrag_rl.scoring.qa_dataset import load_dataset

    dataset = args.dataset
    if dataset is None:
        from search_engine.sample_corpus import generate_sample_corpus

        corpus = generate_sample_corpus("data/sample_corpus/pdf")
        dataset = str(corpus.dataset_path)
        if not (Path(args.index) / "manifest.json").exists():
            from search_engine.ingest import Ingestor

            Ingestor(args.index, visual_model=None, text_model="minilm", progress=False).add(corpus.files)
    search = LoopbackServer(search_app(engine=SearchEngine.load(args.index), expose_paths=True)).start()
    backend = RuleBasedBackend(lang=args.lang, search_url="" if args.ocr_only else search.url)
    policy = LoopbackServer(policy_app(backend, "rule-based")).start()
    examples = [e for e in load_dataset(dataset) if not args.only or args.only in e.query]
    totals = {"em": 0.0, "contains": 0.0, "f1": 0.0, "page": 0.0}
    started = time.perf_counter()
    try:
        with VRAG(base_url=policy.url + "/v1", search_url=search.url, max_turns=args.max_turns) as agent:
            for ex in examples:
                result = agent.run(ex.query)
                answer = result.answer or ""
                em, cm, f1 = (exact_match(answer, ex.reference_answer), contains_match(answer, ex.reference_answer),
                              token_f1(answer, ex.reference_answer))
                looked = set(result.retrieved_ranked or [])
                page = float(bool(looked & set(ex.reference_page_ids))) if ex.reference_page_ids else 0.0
                for key, value in zip(totals, (em, cm, f1, page)):
                    totals[key] += value
                if args.verbose:
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
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
