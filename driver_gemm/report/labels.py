"""Short names for long kernel labels, so that a table of a sweep fits a terminal.

A label such as ``v8[BM=128,BN=256,BK=16,WM=64,WN=128,TM=16,TN=8,STAGES=3]``
becomes ``v8#3`` (the third configuration of v8 in the table), and the table
is followed by a legend that gives each short name's full label once.
"""

from __future__ import annotations

from typing import Iterable

from ..results.text import printable

MAX_LABEL_WIDTH = 20


def short_labels(labels: Iterable[str], max_width: int = MAX_LABEL_WIDTH) -> dict[str, str]:
    """Each distinct label mapped to itself, or, when longer than `max_width`, to ``NAME#i``.

    ``i`` counts the long labels of one kernel name in order of first
    appearance; the name is what comes before ``[`` (the whole label if none).
    """
    out: dict[str, str] = {}
    counts: dict[str, int] = {}
    taken = set(labels_list := list(dict.fromkeys(labels)))
    for label in labels_list:
        if len(label) <= max_width:
            out[label] = label
            continue
        name = label.split("[", 1)[0][: max_width - 4] or "kernel"
        while True:
            counts[name] = counts.get(name, 0) + 1
            short = f"{name}#{counts[name]}"
            if short not in taken:
                break
        taken.add(short)
        out[label] = short
    return out


def legend_lines(names: dict[str, str]) -> list[str]:
    """``short = full label`` for every label that was shortened, in table order (escaped: `printable`)."""
    return [printable(f"{short} = {label}") for label, short in names.items() if short != label]
