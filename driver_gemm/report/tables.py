"""Step 6 of the data flow: results as the seed article's table in the terminal, and as a launch plan.

Tables are made to fit the terminal (100 columns off a terminal): where a
table with full kernel labels is wider, labels longer than
`labels.MAX_LABEL_WIDTH` are shortened to ``NAME#i`` in the table and given in
full once, in a legend below it. Every piece of user text (kernel names,
messages, spec names) goes into a table as a `Text`, and is printed with
markup off, so that a kernel named ``[bold]x`` prints as written; text a
results file holds is shown with its control characters escaped
(`results.text.printable`), so that it can neither drive the terminal nor forge a row.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..planning.case_plan import CasePlan
from ..results.records import CaseResult, RunResult
from ..results.text import printable
from ..status import Status
from .labels import MAX_LABEL_WIDTH, legend_lines, short_labels
from .lines import say
from .clock_figures import TimedRows, clock_cells, clock_columns
from .energy_table import energy_table
from .notes import cases_by_shape, table_notes

_STATUS_STYLE = {Status.PASS: "green", Status.REF: "cyan", Status.FAIL: "bold red", Status.ERROR: "bold red",
                 Status.INVALID: "yellow", Status.TIMEOUT: "bold red"}


def _number(value: float | None, digits: int) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:,.{digits}f}"


def _time(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.4f}" if ms < 1 else f"{ms:.3f}" if ms < 100 else f"{ms:.1f}"


def case_line(case: CaseResult) -> str:
    """One plain line for a finished case (progress output, logs), its text from the case escaped (`printable`)."""
    parts = [f"{case.kernel} {case.shape.label} {case.status}"]
    if case.timing:
        parts.append(f"{_time(case.timing.median_ms)} ms")
        if case.gflops:
            parts.append(f"{case.gflops:,.0f} GFLOP/s")
        if case.pct_cublas:
            against = f" ({case.baseline})" if case.baseline else " TF32" if case.precision == "tf32" else ""
            parts.append(f"{case.pct_cublas:.1f}% of cuBLAS{against}")
    if case.message and case.status not in (Status.PASS,):
        parts.append(f"- {case.message.splitlines()[0]}")
    return printable("  ".join(parts))


def fitting_names(labels: Iterable[str], make_tables: Callable[[dict[str, str]], list[Table]], console: Console,
                  max_width: int = MAX_LABEL_WIDTH) -> tuple[list[Table], dict[str, str]]:
    """The tables `make_tables` builds from a label-to-shown-name map, and that map: every label in full where
    each table then fits `console`'s width, else the long ones shortened (`short_labels`)."""
    labels = list(dict.fromkeys(labels))
    full = {label: label for label in labels}
    tables = make_tables(full)
    unbounded = console.options.update_width(1 << 16)     # the width each table would take, not the one it gets
    if all(Measurement.get(console, unbounded, table).maximum <= console.width for table in tables):
        return tables, full
    names = short_labels(labels, max_width)
    return make_tables(names), names


def _table(title: str) -> Table:
    # Two spaces between columns (padding and the box's blank divider), none at the edges: tables fit 100 columns.
    return Table(title=Text(title), box=box.SIMPLE_HEAVY, title_justify="left", pad_edge=False, show_edge=False,
                 padding=(0, 1, 0, 0))


TF32_NOTE = "TF32 rows (cublas-tf32 and precision: tf32 kernels): % of cuBLAS in TF32 tensor-op math"


