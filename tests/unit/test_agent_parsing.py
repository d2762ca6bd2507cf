"""Reply parsing and image geometry of the agent: every malformed reply becomes a reason, never a crash."""
import pytest
from PIL import Image

from vrag_rl.agent.images import map_bbox_to_page, resize_for_model, smart_resize
from vrag_rl.vrag.actions import parse_reply


def test_well_formed_actions():
    r = parse_reply("<think>look</think><search>revenue 2023</search>")
    assert (r.kind, r.think, r.queries) == ("search", "look", ["revenue 2023"])
    r = parse_reply("<think>zoom</think>\n<bbox>[10, 20.5, 110, 220]</bbox>")
    assert r.kind == "crop" and r.bbox == [10, 20.5, 110, 220]
    r = parse_reply("<think>done</think><answer> Beijing </answer>")
    assert r.kind == "answer" and r.answer == "Beijing" and not r.warnings


@pytest.mark.parametrize("text, queries", [
    ("<search>a | b|c</search>", ["a", "b", "c"]),
    ('<search>["x y", "z"]</search>', ["x y", "z"]),
    ("<search>same | same</search>", ["same"]),
])
def test_parallel_queries(text, queries):
    assert parse_reply(text).queries == queries


@pytest.mark.parametrize("text, reason", [
    ("I think the answer is 4", "no <search>"),
    ("<think>hmm</think>", "no <search>"),
    ("<think>a</think><search>x</search><bbox>[1,2,3,4]</bbox>", "2 actions"),
    ("<search>   </search>", "empty <search>"),
    ("<search>a|b|c|d|e</search>", "at most 4"),
    ("<bbox>[1, 2, 3]</bbox>", "four numbers"),
    ("<bbox>left top</bbox>", "four numbers"),
    ("<bbox>[5, 5, 5, 9]</bbox>", "zero width"),
    ('<bbox>[1, 2, "NaN", 4]</bbox>', "finite"),
    ("<answer></answer>", "empty <answer>"),
])
def test_malformed_replies_are_invalid_with_a_reason(text, reason):
    parsed = parse_reply(text)
    assert parsed.kind == "invalid" and reason in parsed.reason


def test_tolerated_quirks():
    assert parse_reply("<search>q</search>").warnings == ["no <think> block"]
    assert parse_reply("<think>x</think><answer>12 MW").answer == "12 MW"  # cut off by max_tokens
    assert parse_reply("<bbox>[30, 40, 10, 20]</bbox>").bbox == [10, 20, 30, 40]  # corners swapped
    assert parse_reply('<bbox>{"bbox_2d": [1, 2, 30, 40]}</bbox>').bbox == [1, 2, 30, 40]
    assert parse_reply("<answer>a</answer><answer>b</answer>").answer == "a"


@pytest.mark.parametrize("size", [(1024, 768), (5334, 3000), (595, 842), (100, 60), (3000, 200), (28, 28)])
def test_smart_resize_matches_the_qwen_processor(size):
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize as reference

    w, h = size
    ours = smart_resize(h, w, 28, 256 * 28 * 28, 512 * 28 * 28)
    assert ours == reference(h, w, factor=28, min_pixels=256 * 28 * 28, max_pixels=512 * 28 * 28)
    assert ours[0] % 28 == 0 and ours[1] % 28 == 0
    assert 256 * 28 * 28 <= ours[0] * ours[1] <= 512 * 28 * 28


def test_resize_for_model_is_a_fixed_point_of_the_processor():
    shown = resize_for_model(Image.new("RGB", (1024, 768)), 28, 256 * 784, 512 * 784)
    assert smart_resize(shown.height, shown.width, 28, 256 * 784, 512 * 784) == (shown.height, shown.width)


def test_bbox_maps_to_page_pixels_and_composes():
    page_size = (2000, 1000)
    # full page shown at 1000x500: factor 2
    box, clipped = map_bbox_to_page([100, 50, 200, 100], (1000, 500), (0, 0, 2000, 1000), page_size, 0, 1)
    assert box == (200, 100, 400, 200) and not clipped
    # a crop (page box 200..400 x 100..200) shown at 800x400: factor 0.25 page px per shown px
    box, _ = map_bbox_to_page([400, 200, 800, 400], (800, 400), (200, 100, 400, 200), page_size, 0, 1)
    assert box == (300, 150, 400, 200)
    # padding, then clamping to the page
    box, _ = map_bbox_to_page([0, 0, 10, 10], (1000, 500), (0, 0, 2000, 1000), page_size, 56, 1)
    assert box == (0, 0, 76, 76)
    # partly outside: clipped to the image; wholly outside: refused
    box, clipped = map_bbox_to_page([900, 400, 1500, 900], (1000, 500), (0, 0, 2000, 1000), page_size, 0, 1)
    assert clipped and box == (1800, 800, 2000, 1000)
    with pytest.raises(ValueError, match="outside"):
        map_bbox_to_page([1200, 600, 1500, 900], (1000, 500), (0, 0, 2000, 1000), page_size, 0, 1)
    # tiny boxes are widened to the minimum side
    box, _ = map_bbox_to_page([10, 10, 11, 11], (1000, 500), (0, 0, 2000, 1000), page_size, 0, 28)
    assert box[2] - box[0] == 28 and box[3] - box[1] == 28
