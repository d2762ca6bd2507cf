"""Bbox mapping, resize rule, base-URL normalisation and response validation, against hand-computed values.

Every expected number below was worked out by hand from the definitions (page pixels = offset +
shown pixels × page-region size / shown size, then padding, then clamping to the page), not with
the implementation's own formula.
"""
from __future__ import annotations

import json

import pytest
from PIL import Image

from vrag_rl.agent.frontend import search_base
from vrag_rl.agent.images import map_bbox_to_page, smart_resize
from vrag_rl.agent.policies.openai_http import (
    MAX_RESPONSE_BYTES,
    EncodedImageCache,
    normalise_base_url,
    parse_chat_completion,
)
from vrag_rl.agent.policy import PolicyError


@pytest.mark.parametrize("bbox, shown, page_box, page, pad, min_side, expected, clipped", [
    # same frame, no padding: the box itself
    ([10, 20, 30, 40], (100, 100), (0, 0, 100, 100), (100, 100), 0, 1, (10, 20, 30, 40), False),
    # the model saw the page at half size: every coordinate doubles
    ([5, 5, 15, 10], (50, 40), (0, 0, 100, 80), (100, 80), 0, 1, (10, 10, 30, 20), False),
    # a crop of a crop: region (200,100)-(400,300) shown at 100x100 → ×2 plus the offset, then 5 px padding
    ([10, 10, 20, 20], (100, 100), (200, 100, 400, 300), (1000, 1000), 5, 1, (215, 115, 245, 145), False),
    # padding past the right/bottom edge is clamped to the page: 110 → 100, 90 → 80
    ([90, 70, 100, 80], (100, 80), (0, 0, 100, 80), (100, 80), 10, 1, (80, 60, 100, 80), False),
    # ... and past the left/top edge to 0
    ([0, 0, 10, 10], (100, 80), (0, 0, 100, 80), (100, 80), 10, 1, (0, 0, 20, 20), False),
    # a box reaching outside the shown image is cut to it and reported as clipped
    ([90, 70, 150, 120], (100, 80), (0, 0, 100, 80), (100, 80), 0, 1, (90, 70, 100, 80), True),
    ([-20, -5, 10, 10], (100, 80), (0, 0, 100, 80), (100, 80), 0, 1, (0, 0, 10, 10), True),
    # a 2x2 box widened to 20x20 around its centre (51, 41)
    ([50, 40, 52, 42], (100, 80), (0, 0, 100, 80), (100, 80), 0, 20, (41, 31, 61, 51), False),
    # widened at the bottom-right corner, then clamped
    ([98, 78, 100, 80], (100, 80), (0, 0, 100, 80), (100, 80), 0, 20, (89, 69, 100, 80), False),
    # a 1000x800 page shown at 700x560 (scale 10/7): 7 → 10 and 14 → 20 exactly, not 21
    ([7, 7, 14, 14], (70, 56), (0, 0, 100, 80), (100, 80), 0, 1, (10, 10, 20, 20), False),
    ([420, 350, 490, 420], (700, 560), (0, 0, 1000, 800), (1000, 800), 0, 28, (600, 500, 700, 600), False),
])
def test_bbox_maps_to_hand_computed_page_pixels(bbox, shown, page_box, page, pad, min_side, expected, clipped):
    assert map_bbox_to_page(bbox, shown, page_box, page, pad, min_side) == (expected, clipped)


def test_bbox_entirely_outside_the_image_is_refused():
    with pytest.raises(ValueError, match="outside the 100x80 image"):
        map_bbox_to_page([120, 90, 150, 100], (100, 80), (0, 0, 100, 80), (100, 80), 0, 1)
    with pytest.raises(ValueError):
        map_bbox_to_page([10, 85, 20, 95], (100, 80), (0, 0, 100, 80), (100, 80), 0, 1)  # below the image
    with pytest.raises(ValueError):
        map_bbox_to_page([120, 10, 150, 20], (100, 80), (0, 0, 100, 80), (100, 80), 0, 1)  # right of it
    with pytest.raises(ValueError):
        map_bbox_to_page([99.5, 10, 150, 20], (100, 80), (0, 0, 100, 80), (100, 80), 0, 1)  # half a pixel inside
    with pytest.raises(ValueError):
        map_bbox_to_page([10, 79.5, 20, 95], (100, 80), (0, 0, 100, 80), (100, 80), 0, 1)


@pytest.mark.parametrize("height, width, expected", [
    (800, 1000, (560, 700)),  # 812x1008 is over 512·28² → scale by sqrt(800000/401408) and floor to 28s
    (100, 100, (448, 448)),  # 112x112 is under 256·28² → scale up by 4.48 and ceil to 28s
    (560, 700, (560, 700)),  # already 28-aligned and inside the budget
    (28, 5600, None),  # aspect ratio 200 is allowed...
    (20, 5600, "ratio"),  # ...over 200 is not
    (0, 10, "area"),
])
def test_smart_resize_hand_computed(height, width, expected):
    if isinstance(expected, str):
        with pytest.raises(ValueError, match=expected):
            smart_resize(height, width)
        return
    h, w = smart_resize(height, width)
    if expected is not None:
        assert (h, w) == expected
    assert h % 28 == 0 and w % 28 == 0 and 256 * 28 * 28 <= h * w <= 512 * 28 * 28