def results_tables(run: RunResult, names: dict[str, str] | None = None,
                   rows: TimedRows | None = None) -> list[Table]:
    """Per shape: kernel, status, median ms, GFLOP/s, % of cuBLAS, % of FP32 peak, error, samples.

    `names` maps kernel labels to what the table shows (default: `short_labels`); `rows` are the run's
    `TimedRows`, where the caller has them.
    """
    names = names or short_labels(case.kernel for case in run.cases)
    rows = rows or TimedRows(run)
    tables = []
    for shape, cases in cases_by_shape(run).items():
        table = _table(_results_title(run, shape))
        for column, justify in _RESULTS_COLUMNS:
            table.add_column(column, justify=justify)  # type: ignore[arg-type]  # Literals, as str
        clock_columns_shown = clock_columns(run, cases, rows)
        for column in clock_columns_shown:
            table.add_column(column, justify="right")
        for case in cases:
            cells = _results_cells(case, names)
            table.add_row(Text(cells[0]), Text(cells[1], style=_STATUS_STYLE.get(case.status, "")), *cells[2:],
                          *clock_cells(run, case, clock_columns_shown, rows))
        tables.append(table)
    return tables


_RESULTS_COLUMNS = (("kernel", "left"), ("status", "left"), ("median ms", "right"), ("GFLOP/s", "right"),
                    ("% cuBLAS", "right"), ("% peak", "right"), ("rel err", "right"), ("samples", "right"),
                    ("noise", "right"))
# A run of more cases than this is shown as plain aligned text: a terminal table per shape measures every cell,
# which takes a minute for a results file of ten thousand cases.
PLAIN_RESULTS_CASES = 2000


def _results_title(run: RunResult, shape) -> str:
    device = run.environment.get("device") or {}
    title = f"{run.spec}: {shape.label} (M x N x K)"
    return printable(title + (f" on {device.get('name')}" if device.get("name") else ""))


def _results_cells(case, names: dict[str, str]) -> list[str]:
    error = case.verification.rel_fro_error if case.verification else None
    return [printable(names.get(case.kernel, case.kernel)), str(case.status), _time(case.median_ms),
            _number(case.gflops, 0), _number(case.pct_cublas, 1), _number(case.pct_peak, 1),
            f"{error:.1e}" if error is not None else "-",
            str(case.timing.samples) if case.timing else "-",
            f"{100 * case.timing.noise:.1f}%" if case.timing else "-"]


