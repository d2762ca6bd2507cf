"""Memory energy and the pixel budget: which memory images the model sees again, and how sharp.

VimRAG's graph-modulated visual memory encoding (paper; upstream demo's
`calculate_intuitive_memory_energy` / `generate_multimodal_messages`):

* intrinsic energy of an item of node i:  e = (priority / 5) · (1 + out_degree(i)) · exp(−λ · Δt),
  with Δt = t_max − t_i on the node-creation axis (root = 0, last node = t_max);
* then, children before parents, every item of a node gets + γ · (mean over the node's children
  that hold memory of that child's mean item energy) — a node whose findings were built on
  keeps its memory sharp;
* the top-k items by energy share `total_pixels` in proportion to energy; a video item's frames
  share its part equally; each item is capped by its own maximum (`max_pixels_image`, or
  `max_pixels_video` for all frames of a segment). Upstream computed these maxima and never
  applied them, so one dominant item could receive the whole buffer.

Items of priority 0 (not useful) have zero energy and are never shown. Every constant is a field
of `EnergyConfig`. Hand-written because it is a dozen lines of arithmetic specific to the paper.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Any

from vimrag.graph import MAX_PRIORITY, MemoryGraph, MemoryItem, MemoryNode

# The paper's memory buffer: 5 · 256 · 32 · 32 pixels (upstream's demo default is 2,007,040).
PAPER_TOTAL_PIXELS = 5 * 256 * 32 * 32


@dataclass(frozen=True)
class EnergyConfig:
    """The energy and pixel-budget constants. `memory_top_k` was `top_k` (renamed: beside the agent's
    `search_top_k`, hits per search, a bare `top_k` was ambiguous); `top_k=` still works, with a
    DeprecationWarning."""

    decay_lambda: float = 0.1  # λ, temporal decay per node step
    child_gamma: float = 0.3  # γ, share of the children's energy added to a parent's items
    memory_top_k: int = 5  # memory items shown per step (the highest energies)
    total_pixels: int = PAPER_TOTAL_PIXELS  # S_total, shared by the shown items
    max_pixels_image: int = 1003520  # cap per image item (980·32², upstream)
    max_pixels_video: int = 401408  # cap per video item, all its frames together (392·32², upstream)
    min_pixels: int = 4 * 28 * 28  # below this an item is not worth showing (dropped, not blurred)

    def __post_init__(self) -> None:
        if self.decay_lambda < 0 or self.child_gamma < 0:
            raise ValueError("decay_lambda and child_gamma must be >= 0")
        if self.memory_top_k < 0 or self.total_pixels < 0:
            raise ValueError("memory_top_k and total_pixels must be >= 0")
        if min(self.max_pixels_image, self.max_pixels_video, self.min_pixels) <= 0:
            raise ValueError("pixel caps must be positive")


def _accept_old_top_k(init: Any) -> Any:
    """`EnergyConfig(top_k=...)`, the old name, still works (not a field, so `replace`/`asdict` ignore it)."""

    @functools.wraps(init)
    def wrapper(self: EnergyConfig, *args: Any, top_k: int | None = None, **kwargs: Any) -> None:
        if top_k is not None:
            if "memory_top_k" in kwargs:
                raise TypeError("give memory_top_k only (top_k is its deprecated name)")
            warnings.warn("EnergyConfig(top_k=...) is deprecated: use memory_top_k", DeprecationWarning, stacklevel=2)
            kwargs["memory_top_k"] = top_k
        init(self, *args, **kwargs)

    return wrapper


def _old_top_k(self: EnergyConfig) -> int:
    warnings.warn("EnergyConfig.top_k is deprecated: use memory_top_k", DeprecationWarning, stacklevel=2)
    return self.memory_top_k


EnergyConfig.__init__ = _accept_old_top_k(EnergyConfig.__init__)  # type: ignore[method-assign]
EnergyConfig.top_k = property(_old_top_k)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Allocation:
    """One memory item chosen for the context, with its energy and its pixel budget."""

    node_id: str
    item: MemoryItem
    energy: float
    pixels: int  # the item's budget (all frames together for a video)
    pixels_per_frame: int  # = pixels for an image; pixels // frames for a video
    capped: bool  # the item's own maximum cut its proportional share


def intrinsic_energy(priority: float, out_degree: int, delta_t: float, decay_lambda: float) -> float:
    return (priority / MAX_PRIORITY) * (1 + out_degree) * math.exp(-decay_lambda * delta_t)


def memory_energies(graph: MemoryGraph, config: EnergyConfig = EnergyConfig()) -> dict[str, float]:
    """item_id → final energy Ω for every memory item of the graph."""
    nodes: list[MemoryNode] = list(graph.nodes.values())
    t_max = max((n.order for n in nodes), default=0)
    energy: dict[str, float] = {}
    for node in nodes:
        degree = graph.out_degree(node.node_id)
        for item in node.items:
            energy[item.item_id] = intrinsic_energy(item.priority, degree, t_max - node.order, config.decay_lambda)
    node_mean: dict[str, float] = {}
    for node in sorted(nodes, key=lambda n: n.order, reverse=True):  # children are created after parents
        child_means = [node_mean[c] for c in graph.children(node.node_id) if c in node_mean]
        bonus = config.child_gamma * (sum(child_means) / len(child_means)) if child_means else 0.0
        for item in node.items:
            energy[item.item_id] += bonus
        if node.items:
            node_mean[node.node_id] = sum(energy[i.item_id] for i in node.items) / len(node.items)
    return energy


def allocate_pixels(graph: MemoryGraph, config: EnergyConfig = EnergyConfig()) -> list[Allocation]:
    """The top-k items by energy with their pixel budgets, highest energy first."""
    energies = memory_energies(graph, config)
    candidates = [(energies[i.item_id], n.order, n.node_id, i) for n, i in graph.items() if energies[i.item_id] > 0]
    candidates.sort(key=lambda c: (-c[0], -c[1]))  # ties: the more recent node first
    top = candidates[: config.memory_top_k]
    total_energy = sum(c[0] for c in top)
    allocations: list[Allocation] = []
    for value, _order, node_id, item in top:
        share = math.floor(config.total_pixels * value / total_energy)
        is_video = item.kind == "video_segment"
        cap = config.max_pixels_video if is_video else config.max_pixels_image
        pixels = min(share, cap)
        frames = max(1, len(item.key_timestamps) or len(item.frame_boxes)) if is_video else 1
        per_frame = pixels // frames
        if per_frame < config.min_pixels:
            continue
        allocations.append(Allocation(node_id, item, value, pixels, per_frame, share > cap))
    return allocations
