"""The VRAG agent over real sockets: scripted policy server + real search server (sample corpus)."""
from __future__ import annotations

import asyncio
import json
import time

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from search_engine.engine import SearchEngine
from search_engine.text_extraction import ocr_lines
from testkit.loopback import LoopbackServer, free_port
from vrag_rl import VRAG
from vrag_rl.agent.images import smart_resize

QUESTION = "What satisfaction score did the Riverside district get?"
PAGE = "metro_travel_survey_2024_4"


@pytest.fixture(scope="module")
def riverside_bbox(text_index):
    """Where 'Riverside' is printed on its page, expressed in the frame the model is shown."""
    engine = SearchEngine.load(text_index)
    record = engine.page(PAGE)
    from PIL import Image

    page = Image.open(engine.page_image_path(PAGE))
    line = next(found for found in ocr_lines(page) if "Riverside" in found.text)
    shown_h, shown_w = smart_resize(record.height, record.width)
    sx, sy = shown_w / record.width, shown_h / record.height
    x1, y1, x2, y2 = line.box
    bbox = [round(x1 * sx), round(y1 * sy), round(x2 * sx), round(y2 * sy)]
    return bbox, (record.width, record.height), (shown_w, shown_h), line.box


def _types(result):
    return [e.type for e in result.events]


def test_episode_searches_crops_and_answers(scripted_policy, text_search_server, text_index, riverside_bbox):
    bbox, page_size, shown_size, line_box = riverside_bbox
    policy = scripted_policy({"Riverside": [
        "<think>I should find the district table.</think><search>Riverside district satisfaction score</search>",
        f"<think>The table is small; zoom in.</think><bbox>{json.dumps(bbox)}</bbox>",
        "<think>It reads 7.4.</think><answer>7.4</answer>",
    ]})
    agent = VRAG(base_url=policy, search_url=text_search_server.url, crop_padding=20)
    result = agent.run(QUESTION)
    assert result.status == "answered" and result.answer == "7.4"
    assert _types(result) == ["start", "think", "search", "search_results", "think", "crop", "think", "answer",
                              "finish"]
    shown = result.events[3].shown[0]
    assert shown.page_id == PAGE and shown.shown_size == shown_size and shown.page_size == page_size
    crop = result.events[5].crop
    # expected independently: the OCR'd line's own page-pixel box, 20 px padding on each side (it is far from
    # the page edges); the bbox was rounded to whole shown pixels, which moves an edge by at most half a shown
    # pixel, i.e. page/shown / 2 page pixels, plus one for whole-pixel cropping
    x1, y1, x2, y2 = line_box
    expected = (x1 - 20, y1 - 20, x2 + 20, y2 + 20)
    assert 0 < expected[0] and 0 < expected[1] and expected[2] < page_size[0] and expected[3] < page_size[1]
    tolerance = page_size[0] / shown_size[0] / 2 + 1
    assert all(abs(a - b) <= tolerance for a, b in zip(crop.page_box, expected)), (crop.page_box, expected)
    assert crop.is_crop and crop.parent_image_id == shown.image_id
    # the zoomed crop really shows the region: OCR reads the line in it
    assert any("Riverside" in found.text for found in ocr_lines(crop.image))
    assert crop.shown_size[0] * crop.shown_size[1] >= 256 * 28 * 28  # zoomed up to the pixel budget
    assert result.evidence == [{"page_id": PAGE, "crops": [list(crop.page_box)]}]
    # the search server shares this machine (it exposes its paths) and the agent read the page from its file,
    # yet what the result shows names the page by its URL, never by the server machine's absolute path
    assert shown.image_path == f"{text_search_server.url}/pages/{PAGE}/image"
    assert str(text_index) not in json.dumps(result.to_dict())
    assert result.retrieved_page_ids == [PAGE]
    payload = json.dumps(result.to_dict())  # the whole trajectory is JSON-safe
    assert "image_ref" in payload and "base64" not in payload
    assert result.usage["completion_tokens"] > 0 and result.timings["search_s"] > 0


