"""Results, plans and comparisons as Markdown (the README's tables) and as CSV (every figure, unrounded).

Markdown rounds as the terminal tables do and keeps full kernel labels, so
that ``driver-gemm run --markdown`` prints the tables the README shows. CSV
has one row per case with raw numbers and empty cells for missing ones, for
spreadsheets and scripts.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Iterable, Sequence

from ..planning.case_plan import CasePlan
from ..results.records import RunResult
from ..results.text import printable
from .notes import cases_by_shape
from .tables import KernelLines, shapes_text


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table; ``|`` and control characters in a cell are escaped (`markdown_line`)."""
    return "\n".join([markdown_line(header), "|" + "---|" * len(header), *map(markdown_line, rows)]) + "\n"


def markdown_line(cells: Sequence[object]) -> str:
    """One row of `markdown_table`: a newline or a terminal's escape sequence in a cell is shown escaped
    (`printable`), so that it can neither end the row nor drive the terminal the Markdown is printed on."""
    return "| " + " | ".join(printable(str(cell)).replace("|", "\\|") for cell in cells) + " |"


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """CSV with a header row; None is an empty cell, floats keep every digit."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if cell is None or (isinstance(cell, float) and not math.isfinite(cell)) else cell
                         for cell in row])
    return out.getvalue()


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.4f}"
    return f"{value:.4g}" if value < 1000 else f"{value:,.0f}"


def _fixed(value: float | None, digits: int) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:,.{digits}f}"


def run_markdown(run: RunResult) -> str:
    """One table per shape: kernel, status, median ms, GFLOP/s, % of cuBLAS, % of peak (of the FP32 peak where
    every figure of the table is, else of each case's own math: `gemm.peaks`)."""
    tables = []
    for shape, cases in cases_by_shape(run).items():
        rows = [(case.kernel, case.status, _ms(case.median_ms), _fixed(case.gflops, 0), _fixed(case.pct_cublas, 1),
                 _fixed(case.pct_peak, 1)) for case in cases]
        fp32 = all(case.math == "fp32" for case in cases if case.pct_peak is not None)
        tables.append(markdown_table((shape.label, "status", "median ms", "GFLOP/s", "% of cuBLAS",
                                      "% of FP32 peak" if fp32 else "% of peak"), rows))
    return "\n".join(tables)


# A case a ``dispatch:`` table picked: the entry (index and shape) and the rule (exact, when, nearest); its family is
# the row's name. Empty for the other cases.
RUN_DISPATCH_COLUMNS = ("dispatch_entry", "dispatch_shape", "dispatch_rule")

RUN_CSV_HEADER = ("spec", "kernel", "name", "M", "N", "K", "status", "median_ms", "q1_ms", "q3_ms", "min_ms",
                  "samples", "gflops", "pct_cublas", "pct_peak", "rel_fro_error", "precision", "gpu", "message",
                  *RUN_DISPATCH_COLUMNS)


def run_csv(run: RunResult) -> str:
    """Every case of the run, one row each (`RUN_CSV_HEADER`)."""
    return csv_text(RUN_CSV_HEADER, _run_rows(run))


def runs_csv(files: Sequence[tuple[str, RunResult]]) -> str:
    """The cases of several runs, each read from a file, in one table: `RUN_CSV_HEADER` after a ``file`` column
    naming the one its row came from, under one header row (a reader of the CSV meets no second header)."""
    return csv_text(("file", *RUN_CSV_HEADER), [(printable(file), *row) for file, run in files
                                                 for row in _run_rows(run)])


def _run_rows(run: RunResult) -> list[tuple]:
    rows = []
    for case in run.cases:
        timing = case.timing
        rows.append((run.spec, case.kernel, case.name, case.shape.M, case.shape.N, case.shape.K, case.status,
                     timing.median_ms if timing else None, timing.q1_ms if timing else None,
                     timing.q3_ms if timing else None, timing.min_ms if timing else None,
                     timing.samples if timing else None, case.gflops, case.pct_cublas, case.pct_peak,
                     case.verification.rel_fro_error if case.verification else None, case.precision,
                     case.device.name, (case.message or "").split("\n", 1)[0],
                     *((case.dispatch.entry, case.dispatch.shape, case.dispatch.rule) if case.dispatch is not None
                       else (None,) * len(RUN_DISPATCH_COLUMNS))))
    return rows


PLAN_HEADER = ("kernel", "shape", "grid", "block", "threads", "blocks", "registers", "spill st/ld", "smem st+dyn",
               "blocks/SM", "occupancy", "limited by", "waves", "check")


def _plan_cells(plan: CasePlan) -> tuple:
    config, resources, occupancy = plan.config, plan.resources, plan.occupancy
    return (
        "x".join(map(str, config.grid)) if config else "-",
        "x".join(map(str, config.block)) if config else "-",
        str(config.threads_per_block) if config else "-",
        str(config.total_blocks) if config else "-",
        str(resources.registers) if resources else "-",
        (f"{resources.spill_store_bytes}/{resources.spill_load_bytes}"
         if resources and resources.spill_store_bytes is not None else "-"),   # a prebuilt image records none
        f"{resources.static_shared_bytes if resources else '-'}+{config.shared_bytes if config else '-'}",
        str(occupancy.blocks_per_sm) if occupancy else "-",
        f"{100 * occupancy.occupancy:.0f}%" if occupancy else "-",
        ", ".join(occupancy.limited_by) if occupancy else "-",
        f"{plan.waves:.2f}" if plan.waves is not None and math.isfinite(plan.waves) else "-",
    )


def plan_markdown(plans: Iterable[CasePlan]) -> str:
    """The launch plan as one Markdown table (`PLAN_HEADER`)."""
    return markdown_table(PLAN_HEADER, ((plan.kernel.label, plan.shape.label, *_plan_cells(plan),
                                         "ok" if plan.valid else "INVALID") for plan in plans))


# A case a ``dispatch:`` table picked: the table's kernel, its entry (index and shape) and the rule (exact, when,
# nearest: the words of a results file's dispatch.rule); empty for the other cases.
PLAN_DISPATCH_COLUMNS = ("family", "dispatch_entry", "dispatch_shape", "dispatch_rule")

PLAN_CSV_HEADER = ("kernel", "M", "N", "K", "grid", "block", "threads", "blocks", "registers", "spill_store_bytes",
                   "spill_load_bytes", "stack_bytes", "barriers", "static_shared_bytes", "dynamic_shared_bytes",
                   "blocks_per_sm", "occupancy", "limited_by", "waves", "valid", "problems", *PLAN_DISPATCH_COLUMNS)


def plan_csv(plans: Iterable[CasePlan]) -> str:
    """Every planned case, one row each (`PLAN_CSV_HEADER`), problems joined by ``; ``."""
    return csv_text(PLAN_CSV_HEADER, map(plan_csv_row, plans))


def _dispatch_cells(picked: tuple | None) -> tuple:
    """`PLAN_DISPATCH_COLUMNS` of a case: from (its table's kernel, its `DispatchChoice`), else empty."""
    if picked is None:
        return (None,) * len(PLAN_DISPATCH_COLUMNS)
    family, choice = picked
    return family, choice.entry, choice.shape, choice.rule


def plan_csv_row(plan: CasePlan) -> tuple:
    """One case's row of `plan_csv`; the dispatch columns are filled for a case a table picked (`picked_by`)."""
    config, resources, occupancy = plan.config, plan.resources, plan.occupancy
    return (plan.kernel.label, plan.shape.M, plan.shape.N, plan.shape.K,
            "x".join(map(str, config.grid)) if config else None,
            "x".join(map(str, config.block)) if config else None,
            config.threads_per_block if config else None, config.total_blocks if config else None,
            resources.registers if resources else None, resources.spill_store_bytes if resources else None,
            resources.spill_load_bytes if resources else None, resources.stack_bytes if resources else None,
            resources.barriers if resources else None, resources.static_shared_bytes if resources else None,
            config.shared_bytes if config else None,
            occupancy.blocks_per_sm if occupancy else None, occupancy.occupancy if occupancy else None,
            " ".join(occupancy.limited_by) if occupancy else None, plan.waves, plan.valid,
            "; ".join(str(problem) for problem in plan.problems),
            *_dispatch_cells(plan.picked_by))


def plan_markdown_row(plan: CasePlan) -> str:
    """One case's line of `plan_markdown`."""
    return markdown_line((plan.kernel.label, plan.shape.label, *_plan_cells(plan),
                          "ok" if plan.valid else "INVALID")) + "\n"


def not_compiled_csv_row(kernel, shape, error: Exception, picked: tuple | None = None) -> tuple:
    """A `plan_csv` row for a case whose kernel did not compile: its launch is unknown, and its problem is the
    compiler's first error (stderr has the whole message). `picked` is (the table's kernel, its `DispatchChoice`)
    for a case a dispatch table picked."""
    launch_columns = len(PLAN_CSV_HEADER) - len(PLAN_DISPATCH_COLUMNS) - 6    # all but kernel, M, N, K, valid, problems
    return (kernel.label, shape.M, shape.N, shape.K, *[None] * launch_columns, False,
            f"did not compile: {_first_error(error)}", *_dispatch_cells(picked))


def not_compiled_markdown_row(kernel, shape) -> str:
    """A `plan_markdown` line for a case whose kernel did not compile."""
    return markdown_line((kernel.label, shape.label, *["-"] * (len(PLAN_HEADER) - 3), "COMPILE FAILED")) + "\n"


def plan_markdown_lines(lines: KernelLines) -> str:
    """What the terminal says below the plan table, written after the Markdown table as quoted lines (as ``compare
    --markdown`` writes its warnings), so that a pasted table keeps why a case is INVALID: each distinct problem and
    note once, with the kernels and shapes it holds for (`lines`: a sweep's configurations often share one message).
    Empty when there are none. A kernel that did not compile has its row, and its error on stderr."""
    grouped: dict[tuple[str, bool], list[str]] = {}
    for (label, text, is_problem), (shapes, count) in lines.lines.items():
        grouped.setdefault((text, is_problem), []).append(f"{label} at {shapes_text(shapes, count=count[0])}")
    texts = []
    for (text, is_problem), cases in grouped.items():
        where = _cases_text(cases)
        if is_problem:
            cause, _, details = text.partition("\n")
            texts.append(f"{cause} [{where}]" + (f"\n{details}" if details else ""))
        else:
            texts.append(f"{where}: {text}")
    # Each line of a text quoted on its own, so that its hint and details stay in the quote.
    return "".join("\n" + "".join(f"> {printable(line)}".rstrip() + "\n" for line in text.splitlines())
                   for text in texts)


def _cases_text(cases: list[str], shown: int = 3) -> str:
    """``k at 64x64x64``, or for a message several kernels share, the first `shown` of them and how many in all."""
    if len(cases) <= shown:
        return "; ".join(cases)
    return f"{len(cases)} kernels: {'; '.join(cases[:shown])}; ..."


def _first_error(error: Exception) -> str:
    """The message's first line that quotes the compiler's error, else its first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return next((line for line in lines if "error:" in line), lines[0] if lines else type(error).__name__)


COMPARE_HEADER = ("kernel", "shape", "GPU", "old ms", "new ms", "change", "verdict")


def comparison_markdown(comparisons) -> str:
    """Old and new median per matched case, the change and the verdict, as Markdown."""
    return markdown_table(COMPARE_HEADER, (
        (c.kernel, c.shape, c.gpu or "-", _ms(c.old.median_ms if c.old else None),
         _ms(c.new.median_ms if c.new else None), f"{100 * c.change:+.1f}%" if c.change is not None else "-",
         c.verdict) for c in comparisons))


COMPARE_CSV_HEADER = ("kernel", "shape", "gpu", "old_ms", "new_ms", "change", "verdict")


def comparison_csv(comparisons) -> str:
    """Every comparison, one row each; ``change`` is new / old - 1."""
    return csv_text(COMPARE_CSV_HEADER, (
        (c.kernel, c.shape, c.gpu, c.old.median_ms if c.old else None, c.new.median_ms if c.new else None,
         c.change, c.verdict) for c in comparisons))


def comparison_json(comparisons, *, old: str, new: str, threshold: float, warnings: Sequence[str] = (),
                    notes: Sequence[str] = ()) -> str:
    """The comparison as one JSON object for CI: the runs, every case's medians, quartiles, change and verdict,
    the count of each verdict, whether any is a regression, and what differs between the runs besides."""
    def summary(case) -> dict | None:
        timing = case.timing if case is not None else None
        if timing is None:
            return None if case is None else {"status": str(case.status)}
        return {"status": str(case.status), "median_ms": timing.median_ms, "q1_ms": timing.q1_ms,
                "q3_ms": timing.q3_ms, "samples": timing.samples, "sm_clock_mhz": timing.sm_clock_mhz,
                "label": case.kernel}

    comparisons = list(comparisons)
    counts: dict[str, int] = {}
    for c in comparisons:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    document = {"old": old, "new": new, "threshold_pct": 100 * threshold, "counts": counts,
                "regression": any(c.regression for c in comparisons), "warnings": list(warnings),
                "notes": list(notes),
                "cases": [{"kernel": c.kernel, "shape": c.shape, "gpu": c.gpu or None, "verdict": c.verdict,
                           "change": c.change, "old": summary(c.old), "new": summary(c.new)} for c in comparisons]}
    return json.dumps(document, indent=1, allow_nan=False) + "\n"
