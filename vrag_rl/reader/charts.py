"""Reading a chart by where its labels sit: axes, categories, the values printed on bars, titles.

A figure region carries each printed label with its box (`search_engine.page_layout.Label`). A chart
is built on a few alignments, the same in every plotting library:

* a **value axis** is a run of numbers aligned in a column (left or right of the plot: y ticks) or in a
  row (below it: x ticks), in monotonic order along the axis;
* a **category axis** is a run of words aligned in a row under the plot (or in a column beside it, for
  horizontal bars), one per bar or group;
* a **value printed on a bar** sits in the category's column (vertical bars) or row (horizontal bars),
  inside the plot, not on an axis;
* an **axis title** is a word label beyond the axis' labels, on the axis' side: printed upwards
  (rotated ~90°) left or right of a y axis, or level under an x axis' labels; the **chart title** is a
  level label above everything else.

A category pairs with a value only when exactly one value label sits in its column (row) and the column
is unambiguous (nearer to that category than to any other); otherwise the pairing is not made, and a
question about it gets no answer from the chart rather than a guess.
"""
from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from search_engine.page_layout import Label, Region
from vrag_rl.reader.values import number_of, values_in

MIN_TICKS = 3  # a value axis shows at least three ticks (two numbers could be anything)
MIN_CATEGORIES = 2


@dataclass(frozen=True)
class Pair:
    """A category and the value printed on its bar."""

    category: Label
    value: Label
    number: float


@dataclass
class Chart:
    """What the labels of one figure say as a chart (empty lists where a part is not there)."""

    value_axis: list[Label] = field(default_factory=list)  # tick labels, in axis order
    value_axis_side: str = ""  # "y" (a column of ticks) or "x" (a row of ticks)
    second_axis: list[Label] = field(default_factory=list)  # a numeric axis on the other side (a line plot's x)
    legend: list[Label] = field(default_factory=list)  # series names stacked in a column inside the plot
    categories: list[Label] = field(default_factory=list)  # category labels, in axis order
    category_side: str = ""  # "x" (a row under the plot) or "y" (a column beside it)
    pairs: list[Pair] = field(default_factory=list)  # category ↔ value printed on its bar, where unambiguous
    x_title: Label | None = None
    y_title: Label | None = None
    title: Label | None = None
    others: list[Label] = field(default_factory=list)  # legend entries, callouts: everything else

    @property
    def is_chart(self) -> bool:
        return bool(self.value_axis or len(self.categories) >= MIN_CATEGORIES)

    def axis(self, side: str) -> list[Label]:
        """The numeric ticks of the "x" or "y" axis ([] when that axis prints no numbers)."""
        if self.value_axis_side == side:
            return self.value_axis
        return self.second_axis if self.value_axis and self.value_axis_side != side else []


def _cx(label: Label) -> float:
    return (label.box[0] + label.box[2]) / 2


def _cy(label: Label) -> float:
    return (label.box[1] + label.box[3]) / 2


def _level(label: Label) -> bool:
    return abs(label.angle) < 5 or abs(abs(label.angle) - 180) < 5


def _upright(label: Label) -> bool:
    return abs(abs(label.angle) - 90) < 10


def _line_height(labels: Sequence[Label]) -> float:
    heights = [min(lb.box[3] - lb.box[1], lb.box[2] - lb.box[0]) if _upright(lb) else lb.box[3] - lb.box[1]
               for lb in labels]
    return max(1.0, statistics.median(heights)) if heights else 1.0


def number(label: Label) -> float | None:
    """The label's number when the label is one number and nothing else (a tick, a bar's value); a year
    is a category ("2019 2020 2021" under bars), not a value."""
    values = [v for v in values_in(label.text) if not v.is_date and not v.is_year]
    if len(values) != 1:
        return None
    rest = label.text.replace(values[0].text, "").strip(" %:()")
    return None if rest else number_of(values[0].text)


def _groups(labels: Sequence[Label], key: Callable[[Label], float], tol: float) -> list[list[Label]]:
    """Labels whose `key` agrees within `tol` (single-linkage on the sorted keys), largest groups first."""
    ordered = sorted(labels, key=key)
    groups: list[list[Label]] = []
    for label in ordered:
        if groups and key(label) - key(groups[-1][-1]) <= tol:
            groups[-1].append(label)
        else:
            groups.append([label])
    return sorted(groups, key=len, reverse=True)


