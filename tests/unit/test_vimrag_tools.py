"""Tolerant parsing of <tool_call> blocks, with a clear message for everything unusable."""
from __future__ import annotations

import pytest

from vimrag.tools import answer_args, memorize_args, parse_turn, search_args


def test_well_formed_calls_and_think():
    parsed = parse_turn('<think>two things</think>\n'
                        '<tool_call>{"name": "add_search_node", "arguments": {"id": "s1", "query": "a", '
                        '"parent_ids": ["root"]}}</tool_call>\n'
                        '<tool_call>{"name": "add_search_node", "arguments": {"id": "s2", "query": "b"}}</tool_call>')
    assert parsed.valid and parsed.think == "two things"
    assert [search_args(c) for c in parsed.calls] == [("s1", "a", ["root"]), ("s2", "b", [])]


@pytest.mark.parametrize("text", [
    # JSON5: single quotes, trailing comma, comment
    "<tool_call>{'name': 'add_answer_node', 'arguments': {'answer': '7.4', 'parent_ids': ['s1'],},} // done"
    "</tool_call>",
    # arguments as a JSON string, "parameters" spelling, code fence
    ('<tool_call>```json\n{"name": "add_answer_node", "parameters": "{\\"answer\\": \\"7.4\\", '
    '\\"parent_ids\\": \\"s1\\"}"}\n```</tool_call>'),
    # tags forgotten entirely
    '{"name": "add_answer_node", "arguments": {"answer": 7.4, "parent_ids": ["s1"]}}',
    # a thinking model that dropped the opening <think>
    ('let me see</think><tool_call>{"name": "add_answer_node", "arguments": {"answer": "7.4", "parent_ids": ["s1"]}}'
    "</tool_call>"),
])
def test_sloppy_but_meaningful_calls_are_accepted(text):
    parsed = parse_turn(text)
    assert parsed.valid, parsed.errors
    assert answer_args(parsed.calls[0]) == ("7.4", ["s1"])


@pytest.mark.parametrize("text, message", [
    ("I think the answer is 7.4", "no <tool_call>"),
    ('<tool_call>{"name": "add_search_node", "arguments": {"id": "s1", "query": "a"}', "not closed"),
    ("<tool_call>{name: }</tool_call>", "not valid JSON"),
    ('<tool_call>["add_search_node"]</tool_call>', "must be a JSON object"),
    ('<tool_call>{"name": "delete_node", "arguments": {}}</tool_call>', "unknown tool 'delete_node'"),
    ('<tool_call>{"name": "add_answer_node", "arguments": [1]}</tool_call>', "must be an object"),
    ("<tool_call>   </tool_call>", "empty"),
])
def test_malformed_calls_become_messages(text, message):
    parsed = parse_turn(text)
    assert not parsed.valid
    assert any(message in e for e in parsed.errors), parsed.errors


def test_argument_checks():
    call = parse_turn('<tool_call>{"name": "add_search_node", "arguments": {"query": "a"}}</tool_call>').calls[0]
    with pytest.raises(ValueError, match="needs an `id`"):
        search_args(call)
    call = parse_turn('<tool_call>{"name": "summarize_and_memorize", "arguments": {"summarize": "found it", '
                      '"memorize": [{"information_id": "picture_2", "is_useful": "true", "priority_score": "4"}, '
                      '{"information_id": "Video1", "key_timestamp": 12, "priority_score": 5}]}}</tool_call>').calls[0]
    summary, entries, node = memorize_args(call)
    assert summary == "found it" and node is None
    assert [(e.information_id, e.is_useful, e.priority, e.key_timestamps) for e in entries] == [
        ("Picture 2", True, 4.0, []), ("Video 1", True, 5.0, [12.0])]
    for bad, message in [({"priority_score": 9}, "within 0-5"), ({"priority_score": "high"}, "must be a number"),
                         ({"key_timestamp": ["x"]}, "list of seconds"), ({"region": [1, 2]}, r"\[x1, y1, x2, y2\]")]:
        call.arguments = {"summary": "s", "memorize": [{"information_id": "Picture 1", **bad}]}
        with pytest.raises(ValueError, match=message):
            memorize_args(call)
    call.arguments = {"summary": "s", "memorize": [{"is_useful": True}]}
    with pytest.raises(ValueError, match="information_id"):
        memorize_args(call)


def test_runaway_replies_are_bounded():
    call = '<tool_call>{"name": "add_search_node", "arguments": {"id": "s%d", "query": "q"}}</tool_call>'
    parsed = parse_turn("".join(call % i for i in range(20)))
    assert len(parsed.calls) == 8 and any("at most 8" in e for e in parsed.errors)
