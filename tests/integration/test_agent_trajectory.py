"""What an episode records and shows, checked against pixels of drawn markers and hand-written expectations.

A two-page index of drawn pages (`testkit.marker_pages`, fixture `marker_engine`): on the 1000x800
"zebra" page a red square fills page pixels (600..699, 500..599) and a blue one the bottom-right
corner (900..999, 700..799).
The model is shown that page at 700x560 (Qwen2.5-VL's resize rule: 812x1008 is over 512·28²
pixels, so it scales by sqrt(800000/401408) and floors to multiples of 28), i.e. 0.7 shown pixel
per page pixel, so the red square is at (420..490, 350..420) in the shown frame.

The real search server serves it, wrapped (`RemoteLooking`) so that it looks like a server on
another machine (image paths that do not exist here): the agent must fetch page images over HTTP.
"""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from search_engine.api import create_app as search_app
from testkit.loopback import LoopbackServer
from testkit.malformed_openai import create_app as fuzz_app
from testkit.marker_pages import MARKER_PAGE as PAGE
from testkit.marker_pages import RED, RemoteLooking
from vrag_rl import VRAG
from vrag_rl.agent.credit_graph import ROOT_ID, GraphNode

SHOWN = (700, 560)


@pytest.fixture(scope="module")
def endpoint():
    app = fuzz_app()
    server = LoopbackServer(app).start()
    server.state = app.state.fuzz
    yield server
    server.stop()


def _colour_box(image: Image.Image, channel: int) -> tuple[tuple[int, int, int, int], float]:
    """Bounding box (end-exclusive) and area fraction of the pixels where `channel` dominates."""
    pixels = np.asarray(image.convert("RGB")).astype(int)
    others = [c for c in range(3) if c != channel]
    mask = (pixels[..., channel] > 180) & (pixels[..., others[0]] < 90) & (pixels[..., others[1]] < 90)
    ys, xs = np.nonzero(mask)
    return (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1), float(mask.mean())


def test_search_crop_answer_trajectory(scripted_policy, remote_search):
    policy = scripted_policy(default=[
        "<think>find it</think><search>zebra marker</search>",
        "<think>zoom on the red square</think><bbox>[420, 350, 490, 420]</bbox>",
        "<think>red</think><answer>red</answer>",
    ])
    with VRAG(base_url=policy, search_url=remote_search.url, crop_padding=0, search_top_k=2) as agent:
        result = agent.run("What colour is the square?")
    assert result.status == "answered" and result.answer == "red"
    page, crop = result.images
    url = f"{remote_search.url}/pages/{PAGE}/image"
    assert (page.page_id, page.image_path, page.page_size, page.shown_size) == (PAGE, url, (1000, 800), SHOWN)
    assert crop.page_box == RED and crop.parent_image_id == "img-0" and crop.is_crop
    assert _colour_box(crop.image, 0)[1] > 0.97  # the crop is the red square
    assert page.image.size == SHOWN and _colour_box(page.image, 0)[0] == pytest.approx((420, 350, 490, 420), abs=2)

    records = [(r.index, r.action, r.valid, r.queries, r.retrieved, r.shown_image_ids, r.crop_source_image_id,
                r.crop_page_box) for r in result.turn_records]
    assert records == [
        (0, "search", True, ["zebra marker"], [[PAGE, "giraffe_1"]], ["img-0"], None, None),
        (1, "crop", True, [], [], ["img-1"], "img-0", [600, 500, 700, 600]),
        (2, "answer", True, [], [], [], None, None),
    ]
    graph = result.credit_graph
    assert graph.non_root_nodes() == [
        GraphNode("t0", (ROOT_ID,), "search", (0,), (PAGE,)),
        GraphNode("t1", ("t0",), "crop", (1,), (PAGE,)),
        GraphNode("t2", ("t0", "t1"), "answer", (2,), ()),  # every step that showed an image
    ]
    assert graph.answer_id == "t2" and graph.answer_path() == {ROOT_ID, "t0", "t1", "t2"}
    assert result.retrieved_ranked == [PAGE, "giraffe_1"]
    assert result.evidence == [{"page_id": PAGE, "crops": [[600, 500, 700, 600]]}]


def test_invalid_turns_and_a_second_search_in_the_credit_graph(scripted_policy, remote_search):
    policy = scripted_policy(default=[
        "<search>zebra marker</search>", "no action here", "<search>giraffe</search>",
        "<bbox>[0, 0, 350, 280]</bbox>", "<answer>two</answer>"])
    with VRAG(base_url=policy, search_url=remote_search.url, crop_padding=0, search_top_k=2) as agent:
        result = agent.run("How many pages?")
    assert [r.action for r in result.turn_records] == ["search", "invalid", "search", "crop", "answer"]
    assert [(n.node_id, n.parent_ids, n.kind) for n in result.credit_graph.non_root_nodes()] == [
        ("t0", (ROOT_ID,), "search"), ("t1", (ROOT_ID,), "invalid"), ("t2", (ROOT_ID,), "search"),
        ("t3", ("t2",), "crop"), ("t4", ("t0", "t2", "t3"), "answer")]
    # the first search's page is still in the context the model answered from: on the path, never pruned
    assert result.credit_graph.answer_path() == {ROOT_ID, "t0", "t2", "t3", "t4"}
    # the crop cut the giraffe page (the last image), its top-left quarter in page pixels
    assert result.images[-1].page_id == "giraffe_1" and result.images[-1].page_box == (0, 0, 500, 400)


