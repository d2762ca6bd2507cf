"""Every way an episode can go, with an in-process Policy over the real search server (marker pages).

The policy here is a real implementation of the `Policy` seam (a list of replies, as a model
would give them), so each test is about the loop's decisions: which page is shown, what the model
is told, when the episode ends and how. Expected values are written out by hand.
"""
from __future__ import annotations

import asyncio
import json

import pytest

from testkit.loopback import free_port
from testkit.marker_pages import MARKER_PAGE, OTHER_PAGE
from vrag_rl import VRAG
from vrag_rl.agent.policy import PolicyError, PolicyReply, SamplingParams
from vrag_rl.vrag.prompts import Prompts


class ListPolicy:
    """Replies from a list, in order (the last one repeats); records what it was asked."""

    def __init__(self, replies, tokens: int = 4):
        self.replies = list(replies)
        self.tokens = tokens
        self.calls: list[tuple[list, SamplingParams]] = []

    async def complete(self, messages, sampling):
        self.calls.append(([dict(m) for m in messages], sampling))
        reply = self.replies[min(len(self.calls), len(self.replies)) - 1]
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, str):
            return PolicyReply(text=reply, prompt_tokens=10, completion_tokens=self.tokens)
        return reply

    async def aclose(self) -> None:
        return None


def _run(remote_search, replies, **config):
    policy = ListPolicy(replies)
    with VRAG(policy=policy, search_url=remote_search.url, **config) as agent:
        return agent.run("Which colour?"), policy


def _errors(result):
    return [(e.kind, e.message, e.fatal) for e in result.events if e.type == "error"]


def test_forced_answer_after_the_turn_budget(remote_search):
    result, policy = _run(remote_search, ["<search>zebra</search>", "<search>giraffe</search>", "<answer>red</answer>"],
                          max_turns=2)
    assert (result.status, result.answer, result.turns) == ("forced_answer", "red", 3)
    assert [r.forced for r in result.turn_records] == [False, False, True]
    assert policy.calls[2][0][-1]["content"][0]["text"] == Prompts().force_answer
    answer = next(e for e in result.events if e.type == "answer")
    assert answer.forced and answer.evidence[0]["page_id"] == MARKER_PAGE
    assert result.events[-1].status == "forced_answer" and result.events[-1].error is None


def test_no_answer_after_the_turn_budget_is_a_failure(remote_search):
    result, _ = _run(remote_search, ["<search>zebra</search>"], max_turns=1)
    assert (result.status, result.answer, result.turns) == ("failed", None, 2)
    assert _errors(result)[-1] == ("budget_exhausted", "the turn budget is spent and the model still gave no <answer>",
                                   True)
    assert [(r.action, r.forced) for r in result.turn_records] == [("search", False), ("search", True)]
    assert [n.kind for n in result.credit_graph.non_root_nodes()] == ["search", "search"]
    assert result.credit_graph.answer_id is None


def test_invalid_streak_ends_the_episode_and_a_valid_turn_resets_it(remote_search):
    result, policy = _run(remote_search, ["junk", "<search>zebra</search>", "junk", "junk", "junk"], max_turns=8,
                          max_invalid_actions=2)
    assert result.status == "failed" and result.turns == 5
    assert result.error.startswith("3 unusable replies in a row")
    assert [fatal for _, _, fatal in _errors(result)] == [False, False, False, True]
    told = policy.calls[1][0][-1]["content"][0]["text"]
    assert told == Prompts().invalid_action.format(reason="no <search>, <bbox> or <answer> action found")


def test_a_page_is_shown_once_and_a_repeat_search_says_so(remote_search):
    result, policy = _run(remote_search, ["<search>zebra marker</search>", "<search>zebra marker</search>",
                                          "<answer>red</answer>"], search_top_k=1)
    first, second = [e for e in result.events if e.type == "search_results"]
    assert [r.page_id for r in first.shown] == [MARKER_PAGE] and first.message == ""
    assert second.shown == [] and second.message == "no new page among the results"
    assert second.hits == [[{"page_id": MARKER_PAGE, "score": second.hits[0][0]["score"], "rank": 1}]]
    told = policy.calls[2][0][-1]["content"][0]["text"]
    assert told == Prompts().no_new_results.format(query="zebra marker")
    assert result.turn_records[1].shown_image_ids == [] and result.turn_records[1].retrieved == [[MARKER_PAGE]]


