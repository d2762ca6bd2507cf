"""Training questions: a JSON list of `{"id", "question", "answer", "reference_pages"}`.

`reference_pages` are page ids (`{doc_id}_{page}`, the project's and upstream's naming), so the
retrieval reward and GGPO's evidence test compare like with like. Upstream's `rag_dataset.json`
converts to this with `vrag_rl.scoring.qa_dataset` (file name + 1-based pages → page ids).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from vrag_rl.training.rewards import RewardReference
from vrag_rl.training.rollout import RolloutTask


@dataclass(frozen=True)
class TaskExample:
    id: str
    question: str
    answer: str
    reference_pages: tuple[str, ...]

    def rollout_task(self) -> RolloutTask:
        return RolloutTask(self.id, self.question, RewardReference(self.answer, list(self.reference_pages)))


def load_tasks(path: str | Path) -> list[TaskExample]:
    """Read and check the task file; every bad row is reported at once."""
    rows = json.loads(Path(path).read_text())
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{path}: expected a non-empty JSON list of questions")
    tasks, errors, seen = [], [], set()
    for i, row in enumerate(rows):
        try:
            task = TaskExample(str(row["id"]), str(row["question"]), str(row["answer"]),
                               tuple(str(p) for p in row.get("reference_pages", [])))
        except (KeyError, TypeError) as exc:
            errors.append(f"row {i}: missing or bad field {exc}")
            continue
        if task.id in seen or not task.question.strip():
            errors.append(f"row {i}: duplicate id or empty question")
            continue
        seen.add(task.id)
        tasks.append(task)
    if errors:
        raise ValueError(f"{path}: " + "; ".join(errors))
    return tasks


def sample_batch(tasks: list[TaskExample], size: int, rng: random.Random) -> list[TaskExample]:
    """`size` distinct questions (all of them, shuffled, when there are fewer)."""
    return rng.sample(tasks, min(size, len(tasks)))
