"""Step 6 of the data flow: results as the seed article's table in the terminal, and as a launch plan."""

from __future__ import annotations

import math
from typing import Iterable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..pipeline.plan import CasePlan
from ..results.records import CaseResult, RunResult
from ..status import Status

_STATUS_STYLE = {Status.PASS: "green", Status.REF: "cyan", Status.FAIL: "bold red", Status.ERROR: "bold red", Status.INVALID: "yellow", Status.TIMEOUT: "bold red"}


def _number(value: float | None, digits: int) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:,.{digits}f}"


def _time(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.4f}" if ms < 1 else f"{ms:.3f}" if ms < 100 else f"{ms:.1f}"


def case_line(case: CaseResult) -> str:
    """One plain line for a finished case (progress output, logs)."""
    parts = [f"{case.kernel} {case.shape.label} {case.status}"]
    if case.timing:
        parts.append(f"{_time(case.timing.median_ms)} ms")
        if case.gflops:
            parts.append(f"{case.gflops:,.0f} GFLOP/s")
        if case.pct_cublas:
            parts.append(f"{case.pct_cublas:.1f}% of cuBLAS" + (" TF32" if case.precision == "tf32" else ""))
    if case.message and case.status not in (Status.PASS,):
        parts.append(f"- {case.message.splitlines()[0]}")
    return "  ".join(parts)


def results_tables(run: RunResult) -> list[Table]:
    """Per shape: kernel, status, median ms, GFLOP/s, % of cuBLAS, % of FP32 peak, error, samples."""
    tables = []
    shapes = list(dict.fromkeys(case.shape for case in run.cases))
    device = run.environment.get("device", {})
    for shape in shapes:
        title = f"{run.spec}: {shape.label} (M x N x K)"
        if device:
            title += f" on {device.get('name')}"
        table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left")
        for column, justify in (("kernel", "left"), ("status", "left"), ("median ms", "right"),
                                ("GFLOP/s", "right"), ("% cuBLAS", "right"), ("% peak", "right"),
                                ("rel err", "right"), ("samples", "right"), ("noise", "right")):
            table.add_column(column, justify=justify)
        cases = [c for c in run.cases if c.shape == shape]
        if any(c.precision == "tf32" for c in cases):
            table.caption = "TF32 rows (cublas-tf32 and precision: tf32 kernels): % of cuBLAS in TF32 tensor-op math"
        for case in cases:
            verification = case.verification or {}
            error = verification.get("rel_fro_error")
            table.add_row(
                case.kernel,
                Text(case.status, style=_STATUS_STYLE.get(case.status, "")),
                _time(case.median_ms),
                _number(case.gflops, 0),
                _number(case.pct_cublas, 1),
                _number(case.pct_peak, 1),
                f"{error:.1e}" if error is not None else "-",
                str(case.timing.samples) if case.timing else "-",
                f"{100 * case.timing.noise:.1f}%" if case.timing else "-",
            )
        tables.append(table)
    return tables


def problems_text(run: RunResult) -> list[str]:
    """What went wrong, case by case, for the cases that did not pass."""
    out = []
    for case in run.cases:
        if case.ok:
            continue
        out.append(f"{case.kernel} at {case.shape.label}: {case.status}")
        for line in (case.message or "").splitlines():
            out.append(f"    {line}")
        for extra in case.problems[1:]:
            out.append(f"    {extra}")
        for finding in (case.sanitizer or {}).get("summary", [])[:10]:
            out.append(f"    {finding}")
        if (case.diagnosis or {}).get("error_map"):
            out.append(f"    error map: {case.diagnosis['error_map']}")
        for mismatch in (case.diagnosis or {}).get("first_mismatches", [])[:5]:
            where = f"C[{mismatch['row']}, {mismatch['col']}]"
            got = "never written" if mismatch["got"] is None else f"got {mismatch['got']:.6g}"
            owner = ""
            if "block" in mismatch:
                owner = f" (block {tuple(mismatch['block'])}"
                owner += f", thread {tuple(mismatch['thread'])})" if "thread" in mismatch else ")"
            out.append(f"    {where}: expected {mismatch['expected']:.6g}, {got}{owner}")
    return out