def test_crop_of_a_crop_maps_back_to_page_pixels(scripted_policy, text_search_server):
    policy = scripted_policy(default=[
        "<think>s</think><search>Riverside district satisfaction</search>",
        "<think>left half</think><bbox>[0, 0, 200, 300]</bbox>",
        "<think>top-left of that</think><bbox>[0, 0, 100, 100]</bbox>",
        "<answer>done</answer>",
    ])
    result = VRAG(base_url=policy, search_url=text_search_server.url, crop_padding=0).run(QUESTION)
    page, first, second = result.images
    f = page.page_size[0] / page.shown_size[0]
    assert first.page_box == (0, 0, round(200 * f), round(300 * page.page_size[1] / page.shown_size[1]))
    g = (first.page_box[2] - first.page_box[0]) / first.shown_size[0]
    assert second.page_box[2] == pytest.approx(100 * g, abs=1) and second.parent_image_id == first.image_id
    assert result.evidence[0]["crops"] == [list(first.page_box), list(second.page_box)]


def test_stream_yields_events_as_they_happen(scripted_policy, text_search_server):
    policy = scripted_policy(default=["<think>a</think><search>{question}</search>",
                                      "<think>b</think><answer>x</answer>"])
    events = list(VRAG(base_url=policy, search_url=text_search_server.url).stream("Kestrel Ridge output?"))
    assert [e.type for e in events] == ["start", "think", "search", "search_results", "think", "answer", "finish"]
    assert events[2].queries == ["Kestrel Ridge output?"]
    assert events[3].shown[0].page_id == "solar_energy_brief_3"


@pytest.mark.parametrize("bad_reply, reason", [
    ("I will just answer without tags", "no <search>"),
    ("<think>x</think><search>a</search><answer>b</answer>", "2 actions"),
    ("<think>x</think><bbox>[1, 2, 3]</bbox>", "four numbers"),
    ("<think>x</think><bbox>[5000, 5000, 6000, 6000]</bbox>", "outside"),
    ("<think>x</think><search></search>", "empty <search>"),
])
def test_malformed_replies_are_reported_and_the_episode_goes_on(scripted_policy, text_search_server, bad_reply,
                                                                 reason):
    policy = scripted_policy(default=["<think>s</think><search>bicycle share</search>", bad_reply,
                                      "<think>ok</think><answer>12%</answer>"])
    result = VRAG(base_url=policy, search_url=text_search_server.url).run("bicycle?")
    errors = [e for e in result.events if e.type == "error"]
    assert len(errors) == 1 and reason in errors[0].message and not errors[0].fatal
    assert result.status == "answered" and result.answer == "12%"
    # the model was told what went wrong
    assert any("could not be used" in str(m["content"]) for m in result.messages if m["role"] == "user")


def test_bbox_before_any_image_and_missing_think(scripted_policy, text_search_server):
    policy = scripted_policy(default=["<bbox>[0, 0, 10, 10]</bbox>", "<search>bicycle</search>",
                                      "<answer>12%</answer>"])
    result = VRAG(base_url=policy, search_url=text_search_server.url).run("q")
    errors = [e.message for e in result.events if e.type == "error"]
    assert errors == ["<bbox> before any image was shown; search first"]
    assert result.answer == "12%" and "think" not in _types(result)


def test_repeated_search_shows_no_page_twice(scripted_policy, text_search_server):
    policy = scripted_policy(default=["<search>Kestrel Ridge</search>"] * 40)
    result = VRAG(base_url=policy, search_url=text_search_server.url, max_turns=3, search_top_k=1).run("q")
    results = [e for e in result.events if e.type == "search_results"]
    assert len(results[0].shown) == 1 and results[1].shown == [] and "no new page" in results[1].message
    # the model never answered: one forced turn, then an explicit failure
    assert result.status == "failed" and result.turns == 4
    assert result.events[-2].kind == "budget_exhausted" and result.events[-1].type == "finish"


def test_forced_answer_at_the_turn_budget(scripted_policy, text_search_server):
    policy = scripted_policy(default=["<search>bicycle</search>", "<search>bus</search>", "<answer>12%</answer>"])
    result = VRAG(base_url=policy, search_url=text_search_server.url, max_turns=2).run("q")
    assert result.status == "forced_answer" and result.answer == "12%"
    assert "used all your steps" in str(result.messages[-2]["content"])


def test_endless_garbage_fails_cleanly(scripted_policy, text_search_server):
    policy = scripted_policy(default=["garbage"])
    result = VRAG(base_url=policy, search_url=text_search_server.url, max_invalid_actions=2).run("q")
    assert result.status == "failed" and result.turns == 3 and result.events[-2].fatal


