"""Everything VimRAG says to the model, in one place (configurable through `VimPrompts`).

Upstream's `vimrag_prompt.py` was never published; these prompts are ours, written to the
protocol of `vimrag.tools`. The first user line is always "Question: ...", which lets stateless
policies (the CPU stand-in, the scripted replay) key on the question.
"""
from __future__ import annotations

from dataclasses import dataclass

SYSTEM_PROMPT = (
    "You answer questions over a corpus of documents and videos by building a memory graph.\n\n"
    'The graph starts at the node "root" (the question). Each step, reason inside <think> ... </think>, then call '
    'tools, each as <tool_call>{"name": ..., "arguments": {...}}</tool_call>:\n'
    '- add_search_node {"id": "search_1", "query": "...", "parent_ids": ["root"]}: a new node that searches the '
    "corpus. parent_ids are the nodes this step builds on. You may add several search nodes in one step; they are "
    "searched together.\n"
    '- summarize_and_memorize {"summary": "...", "memorize": [{"information_id": "Picture 1", "is_useful": true, '
    '"priority_score": 5}, {"information_id": "Video 2", "is_useful": true, "priority_score": 4, '
    '"key_timestamp": [12.0]}]}: after a search, say what the results show and which items to keep in memory '
    "(priority 0-5; for videos the seconds of the frames that matter; optionally \"region\": [x1, y1, x2, y2] of a "
    'picture as you see it to keep only that part). Add "node_id" when several searches are waiting.\n'
    '- add_answer_node {"answer": "...", "parent_ids": ["search_1"]}: the final answer (short, no explanation), '
    "built on the nodes that support it.\n"
    "Only the graph and the memory you kept are shown to you again, so summarise carefully."
)

QUESTION_TEMPLATE = "Question: {question}"
GRAPH_TEMPLATE = "### Memory graph\n{graph}"
MEMORY_HEADER = "### Multimodal Memory"
MEMORY_ITEM = "Node: {node_id} | {label}: {provenance}"
NEXT_STEP = "Continue: add search nodes, or answer with add_answer_node."
RESULTS_HEADER = "Results of node {node_id} (query \"{query}\"):"
NO_RESULTS = "Node {node_id} (query \"{query}\") found nothing."
SUMMARY_PROMPT = (
    "Now call summarize_and_memorize: summarise what these results say about the question and memorise the "
    "useful items (information_id, is_useful, priority_score, key_timestamp for videos)."
)
INVALID_TEXT = "Your last reply could not be fully used: {reason}. Fix it and call the tools again."
FORCE_ANSWER_TEXT = ("You have used all your steps. Call add_answer_node now with your best answer, built on the "
                     "nodes that support it.")
NO_ANSWER_FALLBACK = "Sorry, I could not find the answer."


@dataclass
class VimPrompts:
    system: str = SYSTEM_PROMPT
    question: str = QUESTION_TEMPLATE
    graph: str = GRAPH_TEMPLATE
    memory_header: str = MEMORY_HEADER
    memory_item: str = MEMORY_ITEM
    next_step: str = NEXT_STEP
    results_header: str = RESULTS_HEADER
    no_results: str = NO_RESULTS
    summary: str = SUMMARY_PROMPT
    invalid: str = INVALID_TEXT
    force_answer: str = FORCE_ANSWER_TEXT
    no_answer: str = NO_ANSWER_FALLBACK

    @property
    def invalid_action(self) -> str:
        """The engine's name for `invalid` (the feedback on an unusable reply, with a {reason} field)."""
        return self.invalid