def test_max_repeats_and_pages_per_search(remote_search):
    result, _ = _run(remote_search, ["<search>zebra marker</search>", "<search>zebra marker</search>",
                                     "<answer>x</answer>"], search_top_k=2, pages_per_search=2, max_repeats=2)
    shown = [[r.page_id for r in e.shown] for e in result.events if e.type == "search_results"]
    assert shown == [[MARKER_PAGE, OTHER_PAGE], [MARKER_PAGE, OTHER_PAGE]]
    assert [i.image_id for i in result.images] == ["img-0", "img-1", "img-2", "img-3"]
    assert result.retrieved_page_ids == [MARKER_PAGE, OTHER_PAGE]


def test_parallel_queries_show_one_page_each(remote_search):
    result, policy = _run(remote_search, ["<search>zebra marker | giraffe other</search>", "<answer>x</answer>"],
                          search_top_k=2)
    event = next(e for e in result.events if e.type == "search_results")
    assert event.queries == ["zebra marker", "giraffe other"]
    assert [r.page_id for r in event.shown] == [MARKER_PAGE, OTHER_PAGE]
    content = policy.calls[1][0][-1]["content"]
    assert [p["type"] for p in content] == ["text", "image", "text", "image"]
    assert content[0]["text"] == Prompts().search_result.format(query="zebra marker", page_id=MARKER_PAGE)
    assert content[1]["image"].size == (700, 560) and content[1]["image_id"] == "img-0"


def test_bbox_problems_are_invalid_actions(remote_search):
    result, policy = _run(remote_search, ["<bbox>[0, 0, 10, 10]</bbox>", "<search>zebra</search>",
                                          "<bbox>[800, 700, 900, 800]</bbox>", "<answer>x</answer>"])
    assert [e[0] for e in _errors(result)] == ["invalid_action", "invalid_action"]
    assert _errors(result)[0][1] == "<bbox> before any image was shown; search first"
    assert _errors(result)[1][1] == "bbox [800.0, 700.0, 900.0, 800.0] lies outside the 700x560 image"
    assert [r.action for r in result.turn_records] == ["invalid", "search", "invalid", "answer"]
    assert result.status == "answered" and len(result.images) == 1


def test_a_crop_of_a_crop_builds_on_the_crop(remote_search):
    result, _ = _run(remote_search, ["<search>zebra</search>", "<bbox>[350, 280, 700, 560]</bbox>",
                                     "<bbox>[0, 0, 100, 100]</bbox>", "<answer>x</answer>"], crop_padding=0,
                     min_crop_side=1)
    page, first, second = result.images
    assert first.page_box == (500, 400, 1000, 800) and first.parent_image_id == "img-0"
    # the 500x400 crop is under 256·28² pixels: scaled up by sqrt(200704/200000) and ceiled to 28s → 504x420;
    # so 100 shown px are 100·500/504 = 99.2 and 100·400/420 = 95.2 page px; the box's far edges round outward
    assert first.shown_size == (504, 420)
    assert second.page_box == (500, 400, 600, 496)
    assert second.parent_image_id == "img-1"
    crop_messages = [m for m in result.messages if m["role"] == "user" and isinstance(m["content"], list)
                     and m["content"][0]["text"].startswith("Zoomed")]
    assert [m["content"][0]["text"] for m in crop_messages] == [
        Prompts().crop.format(bbox=[350, 280, 700, 560]), Prompts().crop.format(bbox=[0, 0, 100, 100])]
    assert [m["content"][1] for m in crop_messages] == [{"type": "image_ref", "image_id": "img-1"},
                                                        {"type": "image_ref", "image_id": "img-2"}]
    # the answer builds on every step that put an image into its context (vrag_credit_graph's rule)
    assert [(n.node_id, n.parent_ids) for n in result.credit_graph.non_root_nodes()] == [
        ("t0", ("root",)), ("t1", ("t0",)), ("t2", ("t1",)), ("t3", ("t0", "t1", "t2"))]
    assert result.evidence == [{"page_id": MARKER_PAGE, "crops": [list(first.page_box), list(second.page_box)]}]


def test_search_server_down_is_a_fatal_search_failure():
    policy = ListPolicy(["<search>zebra</search>"])
    with VRAG(policy=policy, search_url=f"http://127.0.0.1:{free_port()}", search_retries=0) as agent:
        result = agent.run("q")
    assert result.status == "failed" and result.turns == 1 and len(policy.calls) == 1
    assert [(k, f) for k, _, f in _errors(result)] == [("search_failed", True)]
    assert result.error.startswith("search server at http://127.0.0.1:")
    assert "unavailable after 1 attempts" in result.error
    assert [n.kind for n in result.credit_graph.non_root_nodes()] == ["search"]