def _aligned(header: list[str], rows: list[list[str]], justify: list[str]) -> list[str]:
    """`header` and `rows` as plain lines, each column as wide as its widest cell, a rule under the header."""
    widths = [max(len(header[i]), *(len(row[i]) for row in rows)) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return " ".join(cell.rjust(width) if side == "right" else cell.ljust(width)
                        for cell, width, side in zip(cells, widths, justify)).rstrip()

    top = line(header)
    return [top, "-" * len(top), *map(line, rows)]


def problems_text(run: RunResult) -> list[str]:
    """What went wrong, case by case, for the cases that did not pass: lines of the file's text, escaped."""
    out = []
    for case in run.cases:
        if case.ok:
            continue
        out.append(f"{case.kernel} at {case.shape.label}: {case.status}")
        for line in (case.message or "").splitlines():
            out.append(f"    {line}")
        for extra in case.problems[1:]:
            out.append(f"    {extra}")
        for finding in ((case.sanitizer.summary if case.sanitizer else None) or [])[:10]:
            out.append(f"    {finding}")
        if case.diagnosis is not None and case.diagnosis.error_map:
            out.append(f"    error map: {case.diagnosis.error_map}")
        mismatches = (case.diagnosis.first_mismatches if case.diagnosis else None) or []
        for mismatch in mismatches[:5]:
            matrix = f"[{mismatch['matrix']}]" if "matrix" in mismatch else ""
            where = f"C{matrix}[{mismatch['row']}, {mismatch['col']}]"
            got = "never written" if mismatch["got"] is None else f"got {_figure(mismatch['got'])}"
            owners = [f"group {mismatch['group']}"] if "group" in mismatch else []
            if "block" in mismatch:
                owners.append(f"block {tuple(mismatch['block'])}")
                owners += [f"thread {tuple(mismatch['thread'])}"] if "thread" in mismatch else []
            owner = f" ({', '.join(owners)})" if owners else ""
            out.append(f"    {where}: expected {_figure(mismatch['expected'])}, {got}{owner}")
    return [printable(line) for line in out]


def _figure(value) -> str:
    """A mismatch's value as a results file holds it: a number, or null for a NaN or an infinity (JSON has
    neither)."""
    return f"{value:.6g}" if isinstance(value, (int, float)) else "NaN or infinity"


def geometric_mean(values: list[float]) -> float:
    """The geometric mean of positive figures (how % of cuBLAS is averaged over shapes: a ratio each)."""
    return math.exp(sum(math.log(value) for value in values) / len(values))


def geometric_mean_lines(run: RunResult, names: dict[str, str] | None = None) -> list[str]:
    """Per kernel measured on two or more shapes: the geometric mean of its % of cuBLAS over them, and its
    lowest figure with the shape it came from (a mean can hide one shape far behind the rest).

    A kernel chosen by a dispatch table counts as one, whatever params each shape got (its name);
    otherwise each configuration (its label, shown as `names` maps it) is a kernel of its own.
    Shapes where it has no figure (not passed, no vendor row) are counted, not averaged in.
    """
    names = names or {}
    groups: dict[str, list[CaseResult]] = {}
    for case in run.cases:
        if not case.is_baseline:
            groups.setdefault(case.name if case.dispatch is not None else case.kernel, []).append(case)
    lines = []
    for kernel, cases in groups.items():
        measured = [case for case in cases
                    if case.pct_cublas is not None and math.isfinite(case.pct_cublas) and case.pct_cublas > 0]
        shapes = len({case.shape for case in cases})
        if shapes < 2 or not measured:
            continue
        mean = geometric_mean([case.pct_cublas for case in measured])
        lowest = min(measured, key=lambda case: case.pct_cublas)
        over = f"{len(measured)} shapes" if len(measured) == shapes else f"{len(measured)} of its {shapes} shapes"
        lines.append(f"{names.get(kernel, kernel)}: geometric mean of % of cuBLAS over {over}: {mean:.1f}%; "
                     f"lowest {lowest.pct_cublas:.1f}% at {lowest.shape.label}")
    return [printable(line) for line in lines]


def print_run(run: RunResult, console: Console | None = None) -> None:
    """The run's tables, the legend of shortened labels, the FP32 peak and what went wrong."""
    console = console or Console()
    groups = cases_by_shape(run)
    rows = TimedRows(run)
    if len(run.cases) > PLAIN_RESULTS_CASES:
        names = short_labels(case.kernel for case in run.cases)
        header, justify = [c for c, _ in _RESULTS_COLUMNS], [j for _, j in _RESULTS_COLUMNS]
        lines = []
        for shape, cases in groups.items():
            lines += [_results_title(run, shape), *_aligned(header, [_results_cells(c, names) for c in cases],
                                                            justify)]
            lines += [TF32_NOTE] if any(case.precision == "tf32" for case in cases) else []
            lines += [*table_notes(run, shape, cases, rows), ""]
        console.file.write("\n".join(lines) + "\n")
    else:
        tables, names = fitting_names((case.kernel for case in run.cases),
                                      lambda names: results_tables(run, names, rows), console)
        for (shape, cases), table in zip(groups.items(), tables):
            console.print(table)
            if any(case.precision == "tf32" for case in cases):
                say(console, TF32_NOTE, "dim")
            for line in table_notes(run, shape, cases, rows):
                say(console, line, "dim")
            console.line()
    for line in legend_lines(names):
        say(console, line, "dim")
    energy = energy_table(run, names)
    if energy is not None:
        console.print(energy)
        console.line()
    device = run.environment.get("device") or {}
    if device.get("fp32_peak_gflops") and device.get("sm_count") and device.get("clock_khz"):
        say(console, f"FP32 peak {device['fp32_peak_gflops']:,.0f} GFLOP/s = {device['sm_count']} SMs x "
                     f"{device.get('fp32_lanes_per_sm') or '?'} lanes x 2 x {device['clock_khz'] / 1e6:.2f} GHz "
                     "(clock as the driver reports it)", "dim")
    line = tensor_peaks_line(run)
    if line:
        say(console, line, "dim")
    for line in geometric_mean_lines(run, names):
        say(console, line)
    for line in problems_text(run):
        say(console, line)


def tensor_peaks_line(run: RunResult) -> str | None:
    """The dense peaks of the tensor-core math kinds the run's cases use, which their % of peak is of."""
    device = run.environment.get("device") or {}
    found = {}
    for case in run.cases:
        if case.math != "fp32" and case.math not in found:
            found[case.math] = case.peak_gflops(device)
    shown = [f"{math.upper()} {peak:,.0f}" for math, peak in found.items() if peak]
    if not shown or not device.get("clock_khz"):
        return None
    return (f"dense tensor-core peaks (GFLOP/s; INT8 GOP/s): {', '.join(shown)}, at "
            f"{device['clock_khz'] / 1e6:.2f} GHz on {device.get('sm_count')} SMs (gemm/peaks.py)")


_LIMITER_ABBREVIATIONS = {"registers": "regs", "shared memory": "smem"}
PLAN_LABEL_WIDTH = 16   # a plan has twelve columns: its labels are shortened sooner than a results table's


def _dims(values) -> str:
    """``32x17x1`` as ``32x17``: trailing unit dimensions dropped, the first one kept."""
    values = list(values)
    while len(values) > 1 and values[-1] == 1:
        values.pop()
    return "x".join(map(str, values))


def plan_table(plans: Iterable[CasePlan], title: str, names: dict[str, str] | None = None) -> Table:
    """The launch plan: grid, block, resources, occupancy and its limiter, waves, and the check.

    Threads per block and the number of blocks follow from block and grid, and
    spills show beside the registers when there are any: `formats.plan_csv`
    and `formats.plan_markdown` give each as a column.
    """
    plans = list(plans)
    names = names or short_labels((plan.kernel.label for plan in plans), PLAN_LABEL_WIDTH)
    table = _table(title)
    table.padding = (0, 0, 0, 0)   # twelve columns: one space between them
    for column, justify in (("kernel", "left"), ("shape", "left"), ("grid", "left"), ("block", "left"),
                            ("regs", "right"), ("smem", "right"), ("blk/SM", "right"),
                            ("occ", "right"), ("limited by", "left"), ("waves", "right"), ("check", "left")):
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]  # Literals, as str
    for plan in plans:
        *cells, check = _plan_cells(plan, names)
        table.add_row(Text(cells[0]), *cells[1:],
                      Text("ok", style="green") if plan.valid else Text("INVALID", style="bold red"))
    return table


