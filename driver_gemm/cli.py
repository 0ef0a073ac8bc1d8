"""The ``driver-gemm`` command: thin glue over the library.

Exit codes: 0 every case passed; 1 a case failed or errored; 2 the spec or
the command line is wrong; 3 no CUDA driver or GPU; 130 interrupted (the
results so far are still written).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import os
import sys
from pathlib import Path

from rich.console import Console

from . import __version__
from .errors import CompileError, DriverGemmError, NoGpuError, SpecError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own exit code is 2 too; keep its one-line form
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"driver-gemm: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="driver-gemm", description="Compile, launch, check and time CUDA GEMM kernels "
                                                     "from YAML specs, through NVRTC and the CUDA driver API.")
    parser.add_argument("--version", action="version", version=f"driver-gemm {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser("run", help="run specs on a GPU: verify and time every kernel against cuBLAS")
    run.add_argument("specs", nargs="*", type=Path, help="spec files (default: the seed spec)")
    run.add_argument("--device", type=int, default=None, help="GPU ordinal (default $DRIVER_GEMM_DEVICE, or 0)")
    run.add_argument("--kernel", "-k", action="append", default=[], help="run only this kernel (repeatable)")
    run.add_argument("--shape", "-s", action="append", default=[], help="run only this MxNxK shape (repeatable)")
    run.add_argument("--json", type=Path, help="results file (default results/SPEC-TIMESTAMP.json; the "
                                              "cases are also appended, one line each, to the same name .jsonl)")
    run.add_argument("--resume", type=Path, metavar="FILE.jsonl",
                     help="continue an interrupted run: skip the cases already in FILE, append the rest to it")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    run.add_argument("--no-timing", action="store_true", help="verify only: one checked launch per case")
    run.add_argument("--no-baseline", action="store_true", help="do not run cuBLAS")
    run.add_argument("--artifacts", type=Path, metavar="DIR",
                     help="save an error map of C (PNG) for every failing case in DIR")
    run.add_argument("--sanitize", choices=("memcheck", "racecheck", "synccheck", "initcheck"),
                     help="run each case under compute-sanitizer's TOOL (verify only) and report its findings")
    run.add_argument("--devices", help="spread the shapes over these GPUs, one Dask worker each: '0,1' or 'all'")
    run.add_argument("--scheduler", metavar="ADDRESS",
                     help="spread the shapes over the GPU workers of a running Dask cluster (one GPU per worker)")
    run.add_argument("--in-process", action="store_true",
                     help="run cases in this process (faster start; a kernel fault then ends the run) instead of "
                          "in a worker process that is replaced after a fault or a hang")

    plan = commands.add_parser("plan", help="show and check the launch of every case; needs no GPU")
    plan.add_argument("specs", nargs="*", type=Path, help="spec files (default: the seed spec)")
    plan.add_argument("--arch", help="target architecture when no GPU is used (default: the GPU's, else sm_90)")
    plan.add_argument("--kernel", "-k", action="append", default=[])
    plan.add_argument("--shape", "-s", action="append", default=[])
    plan.add_argument("--sms", type=int, help="SM count for the waves column (default: the GPU's, or a "
                                              "typical part of the architecture)")

    compare = commands.add_parser("compare", help="match two runs' cases and judge each: SAME, FASTER, SLOWER, "
                                                  "BROKEN, FIXED; exit 1 on a regression")
    compare.add_argument("old", type=Path, help="results of the reference run (.json or .jsonl)")
    compare.add_argument("new", type=Path, help="results of the run to judge")
    compare.add_argument("--threshold", type=float, default=0.0, metavar="PERCENT",
                         help="also call differences up to this many percent SAME (default 0: noise only)")
    compare.add_argument("--across-gpus", action="store_true", help="match cases whatever GPU ran them")

    plot = commands.add_parser("plot", help="GFLOP/s against size, %% of cuBLAS per kernel and shape, and a "
                                            "roofline, from results files")
    plot.add_argument("results", nargs="+", type=Path, help="results (.json or .jsonl)")
    plot.add_argument("-o", "--output", type=Path, required=True, help="picture to write (.png or .svg)")

    tune = commands.add_parser("tune", help="run a sweep (params given as lists) and pick each kernel's best "
                                            "configuration per shape; write a spec of the winners")
    tune.add_argument("spec", type=Path, help="a spec whose kernels sweep their params")
    tune.add_argument("--device", type=int, default=None, help="GPU ordinal (default $DRIVER_GEMM_DEVICE, or 0)")
    tune.add_argument("--kernel", "-k", action="append", default=[])
    tune.add_argument("--shape", "-s", action="append", default=[])
    tune.add_argument("--json", type=Path, help="results of every configuration (default results/SPEC-TIMESTAMP.json)")
    tune.add_argument("--out", type=Path, help="the winners spec (default: beside the results, SPEC-winners.yaml)")
    tune.add_argument("--from", dest="recorded", type=Path, metavar="RESULTS",
                      help="pick the winners from recorded results (.json or .jsonl, e.g. of a tune stopped "
                           "before it finished) instead of running; no GPU needed")
    tune.add_argument("--quiet", "-q", action="store_true")

    commands.add_parser("info", help="the GPU, driver and NVRTC this machine has")
    return parser


def _env_device() -> int:
    text = os.environ.get("DRIVER_GEMM_DEVICE", "0")
    try:
        return int(text)
    except ValueError:
        raise SpecError(f"must be a GPU ordinal, got {text!r}", field="DRIVER_GEMM_DEVICE") from None


def _load(paths: list[Path], kernels: list[str], shapes: list[str]):
    from .spec.model import DEFAULT_SPEC
    from .spec import load_spec

    return [load_spec(path).select(kernels, shapes) for path in (paths or [DEFAULT_SPEC])]


def _default_json(spec_name: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{spec_name}-{stamp}.json"


class _Progress:
    """Live progress on a terminal (cases done, failures, ETA, the case running); plain lines elsewhere."""

    def __init__(self, errors: Console, total: int, quiet: bool):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.errors, self.total, self.quiet = errors, total, quiet
        self.done = self.failed = 0
        self.live = None
        if not quiet and errors.is_terminal:
            self.live = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[failed]} failed"), TimeRemainingColumn(),
                                 console=errors, transient=True)
            self.task = self.live.add_task("starting", total=total, failed=0)
            self.live.start()

    def started(self, case) -> None:
        if self.live:
            self.live.update(self.task, description=f"{case.label} {case.shape.label}")

    def finished(self, case) -> None:
        from .report.tables import case_line

        self.done += 1
        self.failed += not case.ok
        if self.live:
            self.live.update(self.task, advance=1, failed=self.failed)
            if not case.ok:
                self.live.console.print(case_line(case), highlight=False, markup=False)
        elif not self.quiet:
            self.errors.print(f"[{self.done}/{self.total}] {case_line(case)}", highlight=False, markup=False)

    def close(self) -> None:
        if self.live:
            self.live.stop()


def _recorder(result, log, progress):
    """A run's on_result: each finished case goes to the case log (after the run's header), then to progress."""
    def finished(case) -> None:
        log.write_header(result)
        log.append(case)
        progress.finished(case)
    return finished


def _read_results(paths: list[Path]) -> list:
    """Results files (.json or .jsonl); one that cannot be read is a usage error naming it."""
    from .results.records import load_results

    runs = []
    for path in paths:
        try:
            runs.append(load_results(path))
        except (OSError, ValueError, KeyError) as exc:
            raise SpecError(f"cannot read results: {exc}", where=str(path)) from None
    return runs


def _command_run(args, console: Console, errors: Console) -> int:
    from .report.tables import print_run
    from .results.records import CaseLog, RunResult
    from .pipeline.runner import RunOptions, cases_of, run_spec

    specs = _load(args.specs, args.kernel, args.shape)
    if args.device is None:
        args.device = _env_device()
    if args.no_baseline:
        specs = [dataclasses.replace(spec, baseline=False) for spec in specs]
    if args.sanitize:
        return _command_sanitize(args, specs, console, errors)
    options = RunOptions(time=not args.no_timing, artifacts=args.artifacts)
    if (args.json or args.resume) and len(specs) > 1:
        raise SpecError("--json and --resume name one run; give one spec with them", field="--json")
    exit_code = EXIT_OK
    for spec in specs:
        result = RunResult(spec=spec.name, spec_path=str(spec.path) if spec.path else None)
        previous = []
        if args.resume:
            if not args.resume.is_file():
                raise SpecError(f"no such results file {args.resume}", field="--resume")
            _, previous = CaseLog.read(args.resume)
            lines = args.resume
        else:
            lines = (args.json or _default_json(spec.name)).with_suffix(".jsonl")
        path = args.json or lines.with_suffix(".json")
        progress = _Progress(errors, len(cases_of(spec)) - len(previous), args.quiet)
        log = CaseLog(lines)
        finished = _recorder(result, log, progress)
        try:
            if args.devices or args.scheduler:
                if args.resume or args.in_process:
                    raise SpecError("--devices and --scheduler take neither --resume nor --in-process",
                                    field="--devices")
                result = _run_on_gpus(spec, args, options, finished)
            else:
                run_spec(spec, device=args.device, isolate=not args.in_process, options=options,
                         on_start=progress.started, on_result=finished, result=result, previous=previous)
        except KeyboardInterrupt:
            result.interrupted = True
            progress.close()
            errors.print(f"interrupted: {len(result.cases)} finished cases kept in {lines} and "
                         f"{result.write_json(path)}; continue with --resume {lines}")
            return EXIT_INTERRUPTED
        finally:
            progress.close()
            log.close()
            if result.cases or result.environment:
                result.write_json(path)
        print_run(result, console)
        console.print(f"results: {path} (case by case: {lines})", style="dim")
        if not result.ok:
            exit_code = EXIT_FAILED
    return exit_code


def _run_on_gpus(spec, args, options, finished):
    from .cuda.device import device_count
    from .pipeline.distribute import gpu_cluster, run_on_workers

    devices = None
    if args.devices:
        try:
            devices = None if args.devices == "all" else [int(d) for d in args.devices.split(",")]
        except ValueError:
            raise SpecError(f"give GPU ordinals such as 0,1 or 'all', not {args.devices!r}", field="--devices") from None
        count = device_count()   # here, before any worker starts: no GPU is one clear line
        devices = list(range(count)) if devices is None else devices
        missing = [d for d in devices if not 0 <= d < count]
        if missing:
            raise SpecError(f"no GPU {', '.join(map(str, missing))} on this machine (it has {count})",
                            field="--devices")
    with gpu_cluster(devices, args.scheduler) as (client, workers):
        return run_on_workers(spec, client, workers, options=options, on_result=finished)


def _command_sanitize(args, specs, console: Console, errors: Console) -> int:
    """Each selected case under compute-sanitizer, one child process a case; findings join the results."""
    from .report.tables import print_run
    from .results.records import CaseResult, RunResult
    from .status import Status
    from .pipeline.sanitize import sanitize_case

    exit_code = EXIT_OK
    for spec in specs:
        if spec.path is None:
            raise SpecError("--sanitize needs a spec file", field="--sanitize")
        result = RunResult(spec=f"{spec.name} under {args.sanitize}", spec_path=str(spec.path),
                           settings={"sanitize": args.sanitize})
        for shape in spec.shapes:
            for kernel in spec.kernels:
                data = sanitize_case(spec.path, kernel.label, shape.label, args.sanitize, args.device)
                findings = data.pop("sanitizer")
                case = CaseResult.from_dict(data) if "shape" in data else CaseResult(
                    kernel=kernel.label, name=kernel.name, shape=shape, status=Status(data.get("status", Status.ERROR)),
                    message=" ".join(data.get("message") or []))
                case.sanitizer = findings
                if findings["findings"]:
                    case.status = Status.FAIL
                    case.message = (f"{args.sanitize}: {len(findings['findings'])} finding(s): "
                                    + "; ".join(findings["summary"][:3]))
                result.cases.append(case)
                if not args.quiet:
                    errors.print(f"[{len(result.cases)}] {kernel.label} {shape.label} {case.status} "
                                 f"({len(findings['findings'])} {args.sanitize} findings)", highlight=False,
                                 markup=False)
        path = args.json or _default_json(f"{spec.name}-{args.sanitize}")
        result.write_json(path)
        print_run(result, console)
        console.print(f"results: {path}", style="dim")
        if not result.ok:
            exit_code = EXIT_FAILED
    return exit_code


def _command_plan(args, console: Console, errors: Console) -> int:
    from .cuda.occupancy import arch_limits
    from .cuda.occupancy import limits_from_device
    from .pipeline.plan import plan_case
    from .report.tables import plan_table
    from .pipeline.runner import compile_spec, refused_everywhere

    specs = _load(args.specs, args.kernel, args.shape)
    limits, arch = None, args.arch
    if arch is None:
        try:
            from .cuda.device import read_properties
            props = read_properties(_env_device())
            limits, arch = limits_from_device(props), props.arch
        except NoGpuError:
            arch = "sm_90"
    from .cuda.compile import normalise_arch
    arch = normalise_arch(arch)
    if limits is None:
        try:
            limits = arch_limits(arch)
        except KeyError as exc:
            raise SpecError(str(exc.args[0]), field="--arch") from None
    exit_code = EXIT_OK
    for spec in specs:
        plans = []
        compiled = compile_spec(spec, arch, skip=refused_everywhere(spec, limits))
        reported: set[int] = set()
        for kernel in spec.kernels:
            cubin = compiled.get(kernel.label)
            if cubin is None:                   # refused on every shape: the plans say why
                plans.extend(plan_case(kernel, shape, limits, None, dict(spec.scalars), args.sms)
                             for shape in spec.shapes)
                continue
            if isinstance(cubin, CompileError):
                if id(cubin) not in reported:   # one message per failed program, not per instance
                    errors.print(str(cubin), markup=False, highlight=False)
                    reported.add(id(cubin))
                exit_code = EXIT_FAILED
                continue
            resources = cubin.resources_of(kernel.instance)
            for shape in spec.shapes:
                plans.append(plan_case(kernel, shape, limits, resources, dict(spec.scalars), args.sms))
        console.print(plan_table(plans, f"{spec.name}: launch plan for {arch} "
                                        f"({args.sms or limits.typical_sm_count} SMs, {limits.typical_part})"))
        for plan in plans:
            for note in plan.notes:
                console.print(f"{plan.kernel.label} at {plan.shape.label}: {note}", style="dim", markup=False)
            for problem in plan.problems:
                console.print(f"{plan.kernel.label} at {plan.shape.label}: {problem}", markup=False,
                              highlight=False)
        if any(not p.valid for p in plans):
            exit_code = EXIT_FAILED
    return exit_code


def _command_compare(args, console: Console, errors: Console) -> int:
    from .report.compare import compare_runs
    from .report.tables import comparison_table

    runs = _read_results([args.old, args.new])
    comparisons = compare_runs(*runs, threshold=args.threshold / 100, across_gpus=args.across_gpus)
    console.print(comparison_table(comparisons, f"{args.old} -> {args.new}"))
    regressions = [c for c in comparisons if c.regression]
    console.print(f"{len(comparisons)} cases: " + ", ".join(
        f"{sum(c.verdict == v for c in comparisons)} {v}" for v in dict.fromkeys(c.verdict for c in comparisons)))
    return EXIT_FAILED if regressions else EXIT_OK


def _command_plot(args, console: Console, errors: Console) -> int:
    from .report.plots import plot_results

    if args.output.suffix.lower() not in (".png", ".svg"):
        raise SpecError("the picture is .png or .svg", field="--output")
    runs = _read_results(args.results)
    console.print(f"plot: {plot_results(runs, args.output)}")
    return EXIT_OK


def _command_tune(args, console: Console, errors: Console) -> int:
    from .report.tables import tune_table
    from .results.records import CaseLog, RunResult
    from .pipeline.runner import cases_of, run_spec
    from .report.tune import pick_winners, winners_spec

    spec, = _load([args.spec], args.kernel, args.shape)
    if args.recorded:
        path = args.recorded
        result, = _read_results([path])
        wanted = {(case.label, case.shape.label) for case in cases_of(spec)}
        result.cases = [case for case in result.cases if (case.kernel, case.shape.label) in wanted]
        if not result.cases:
            raise SpecError(f"no case of {spec.name} (as selected) in these results", where=str(path))
    else:
        device = args.device if args.device is not None else _env_device()
        path = args.json or _default_json(f"{spec.name}-tune")
        result = RunResult(spec=spec.name, spec_path=str(spec.path))
        progress = _Progress(errors, len(cases_of(spec)), args.quiet)
        with CaseLog(path.with_suffix(".jsonl")) as log:
            try:
                run_spec(spec, device=device, isolate=True, on_start=progress.started,
                         on_result=_recorder(result, log, progress), result=result)
            finally:
                progress.close()
                if result.cases:
                    result.write_json(path)
    picks = pick_winners(result)
    console.print(tune_table(picks, f"{spec.name}: best configuration per kernel and shape"))
    out = winners_spec(spec, picks, args.out or path.with_name(f"{spec.name}-winners.yaml"))
    untried = len(cases_of(spec)) - len(result.cases)
    if untried > 0:
        console.print(f"{untried} case(s) of the sweep have no result here: the winners are of what was tried",
                      style="yellow")
    console.print(f"results: {path}; winners: {out}", style="dim")
    return EXIT_OK if any(p.best for p in picks) else EXIT_FAILED


def _command_info(args, console: Console, errors: Console) -> int:
    from .cuda.compile import nvrtc_version, supported_archs
    from .cuda.device import device_count, read_properties

    console.print(f"NVRTC {'.'.join(map(str, nvrtc_version()))}, real architectures "
                  f"{', '.join(f'sm_{a}' for a in supported_archs())}")
    for ordinal in range(device_count()):
        props = read_properties(ordinal)
        console.print(f"GPU {ordinal}: {props.name} ({props.arch}, {props.sm_count} SMs, "
                      f"{props.clock_khz / 1e6:.2f} GHz, L2 {props.l2_bytes >> 20} MiB, "
                      f"{props.total_memory_bytes / 2**30:.0f} GiB), driver {props.driver_version}, "
                      f"FP32 peak {props.fp32_peak_gflops or 0:,.0f} GFLOP/s, {props.uuid}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Off a terminal (CI logs, files) rich would wrap tables at 80 columns: give them room instead.
    console = Console(width=None if sys.stdout.isatty() else 200)
    errors = Console(stderr=True, soft_wrap=True)
    command = {"run": _command_run, "plan": _command_plan, "compare": _command_compare, "plot": _command_plot,
               "tune": _command_tune, "info": _command_info}[args.command]
    try:
        return command(args, console, errors)
    except SpecError as exc:
        errors.print(f"driver-gemm: {exc}", markup=False, highlight=False)
        return EXIT_USAGE
    except NoGpuError as exc:
        errors.print(f"driver-gemm: {exc}", markup=False, highlight=False)
        return EXIT_NO_GPU
    except DriverGemmError as exc:
        errors.print(f"driver-gemm: {exc}", markup=False, highlight=False)
        return EXIT_FAILED
    except KeyboardInterrupt:
        errors.print("driver-gemm: interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