def print_run(run: RunResult, console: Console | None = None) -> None:
    console = console or Console()
    for table in results_tables(run):
        console.print(table)
    device = run.environment.get("device") or {}
    if device.get("fp32_peak_gflops"):
        console.print(f"FP32 peak {device['fp32_peak_gflops']:,.0f} GFLOP/s = {device['sm_count']} SMs x "
                      f"{device['fp32_lanes_per_sm']} lanes x 2 x {device['clock_khz'] / 1e6:.2f} GHz "
                      "(clock as the driver reports it)", style="dim")
    for line in problems_text(run):
        console.print(line, highlight=False, markup=False)


def plan_table(plans: Iterable[CasePlan], title: str) -> Table:
    """The launch plan: grid, block, resources, occupancy and its limiter, waves, and problems."""
    table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left")
    for column in ("kernel", "shape", "grid", "block", "thr/blk", "blocks", "regs", "spill", "smem st+dyn",
                   "blk/SM", "occupancy", "limited by", "waves", "check"):
        table.add_column(column)
    for plan in plans:
        config, res, occ = plan.config, plan.resources, plan.occupancy
        table.add_row(
            plan.kernel.label, plan.shape.label,
            "x".join(map(str, config.grid)) if config else "-",
            "x".join(map(str, config.block)) if config else "-",
            str(config.threads_per_block) if config else "-",
            str(config.total_blocks) if config else "-",
            str(res.registers) if res else "-",
            (f"{res.spill_store_bytes}/{res.spill_load_bytes}" + (f" stk {res.stack_bytes}" if res.stack_bytes else ""))
            if res else "-",
            f"{res.static_shared_bytes if res else 0}+{config.shared_bytes if config else 0}",
            str(occ.blocks_per_sm) if occ else "-",
            f"{100 * occ.occupancy:.0f}%" if occ else "-",
            ", ".join(occ.limited_by) if occ else "-",
            f"{plan.waves:.2f}" if plan.waves is not None and math.isfinite(plan.waves) else "-",
            Text("ok", style="green") if plan.valid else Text("INVALID", style="bold red"),
        )
    return table


_VERDICT_STYLE = {"SAME": "", "FASTER": "green", "FIXED": "green", "SLOWER": "bold red", "BROKEN": "bold red",
                  "NEW": "cyan", "GONE": "yellow", "UNTIMED": "dim"}


def comparison_table(comparisons, title: str) -> Table:
    """Old and new median per case, the change, and the noise-aware verdict."""
    table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left")
    for column, justify in (("kernel", "left"), ("shape", "left"), ("GPU", "left"), ("old ms", "right"),
                            ("new ms", "right"), ("change", "right"), ("verdict", "left")):
        table.add_column(column, justify=justify)
    for c in comparisons:
        table.add_row(c.kernel, c.shape, c.gpu or "-", _time(c.old.median_ms if c.old else None),
                      _time(c.new.median_ms if c.new else None),
                      f"{100 * c.change:+.1f}%" if c.change is not None else "-",
                      Text(c.verdict, style=_VERDICT_STYLE.get(c.verdict, "")))
    return table


def tune_table(picks, title: str) -> Table:
    """Per kernel and shape: what was tried, the best configuration and how clearly it beat the runner-up."""
    table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left")
    for column, justify in (("kernel", "left"), ("shape", "left"), ("tried", "right"), ("passed", "right"),
                            ("invalid", "right"), ("best", "left"), ("median ms", "right"), ("% cuBLAS", "right"),
                            ("runner-up", "left"), ("margin", "right"), ("verdict", "left")):
        table.add_column(column, justify=justify)
    for pick in picks:
        best, second = pick.best, pick.runner_up
        verdict = "-" if best is None else ("only one passed" if second is None else
                                            ("tie (within noise)" if pick.tie else "clear"))
        table.add_row(pick.kernel, pick.shape, str(pick.tried), str(pick.passed), str(pick.invalid),
                      best.kernel if best else Text("nothing passed", style="bold red"),
                      _time(best.median_ms if best else None), _number(best.pct_cublas if best else None, 1),
                      second.kernel if second else "-",
                      f"{100 * pick.margin:.1f}%" if pick.margin is not None else "-", verdict)
    return table
