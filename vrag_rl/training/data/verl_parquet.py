"""QA datasets → the parquet verl's `RLHFDataset` reads, and a checker for such files.

One row per question, with exactly the columns the trainer and our plugins read (upstream's
converter dropped the columns its own trainer needed, see the reference report §4.5):

- `data_source` (str): the benchmark, e.g. `slidevqa_train`, `vidoseek`, `mmlongdoc` — verl groups
  validation metrics by it (`data.reward_fn_key`).
- `prompt` (list of chat messages): exactly the messages the agent starts from
  (`Prompts().initial_messages(question)`), so `data.filter_overlong_prompts` measures what the
  model really sees. The question carries no image: pages come from the search engine.
- `images` (list[str], always empty): verl's `data.image_key`; kept so upstream-style configs work.
- `ability` (str): `visual_rag`.
- `reward_model` ({style, ground_truth}): the reference answer, for verl's reward path.
- `extra_info` (struct): `index`, `uid`, `question`, `answer`, `reference_answers`,
  `reference_page_ids` (`{doc_id}_{page}`, the search engine's page ids — the retrieval reward's
  gold list), `file_name`, `reference_page` (1-based ints), `split`, `content_type`,
  `reason_type`, `meta_json` (the source's other metadata as JSON, so rows with different
  metadata share one schema).
- `agent_name` (str): the registered agent loop that runs the row (`vrag_agent`).

Input records are parsed by `vrag_rl.scoring.qa_dataset.parse_example` — the same rules the
evaluation uses (upstream `{"examples": [...]}`, a JSON list or JSONL; `query`/`question`,
`reference_answer`/`answer`, `meta_info.file_name`/`reference_page`) — so training and evaluation
can never disagree on page ids.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_rl.agent.plugins import agent_plugin
from vrag_rl.scoring.qa_dataset import EvalExample, parse_example, read_dataset_records

AGENT_NAME = "vrag_agent"
ABILITY = "visual_rag"
REQUIRED_COLUMNS = ("data_source", "prompt", "images", "ability", "reward_model", "extra_info", "agent_name")
REQUIRED_EXTRA = ("index", "uid", "question", "answer", "reference_answers", "reference_page_ids")


class DatasetConversionError(ValueError):
    """Some input rows are unusable; `errors` lists every one (index and reason), not just the first."""

    def __init__(self, source: str, errors: list[str]):
        self.errors = errors
        shown = "\n  ".join(errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(f"{source}: {len(errors)} unusable row(s):\n  {shown}{more}")


@dataclass
class ConversionReport:
    """What a conversion wrote and what it skipped (only with `skip_bad=True`)."""

    rows: int
    skipped: list[str] = field(default_factory=list)
    data_sources: dict[str, int] = field(default_factory=dict)


def _content_and_reason(meta: dict[str, Any]) -> tuple[str, str]:
    """Upstream's per-benchmark labels, for per-type validation metrics.

    ViDoSeek and MMLongBench-Doc name the content in `source_type` (str or list, e.g. ["Chart"]);
    SlideVQA names the reasoning in `query_type` (e.g. "Multi-Hop_Single-Span"); MMLongBench-Doc
    adds `doc_type`.
    """
    source_type = meta.get("source_type", "")
    if isinstance(source_type, list):
        content = "####".join(str(s) for s in source_type)
    else:
        content = str(source_type or "")
    reason = str(meta.get("query_type", "") or meta.get("doc_type", "") or "")
    return content, reason


def example_to_row(example: EvalExample, index: int, data_source: str, split: str,
                   agent_name: str = AGENT_NAME, prompts: Any | None = None) -> dict[str, Any]:
    """One parsed question → one verl row (see the module docstring for the columns)."""
    answers = example.reference_answer if isinstance(example.reference_answer, list) else [example.reference_answer]
    answers = [str(a).strip() for a in answers if str(a).strip()]
    if not answers:
        raise ValueError(f"example {index}: empty reference answer")
    meta = dict(example.meta)
    pages = meta.pop("reference_page", None)
    pages = [int(p) for p in (pages if isinstance(pages, list) else [pages] if pages is not None else [])]
    meta.pop("file_name", None)
    content, reason = _content_and_reason(meta)
    messages = (prompts or agent_plugin("vrag").prompts_type()).initial_messages(example.query)  # VRAG's words
    return {
        "data_source": data_source,
        "prompt": [{"role": m["role"], "content": m["content"]} for m in messages],
        "images": [],
        "ability": ABILITY,
        "reward_model": {"style": "model", "ground_truth": answers[0]},
        "extra_info": {
            "index": index,
            "uid": example.uid,
            "question": example.query,
            "answer": answers[0],
            "reference_answers": answers,
            "reference_page_ids": list(example.reference_page_ids),
            "file_name": example.file_name,
            "reference_page": pages,
            "split": split,
            "content_type": content,
            "reason_type": reason,
            "meta_json": json.dumps(meta, ensure_ascii=False, sort_keys=True, default=str),
        },
        "agent_name": agent_name,
    }


def convert_records(records: Iterable[Any], data_source: str, split: str = "train", agent_name: str = AGENT_NAME,
                    skip_bad: bool = False, require_pages: bool = True, source: str = "input",
                    start_index: int = 0, prompts: Any | None = None) -> tuple[list[dict[str, Any]], ConversionReport]:
    """Raw records → verl rows. Every bad record is reported; none is dropped silently.

    `prompts`: the VRAG agent's `Prompts` the rows start from (default: its defaults); a run that sets
    `vrag.prompts` must convert with the same words, or the first turn would not match the rest.

    `require_pages`: the retrieval reward needs gold pages, so a training row without
    `reference_page` is an error unless this is False (e.g. an answer-only validation set).
    With `skip_bad` the bad rows are listed in the report instead of raising.
    """
    if not data_source or not data_source.strip():
        raise ValueError("data_source must be a non-empty name (e.g. slidevqa_train, vidoseek, mmlongdoc)")
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(records):
        try:
            example = parse_example(raw, i)
            if require_pages and not example.reference_page_ids:
                raise ValueError(f"example {i}: no reference_page (the retrieval reward needs gold pages; "
                                 "pass require_pages=False / --allow-no-pages for answer-only data)")
            if example.uid in seen:
                raise ValueError(f"example {i}: duplicate uid {example.uid!r} (also example {seen[example.uid]})")
            row = example_to_row(example, start_index + len(rows), data_source, split, agent_name, prompts)
        except ValueError as exc:
            errors.append(str(exc))
            continue
        seen[example.uid] = i
        rows.append(row)
    if errors and not skip_bad:
        raise DatasetConversionError(source, errors)
    if not rows:
        raise DatasetConversionError(source, errors or ["no examples in the input"])
    return rows, ConversionReport(rows=len(rows), skipped=errors, data_sources={data_source: len(rows)})


def convert_file(path: str | Path, data_source: str | None = None, split: str = "train",
                 agent_name: str = AGENT_NAME, skip_bad: bool = False,
                 require_pages: bool = True) -> tuple[list[dict[str, Any]], ConversionReport]:
    """Read one dataset file (upstream JSON, a JSON list or JSONL) and convert it."""
    path = Path(path)
    return convert_records(read_dataset_records(path), data_source or path.stem, split, agent_name, skip_bad,
                           require_pages, source=str(path))


def write_parquet(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write rows atomically (a partial file never replaces a good one)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        raise ValueError("refusing to write an empty dataset")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=_schema())
    partial = path.with_name(path.name + ".partial")
    pq.write_table(table, partial)
    partial.replace(path)
    return path


def _schema():
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    extra = pa.struct([
        ("index", pa.int64()), ("uid", pa.string()), ("question", pa.string()), ("answer", pa.string()),
        ("reference_answers", pa.list_(pa.string())), ("reference_page_ids", pa.list_(pa.string())),
        ("file_name", pa.string()), ("reference_page", pa.list_(pa.int64())), ("split", pa.string()),
        ("content_type", pa.string()), ("reason_type", pa.string()), ("meta_json", pa.string()),
    ])
    return pa.schema([
        ("data_source", pa.string()), ("prompt", pa.list_(message)), ("images", pa.list_(pa.string())),
        ("ability", pa.string()), ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", extra), ("agent_name", pa.string()),
    ])


def check_parquet(path: str | Path, require_pages: bool = True, agent_name: str | None = None) -> int:
    """Validate a training parquet before a cluster job spends GPU hours on it; returns the row count.

    Raises `DatasetConversionError` listing every bad row (missing columns, empty question or
    answer, missing gold pages, empty agent name). With `agent_name` (the loop the run trains: the train
    scripts pass theirs), every row must name that loop: verl runs each row's `agent_name` whatever the
    config's `default_agent_loop`, so a VRAG-converted file under a VimRAG config would silently train the
    VRAG loop with VimRAG's settings.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset not found: {path}")
    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise DatasetConversionError(str(path), [f"not a readable parquet file: {exc}"]) from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        hint = "convert the data with `python -m vrag_rl.training.data convert`"
        raise DatasetConversionError(str(path), [f"missing column(s) {missing}; {hint}"])
    errors: list[str] = []
    for i, row in enumerate(table.to_pylist()):
        extra = row.get("extra_info") or {}
        lacking = [k for k in REQUIRED_EXTRA if extra.get(k) in (None, "")]
        if lacking:
            errors.append(f"row {i}: extra_info lacks {lacking}")
            continue
        if not str(extra["question"]).strip():
            errors.append(f"row {i}: empty question")
        if not (row.get("reward_model") or {}).get("ground_truth"):
            errors.append(f"row {i}: empty reward_model.ground_truth")
        if require_pages and not extra["reference_page_ids"]:
            errors.append(f"row {i}: no reference_page_ids")
        if not row.get("agent_name"):
            errors.append(f"row {i}: empty agent_name")
        if not row.get("prompt"):
            errors.append(f"row {i}: empty prompt")
    if agent_name is not None:
        errors.extend(_agent_mismatch(table.column("agent_name").to_pylist(), agent_name))
    if errors:
        raise DatasetConversionError(str(path), errors)
    if table.num_rows == 0:
        raise DatasetConversionError(str(path), ["the file has no rows"])
    return table.num_rows


def _agent_mismatch(names: list[Any], agent_name: str) -> list[str]:
    """One error per foreign agent name, with the converter call that writes rows for `agent_name`."""
    counts: dict[str, int] = {}
    for name in names:
        if name and name != agent_name:
            counts[str(name)] = counts.get(str(name), 0) + 1
    return [f"{count} row(s) have agent_name {name!r} but this run trains {agent_name!r} (verl runs each row's "
            f"agent_name, not the config's loop); convert the data for it: python -m vrag_rl.training.data convert "
            f"QA.json --agent-name {agent_name} --out FILE" for name, count in sorted(counts.items())]