_PLAN_COLUMNS = (("kernel", "left"), ("shape", "left"), ("grid", "left"), ("block", "left"), ("regs", "right"),
                 ("smem", "right"), ("blk/SM", "right"), ("occ", "right"), ("limited by", "left"),
                 ("waves", "right"), ("check", "left"))
# A plan of more cases than this is printed as plain aligned text: a terminal table measures every cell of every
# row, which takes minutes at 10^5 rows.
PLAIN_PLAN_ROWS = 2000


def _plan_cells(plan: CasePlan, names: dict[str, str]) -> list[str]:
    config, res, occ = plan.config, plan.resources, plan.occupancy
    registers = "-"
    if res:   # spills are rare and bad: shown beside the registers only when there are any
        registers = str(res.registers)
        if res.spill_store_bytes or res.spill_load_bytes:
            registers += f" spill {res.spill_store_bytes}/{res.spill_load_bytes}"
    return [
        names.get(plan.kernel.label, plan.kernel.label), plan.shape.label,
        _dims(config.grid) if config else "-",
        _dims(config.block) if config else "-",
        registers,
        f"{res.static_shared_bytes if res else '-'}+{config.shared_bytes if config else '-'}",
        str(occ.blocks_per_sm) if occ else "-",
        f"{100 * occ.occupancy:.0f}%" if occ else "-",
        ",".join(_LIMITER_ABBREVIATIONS.get(name, name) for name in occ.limited_by) if occ else "-",
        f"{plan.waves:.2f}" if plan.waves is not None and math.isfinite(plan.waves) else "-",
        "ok" if plan.valid else "INVALID",
    ]


