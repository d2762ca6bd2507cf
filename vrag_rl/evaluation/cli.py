"""`vrag-eval`: run the agent over a dataset against live policy and search servers."""
from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from search_engine.infra.cli_exit import exit_status

app = typer.Typer(add_completion=False, rich_markup_mode=None, help=__doc__)


@app.command()
def evaluate(
    dataset: Annotated[Path, typer.Option(help="rag_dataset.json (upstream layout), list or .jsonl")],
    out: Annotated[Path, typer.Option(help="per-example JSONL; rerunning with the same file resumes")
                   ] = Path("runs/eval.jsonl"),
    summary: Annotated[Path | None, typer.Option(help="write the summary JSON here")] = None,
    base_url: Annotated[str | None, typer.Option(envvar="VRAG_POLICY_URL",
                                                 help="OpenAI-compatible policy server")] = None,
    search_url: Annotated[str | None, typer.Option(envvar="VRAG_SEARCH_URL", help="search server")] = None,
    model: Annotated[str | None, typer.Option(envvar="VRAG_MODEL", help="served policy model name")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="OPENAI_API_KEY", help="policy API key")] = None,
    agent: Annotated[str, typer.Option(help="the agent plugin to run: vrag, vimrag, ...")] = "vrag",
    max_turns: Annotated[int, typer.Option(min=1)] = 10,
    concurrency: Annotated[int, typer.Option(min=1)] = 8,
    limit: Annotated[int | None, typer.Option(min=1)] = None,
    shuffle: Annotated[bool, typer.Option("--shuffle", help="shuffle (seeded) before --limit")] = False,
    seed: int = 0,
    k: Annotated[int, typer.Option("--k", min=1, help="cut-off for recall@k and ndcg@k")] = 5,
    judge_url: Annotated[str | None, typer.Option(envvar="VRAG_JUDGE_URL",
                                                  help="OpenAI-compatible judge server; no judge when unset")] = None,
    judge_model: Annotated[str | None, typer.Option(envvar="VRAG_JUDGE_MODEL",
                                                    help="judge model (default: --model)")] = None,
    judge_api_key: Annotated[str | None, typer.Option(envvar="VRAG_JUDGE_API_KEY",
                                                      help="judge key (default: --api-key)")] = None,
    episode_timeout: Annotated[float | None, typer.Option(
        min=0.001, help="seconds before an episode counts as failed")] = None,
    retry_errors: Annotated[bool, typer.Option("--retry-errors",
                                               help="rerun uids whose earlier record has an error")] = False,
    save_trajectories: Annotated[bool, typer.Option("--save-trajectories",
                                                    help="store each full trajectory in --out")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress")] = False,
) -> None:
    """Run the agent over a dataset against live policy and search servers; exit 1 when every episode failed."""
    raise typer.Exit(_run(dataset=dataset, out=out, summary_path=summary, base_url=base_url, search_url=search_url,
                          model=model, api_key=api_key, agent=agent, max_turns=max_turns, concurrency=concurrency,
                          limit=limit, shuffle=shuffle, seed=seed, k=k, judge_url=judge_url, judge_model=judge_model,
                          judge_api_key=judge_api_key, episode_timeout=episode_timeout, retry_errors=retry_errors,
                          save_trajectories=save_trajectories, progress=not no_progress))


def _run(*, dataset: Path, out: Path, summary_path: Path | None, base_url: str | None, search_url: str | None,
         model: str | None, api_key: str | None, agent: str, max_turns: int, concurrency: int, limit: int | None,
         shuffle: bool, seed: int, k: int, judge_url: str | None, judge_model: str | None,
         judge_api_key: str | None, episode_timeout: float | None, retry_errors: bool, save_trajectories: bool,
         progress: bool) -> int:
    from vrag_rl.agent.plugins import UnknownAgentError, agent_plugin
    from vrag_rl.evaluation.runner import run_evaluation
    from vrag_rl.scoring.judge import LLMJudge
    from vrag_rl.scoring.qa_dataset import load_dataset

    try:
        plugin = agent_plugin(agent)
        examples = load_dataset(dataset, limit=limit, shuffle=shuffle, seed=seed)
    except (OSError, ValueError, UnknownAgentError) as exc:
        print(f"vrag-eval: {exc}", file=sys.stderr)
        return 2

    agent_class = plugin.load("agent")  # heavy (torch, transformers): only once the arguments are known good
    # Unset options are left out so the agent's own defaults apply.
    options = {"base_url": base_url, "search_url": search_url, "model": model,
               "api_key": api_key}
    runner = agent_class(**{key: value for key, value in options.items() if value is not None}, max_turns=max_turns)

    judge = None
    if judge_url:
        judge_model = judge_model or model
        if not judge_model:
            print("vrag-eval: --judge-url needs --judge-model (or --model)", file=sys.stderr)
            return 2
        judge = LLMJudge(judge_url, judge_model, api_key=judge_api_key or api_key)

    summary = run_evaluation(runner, examples, concurrency=concurrency, judge=judge, out_path=out,
                             progress=progress, k=k, episode_timeout=episode_timeout,
                             save_trajectories=save_trajectories, retry_errors=retry_errors)
    print(summary.format_table())
    if summary_path is not None:
        summary_path.parent.mkdir(parents=True, exist_ok=True)
        summary_path.write_text(json.dumps(summary.to_dict(), indent=2))
    if summary.n_evaluated and summary.n_errors == summary.n_evaluated:
        # Every episode failed: almost surely a wrong URL or a server down, not a bad model.
        print("vrag-eval: every episode failed; see the 'error' field in " + str(out), file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The `vrag-eval` console script: the exit status (0 ok, 1 every episode failed, 2 bad arguments)."""
    return exit_status(app, argv, "vrag-eval")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
