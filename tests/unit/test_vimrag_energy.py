"""Memory energy and pixel budget, against numbers computed by hand (see each comment)."""
from __future__ import annotations

import pytest

from vimrag.energy import EnergyConfig, allocate_pixels, memory_energies
from vimrag.graph import MemoryGraph, MemoryItem


def _item(node, label, priority, kind="page", frames=0):
    boxes = [[0, 0, 10, 10]] * frames
    return MemoryItem(item_id=f"{node}/{label}", kind=kind, label=label, ref_id=f"d_{label[-1]}", priority=priority,
                      frame_boxes=boxes, key_timestamps=[float(i) for i in range(frames)])


def graph(video: bool = False) -> MemoryGraph:
    # root(t=0) → s1(t=1) → s2(t=2); root → s3(t=3). t_max = 3.
    g = MemoryGraph("q")
    g.add_search_node("s1", "a")
    g.summarize("s1", "", [_item("s1", "Picture 1", 5)])
    g.add_search_node("s2", "b", ["s1"])
    g.summarize("s2", "", [_item("s2", "Picture 2", 4)])
    g.add_search_node("s3", "c")
    c = _item("s3", "Video 3", 2, "video_segment", 3) if video else _item("s3", "Picture 3", 2)
    g.summarize("s3", "", [c, _item("s3", "Picture 4", 0)])  # priority 0: never shown
    return g


def test_energies_match_hand_computation():
    e = memory_energies(graph())
    # B = (4/5)·(1+0)·e^(−0.1·1) = 0.8·0.904837418 = 0.7238699344
    assert e["s2/Picture 2"] == pytest.approx(0.7238699344)
    # C = (2/5)·1·e^0 = 0.4; items of s3 average (0.4 + 0)/2 but s3 has no parent with items except root
    assert e["s3/Picture 3"] == pytest.approx(0.4)
    # A = (5/5)·(1+1)·e^(−0.2) = 1.6374615062, plus γ·mean(children's mean) = 0.3·0.7238699344
    assert e["s1/Picture 1"] == pytest.approx(1.8546224865)
    assert e["s3/Picture 4"] == 0.0


def test_constants_are_configurable():
    e = memory_energies(graph(), EnergyConfig(decay_lambda=0.0, child_gamma=0.0))
    assert e["s1/Picture 1"] == pytest.approx(2.0) and e["s2/Picture 2"] == pytest.approx(0.8)


def test_pixel_budget_is_proportional_to_energy():
    allocations = allocate_pixels(graph())
    # S = 1.8546224865 + 0.7238699344 + 0.4 = 2.9784924209; budget floor(1,310,720·Ω/S)
    assert [(a.item.label, a.pixels) for a in allocations] == [
        ("Picture 1", 816148), ("Picture 2", 318547), ("Picture 3", 176024)]
    assert sum(a.pixels for a in allocations) <= 5 * 256 * 32 * 32
    assert not any(a.capped for a in allocations)


def test_per_item_caps_apply_and_video_frames_share():
    config = EnergyConfig(max_pixels_image=800_000, max_pixels_video=150_000)
    allocations = {a.item.label: a for a in allocate_pixels(graph(video=True), config)}
    assert allocations["Picture 1"].pixels == 800_000 and allocations["Picture 1"].capped  # share 816,148
    assert allocations["Picture 2"].pixels == 318547 and not allocations["Picture 2"].capped
    video = allocations["Video 3"]  # share 176,024 > cap 150,000; three frames share it
    assert video.pixels == 150_000 and video.capped and video.pixels_per_frame == 50_000


def test_top_k_and_minimum():
    allocations = allocate_pixels(graph(), EnergyConfig(memory_top_k=1))
    assert [(a.item.label, a.pixels) for a in allocations] == [("Picture 1", 1_003_520)]  # all S, capped at 980·32²
    tiny = allocate_pixels(graph(), EnergyConfig(total_pixels=5_000))
    # shares 3,113 / 1,215 / 671 are all below min_pixels (4·28² = 3,136): nothing blurry is shown
    assert tiny == []
    assert [a.pixels for a in allocate_pixels(graph(), EnergyConfig(total_pixels=10_000))] == [6226]


def test_the_old_top_k_name_still_works_with_a_deprecation_warning():
    """`top_k` beside the agent's `search_top_k` was ambiguous: it is `memory_top_k` now."""
    with pytest.warns(DeprecationWarning, match="memory_top_k"):
        old = EnergyConfig(top_k=2)
    assert old == EnergyConfig(memory_top_k=2)
    with pytest.warns(DeprecationWarning, match="memory_top_k"):
        assert old.top_k == 2
    with pytest.raises(TypeError, match="memory_top_k only"):
        EnergyConfig(top_k=2, memory_top_k=3)
    from vimrag.config import VimRAGConfig

    with pytest.warns(DeprecationWarning):  # a saved config dict with the old key still loads
        assert VimRAGConfig(energy={"top_k": 4}).energy.memory_top_k == 4
    assert "top_k" not in VimRAGConfig().to_dict()["energy"]
