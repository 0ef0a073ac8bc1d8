"""The energy of a run's cases, where NVML read the GPU's energy counter: a small table after the results."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from ..results.records import RunResult
from ..results.text import printable


def energy_table(run: RunResult, names: dict[str, str] | None = None) -> Table | None:
    """Per case with an energy record: joules per launch, average watts and GFLOP/s per watt; None when no case
    has one (no NVML, or a GPU without an energy counter)."""
    cases = [case for case in run.cases if case.energy is not None and case.energy.joules_per_launch]
    if not cases:
        return None
    names = names or {}
    table = Table(title=Text("energy over each case's sampling window (NVML; flushes between samples included)"),
                  box=box.SIMPLE_HEAVY, title_justify="left", pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for column, justify in (("kernel", "left"), ("shape", "left"), ("mJ/launch", "right"), ("W", "right"),
                            ("GFLOP/s/W", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]  # rich's stub wants a Literal
    for case in cases:
        energy = case.energy
        table.add_row(Text(printable(names.get(case.kernel, case.kernel))), case.shape.label,
                      f"{1e3 * energy.joules_per_launch:.3f}",
                      f"{energy.average_w:.0f}" if energy.average_w else "-",
                      f"{energy.gflops_per_watt:,.0f}" if energy.gflops_per_watt else "-")
    return table
