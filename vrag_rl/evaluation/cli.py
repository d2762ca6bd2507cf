"""`vrag-eval`: run the agent over a dataset against live policy and search servers."""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="vrag-eval", description=__doc__)
    p.add_argument("--dataset", required=True, type=Path, help="rag_dataset.json (upstream layout), list or .jsonl")
    p.add_argument("--out", type=Path, default=Path("runs/eval.jsonl"),
                   help="per-example JSONL; rerunning with the same file resumes")
    p.add_argument("--summary", type=Path, default=None, help="write the summary JSON here")
    p.add_argument("--base-url", default=env("VRAG_POLICY_URL"),
                   help="OpenAI-compatible policy server [VRAG_POLICY_URL]")
    p.add_argument("--search-url", default=env("VRAG_SEARCH_URL"), help="search server [VRAG_SEARCH_URL]")
    p.add_argument("--model", default=env("VRAG_MODEL"), help="served policy model name [VRAG_MODEL]")
    p.add_argument("--api-key", default=env("OPENAI_API_KEY"), help="policy API key [OPENAI_API_KEY]")
    p.add_argument("--max-turns", type=int, default=10)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--shuffle", action="store_true", help="shuffle (seeded) before --limit")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--k", type=int, default=5, help="cut-off for recall@k and ndcg@k")
    p.add_argument("--judge-url", default=env("VRAG_JUDGE_URL"), help="OpenAI-compatible judge server; "
                   "no judge when unset [VRAG_JUDGE_URL]")
    p.add_argument("--judge-model", default=env("VRAG_JUDGE_MODEL"), help="judge model (default: --model)")
    p.add_argument("--judge-api-key", default=env("VRAG_JUDGE_API_KEY"), help="judge key (default: --api-key)")
    p.add_argument("--episode-timeout", type=float, default=None, help="seconds before an episode counts as failed")
    p.add_argument("--retry-errors", action="store_true", help="rerun uids whose earlier record has an error")
    p.add_argument("--save-trajectories", action="store_true", help="store each full trajectory in --out")
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from vrag_rl.evaluation.runner import run_evaluation
    from vrag_rl.scoring.judge import LLMJudge
    from vrag_rl.scoring.qa_dataset import load_dataset

    try:
        examples = load_dataset(args.dataset, limit=args.limit, shuffle=args.shuffle, seed=args.seed)
    except (OSError, ValueError) as exc:
        print(f"vrag-eval: {exc}", file=sys.stderr)
        return 2

    from vrag_rl import VRAG  # heavy (torch, transformers): only once the arguments are known good

    # Unset options are left out so the agent's own defaults apply.
    options = {"base_url": args.base_url, "search_url": args.search_url, "model": args.model,
               "api_key": args.api_key}
    agent = VRAG(**{k: v for k, v in options.items() if v is not None}, max_turns=args.max_turns)

    judge = None
    if args.judge_url:
        judge_model = args.judge_model or args.model
        if not judge_model:
            print("vrag-eval: --judge-url needs --judge-model (or --model)", file=sys.stderr)
            return 2
        judge = LLMJudge(args.judge_url, judge_model, api_key=args.judge_api_key or args.api_key)

    summary = run_evaluation(agent, examples, concurrency=args.concurrency, judge=judge, out_path=args.out,
                             progress=not args.no_progress, k=args.k, episode_timeout=args.episode_timeout,
                             save_trajectories=args.save_trajectories, retry_errors=args.retry_errors)
    print(summary.format_table())
    if args.summary is not None:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        args.summary.write_text(json.dumps(summary.to_dict(), indent=2))
    if summary.n_evaluated and summary.n_errors == summary.n_evaluated:
        # Every episode failed: almost surely a wrong URL or a server down, not a bad model.
        print("vrag-eval: every episode failed; see the 'error' field in " + str(args.out), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