def _monotonic(numbers: list[float]) -> bool:
    ordered = sorted(numbers)
    return len(set(numbers)) == len(numbers) and numbers in (ordered, ordered[::-1])


def _value_axis(numeric: list[Label], tol: float, sides: str = "yx") -> tuple[list[Label], str]:
    """The longest run of numbers aligned in a column (y axis) or a row (x axis), monotonic along it
    (only on the `sides` given)."""
    best: tuple[list[Label], str] = ([], "")
    candidates = []
    if "y" in sides:
        for key in (lambda lb: lb.box[2], _cx, lambda lb: lb.box[0]):  # right-aligned, centred, left-aligned
            candidates += [(sorted(g, key=_cy), "y") for g in _groups(numeric, key, tol)]
    if "x" in sides:
        candidates += [(sorted(g, key=_cx), "x") for g in _groups(numeric, _cy, tol)]
    for group, side in candidates:
        if len(group) < MIN_TICKS or len(group) <= len(best[0]):
            continue
        if _monotonic([number(lb) for lb in group]):  # type: ignore[misc]
            best = (group, side)
    return best


def _row_key(label: Label) -> float:
    """Where a label sits vertically in a row of labels: its top for slanted labels (they hang from the
    axis), its middle otherwise."""
    return _cy(label) if _level(label) else label.box[1]


def read_chart(region: Region) -> Chart:
    """The chart the figure's labels describe (see the module doc); an empty `Chart` without labels."""
    labels = [lb for lb in region.labels if lb.text.strip()]
    chart = Chart()
    if len(labels) < 2:
        return chart
    tol = 0.5 * _line_height(labels)
    labels = _without_caption(labels, region.caption, tol)
    numeric = [lb for lb in labels if number(lb) is not None]
    chart.value_axis, chart.value_axis_side = _value_axis(numeric, tol)
    taken = {id(lb) for lb in chart.value_axis}
    if chart.value_axis:  # a line plot or a scatter plot numbers both axes
        other = "x" if chart.value_axis_side == "y" else "y"
        chart.second_axis = _value_axis([lb for lb in numeric if id(lb) not in taken], tol, other)[0]
        taken |= {id(lb) for lb in chart.second_axis}
    words = [lb for lb in labels if id(lb) not in taken and number(lb) is None and not _upright(lb)]
    rows = [sorted(g, key=_cx) for g in _groups(words, _row_key, tol) if len(g) >= MIN_CATEGORIES]
    cols = [sorted(g, key=_cy) for g in _groups(words, lambda lb: lb.box[2], tol) if len(g) >= MIN_CATEGORIES]
    if chart.value_axis_side == "y" and rows:  # vertical bars: categories in a row, under the plot
        ticks_bottom = max(lb.box[3] for lb in chart.value_axis)
        under = [g for g in rows if _row_key(g[0]) >= ticks_bottom - 2 * tol] or rows
        chart.categories, chart.category_side = max(under, key=len), "x"
    elif chart.value_axis_side == "x" and cols:  # horizontal bars: categories in a column, beside the plot
        # (beside it: clear of the ticks' span; a column of words over the ticks is a legend inside the plot)
        low, high = min(_cx(lb) for lb in chart.value_axis), max(_cx(lb) for lb in chart.value_axis)
        beside = [g for g in cols if max(lb.box[2] for lb in g) <= low or min(lb.box[0] for lb in g) >= high]
        if beside:
            chart.categories, chart.category_side = max(beside, key=len), "y"
    elif rows and not chart.value_axis:
        chart.categories, chart.category_side = max(rows, key=len), "x"
    taken |= {id(lb) for lb in chart.categories}
    chart.pairs = _pairs(chart, [lb for lb in numeric if id(lb) not in taken])
    taken |= {id(p.value) for p in chart.pairs}
    _titles(chart, [lb for lb in labels if id(lb) not in taken])
    chart.legend = _legend(chart, tol)
    return chart


# A caption's reference label opening a line: "Fig. 7.", "Figure 2-1.", "Table III", 图 3, 表 1
_CAPTION_START = re.compile(r"^\s*(?:fig(?:ure)?\.?|table|图|表)\s*(?:\d|[IVX]+\b)", re.IGNORECASE)


