"""Reading a figure: the labels printed inside it (axis categories, bar values, legend, callouts) and its caption.

A chart's text arrives as lines: either "label value" on one line (a labelled bar, a legend entry with
its number), or the category labels and the value labels as two runs of equal length (an axis under
a row of bar labels) — both are paired here, so "what share is Bicycle" and "which is largest" can be
read off a chart's own labels.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

from search_engine.page_layout import Box, Region
from vrag_rl.reader.values import Value, number_of, values_in


@dataclass(frozen=True)
class LabelValue:
    """One labelled value of a figure: "Bicycle" and "12%"."""

    label: str
    value: str
    number: float
    box: Box | None = None  # where both are printed, when the figure's labels carry boxes


def label_lines(region: Region) -> list[str]:
    """The figure's printed labels, one per line (" | " separates labels on one line too)."""
    return [part.strip() for line in region.text.split("\n") for part in line.split(" | ") if part.strip()]


def _numbers(text: str) -> list[Value]:
    """The numbers printed in a label (a month name is a label, not a value)."""
    return [v for v in values_in(text) if not v.is_date]


def _value_only(text: str) -> bool:
    values = _numbers(text)
    return len(values) == 1 and not re.sub(re.escape(values[0].text), "", text).strip(" :|-–()")


_NUMBERING_AFTER = re.compile(r"^[.)]\s+\S|^(?:\.\d+)+\.?\s")  # what follows "2" in "2. Title", "4" in "4.5.1 USB"


def _line_pair(line: str, box: Box | None = None) -> LabelValue | None:
    """ "Car 25%", "Cruise calls: 45": a label and one value printed apart on one line ("Jun-99" is a
    category with its year, not a label and a value)."""
    values = [v for v in values_in(line) if not v.is_date and not v.is_year]  # "Revenue by region, 2023": a title
    if len(values) != 1:
        return None
    value = values[0]
    before, after = line[:value.start], line[value.start + len(value.text):]
    if (before and not before[-1].isspace() and before[-1] not in ":(") or (after and after[0].isalnum()):
        return None
    if not before.strip() and _NUMBERING_AFTER.match(after):
        return None  # "2. JAL Group Total Domestic Pax Traffic", "3) Install": a heading's or item's number
    label = (before + after).strip(" :|-–()")
    number = number_of(value.text)
    if label and re.search(r"[^\W\d_]", label) and number is not None:
        return LabelValue(label, value.text, number, box)
    return None


def line_pairs(region: Region) -> list[LabelValue]:
    """(label, value) pairs printed together on one label (a legend entry, a bar labelled "Car 25%")."""
    if region.labels:
        found = [_line_pair(lb.text, lb.box) for lb in region.labels]
    else:
        found = [_line_pair(line) for line in label_lines(region)]
    return [pair for pair in found if pair is not None]


def label_values(region: Region) -> list[LabelValue]:
    """The figure's (label, value) pairs, for a figure stored without label boxes: from "label value"
    lines, else from a run of labels and a run of as many values (in reading order)."""
    lines = label_lines(region)
    pairs = line_pairs(region)
    if len(pairs) >= 2:
        return pairs
    labels = [line for line in lines if not _numbers(line) and re.search(r"[^\W\d_]", line)]
    numbers = [line for line in lines if _value_only(line)]
    if len(labels) >= 2 and len(numbers) == len(labels):  # one value per label, or no pairing at all: the
        # figure's text carries no positions, so axis ticks mixed with bar labels cannot be told apart
        # (cast: a `_value_only` line holds a number `values_in` found, so it has a digit and number_of
        # reads it)
        return [LabelValue(label, value, cast(float, number_of(value))) for label, value in zip(labels, numbers)]
    return pairs
