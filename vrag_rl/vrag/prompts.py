"""All text the agent sends to the model, in one place (configurable through `Prompts`).

The rules follow upstream VRAG's instruction (reason in <think>, then search, crop or answer),
reworded, plus the two things upstream lacked: how to ask several queries at once, and what the
model is told when its output could not be used.
"""
from __future__ import annotations

from dataclasses import dataclass

SYSTEM_PROMPT = """You answer questions about a collection of documents (reports, slides, scans) by looking at their pages.

Each turn, first reason step by step inside <think> ... </think>. Then take exactly one action:
- <search>query</search> asks the search engine; the best page it finds is shown to you as an image. To look for several things at once, separate queries with " | ", e.g. <search>revenue 2023 | number of employees</search>.
- <bbox>[x1, y1, x2, y2]</bbox> zooms into a region of the most recent image: pixel coordinates (left, top, right, bottom) in that image as you see it. Use it when text, a table or a chart is too small to read.
- <answer>...</answer> gives the final answer: short, with no explanation, e.g. <answer>Beijing</answer>.
Search as often as you need; answer only when the pages you have seen support the answer."""

QUESTION_TEMPLATE = "Question: {question}"

SEARCH_RESULT_TEXT = "Search result for \"{query}\": page {page_id}."
NO_NEW_RESULTS_TEXT = (
    "The search for \"{query}\" returned no page you have not already seen. Try a different query, zoom into a "
    "page you have, or answer."
)
CROP_TEXT = "Zoomed region {bbox} of the previous image."
INVALID_ACTION_TEXT = (
    "Your last reply could not be used: {reason}. Reason inside <think> ... </think>, then write exactly one of "
    "<search>query</search>, <bbox>[x1, y1, x2, y2]</bbox> or <answer>...</answer>."
)
FORCE_ANSWER_TEXT = (
    "You have used all your steps. Give your final answer now inside <answer> ... </answer>, based on what you "
    "have seen."
)
NO_ANSWER_FALLBACK = "Sorry, I could not find the answer in the documents."


@dataclass
class Prompts:
    system: str | None = SYSTEM_PROMPT  # None: put the rules in the first user message (upstream style)
    question: str = QUESTION_TEMPLATE
    search_result: str = SEARCH_RESULT_TEXT
    no_new_results: str = NO_NEW_RESULTS_TEXT
    crop: str = CROP_TEXT
    invalid_action: str = INVALID_ACTION_TEXT
    force_answer: str = FORCE_ANSWER_TEXT
    no_answer: str = NO_ANSWER_FALLBACK

    def initial_messages(self, question: str) -> list[dict]:
        text = self.question.format(question=question)
        if self.system is None:
            return [{"role": "user", "content": SYSTEM_PROMPT + "\n\n" + text}]
        return [{"role": "system", "content": self.system}, {"role": "user", "content": text}]