def plain_plan_lines(plans: list[CasePlan], title: str, names: dict[str, str]) -> list[str]:
    """The plan table as plain lines, columns aligned by their widest cell: for plans too large for `plan_table`."""
    return [title, *_aligned([column for column, _ in _PLAN_COLUMNS], [_plan_cells(plan, names) for plan in plans],
                             [side for _, side in _PLAN_COLUMNS])]


def per_kernel_lines(plans: list[CasePlan]) -> dict[tuple[str, str, bool], list[str]]:
    """Each distinct note and problem of a kernel once, with the shapes it holds for, in plan order: a mistake of
    the kernel's own (its signature, its source) is said once, not once per shape. Keys: (kernel label, text,
    whether it is a problem)."""
    lines: dict[tuple[str, str, bool], list[str]] = {}
    for plan in plans:
        for text, is_problem in [*((note, False) for note in plan.notes),
                                 *((str(problem), True) for problem in plan.problems)]:
            lines.setdefault((plan.kernel.label, text, is_problem), []).append(plan.shape.label)
    return lines


def problem_text(label: str, text: str, shapes: list[str], count: int | None = None) -> str:
    """A problem as said once for a kernel: its cause (led by the spec's file:line) with the kernel and the shapes
    it holds for on the first line, the hint and the details after. `count`: how many shapes, when `shapes` holds
    only the first few."""
    cause, _, details = text.partition("\n")
    return f"{cause} [{label} at {shapes_text(shapes, count=count)}]" + (f"\n{details}" if details else "")


def shapes_text(shapes: list[str], shown: int = 3, count: int | None = None) -> str:
    """``64x64x64``, ``64x64x64, 128x128x128``, or ``5 shapes (64x64x64, 96x96x96, 128x128x128, ...)``; `count`
    is the number of shapes when `shapes` holds only the first `shown`."""
    count = len(shapes) if count is None else count
    if count <= shown:
        return ", ".join(shapes[:count])
    return f"{count} shapes ({', '.join(shapes[:shown])}, ...)"


class KernelLines:
    """`per_kernel_lines` gathered one plan at a time, for a plan too large to hold: each distinct note and problem
    of a kernel with the number of shapes it holds for and the first three of them."""

    def __init__(self) -> None:
        self.lines: dict[tuple[str, str, bool], tuple[list[str], list[int]]] = {}

    def add(self, plan: CasePlan) -> None:
        for text, is_problem in [*((note, False) for note in plan.notes),
                                 *((str(problem), True) for problem in plan.problems)]:
            shapes, count = self.lines.setdefault((plan.kernel.label, text, is_problem), ([], [0]))
            count[0] += 1
            if len(shapes) < 3:
                shapes.append(plan.shape.label)

    def say(self, console: Console) -> None:
        """The lines as `print_plan` says them."""
        for (label, text, is_problem), (shapes, count) in self.lines.items():
            if is_problem:
                say(console, problem_text(label, text, shapes, count[0]))
            else:
                say(console, f"{label} at {shapes_text(shapes, count=count[0])}: {text}", "dim")


# Rows of a long plan written at a time (CSV, Markdown or plain text): the first show at once and no more are held;
# in plain text each block's columns are as wide as the widest cell so far.
PLAN_BLOCK_ROWS = 1000


