"""Short names for long kernel labels, so that a table of a sweep fits a terminal.

A label such as ``v8[BM=128,BN=256,BK=16,WM=64,WN=128,TM=16,TN=8,STAGES=3]``
becomes ``v8#3`` (the third configuration of v8 in the table), and the table
is followed by a legend that gives each short name's full label once.
"""

from __future__ import annotations

from typing import Iterable

from ..results.text import printable

MAX_LABEL_WIDTH = 20


def _stems(names: Iterable[str], limit: int) -> dict[str, str]:
    """Each kernel name cut to `limit` characters. Where two different names would be cut alike
    (``warptile_small_tiles`` and ``warptile_small_tiles_v2``), both lose their middle instead (``warptil~ll_tiles``
    and ``warptil~tiles_v2``): cut at the end, their rows would read as two configurations of one kernel."""
    names = list(dict.fromkeys(names))
    cut = {name: name[:limit] or "kernel" for name in names}
    sharing: dict[str, set[str]] = {}
    for name, stem in cut.items():
        sharing.setdefault(stem, set()).add(name)
    head = max(1, (limit - 1) // 2)
    for name in names:
        if len(sharing[cut[name]]) > 1 and len(name) > limit:
            cut[name] = f"{name[:head]}~{name[len(name) - (limit - head - 1):]}"
    return cut


def short_labels(labels: Iterable[str], max_width: int = MAX_LABEL_WIDTH) -> dict[str, str]:
    """Each distinct label mapped to itself, or, when longer than `max_width`, to ``NAME#i``.

    ``i`` counts the long labels of one kernel name in order of first
    appearance; the name is what comes before ``[`` (the whole label if none),
    cut to fit (`_stems`).
    """
    out: dict[str, str] = {}
    counts: dict[str, int] = {}
    taken = set(labels_list := list(dict.fromkeys(labels)))
    long_names = [label.split("[", 1)[0] for label in labels_list if len(label) > max_width]
    stems = _stems(long_names, max_width - 4)
    for label in labels_list:
        if len(label) <= max_width:
            out[label] = label
            continue
        name = stems[label.split("[", 1)[0]]
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
