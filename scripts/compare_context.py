"""Context size per model call: VimRAG's graph-rebuilt context vs the VRAG agent's growing transcript.

Both agents run the *same* multi-step episodes — the same search queries in the same order against
the same search server (the sample corpus), then an answer — driven by the project's scripted policy
server over real sockets. A measuring `Policy` wrapper records what each call sends: text characters
(→ estimated tokens, 4 characters per token: no tokenizer is available offline; the same ruler for
both), images, image pixels and image tokens (pixels / 28², Qwen2.5-VL's merged patch).

VRAG shows one new page per search and keeps every image in its transcript; VimRAG shows the same
page as its search's observation (same pixel cap), memorises it, and from then on carries only
the graph JSON plus its top-energy memory images under the pixel budget (paper: 5·256·32²).

    python scripts/compare_context.py --searches 6 --out runs/compare_context
    # → table on stdout, runs/compare_context/{compare_context.json,compare_context.png}
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from search_engine.infra.cli_exit import exit_status
from vimrag.context import conversation_stats
from vrag_rl.agent.policy import Message, PolicyReply, SamplingParams

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})

QUERIES = [
    "What was Acme Robotics' total revenue in 2023?",
    "How many employees did Acme Robotics have at the end of 2023?",
    "What is the most used travel app in the Metro Travel Survey?",
    "What satisfaction score did the Riverside district get?",
    "How much power does the Kestrel Ridge solar plant produce?",
    "What was the installed solar capacity in 2023?",
    "What dividend per share did the board approve in the memo?",
    "Which region brought Acme Robotics the most revenue in 2023?",
    "What share of commuters ride the bicycle according to the Metro Travel Survey?",
]


class MeasuringPolicy:
    """A Policy that forwards to another and records the size of every request it forwards."""

    def __init__(self, inner, factor: int = 28):
        self.inner, self.factor = inner, factor
        self.calls: list[dict[str, Any]] = []

    async def complete(self, messages: list[Message], sampling: SamplingParams) -> PolicyReply:
        self.calls.append(conversation_stats(messages, self.factor).to_dict())
        return await self.inner.complete(messages, sampling)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def vrag_script(queries: list[str]) -> list[str]:
    return [f"<think>Look up step {i + 1}.</think><search>{q}</search>" for i, q in enumerate(queries)] + [
        "<think>Enough.</think><answer>done</answer>"]


def vimrag_scripts(queries: list[str]) -> dict[str, list[str]]:
    """Scripts keyed by graph state (the scripted server is stateless; see tests/unit/test_vimrag_*.py)."""
    scripts: dict[str, list[str]] = {}
    n = len(queries)
    scripts[f"found step {n}."] = [_call("add_answer_node", answer="done", parent_ids=[f"s{n}"])]
    for i in range(n - 1, -1, -1):  # most advanced state first: keys are tried in order
        search = _call("add_search_node", id=f"s{i + 1}", query=queries[i], parent_ids=[f"s{i}"] if i else ["root"])
        memorize = _call("summarize_and_memorize", summary=f"found step {i + 1}.", memorize=[
            {"information_id": f"Picture {i + 1}", "is_useful": True, "priority_score": 5 - (i % 3)}])
        key = f"found step {i}." if i else "Initial query from user"
        scripts.setdefault(f'"query":{json.dumps(queries[i])},"summary":"(not summarised yet)"', ["x", memorize])
        scripts[key] = [search]
    # state keys must be tried most-specific first: "pending" states before "found" states
    pending = {k: v for k, v in scripts.items() if "not summarised" in k}
    found = {k: v for k, v in scripts.items() if "not summarised" not in k}
    return {**pending, **dict(sorted(found.items(), key=lambda kv: -_step_of(kv[0])))}


def _step_of(key: str) -> int:
    digits = "".join(c for c in key if c.isdigit())
    return int(digits) if digits else -1


def run(*, searches: int, index: str | None, page_pixels: int, total_pixels: int,
        memory_top_k: int) -> dict[str, Any]:
    """Both agents over the same scripted searches; every model call's context as measured."""
    from search_engine.api import create_app as search_app
    from search_engine.engine import SearchEngine
    from testkit.loopback import LoopbackServer
    from vimrag import EnergyConfig, VimRAG
    from vrag_rl import VRAG
    from vrag_rl.agent.policies.openai_http import OpenAIPolicy
    from vrag_rl.serving.policy_server.app import create_app as policy_app
    from vrag_rl.serving.policy_server.scripted import ScriptedBackend

    index_dir = Path(index) if index else _sample_index()
    queries = QUERIES[:searches]
    question = "Compare everything the corpus says."  # the same question for both; not answered by design
    search = LoopbackServer(search_app(engine=SearchEngine.load(index_dir))).start()
    vrag_server = LoopbackServer(policy_app(ScriptedBackend(default=vrag_script(queries)), "scripted")).start()
    vim_server = LoopbackServer(policy_app(ScriptedBackend(vimrag_scripts(queries)), "scripted")).start()
    try:
        vrag_policy = MeasuringPolicy(OpenAIPolicy(vrag_server.url + "/v1"))
        vrag = VRAG(policy=vrag_policy, search_url=search.url, max_turns=searches + 2,
                    max_pixels=page_pixels, search_top_k=1)
        vrag_result = vrag.run(question)
        vim_policy = MeasuringPolicy(OpenAIPolicy(vim_server.url + "/v1"))
        energy = EnergyConfig(total_pixels=total_pixels, memory_top_k=memory_top_k)
        vim = VimRAG(policy=vim_policy, search_url=search.url, max_turns=2 * searches + 2, search_top_k=1,
                     observation_max_pixels=page_pixels, energy=energy)
        vim_result = vim.run(question)
    finally:
        for server in (search, vrag_server, vim_server):
            server.stop()
    for name, result in (("VRAG", vrag_result), ("VimRAG", vim_result)):
        if result.status != "answered":
            raise SystemExit(f"{name} episode did not run as scripted: {result.status} {result.error}")
    return {"searches": searches, "page_pixels": page_pixels, "total_pixels": total_pixels,
            "memory_top_k": memory_top_k, "vrag": vrag_policy.calls, "vimrag": vim_policy.calls,
            "vimrag_steps": [t.action for t in vim_result.turn_records],
            "vrag_steps": [t.action for t in vrag_result.turn_records]}