@pytest.mark.parametrize("reply, reason", [
    (PolicyError("model overloaded"), "model overloaded"),
    (RuntimeError("adapter bug"), "policy adapter failed: RuntimeError: adapter bug"),
    ("not a reply object", None),
    (PolicyReply(text=None), "policy returned PolicyReply, not a PolicyReply with text"),  # type: ignore[arg-type]
])
def test_policy_failures_end_the_episode_with_the_reason(remote_search, reply, reason):
    replies = [reply] if reason is not None else [42]
    result, _ = _run(remote_search, replies)
    assert result.status == "failed" and result.turns == 1 and result.answer is None
    assert _errors(result) == [("policy_failed", result.error, True)]
    assert result.error == (reason or "policy returned int, not a PolicyReply with text")


def test_usage_timings_and_the_sampling_the_policy_gets(remote_search):
    replies = ["<think>a</think><search>zebra</search>", "<think>b</think><answer>red</answer>"]
    result, policy = _run(remote_search, replies, temperature=0.7, top_p=0.9, max_tokens=77, seed=5,
                          extra_body={"top_k": 3})
    sampling = policy.calls[0][1]
    assert (sampling.temperature, sampling.top_p, sampling.max_tokens, sampling.seed, sampling.extra_body) == (
        0.7, 0.9, 77, 5, {"top_k": 3})
    assert result.usage == {"prompt_tokens": 20, "completion_tokens": 8}
    assert [r.completion_tokens for r in result.turn_records] == [4, 4]
    assert result.timings["search_s"] > 0 and result.timings["image_s"] > 0 and result.timings["policy_s"] >= 0
    assert [e.type for e in result.events] == ["start", "think", "search", "search_results", "think", "answer",
                                              "finish"]
    assert [e.text for e in result.events if e.type == "think"] == ["a", "b"]
    assert result.messages[-1] == {"role": "assistant", "content": "<think>b</think><answer>red</answer>"}
    assert result.messages[-2]["content"][1] == {"type": "image_ref", "image_id": "img-0"}
    data = json.loads(json.dumps(result.to_dict()))
    assert data["status"] == "answered" and data["retrieved_page_ids"] == [MARKER_PAGE]
    assert data["credit_graph"]["answer_id"] == "t1" and data["turn_records"][0]["queries"] == ["zebra"]


def test_token_ids_count_as_the_reply_tokens(remote_search):
    replies = [PolicyReply(text="<search>zebra</search>", completion_tokens=99, token_ids=[1, 2, 3]),
               PolicyReply(text="<answer>x</answer>", completion_tokens=99, token_ids=[4])]
    result, policy = _run(remote_search, replies, max_episode_tokens=10)
    assert result.usage["completion_tokens"] == 4 and [r.completion_tokens for r in result.turn_records] == [3, 1]
    assert [s.max_tokens for _, s in policy.calls] == [10, 7]


def test_async_apis_and_event_callbacks(remote_search):
    seen_sync, seen_async = [], []

    async def record(event):
        seen_async.append(event.type)

    async def main():
        agent = VRAG(policy=ListPolicy(["<search>zebra</search>", "<answer>red</answer>"]),
                     search_url=remote_search.url)
        try:
            first = await agent.arun("q1", on_event=lambda e: seen_sync.append(e.type))
            second = await agent.arun("q2", on_event=record)
            streamed = [e.type async for e in agent.astream("q3")]
            batch = await agent.arun_batch(["q4", "", "q6"], concurrency=2)
        finally:
            await agent.aclose()
        return first, second, streamed, batch

    first, second, streamed, batch = asyncio.run(main())
    assert first.answer == "red" and seen_sync == [e.type for e in first.events]
    assert seen_async == [e.type for e in second.events] and streamed[-1] == "finish"
    assert [r.status for r in batch] == ["answered", "failed", "answered"]
    assert batch[1].error == "ValueError: the question is empty" and batch[1].question == ""