def _without_caption(labels: list[Label], caption: str, tol: float) -> list[Label]:
    """The labels without the figure's caption, when OCR read the caption among the figure's words ("Fig. 7."
    and "Maximum bit rates for VCR scanning." side by side under the plot would otherwise be a row of two
    categories, and lie below the x axis' title): the line that opens with the caption's reference label and,
    the caption being outside the plot, every line beyond it (below it when it is in the figure's lower half,
    above it otherwise). Only a label the caption itself prints opens it; without a caption nothing is dropped."""
    folded = " ".join(caption.split()).lower()
    starts = [lb for lb in labels if _CAPTION_START.match(lb.text) and " ".join(lb.text.split()).lower()[:6] in folded]
    if not folded or not starts:
        return labels
    top, bottom = min(lb.box[1] for lb in labels), max(lb.box[3] for lb in labels)
    opener = max(starts, key=_cy)
    if _cy(opener) >= (top + bottom) / 2:  # under the plot: its line and what follows
        return [lb for lb in labels if _cy(lb) < opener.box[1] - tol / 2]
    opener = min(starts, key=_cy)
    return [lb for lb in labels if _cy(lb) > opener.box[3] + tol / 2]


def _legend(chart: Chart, tol: float) -> list[Label]:
    """The legend among the labels no axis claimed: words stacked in one column (left-aligned, a line
    apart) within the plot's frame, as plotting libraries draw a legend box; [] when there is no such
    column or no axis to frame it."""
    axis = chart.value_axis + chart.second_axis + chart.categories
    words = [lb for lb in chart.others if _level(lb) and number(lb) is None]
    if not axis or len(words) < 2:
        return []
    left, top = min(lb.box[0] for lb in axis), min(lb.box[1] for lb in axis)
    right, bottom = max(lb.box[2] for lb in axis), max(lb.box[3] for lb in axis)
    inside = [lb for lb in words if left <= _cx(lb) <= right + 4 * tol and top - 2 * tol <= _cy(lb) <= bottom]
    for group in _groups(inside, lambda lb: lb.box[0], tol):
        column = sorted(group, key=_cy)
        steps = [_cy(b) - _cy(a) for a, b in zip(column, column[1:])]
        if len(column) >= 2 and all(0 < step <= 6 * tol for step in steps):
            return column
    return []


def _pairs(chart: Chart, values: list[Label]) -> list[Pair]:
    """Each category with the one value printed in its column (row): nearest that category by more than
    half the spacing to the next one, and alone there; a category with two values (two series) gets none."""
    cats = chart.categories
    if len(cats) < MIN_CATEGORIES or not values:
        return []
    along = _cx if chart.category_side == "x" else _cy
    positions = [along(c) for c in cats]
    gaps = [b - a for a, b in zip(positions, positions[1:]) if b > a]
    if not gaps:
        return []
    reach = 0.5 * min(gaps)
    found: dict[int, list[Label]] = {}
    for value in values:
        distances = [abs(along(value) - p) for p in positions]
        k = min(range(len(cats)), key=distances.__getitem__)
        if distances[k] < reach:
            found.setdefault(k, []).append(value)
    out = []
    for k, hits in sorted(found.items()):
        if len(hits) == 1:
            printed = number(hits[0])
            if printed is not None:
                out.append(Pair(cats[k], hits[0], printed))
    return out


def _titles(chart: Chart, rest: list[Label]) -> None:
    """Axis titles and the chart title among the labels no axis or bar claimed; the rest stays `others`."""
    axis = chart.value_axis + chart.second_axis + chart.categories
    if not axis:
        chart.others = rest
        return
    left = min(lb.box[0] for lb in axis)
    right = max(lb.box[2] for lb in axis)
    top = min(lb.box[1] for lb in axis)
    bottom = max(lb.box[3] for lb in axis)
    has_x_axis = chart.category_side == "x" or chart.value_axis_side == "x" or bool(chart.second_axis)
    for label in sorted(rest, key=lambda lb: lb.box[1]):
        if _upright(label) and chart.y_title is None and (label.box[2] <= left + 1 or label.box[0] >= right - 1):
            chart.y_title = label
        elif _level(label) and chart.x_title is None and has_x_axis and label.box[1] >= bottom - 1 \
                and left <= _cx(label) <= right:
            chart.x_title = label
        elif _level(label) and chart.title is None and label.box[3] <= top + 1 \
                and abs(_cx(label) - (left + right) / 2) <= 0.15 * (right - left):  # centred over the plot
            chart.title = label
        else:
            chart.others.append(label)