class PlanBlocks:
    """Plans read once and handed on in lists of `PLAN_BLOCK_ROWS` as they come (the last one shorter), counted as
    they pass (`valid`, `invalid`); `progress(done)` is called after each full block has been taken care of."""

    def __init__(self, plans: Iterable[CasePlan], progress: Callable[[int], None] | None = None):
        self.plans, self.progress = plans, progress
        self.valid = self.invalid = 0

    def __iter__(self):
        block: list[CasePlan] = []
        done = 0
        for plan in self.plans:
            block.append(plan)
            if plan.valid:
                self.valid += 1
            else:
                self.invalid += 1
            if len(block) >= PLAN_BLOCK_ROWS:
                yield block
                done += len(block)
                block = []
                if self.progress is not None:
                    self.progress(done)
        if block:
            yield block


def print_plan_stream(plans: Iterable[CasePlan], count: int, labels: list[str], title: str, console: Console,
                      summary: Callable[[int, int], str], progress: Callable[[int], None] | None = None
                      ) -> tuple[int, int]:
    """`print_plan` for `count` plans read once from `plans` (their kernels' `labels` in order): up to
    `PLAIN_PLAN_ROWS` as `print_plan` shows them; more as plain text written block by block as they are planned,
    so that the first rows show at once and memory stays bounded. Columns are as wide as the widest cell so far
    (a later block may widen them). `summary(valid, invalid)` gives the last line; `progress(done)` is called
    after each block. Returns the counts of valid and invalid plans."""
    if count <= PLAIN_PLAN_ROWS:
        held = list(plans)
        invalid = sum(not plan.valid for plan in held)
        print_plan(held, title, console, summary(len(held) - invalid, invalid))
        return len(held) - invalid, invalid
    names = short_labels(list(dict.fromkeys(labels)), PLAN_LABEL_WIDTH)
    header, justify = [column for column, _ in _PLAN_COLUMNS], [side for _, side in _PLAN_COLUMNS]
    widths = [len(column) for column in header]
    lines = KernelLines()

    def write(rows: list[list[str]], first: bool) -> None:
        for row in rows:
            widths[:] = [max(width, len(cell)) for width, cell in zip(widths, row)]
        text = [" ".join(cell.rjust(width) if side == "right" else cell.ljust(width)
                         for cell, width, side in zip(cells, widths, justify)).rstrip() for cells in rows]
        if first:
            top = " ".join(cell.rjust(width) if side == "right" else cell.ljust(width)
                           for cell, width, side in zip(header, widths, justify)).rstrip()
            text = [title, top, "-" * len(top), *text]
        console.file.write("\n".join(text) + "\n")
        console.file.flush()

    blocks, first = PlanBlocks(plans, progress), True
    for block in blocks:
        for plan in block:
            lines.add(plan)
        write([_plan_cells(plan, names) for plan in block], first)
        first = False
    if first:
        write([], True)
    valid, invalid = blocks.valid, blocks.invalid
    for line in legend_lines(names):
        say(console, line, "dim")
    lines.say(console)
    text = summary(valid, invalid)
    say(console, text, "bold red" if "INVALID" in text and not text.endswith(" 0 INVALID") else None)
    return valid, invalid


def print_plan(plans: list[CasePlan], title: str, console: Console, summary: str | None = None) -> None:
    """The plan table, its legend, each case's notes and problems, and a summary line (``N ok, M INVALID``)."""
    if len(plans) > PLAIN_PLAN_ROWS:
        names = short_labels(list(dict.fromkeys(plan.kernel.label for plan in plans)), PLAN_LABEL_WIDTH)
        console.file.write("\n".join(plain_plan_lines(plans, title, names)) + "\n")
    else:
        tables, names = fitting_names((plan.kernel.label for plan in plans),
                                      lambda names: [plan_table(plans, title, names)], console, PLAN_LABEL_WIDTH)
        console.print(tables[0])
    for line in legend_lines(names):
        say(console, line, "dim")
    for (label, text, is_problem), shapes in per_kernel_lines(plans).items():
        if is_problem:
            say(console, problem_text(label, text, shapes))
        else:
            say(console, f"{label} at {shapes_text(shapes)}: {text}", "dim")
    if summary is None:
        invalid = sum(not plan.valid for plan in plans)
        summary = f"{len(plans) - invalid} ok, {invalid} INVALID"
    say(console, summary, "bold red" if "INVALID" in summary and not summary.endswith(" 0 INVALID") else None)


