"""Dispatch tables built from a tune's winners (`build_dispatch`) and written as a spec's ``dispatch:`` field.

The field, its rule for choosing an entry and its reader live in
`driver_gemm.specfile.dispatch` (a spec is read before anything runs); they are
imported here too, so that the tuning side reads as one place.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ..specfile.dispatch import (DIMENSIONS, DispatchEntry, DispatchTable, parse_dispatch,  # noqa: F401 (re-exported)
                             select_kernel)
from ..specfile.model import KernelSpec

__all__ = ["DIMENSIONS", "DispatchEntry", "DispatchTable", "build_dispatch", "dispatch_document", "parse_dispatch",
           "select_kernel"]


def build_dispatch(picks: Iterable, configurations: Mapping[str, KernelSpec] | None = None) -> dict[str, DispatchTable]:
    """Per kernel family, an entry for every shape where a configuration won (`tune.winners.Pick`s).

    Each entry's params are those of the configuration its winner's label names in `configurations` (the spec's,
    by label), as a winners spec takes them: a results file need not record params, and its label is what names
    the configuration. Without `configurations`, the params the winner's record holds."""
    tables: dict[str, list[DispatchEntry]] = {}
    for pick in picks:
        if pick.best is None:
            continue
        configuration = configurations.get(pick.best.kernel) if configurations is not None else None
        params = dict(configuration.params) if configuration is not None else dict(pick.best.params)
        entry = DispatchEntry(pick.best.shape, params, label=pick.best.kernel)
        tables.setdefault(pick.kernel, []).append(entry)
    return {name: DispatchTable(name, tuple(entries)) for name, entries in tables.items()}


def dispatch_document(tables: Mapping[str, DispatchTable]) -> dict:
    """The ``dispatch:`` field of a spec for `tables` (what `parse_dispatch` reads back)."""
    return {name: table.as_document() for name, table in tables.items()}