def _sample_index() -> Path:
    from search_engine.ingest import Ingestor
    from search_engine.sample_corpus import generate_sample_corpus

    root = Path(tempfile.mkdtemp(prefix="compare_context_"))
    corpus = generate_sample_corpus(root / "pdf")
    Ingestor(root / "index", visual_model=None, text_model="minilm", progress=False).add(corpus.files)
    return root / "index"


def table(data: dict[str, Any]) -> str:
    """Per search step: what each agent sends on the call that follows that step's observation."""
    rows = ["| after search | VRAG: tokens (text+image) | VRAG: image px | VimRAG reading results: tokens | "
            "VimRAG rebuilt: tokens (text+image) | VimRAG rebuilt: image px |",
            "|---:|---:|---:|---:|---:|---:|"]
    vrag, vim = data["vrag"], data["vimrag"]
    # VRAG's call k follows search k. VimRAG's call 2k-1 reads search k's results (rebuilt context + the
    # observation), call 2k is the context rebuilt after memorising them.
    for k in range(1, data["searches"] + 1):
        a, r, b = vrag[k], vim[2 * k - 1], vim[2 * k]
        rows.append(f"| {k} | {a['total_tokens']:,} ({a['text_tokens']:,}+{a['image_tokens']:,}) | "
                    f"{a['image_pixels']:,} | {r['total_tokens']:,} | "
                    f"{b['total_tokens']:,} ({b['text_tokens']:,}+{b['image_tokens']:,}) | {b['image_pixels']:,} |")
    peak_a = max(c["total_tokens"] for c in vrag)
    peak_b = max(c["total_tokens"] for c in vim)
    mean_a = sum(c["total_tokens"] for c in vrag) / len(vrag)
    mean_b = sum(c["total_tokens"] for c in vim) / len(vim)
    rows.append(f"\nper call over the episode: VRAG mean {mean_a:,.0f} / peak {peak_a:,} tokens ({len(vrag)} calls); "
                f"VimRAG mean {mean_b:,.0f} / peak {peak_b:,} tokens ({len(vim)} calls, search and memorise "
                f"steps both counted)")
    return "\n".join(rows)


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    steps = list(range(1, data["searches"] + 1))
    for calls, name, offset, style in ((data["vrag"], "VRAG transcript", 1, "o-"),
                                       (data["vimrag"], "VimRAG rebuilt context", None, "s-")):
        picked = [calls[k] for k in steps] if offset else [calls[2 * k] for k in steps]
        left.plot(steps, [c["total_tokens"] for c in picked], style, label=name)
        right.plot(steps, [c["image_pixels"] / 1e6 for c in picked], style, label=name)
    left.set(xlabel="searches so far", ylabel="context tokens (text est. + image)", title="Context tokens per call")
    right.set(xlabel="searches so far", ylabel="image megapixels", title="Image pixels per call")
    right.axhline(data["total_pixels"] / 1e6, color="grey", ls="--", lw=1, label="VimRAG memory budget")
    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


@app.command(help="\n\n".join(f"\b\n{part}" for part in (__doc__ or "").split("\n\n")))  # \b: printed as written
def compare(
    searches: Annotated[int, typer.Option(help="search steps per episode")] = 6,
    index: Annotated[str | None, typer.Option(
        help="an index to search (default: the sample corpus, built in a temp dir)")] = None,
    page_pixels: Annotated[int, typer.Option(
        help="pixels of a page as first shown (both agents; VRAG's default)")] = 512 * 28 * 28,
    total_pixels: Annotated[int, typer.Option(help="VimRAG memory budget")] = 5 * 256 * 32 * 32,
    memory_top_k: int = 5,
    out: str = "runs/compare_context",
) -> None:
    """Run both agents, write the JSON and the plot, print the table."""
    if not 1 <= searches <= len(QUERIES):
        raise typer.BadParameter(f"must be within 1..{len(QUERIES)} (one distinct sample question per search)",
                                 param_hint="'--searches'")
    data = run(searches=searches, index=index, page_pixels=page_pixels, total_pixels=total_pixels,
               memory_top_k=memory_top_k)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "compare_context.json").write_text(json.dumps(data, indent=1))
    plot(data, out_dir / "compare_context.png")
    print(table(data))
    print(f"\nwrote {out_dir / 'compare_context.json'} and {out_dir / 'compare_context.png'}")


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="compare_context.py")


if __name__ == "__main__":
    sys.exit(main())