_VERDICT_STYLE = {"SAME": "", "FASTER": "green", "FIXED": "green", "SLOWER": "bold red", "BROKEN": "bold red",
                  "NEW": "cyan", "GONE": "yellow", "UNTIMED": "dim"}


_COMPARISON_COLUMNS = (("kernel", "left"), ("shape", "left"), ("GPU", "left"), ("old ms", "right"),
                       ("new ms", "right"), ("change", "right"), ("verdict", "left"))


def _comparison_cells(c, names: dict[str, str]) -> list[str]:
    return [printable(names.get(c.kernel, c.kernel)), c.shape, printable(c.gpu or "-"),
            _time(c.old.median_ms if c.old else None), _time(c.new.median_ms if c.new else None),
            f"{100 * c.change:+.1f}%" if c.change is not None else "-", c.verdict]


def comparison_table(comparisons, title: str, names: dict[str, str] | None = None) -> Table:
    """Old and new median per case, the change, and the noise-aware verdict."""
    comparisons = list(comparisons)
    names = names or short_labels(c.kernel for c in comparisons)
    table = _table(title)
    for column, justify in _COMPARISON_COLUMNS:
        table.add_column(column, justify=justify)  # type: ignore[arg-type]  # Literals, as str
    for c in comparisons:
        kernel, shape, gpu, *figures, verdict = _comparison_cells(c, names)
        table.add_row(Text(kernel), shape, Text(gpu), *figures, Text(verdict, style=_VERDICT_STYLE.get(verdict, "")))
    return table


def print_comparison(comparisons, title: str, console: Console) -> None:
    """The comparison table, its legend, and one line counting each verdict. A comparison of more than
    `PLAIN_RESULTS_CASES` cases is plain aligned text, as a run's results are."""
    comparisons = list(comparisons)
    if len(comparisons) > PLAIN_RESULTS_CASES:
        names = short_labels(c.kernel for c in comparisons)
        lines = _aligned([column for column, _ in _COMPARISON_COLUMNS],
                         [_comparison_cells(c, names) for c in comparisons],
                         [justify for _, justify in _COMPARISON_COLUMNS])
        console.file.write("\n".join([printable(title), *lines]) + "\n")
    else:
        tables, names = fitting_names((c.kernel for c in comparisons),
                                      lambda names: [comparison_table(comparisons, title, names)], console)
        console.print(tables[0])
    for line in legend_lines(names):
        say(console, line, "dim")
    counts = ", ".join(f"{sum(c.verdict == v for c in comparisons)} {v}"
                       for v in dict.fromkeys(c.verdict for c in comparisons))
    say(console, f"{len(comparisons)} cases: {counts or 'none'}")


