"""``driver-gemm plan``: the launch of every case and every check, for a GPU or an architecture. No GPU needed."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from .common import Output, add_format_options, add_source_option, env_device, load_specs


def add_parser(commands, **common) -> None:
    plan = commands.add_parser("plan", help="show and check the launch of every case; needs no GPU", **common)
    plan.add_argument("specs", nargs="*", type=Path, help="spec files (default: the seed spec)")
    add_source_option(plan)
    plan.add_argument("--arch", help="target architecture when no GPU is used (default: the GPU's, else sm_90)")
    plan.add_argument("--kernel", "-k", action="append", default=[])
    plan.add_argument("--shape", "-s", action="append", default=[])
    plan.add_argument("--sms", type=int, help="SM count for the waves column (default: the GPU's, or a "
                                              "typical part of the architecture)")
    add_format_options(plan)


def execute(args, out: Output) -> int:
    from ..pipeline.plan_spec import plan_spec, plan_target
    from ..report.formats import plan_csv, plan_markdown
    from ..report.tables import print_plan, say
    from .main import EXIT_FAILED, EXIT_OK

    if args.sms is not None and args.sms < 1:
        raise UsageError(f"an SM count is at least 1, got {args.sms}", field="--sms")
    specs = load_specs(args.specs, args.kernel, args.shape, args.allow_outside_sources)
    device = env_device() if args.arch is None else 0
    try:
        target = plan_target(args.arch, device)
    except UsageError as exc:
        raise UsageError(exc.message, field="--arch") from None
    exit_code = EXIT_OK
    for spec in specs:
        planned = plan_spec(spec, sm_count=args.sms, target=target)
        for error in planned.compile_errors:
            say(out.errors, str(error))
        title = (f"{spec.name}: launch plan for {target.arch} "
                 f"({planned.sm_count} SMs, {target.limits.typical_part})")
        if out.format == "markdown":
            out.data(plan_markdown(planned.plans))
        elif out.format == "csv":
            out.data(plan_csv(planned.plans))
        else:
            print_plan(planned.plans, title, out.console, planned.summary())
        if out.plain:
            out.note(f"{spec.name}: {planned.summary()}", None)
        if not planned.ok:
            exit_code = EXIT_FAILED
    return exit_code