@pytest.mark.parametrize("given, expected", [
    ("http://h:8001", "http://h:8001/v1"),
    ("http://h:8001/", "http://h:8001/v1"),
    ("http://h:8001/v1", "http://h:8001/v1"),
    ("http://h:8001/v1/", "http://h:8001/v1"),
    ("http://h:8001/v1/chat/completions", "http://h:8001/v1"),
    ("https://api.example.com/compatible-mode/v1", "https://api.example.com/compatible-mode/v1"),
    ("http://h/proxy/v1/chat/completions/", "http://h/proxy/v1"),
])
def test_base_url_normalisation(given, expected):
    assert normalise_base_url(given) == expected


@pytest.mark.parametrize("given, expected", [
    ("http://h:8002", "http://h:8002"), ("http://h:8002/", "http://h:8002"), ("http://h:8002/search", "http://h:8002"),
    ("http://h:8002/search/", "http://h:8002"),
])
def test_search_url_normalisation(given, expected):
    assert search_base(given) == expected


def _body(content, **extra) -> bytes:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
    return json.dumps({"choices": [choice], **extra}).encode()


def test_parse_chat_completion_reads_text_usage_and_finish_reason():
    reply = parse_chat_completion(_body("<answer>x</answer>", usage={"prompt_tokens": 12, "completion_tokens": 3}))
    assert (reply.text, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens) == (
        "<answer>x</answer>", "stop", 12, 3)
    parts = [{"type": "text", "text": "<answer>"}, {"type": "text", "text": "y</answer>"}]
    assert parse_chat_completion(_body(parts)).text == "<answer>y</answer>"
    assert parse_chat_completion(_body(None)).text == ""


@pytest.mark.parametrize("usage, prompt, completion", [
    ({"prompt_tokens": "12", "completion_tokens": 3}, 0, 3),
    ({"prompt_tokens": True, "completion_tokens": -4}, 0, 0),
    ({"prompt_tokens": 5.0, "completion_tokens": None}, 0, 0),
    ("lots", 0, 0),
    ({"prompt_tokens": 0, "completion_tokens": 7}, 0, 7),
])
def test_malformed_usage_counts_as_zero(usage, prompt, completion):
    reply = parse_chat_completion(_body("t", usage=usage))
    assert (reply.prompt_tokens, reply.completion_tokens) == (prompt, completion)


def test_non_string_finish_reason_is_dropped():
    body = json.dumps({"choices": [{"message": {"content": "t"}, "finish_reason": 3}]}).encode()
    assert parse_chat_completion(body).finish_reason is None


@pytest.mark.parametrize("body, reason", [
    (b"", "empty"),
    (b"\xff", "not UTF-8"),
    (b"[" * 50_000, "nested too deeply"),
    (b"{", "not JSON"),
    (b"null", "JSON NoneType"),
    (b"{}", "no `choices`"),
    (b'{"choices": []}', "no `choices`"),
    (b'{"choices": {"0": 1}}', "no `choices`"),
    (b'{"choices": [null]}', "not an object"),
    (b'{"choices": [{}]}', "`message`"),
    (b'{"choices": [{"message": "hi"}]}', "`message`"),
    (_body(3), "content is a int"),
    (_body({"text": "x"}), "content is a dict"),
    (_body([{"type": "image_url"}]), "content is a list"),
    (_body([{"type": "text", "text": 5}]), "content is a list"),
    (b" " * (MAX_RESPONSE_BYTES + 1), "larger than"),
])
def test_unusable_bodies_are_policy_errors_with_a_reason(body, reason):
    with pytest.raises(PolicyError, match=reason):
        parse_chat_completion(body)


def test_lone_surrogates_are_replaced():
    reply = parse_chat_completion(b'{"choices": [{"message": {"content": "<search>\\ud800 x</search>"}}]}')
    assert reply.text == "<search>? x</search>"
    reply.text.encode("utf-8")  # the next request can carry it
    assert parse_chat_completion(_body("caf\u00e9")).text == "caf\u00e9"


def test_encode_cache_encodes_each_key_once_and_is_bounded():
    red, blue = Image.new("RGB", (32, 32), (255, 0, 0)), Image.new("L", (32, 32), 40)
    cache = EncodedImageCache()
    first = cache.data_url(red, "page-1")
    assert cache.data_url(red, "page-1") is first and (cache.misses, cache.hits) == (1, 1)
    assert first.startswith("data:image/jpeg;base64,")
    cache.data_url(blue, None), cache.data_url(blue, None)  # no key: nothing to cache under
    assert cache.misses == 3
    small = EncodedImageCache(max_chars=len(first) + 10)
    small.data_url(red, "a"), small.data_url(blue, "b"), small.data_url(red, "a")
    assert small.misses == 3  # "b" evicted "a": bounded by characters


def test_not_json_reason_quotes_the_first_40_characters():
    with pytest.raises(PolicyError) as caught:
        parse_chat_completion(b"   " + b"x" * 100)
    assert str(caught.value) == f"policy response is not JSON (JSONDecodeError; starts {'x' * 40!r})"
