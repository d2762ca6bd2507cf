"""Read question sets (question, gold answer, gold pages) in upstream VRAG's `rag_dataset.json` layout.

The one reader of QA files: the evaluation loads them (`load_dataset`) and the training-data
converter (`vrag_rl.training.data`) turns the same records into verl rows (`read_dataset_records` +
`parse_example`), so training and evaluation can never disagree on answers or page ids.

Upstream benchmarks (ViDoSeek, SlideVQA, MMLongBench-Doc conversions) ship as
`{"examples": [{"query", "reference_answer", "meta_info": {"file_name", "reference_page"}}]}`;
reading that layout directly lets us score on their data without a conversion step. Reference
pages become page ids `{doc_id}_{page}` exactly as the search engine names pages, so retrieval
metrics compare like with like.
"""
from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from search_engine.corpus import doc_id_for


def doc_id_for_file(file_name: str) -> str:
    """The corpus doc id of a PDF named in a dataset: the ingestion's own rule (`corpus.doc_id_for`),
    so dataset page ids can never drift from the index's.

    The ingestion suffixes a hash when two files sanitise to the same id; a dataset cannot know
    that, so such clashing names are not supported.
    """
    return doc_id_for(Path(file_name))


@dataclass
class EvalExample:
    """One question with its gold answer and gold evidence pages."""

    uid: str
    query: str
    reference_answer: str | list[str]
    reference_page_ids: list[str] = field(default_factory=list)
    file_name: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_dataset_records(path: Path) -> list[Any]:
    """The raw records of a QA file, unparsed: `{"examples": [...]}`, a JSON list, or JSONL.

    Errors name the file (and the line, for JSONL); parse each record with `parse_example`.
    """
    if not path.exists():
        raise FileNotFoundError(f"dataset not found: {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        rows = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {lineno} is not valid JSON: {exc}") from exc
        return rows
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("examples"), list):
        return data["examples"]
    if isinstance(data, list):
        return data
    raise ValueError(f'{path}: expected {{"examples": [...]}}, a JSON list, or a .jsonl file')


def _reference(value: Any, index: int) -> str | list[str]:
    if isinstance(value, list):
        answers = [str(v) for v in value if v is not None and str(v).strip()]
        if answers:
            return answers
    elif value is not None and str(value).strip():
        return str(value) if not isinstance(value, str) else value
    raise ValueError(f"example {index}: missing or empty 'reference_answer'")


def _pages(value: Any, index: int) -> list[int]:
    if value is None:
        return []
    values = value if isinstance(value, list) else [value]
    pages = []
    for v in values:
        try:
            page = int(v)
        except (TypeError, ValueError):
            raise ValueError(f"example {index}: reference_page must hold 1-based ints, got {v!r}") from None
        if page < 1:
            raise ValueError(f"example {index}: reference_page must be 1-based, got {page}")
        pages.append(page)
    return pages


def parse_example(raw: Any, index: int) -> EvalExample:
    """Turn one upstream record into an EvalExample; errors name the example index."""
    if not isinstance(raw, dict):
        raise ValueError(f"example {index}: expected an object, got {type(raw).__name__}")
    query = raw.get("query", raw.get("question"))
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"example {index}: missing or empty 'query'")
    reference = _reference(raw.get("reference_answer", raw.get("answer")), index)
    meta = raw.get("meta_info") or {}
    if not isinstance(meta, dict):
        raise ValueError(f"example {index}: 'meta_info' must be an object")
    file_name = str(meta.get("file_name") or raw.get("file_name") or "")
    pages = _pages(meta.get("reference_page", raw.get("reference_page")), index)
    if pages and not file_name:
        raise ValueError(f"example {index}: reference_page given without meta_info.file_name")
    doc_id = doc_id_for_file(file_name) if file_name else ""
    extra = {k: v for k, v in raw.items() if k not in {"uid", "query", "question", "reference_answer", "answer",
                                                       "meta_info"}}
    return EvalExample(
        uid=str(raw.get("uid", index)),
        query=query.strip(),
        reference_answer=reference,
        reference_page_ids=[f"{doc_id}_{p}" for p in pages],
        file_name=file_name,
        meta={**meta, **extra},
    )


def load_dataset(path: str | Path, limit: int | None = None, shuffle: bool = False,
                 seed: int = 0) -> list[EvalExample]:
    """Read a dataset file; `shuffle` (seeded, so runs are repeatable) happens before `limit`,
    so a limit takes a random subset rather than the first documents only."""
    path = Path(path)
    examples = [parse_example(raw, i) for i, raw in enumerate(read_dataset_records(path))]
    seen: dict[str, int] = {}
    for i, ex in enumerate(examples):
        if ex.uid in seen:  # resume keys on uid, so duplicates would silently skip questions
            raise ValueError(f"example {i}: duplicate uid {ex.uid!r} (also example {seen[ex.uid]})")
        seen[ex.uid] = i
    if shuffle:
        random.Random(seed).shuffle(examples)
    if limit is not None:
        examples = examples[: max(0, limit)]
    return examples
