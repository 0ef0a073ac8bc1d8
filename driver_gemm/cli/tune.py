"""``driver-gemm tune SPEC``: run a sweep, or read one (``--from``), and write a spec of each kernel's winners."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from .common import Output, add_source_option, default_json, env_device, load_specs, read_results_files


def add_parser(commands, **common) -> None:
    tune = commands.add_parser("tune", help="run a sweep (params given as lists) and pick each kernel's best "
                                            "configuration per shape; write a spec of the winners", **common)
    tune.add_argument("spec", type=Path, help="a spec whose kernels sweep their params")
    add_source_option(tune)
    tune.add_argument("--device", type=int, default=None, help="GPU ordinal (default $DRIVER_GEMM_DEVICE, or 0)")
    tune.add_argument("--kernel", "-k", action="append", default=[])
    tune.add_argument("--shape", "-s", action="append", default=[])
    tune.add_argument("--json", type=Path, help="results of every configuration (default results/SPEC-TIMESTAMP.json)")
    tune.add_argument("--out", type=Path, help="the winners spec (default: beside the results, SPEC-winners.yaml)")
    tune.add_argument("--from", dest="recorded", type=Path, metavar="RESULTS",
                      help="pick the winners from recorded results (.json or .jsonl, e.g. of a tune stopped "
                           "before it finished) instead of running; no GPU needed")
    tune.add_argument("--quiet", "-q", action="store_true")


def _recorded(spec, path: Path, out: Output):
    from ..pipeline.cases import cases_of

    result, = read_results_files([path], out)
    wanted = {(case.label, case.shape.label) for case in cases_of(spec)}
    result.cases = [case for case in result.cases if (case.kernel, case.shape.label) in wanted]
    if not result.cases:
        raise UsageError(f"no case of {spec.name} (as selected) in these results", where=str(path))
    return result


def _run(spec, args, out: Output, path: Path):
    from ..pipeline.cases import cases_of
    from ..pipeline.runner import run_spec
    from ..results.records import CaseLog, RunResult
    from .run import Progress, recorder

    device = args.device if args.device is not None else env_device()
    result = RunResult(spec=spec.name, spec_path=str(spec.path))
    progress = Progress(out.errors, len(cases_of(spec)), args.quiet)
    with CaseLog(path.with_suffix(".jsonl")) as log:
        try:
            run_spec(spec, device=device, isolate=True, on_start=progress.started,
                     on_result=recorder(result, log, progress), result=result)
        finally:
            progress.close()
            if result.cases:
                result.write_json(path)
    return result


def execute(args, out: Output) -> int:
    from ..pipeline.cases import cases_of
    from ..report.tables import print_tune
    from ..tune.winners import pick_winners, winners_spec
    from .main import EXIT_FAILED, EXIT_OK

    spec, = load_specs([args.spec], args.kernel, args.shape, args.allow_outside_sources)
    if args.recorded:
        path = args.recorded
        result = _recorded(spec, path, out)
    else:
        path = args.json or default_json(f"{spec.file_stem}-tune")
        result = _run(spec, args, out, path)
    picks = pick_winners(result)
    print_tune(picks, f"{spec.name}: best configuration per kernel and shape", out.console)
    winners = winners_spec(spec, picks, args.out or path.with_name(f"{spec.name}-winners.yaml"))
    untried = len(cases_of(spec)) - len(result.cases)
    if untried > 0:
        out.note(f"{untried} case(s) of the sweep have no result here: the winners are of what was tried", "yellow")
    out.note(f"results: {path}; winners: {winners}")
    return EXIT_OK if any(p.best for p in picks) else EXIT_FAILED