def tune_table(picks, title: str, names: dict[str, str] | None = None) -> Table:
    """Per kernel and shape: what was tried, the best configuration and how clearly it beat the runner-up.

    The best and the runner-up are different configurations of one kernel;
    their short names differ (``v8#1``, ``v8#4``) and the legend gives both.
    """
    picks = list(picks)
    names = names or short_labels(_tune_labels(picks))
    table = _table(title)
    for column, justify in (("kernel", "left"), ("shape", "left"), ("tried", "right"), ("pass/inv", "right"),
                            ("best", "left"), ("median ms", "right"), ("% cuBLAS", "right"),
                            ("runner-up", "left"), ("margin", "right"), ("verdict", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]  # Literals, as str
    for pick in picks:
        best, second = pick.best, pick.runner_up
        verdict = "-" if best is None else ("only one" if second is None else ("tie" if pick.tie else "clear"))
        table.add_row(Text(printable(pick.kernel)), pick.shape, str(pick.tried), f"{pick.passed}/{pick.invalid}",
                      Text(printable(names.get(best.kernel, best.kernel)), style="bold green") if best else
                      # a verify-only run's rows pass with no time: they are not failures, but none can win
                      Text("passed, not timed" if getattr(pick, "untimed", 0) else "nothing passed",
                           style="bold yellow" if getattr(pick, "untimed", 0) else "bold red"),
                      _time(best.median_ms if best else None), _number(best.pct_cublas if best else None, 1),
                      Text(printable(names.get(second.kernel, second.kernel))) if second else "-",
                      f"{100 * pick.margin:.1f}%" if pick.margin is not None else "-", verdict)
    return table


def _tune_labels(picks) -> list[str]:
    return [case.kernel for pick in picks for case in (pick.best, pick.runner_up) if case is not None]


def print_tune(picks, title: str, console: Console) -> None:
    """The tune table and the legend of its configurations."""
    picks = list(picks)
    tables, names = fitting_names(_tune_labels(picks), lambda names: [tune_table(picks, title, names)], console)
    console.print(tables[0])
    for line in legend_lines(names):
        say(console, line, "dim")
    if any(pick.tie for pick in picks):
        say(console, "tie: the runner-up's time is within the noise of the best's; either may win a rerun", "dim")


def profile_rows(run: RunResult) -> list[dict]:
    """Per profiled case: Nsight Compute's counters beside the plan's theoretical occupancy (both in %)."""
    rows = []
    for case in run.cases:
        profile = case.profile
        if not profile:
            continue
        theoretical = case.occupancy.occupancy if case.occupancy else None
        stalls = profile.get("top_stalls") or []
        rows.append({
            "kernel": case.kernel, "shape": case.shape.label, "error": profile.get("error"),
            "duration_us": profile.get("duration_us"),
            "achieved_occupancy_pct": profile.get("achieved_occupancy_pct"),
            "theoretical_occupancy_pct": None if theoretical is None else 100.0 * theoretical,
            "dram_gb": None if profile.get("dram_bytes") is None else profile["dram_bytes"] / 1e9,
            "arithmetic_intensity": profile.get("arithmetic_intensity"),
            "fma_pipe_pct": profile.get("fma_pipe_pct"), "tensor_pipe_pct": profile.get("tensor_pipe_pct"),
            "shared_bank_conflicts": profile.get("shared_bank_conflicts"),
            "top_stall": stalls[0]["reason"] if stalls else None,
        })
    return rows


def profile_table(run: RunResult, names: dict[str, str] | None = None) -> Table:
    """The profile table: time under ncu, achieved / theoretical occupancy, DRAM traffic, FLOP per DRAM byte,
    pipe utilisation, bank conflicts and the first warp stall reason."""
    table = _table("Nsight Compute, one launch per case (at the GPU's own clocks)")
    for title in ("kernel", "shape", "us", "occupancy % achieved / theoretical", "DRAM GB", "FLOP/byte",
                  "FMA %", "tensor %", "bank conflicts", "top stall"):
        table.add_column(title, justify="left" if title in ("kernel", "shape", "top stall") else "right")
    for row in profile_rows(run):
        name = printable((names or {}).get(row["kernel"], row["kernel"]))
        if row["error"]:
            table.add_row(Text(name), row["shape"],
                          Text(printable(f"not profiled: {row['error']}")[:60], style="yellow"))
            continue
        occupancy = f"{_number(row['achieved_occupancy_pct'], 1)} / {_number(row['theoretical_occupancy_pct'], 1)}"
        table.add_row(Text(name), row["shape"], _number(row["duration_us"], 1), occupancy,
                      _number(row["dram_gb"], 3), _number(row["arithmetic_intensity"], 1),
                      _number(row["fma_pipe_pct"], 1), _number(row["tensor_pipe_pct"], 1),
                      _number(row["shared_bank_conflicts"], 0), Text(printable(str(row["top_stall"] or "-"))))
    return table


def print_profile(run: RunResult, console: Console) -> None:
    """The profile table, when any case of `run` was profiled."""
    if any(case.profile for case in run.cases):
        console.print(profile_table(run))