def test_crop_at_the_page_corner_stays_on_the_page(scripted_policy, remote_search):
    """Padding past the bottom-right edge is clamped: the crop holds page pixels only, no black fill."""
    policy = scripted_policy(default=["<search>zebra marker</search>", "<bbox>[630, 490, 700, 560]</bbox>",
                                      "<answer>blue</answer>"])
    with VRAG(base_url=policy, search_url=remote_search.url, crop_padding=50) as agent:
        result = agent.run("corner?")
    crop = result.images[-1]
    assert crop.page_box == (850, 650, 1000, 800)  # (900-50, 700-50, min(1000, 1050), min(800, 850))
    dark = (np.asarray(crop.image.convert("RGB")).max(axis=-1) < 60).mean()  # black: every channel low
    assert dark < 0.001  # cropping past the page would fill a third of each side with black
    box, fraction = _colour_box(crop.image, 2)
    width, height = crop.image.size  # the blue square is the crop's bottom-right 100x100 of 150x150
    assert box == pytest.approx((width / 3, height / 3, width, height), abs=width * 0.02)
    assert fraction == pytest.approx(4 / 9, abs=0.02)


def test_padding_centres_the_region(scripted_policy, remote_search):
    policy = scripted_policy(default=["<search>zebra marker</search>", "<bbox>[420, 350, 490, 420]</bbox>",
                                      "<answer>red</answer>"])
    with VRAG(base_url=policy, search_url=remote_search.url, crop_padding=50) as agent:
        crop = agent.run("centre?").images[-1]
    assert crop.page_box == (550, 450, 750, 650)
    box, fraction = _colour_box(crop.image, 0)
    width, height = crop.image.size
    assert box == pytest.approx((width / 4, height / 4, 3 * width / 4, 3 * height / 4), abs=width * 0.02)
    assert fraction == pytest.approx(0.25, abs=0.02)


def test_page_fetched_and_encoded_once_across_episodes(scripted_policy, remote_search):
    """Two episodes of one agent show the same remote page: one HTTP fetch, one JPEG encoding."""
    policy = scripted_policy(default=["<search>zebra marker</search>", "<answer>red</answer>"])
    before = remote_search.wrapped.page_fetches[f"/pages/{PAGE}/image"]
    with VRAG(base_url=policy, search_url=remote_search.url) as agent:
        first, second = agent.run("episode one"), agent.run("episode two")
        third = agent.run_batch(["episode three"])[0]
        assert agent.encoded_images.misses == 1 and agent.encoded_images.hits == 2
    assert [r.status for r in (first, second, third)] == ["answered"] * 3
    assert remote_search.wrapped.page_fetches[f"/pages/{PAGE}/image"] - before == 1
    url = f"{remote_search.url}/pages/{PAGE}/image"  # the view's name: page id @ source | region | size
    assert first.images[0].cache_key == second.images[0].cache_key == f"{PAGE}@{url}|0,0,1000,800|700x560"


def test_unreachable_page_image_is_reported(scripted_policy, marker_engine, tmp_path):
    """A hit whose image the server cannot serve: an error event, the episode goes on."""
    app = search_app(engine=marker_engine)
    wrapped = RemoteLooking(app)

    async def no_images(scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/pages/"):
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"gone"})
            return
        await wrapped(scope, receive, send)

    server = LoopbackServer(no_images).start()
    policy = scripted_policy(default=["<search>zebra marker</search>", "<answer>none</answer>"])
    try:
        with VRAG(base_url=policy, search_url=server.url, search_retries=0) as agent:
            result = agent.run("q")
    finally:
        server.stop()
    errors = [e for e in result.events if e.type == "error"]
    assert len(errors) == 1 and PAGE in errors[0].message and "404" in errors[0].message
    assert (errors[0].turn, errors[0].kind, errors[0].fatal) == (1, "search_failed", False)
    assert result.status == "answered" and result.images == []


def test_search_api_key_is_sent(scripted_policy, marker_engine):
    server = LoopbackServer(search_app(engine=marker_engine, api_key="s3cret")).start()
    policy = scripted_policy(default=["<search>zebra marker</search>", "<answer>red</answer>"])
    try:
        with VRAG(base_url=policy, search_url=server.url, search_api_key="s3cret") as agent:
            good = agent.run("q")
        with VRAG(base_url=policy, search_url=server.url, search_api_key="wrong") as agent:
            bad = agent.run("q")
        with VRAG(base_url=policy, search_url=server.url) as agent:
            missing = agent.run("q")
    finally:
        server.stop()
    assert good.status == "answered" and good.images[0].page_id == PAGE
    for result in (bad, missing):
        assert result.status == "failed" and "refused the request (401)" in result.error


def test_token_budget_caps_each_request_and_ends_the_episode(endpoint, remote_search):
    """Each reply costs 5 completion tokens (the endpoint's usage); a budget of 12 allows 12, 7, then 2."""
    with VRAG(base_url=endpoint.url + "/fz/k.good_search/v1", search_url=remote_search.url, model="m",
              max_episode_tokens=12) as agent:
        result = agent.run("[fuzz budget] q")
    sent = [e["max_tokens"] for e in endpoint.state.log if e["episode"] == "[fuzz budget]"]
    assert sent == [12, 7, 2]
    assert result.status == "token_budget" and result.turns == 3 and result.usage["completion_tokens"] == 15
    assert "token budget (12 response tokens)" in result.error
    assert [r.completion_tokens for r in result.turn_records] == [5, 5, 5]


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/v1/chat/completions"])
def test_base_url_forms_reach_the_endpoint(endpoint, remote_search, suffix):
    tag = f"[fuzz base-url {suffix or 'none'}]"
    with VRAG(base_url=endpoint.url + "/fz/k.good_answer" + suffix, search_url=remote_search.url + "/search/",
              model="m") as agent:
        result = agent.run(f"{tag} q")
    assert result.status == "answered" and result.answer == "7.4"
    assert endpoint.state.episode_requests("k.good_answer", tag) == 1
