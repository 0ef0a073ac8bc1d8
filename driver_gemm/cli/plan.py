"""``driver-gemm plan``: the launch of every case and every check, for a GPU or an architecture. No GPU needed."""

from __future__ import annotations

from ..errors import ToolMissingError, UsageError
from .common import (SPEC_HELP, Output, add_format_options, add_source_option, check_arch_option,
                     check_environment, env_device, load_specs, spec_argument, whole_number)
from .exit_codes import EXIT_FAILED, EXIT_OK


def add_parser(commands, **common) -> None:
    plan = commands.add_parser("plan", help="show and check the launch of every case; needs no GPU", **common)
    plan.add_argument("specs", nargs="*", type=spec_argument, metavar="SPEC", help=f"{SPEC_HELP} (default: the seed spec)")
    add_source_option(plan)
    plan.add_argument("--arch", help="target architecture when no GPU is used (default: the GPU's, else sm_90)")
    plan.add_argument("--kernel", "-k", action="append", default=[], help="plan only this kernel (repeatable)")
    plan.add_argument("--shape", "-s", action="append", default=[],
                      help="plan this MxNxK shape instead of the spec's (repeatable)")
    plan.add_argument("--sms", type=whole_number, help="SM count for the waves column and the specs' sm_count "
                                                       "(default: the GPU's, or a typical part of the architecture)")
    plan.add_argument("--sass", action="store_true",
                      help="also count each kernel's instructions (FFMA, HMMA/HGMMA, LDS/LDG by width, STG, BAR) "
                           "in its machine code; needs cuobjdump or nvdisasm")
    add_format_options(plan)


def execute(args, out: Output) -> int:
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..cuda.compile import nvrtc_warning
    from ..planning.spec_plan import MAX_SM_COUNT, instruction_mixes, plan_stream, plan_summary, plan_target
    from ..report.tables import print_plan_stream, say

    if args.sms is not None and not 1 <= args.sms <= MAX_SM_COUNT:
        raise UsageError(f"an SM count is 1 to {MAX_SM_COUNT:,}, got {args.sms:,}", field="--sms")
    check_arch_option(args.arch)
    check_environment()
    specs = load_specs(args.specs, args.kernel, args.shape, args.allow_outside_sources)
    device = env_device() if args.arch is None else 0
    try:
        target = plan_target(args.arch, device)
    except UsageError as exc:
        raise UsageError(exc.message, field="--arch") from None
    exit_code = EXIT_OK
    warning = nvrtc_warning()
    if warning:
        out.note(f"warning: {warning}", "yellow")
    for spec in specs:
        stream = plan_stream(spec, args.sms, target=target)
        planned = stream.result
        for error in planned.compile_errors:
            say(out.errors, str(error))
        title = (f"{spec.name}: launch plan for {target.arch} "
                 f"({planned.sm_count} SMs, {target.limits.typical_part})")
        progress = _progress(out, stream.count)

        def summary(valid: int, invalid: int) -> str:
            return plan_summary(valid, invalid, len(planned.compile_errors))

        if out.plain:
            valid, invalid = _write_rows(stream, out, progress)
        else:
            valid, invalid = print_plan_stream(stream, stream.count, stream.labels, title, out.console, summary,
                                               progress)
        if progress is not None:
            progress(-1)
        if args.sass:
            try:
                out.data(sass_table(instruction_mixes(planned), out.format, out.console.width))
            except ToolMissingError as exc:
                # The plan is whole without the instruction mix: a note, and the exit code the plan alone gives.
                out.note(f"note: --sass: no instruction mix: {exc}", "yellow")
        if out.plain:
            out.note(f"{spec.name}: {summary(valid, invalid)}", None)
        if planned.compile_errors or invalid:
            exit_code = EXIT_FAILED
    return exit_code



def _write_rows(stream, out: Output, progress) -> tuple[int, int]:
    """The plans as CSV or Markdown rows on stdout, written block by block as they are planned, then a row for each
    case whose kernel did not compile (so that the table names every case), and after a Markdown table its problems
    and notes as quoted lines (CSV has them in its problems column); the counts of valid and invalid plans."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.formats import PLAN_CSV_HEADER, PLAN_HEADER, csv_text, markdown_table, not_compiled_csv_row, \
        not_compiled_markdown_row, plan_csv_row, plan_markdown_lines, plan_markdown_row
    from ..report.tables import KernelLines, PlanBlocks

    if out.format == "csv":
        out.data(csv_text(PLAN_CSV_HEADER, ()))
    else:
        out.data(markdown_table(PLAN_HEADER, ()))
    blocks = PlanBlocks(stream, progress)
    lines = KernelLines()   # Markdown has no problems column: the reasons and notes follow the table
    for block in blocks:
        if out.format == "csv":
            out.data(csv_text(PLAN_CSV_HEADER, map(plan_csv_row, block)).partition("\n")[2])
        else:
            out.data("".join(map(plan_markdown_row, block)))
            for plan in block:
                lines.add(plan)
    failed = list(stream.not_compiled())
    if failed and out.format == "csv":
        out.data(csv_text(PLAN_CSV_HEADER, (not_compiled_csv_row(kernel, shape, error, stream.picked(kernel, shape))
                                            for kernel, shape, error in failed)).partition("\n")[2])
    elif failed:
        out.data("".join(not_compiled_markdown_row(kernel, shape) for kernel, shape, _ in failed))
    if out.format == "markdown":
        out.data(plan_markdown_lines(lines))
    return blocks.valid, blocks.invalid


def _progress(out: Output, count: int):
    """A function that says on a terminal's stderr how many of `count` cases are planned (-1: clears the line), for a
    long plan whose rows go elsewhere (stdout redirected); None when no such line is wanted."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.tables import PLAIN_PLAN_ROWS

    errors = out.errors.file
    if count <= PLAIN_PLAN_ROWS or not _is_terminal(errors) or _is_terminal(out.console.file):
        return None

    def progress(done: int) -> None:
        text = "" if done < 0 else f"planned {done:,} of {count:,} cases"
        errors.write(f"\r{text}\x1b[K" if text else "\r\x1b[K")
        errors.flush()
    return progress


def _is_terminal(file) -> bool:
    try:
        return bool(file.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def sass_table(mixes: dict, format: str, width: int = 100) -> str:
    """The instruction mix per kernel as text: aligned columns (long labels shortened, with a legend, where the
    full ones would make a line wider than `width`), or markdown / CSV with the full labels for those formats."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.labels import short_labels

    text = _sass_text(mixes, format, {label: label for label in mixes})
    if format in ("markdown", "csv") or max(map(len, text.splitlines()), default=0) <= width:
        return text
    return _sass_text(mixes, format, short_labels(mixes, 16))


def _sass_text(mixes: dict, format: str, names: dict[str, str]) -> str:
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..cuda.sass import MIX_COLUMNS
    from ..report.labels import legend_lines

    header = ["kernel", *MIX_COLUMNS]
    rows = [[names[label], *(str(mix[column]) for column in MIX_COLUMNS)] if not isinstance(mix, str)
            else [names[label], mix] for label, mix in mixes.items()]
    if format == "csv":
        return "\n".join(",".join(f'"{cell}"' if "," in cell else cell for cell in row)
                         for row in [header, *rows]) + "\n"
    if format == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"
    widths = [max(len(row[i]) for row in [header, *rows] if len(row) == len(header)) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(width) if i else cell.ljust(width)
                       for i, (cell, width) in enumerate(zip(row, widths))).rstrip() for row in [header, *rows]]
    return "\n".join(lines + list(legend_lines(names))) + "\n"
