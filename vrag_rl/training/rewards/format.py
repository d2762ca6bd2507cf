"""Format reward: every model turn well-formed, and the episode ends with an answer.

Read from the turn records (the loop's own parse of each *model* reply), never from the decoded
response text: upstream checked the whole response including observation and feedback turns, whose
text contains example `<search>` / `<answer>` tags, so a trajectory that only received feedback
passed its format check.
"""
from __future__ import annotations

from collections.abc import Sequence

from vrag_rl.agent.result import TurnRecord


def format_score(turn_records: Sequence[TurnRecord], *, require_answer: bool = True,
                 require_search: bool = False) -> float:
    """1.0 when there is at least one model turn, every turn is valid, and (by default) the last one answers.

    `require_search=True` adds upstream's other condition (at least one search turn).
    """
    if not turn_records:
        return 0.0
    if not all(record.valid for record in turn_records):
        return 0.0
    if require_answer and turn_records[-1].action != "answer":
        return 0.0
    if require_search and not any(record.action == "search" for record in turn_records):
        return 0.0
    return 1.0