def test_upstream_generator_tuples(remote_search):
    policy = ListPolicy(["<think>t</think><search>zebra</search>", "<think>z</think><bbox>[420, 350, 490, 420]</bbox>",
                         "<answer>red</answer>"])
    generator = VRAG(policy=policy, search_url=remote_search.url, generator=True).run("q")
    items = []
    try:
        while True:
            items.append(next(generator))
    except StopIteration as stop:
        final = stop.value
    assert [i[0] for i in items] == ["think", "search", "search_image", "think", "bbox", "crop_image", "answer"]
    assert items[1][1:] == ("zebra", "<search>zebra</search>") and items[4][1] == "[420.0, 350.0, 490.0, 420.0]"
    assert items[2][1].size == (700, 560) and items[5][2].size == (700, 560)  # the source with the box drawn
    source_with_box = items[5][2]  # draw_box's 5-pixel outline runs just inside the box's edges
    assert source_with_box.getpixel((455, 352)) == (160, 32, 240) and source_with_box.getpixel((455, 357))[1] < 60
    assert final == ("answer", "red", "")
    no_answer = VRAG(policy=ListPolicy(["junk"]), search_url=remote_search.url, generator=True,
                     max_invalid_actions=0).run("q")
    assert list(no_answer) == []


class SlowPolicy(ListPolicy):
    async def complete(self, messages, sampling):
        await asyncio.sleep(0.05)
        return await super().complete(messages, sampling)


def test_events_records_and_timings_in_detail(remote_search):
    policy = SlowPolicy(["<search>zebra</search>", "no action", "<answer>red</answer>"])
    with VRAG(policy=policy, search_url=remote_search.url) as agent:
        result = agent.run("  Which colour?  ")
    start, finish = result.events[0], result.events[-1]
    assert (start.type, start.turn, start.episode_id) == ("start", 0, result.episode_id)
    assert start.question == "Which colour?"
    assert len(result.episode_id) == 12 and int(result.episode_id, 16) >= 0 and result.question == "Which colour?"
    assert (finish.turn, finish.turns, finish.answer, finish.status, finish.error) == (3, 3, "red", "answered", None)
    assert 0.15 <= finish.elapsed_s <= result.elapsed_s
    assert result.timings["policy_s"] >= 0.15  # three calls of 50 ms each, summed
    invalid = result.turn_records[1]
    assert (invalid.index, invalid.action, invalid.valid, invalid.reason, invalid.reply) == (
        1, "invalid", False, "no <search>, <bbox> or <answer> action found", "no action")
    assert [e.turn for e in result.events] == [0, 1, 1, 2, 3, 3]
    assert [m["role"] for m in result.messages] == ["system", "user", "assistant", "user", "assistant", "user",
                                                   "assistant"]


def test_crops_do_not_count_as_showing_a_page_again(remote_search):
    result, _ = _run(remote_search, ["<search>zebra marker</search>", "<bbox>[0, 0, 350, 280]</bbox>",
                                     "<search>zebra marker</search>", "<answer>x</answer>"],
                     search_top_k=1, max_repeats=2)
    shown = [[r.page_id for r in e.shown] for e in result.events if e.type == "search_results"]
    assert shown == [[MARKER_PAGE], [MARKER_PAGE]]  # shown twice; the crop between did not use up a repeat
    assert [i.is_crop for i in result.images] == [False, True, False]
    assert result.evidence[0]["crops"] == [[0, 0, 556, 456]] and len(result.evidence) == 1  # + 56 px padding


def test_a_bug_inside_the_loop_is_an_explicit_internal_failure(remote_search):
    """A broken prompt template raises inside the loop: the episode fails with the reason, nothing escapes."""
    policy = ListPolicy(["<search>zebra</search>", "<answer>x</answer>"])
    with VRAG(policy=policy, search_url=remote_search.url, prompts=Prompts(search_result="{no_such_field}")) as agent:
        result = agent.run("q")
    message = "internal error: KeyError: 'no_such_field'"
    assert (result.status, result.error, result.turns) == ("failed", message, 1)
    assert [(e.type, getattr(e, "kind", None)) for e in result.events[-2:]] == [("error", "internal"), ("finish", None)]
    assert (result.events[-2].message, result.events[-2].fatal, result.events[-2].turn) == (message, True, 1)


def test_a_result_before_the_episode_ran():
    from search_engine.client import SearchClient
    from vrag_rl.vrag.config import AgentConfig
    from vrag_rl.vrag.loop import Episode

    episode = Episode(" q ", AgentConfig(), Prompts(), ListPolicy(["x"]), SearchClient("http://127.0.0.1:9"))
    result = episode.result()
    assert (result.status, result.turns, result.answer, result.question, result.error) == ("failed", 0, None, "q", None)
    assert result.events == [] and result.credit_graph.non_root_nodes() == [] and result.evidence == []
    with pytest.raises(ValueError, match="the question is empty"):
        Episode(" ", AgentConfig(), Prompts(), ListPolicy(["x"]), SearchClient("http://127.0.0.1:9"))
