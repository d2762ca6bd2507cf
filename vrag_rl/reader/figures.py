"""Reading a figure: the labels printed inside it (axis categories, bar values, legend, callouts) and its caption.

A chart's text arrives as lines: either "label value" on one line (a labelled bar, a legend entry with
its number), or the category labels and the value labels as two runs of equal length (an axis under
a row of bar labels) — both are paired here, so "what share is Bicycle" and "which is largest" can be
read off a chart's own labels.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from search_engine.page_layout import Region
from vrag_rl.reader.values import number_of, values_in


@dataclass(frozen=True)
class LabelValue:
    """One labelled value of a figure: "Bicycle" and "12%"."""

    label: str
    value: str
    number: float


def label_lines(region: Region) -> list[str]:
    """The figure's printed labels, one per line (" | " separates labels on one line too)."""
    return [part.strip() for line in region.text.split("\n") for part in line.split(" | ") if part.strip()]


def _numbers(text: str) -> list:
    """The numbers printed in a label (a month name is a label, not a value)."""
    return [v for v in values_in(text) if not v.is_date]


def _value_only(text: str) -> bool:
    values = _numbers(text)
    return len(values) == 1 and not re.sub(re.escape(values[0].text), "", text).strip(" :|-–()")


def label_values(region: Region) -> list[LabelValue]:
    """The figure's (label, value) pairs: from "label value" lines, else from a run of labels and a run
    of as many values (in reading order)."""
    lines = label_lines(region)
    pairs = []
    for line in lines:
        values = [v for v in values_in(line) if not v.is_date]
        if len(values) != 1:
            continue
        value = values[0]
        label = (line[:value.start] + line[value.start + len(value.text):]).strip(" :|-–()")
        if label and re.search(r"[^\W\d_]", label) and number_of(value.text) is not None:
            pairs.append(LabelValue(label, value.text, number_of(value.text)))
    if len(pairs) >= 2:
        return pairs
    labels = [line for line in lines if not _numbers(line) and re.search(r"[^\W\d_]", line)]
    numbers = [line for line in lines if _value_only(line)]
    if len(labels) >= 2 and len(numbers) == len(labels):  # one value per label, or no pairing at all: the
        # figure's text carries no positions, so axis ticks mixed with bar labels cannot be told apart
        return [LabelValue(label, value, number_of(value)) for label, value in zip(labels, numbers)]
    return pairs