def test_parallel_queries_in_one_search(scripted_policy, text_search_server):
    policy = scripted_policy(default=["<search>Kestrel Ridge solar plant | most used travel app</search>",
                                      "<answer>both</answer>"])
    result = VRAG(base_url=policy, search_url=text_search_server.url).run("q")
    search_results = next(e for e in result.events if e.type == "search_results")
    assert [r.page_id for r in search_results.shown] == ["solar_energy_brief_3", "metro_travel_survey_2024_2"]
    assert len(search_results.hits) == 2


def test_unreachable_search_server_is_a_clear_failure(scripted_policy):
    policy = scripted_policy(default=["<search>x</search>"])
    started = time.monotonic()
    result = VRAG(base_url=policy, search_url=f"http://127.0.0.1:{free_port()}", search_retries=1).run("q")
    assert result.status == "failed" and "unavailable after 2 attempts" in result.error
    assert [e.kind for e in result.events if e.type == "error"] == ["search_failed"]
    assert time.monotonic() - started < 20


def test_policy_errors_and_timeouts_are_clear_failures(text_search_server):
    app = FastAPI()
    calls = {"n": 0}

    @app.get("/health")
    async def health():
        return {}

    @app.post("/v1/chat/completions")
    async def broken(request: dict):
        calls["n"] += 1
        if request["messages"][-1]["content"].endswith("slow"):
            await asyncio.sleep(3)
        return JSONResponse({"error": "model crashed"}, status_code=500)

    server = LoopbackServer(app).start()
    try:
        result = VRAG(base_url=server.url + "/v1", search_url=text_search_server.url, model="m",
                      policy_retries=2).run("q")
        assert result.status == "failed" and "500" in result.error and calls["n"] == 3
        started = time.monotonic()
        result = VRAG(base_url=server.url + "/v1", search_url=text_search_server.url, model="m", policy_retries=0,
                      policy_timeout_s=0.5).run("too slow")
        assert result.status == "failed" and time.monotonic() - started < 3
        result = VRAG(base_url=f"http://127.0.0.1:{free_port()}/v1", search_url=text_search_server.url, model="m",
                      policy_retries=0).run("q")
        assert result.status == "failed" and "unreachable" in result.error
    finally:
        server.stop()


def test_upstream_call_style(scripted_policy, text_search_server):
    policy = scripted_policy(default=["<think>t</think><search>bicycle</search>",
                                      "<think>t</think><bbox>[10, 10, 200, 200]</bbox>", "<answer>12%</answer>"])
    assert VRAG(policy, text_search_server.url + "/search", generator=False).run("q") == "12%"
    gen = VRAG(policy, text_search_server.url + "/search", generator=True).run("q")
    kinds = []
    try:
        while True:
            kinds.append(next(gen)[0])
    except StopIteration as stop:
        final = stop.value
    assert kinds == ["think", "search", "search_image", "think", "bbox", "crop_image", "answer"]
    assert final == ("answer", "12%", "")


def test_many_episodes_concurrently(scripted_policy, text_search_server):
    policy = scripted_policy(default=["<search>{question}</search>", "<answer>ok</answer>"])
    questions = [f"Kestrel Ridge question {i}" for i in range(24)]
    agent = VRAG(base_url=policy, search_url=text_search_server.url)
    results = agent.run_batch(questions, concurrency=8)
    assert [r.question for r in results] == questions
    assert all(r.status == "answered" for r in results)
    assert len({r.episode_id for r in results}) == 24


def test_rule_based_policy_reads_the_page(text_search_server):
    """The OCR rule-based policy (the CPU demo's default) finds, zooms into and reads a real answer."""
    from vrag_rl.serving.policy_server.app import create_app
    from vrag_rl.serving.policy_server.rule_based import RuleBasedBackend

    server = LoopbackServer(create_app(RuleBasedBackend(), "rule-based")).start()
    try:
        result = VRAG(base_url=server.url + "/v1", search_url=text_search_server.url).run(
            "How much power does the Kestrel Ridge solar plant produce?")
    finally:
        server.stop()
    assert _types(result)[:6] == ["start", "think", "search", "search_results", "think", "crop"]
    assert result.status == "answered" and "410" in result.answer
    assert result.retrieved_page_ids[0] == "solar_energy_brief_3"
