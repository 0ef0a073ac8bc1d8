"""``driver-gemm run``: verify and time every kernel of a spec on a GPU, against cuBLAS."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import re
import signal
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from .. import timeline
from ..errors import DriverGemmError, NoGpuError, ToolMissingError, UsageError
from ..output_files import output_path
from .common import (MAX_THRESHOLD_PCT, Output, add_format_options, add_source_option, check_environment,
                     check_ordinal, check_output_file, SPEC_HELP, check_output_folder, claimed_default_json,
                     decimal_number, default_json, env_device, load_specs, read_whole_number, refuse_aliases,
                     results_argument, spec_argument, spec_inputs)
from .common import read_results_files
from ..measure.vendor_choice import BaselineChoice
from ..session.options import RunOptions
from .exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")


def add_parser(commands, **common) -> None:
    run = commands.add_parser("run", help="run specs on a GPU: verify and time every kernel against cuBLAS",
                              **common)
    run.add_argument("specs", nargs="*", type=spec_argument, metavar="SPEC", help=f"{SPEC_HELP} (default: the seed spec)")
    add_source_option(run)
    run.add_argument("--device", metavar="N|N,M|all",
                     help="the GPU to run on (default $DRIVER_GEMM_DEVICE, or 0); several ('0,1') or 'all' spread "
                          "the cases over those GPUs of this machine, each with its own worker process, a free GPU "
                          "taking the next share")
    run.add_argument("--kernel", "-k", action="append", default=[], help="run only this kernel (repeatable)")
    run.add_argument("--shape", "-s", action="append", default=[],
                     help="run this MxNxK shape instead of the spec's (repeatable)")
    run.add_argument("--json", help="results file (default results/SPEC-TIMESTAMP.json, or -2, -3... where another "
                                    "run took that name; the cases are also written, one line each, to the same "
                                    "name .jsonl, which a new run starts afresh); with several specs, one file per "
                                    "spec: STEM-SPECNAME.json")
    run.add_argument("--resume", type=Path, metavar="FILE.jsonl",
                     help="continue an interrupted run: skip the cases already in FILE, append the rest to it")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    run.add_argument("--no-timing", action="store_true", help="verify only: one checked launch per case")
    run.add_argument("--no-baseline", action="store_true", help="do not run cuBLAS")
    run.add_argument("--baseline", metavar="best[:N]|heuristic",
                     help="the cuBLASLt rows' algorithm: the fastest of the heuristic's first N (default best = "
                          "best:8), by a short screen of all and a longer final of the two fastest, with the case's "
                          "pattern, or the heuristic's first alone; the results record which ran")
    run.add_argument("--timer", choices=("events", "cupti"),
                     help="what times a sample: a CUDA event pair (default), or the kernels' own durations as CUPTI "
                          "records them (needs NVIDIA's cupti-python, the 'cupti' extra)")
    run.add_argument("--samples", metavar="PATTERN",
                     help="what runs between samples, for every spec (its measure.samples otherwise): flush, "
                          "flush-idle:MS, do-bench, burst[:N[:MS]] (docs/timing.md)")
    run.add_argument("--rounds", metavar="N",
                     help="time each kernel in N rounds alternating with its vendor row, for every spec (its "
                          "measure.rounds otherwise): both then meet the GPU's clock in the same state (docs/timing.md)")
    run.add_argument("--artifacts", metavar="DIR",
                     help="save an error map of C (PNG) for every failing case in DIR")
    run.add_argument("--sanitize", choices=SANITIZER_TOOLS,
                     help="run each case under compute-sanitizer's TOOL (verify only) and report its findings")
    run.add_argument("--scheduler", metavar="ADDRESS",
                     help="spread the cases over the GPU workers of a running Dask cluster, on one machine or "
                          "several (one GPU per worker; needs driver-gemm[dask])")
    run.add_argument("--in-process", action="store_true",
                     help="run cases in this process (faster start; a kernel fault then ends the run, and "
                          "measure.case_timeout_s is not applied, so a hung case blocks it) instead of in a "
                          "worker process that is replaced after a fault or a hang")
    run.add_argument("--profile", action="store_true",
                     help="after each kernel case, profile one launch of it under Nsight Compute (ncu, at the GPU's "
                          "own clocks) and show its counters beside the plan's occupancy")
    run.add_argument("--lock-clocks", metavar="MHZ|max",
                     help="lock the SM clock of every GPU the run uses to MHZ (or NVML's maximum) for the run, then "
                          "reset it: samples at one clock compare across runs and tools (root only; needs NVML, "
                          "the 'nvml' extra); the MHz go into the results' settings")
    gates = run.add_argument_group("performance gates (a failing gate names the case and makes the exit code 1)")
    gates.add_argument("--min-pct", action="append", default=[], metavar="PCT|NAME=PCT",
                       help="every kernel case must reach PCT %% of cuBLAS (or kernel NAME must: repeatable; "
                            "a kernel's min_pct: in the spec says the same)")
    gates.add_argument("--baseline-results", type=results_argument, metavar="OLD.json",
                       help="no case may be SLOWER (beyond both runs' noise) or BROKEN against these results")
    gates.add_argument("--threshold", type=decimal_number, metavar="PERCENT",
                       help="with --baseline-results: also call differences up to this many percent SAME, so that a "
                            "slowdown must exceed it to fail (default 0: noise only)")
    gates.add_argument("--across-gpus", action="store_true",
                       help="with --baseline-results: match the stored cases whatever GPU ran them (else, as compare "
                            "matches them, only cases of the same GPU model are compared, and stored results of "
                            "another GPU model are refused)")
    add_format_options(run)


def read_gates(args, out: Output, specs=()):
    """The gates asked for on the command line, read before anything runs: (every, per name, stored results).

    A gate that could never fail is refused with the rest: a kernel name the
    specs lack, stored results that share no case with the run.
    """
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..planning.cases import cases_of
    from ..report.gates import GateError, check_gate_names, check_stored_matches, parse_min_pct

    for value in args.min_pct:     # parse_min_pct reads the number with float(), which also takes '８０' and '1_0'
        number = str(value).rpartition("=")[2]
        if not number.isascii() or "_" in number:
            raise UsageError(f"a percentage is written with the digits 0-9 (80, NAME=90), got {value!r}",
                             field="--min-pct")
    try:
        every, per_name = parse_min_pct(args.min_pct)
        for spec in specs:
            check_gate_names(per_name, [kernel.name for kernel in spec.kernels])
    except GateError as error:
        raise UsageError(str(error).replace("--driver-gemm-min-pct", "--min-pct"), field="--min-pct") from None
    if args.threshold is not None and not 0 <= args.threshold < MAX_THRESHOLD_PCT:   # also refuses NaN
        raise UsageError(f"a threshold is a percentage from 0 to below {MAX_THRESHOLD_PCT:,.0f}, got "
                         f"{args.threshold:g}", field="--threshold")
    stored = read_results_files([args.baseline_results], out)[0] if args.baseline_results else None
    if stored is not None and specs:
        try:
            check_stored_matches(stored, {(case.label, case.shape.label) for spec in specs for case in cases_of(spec)})
        except GateError as error:
            raise UsageError(str(error), where=str(args.baseline_results), field="--baseline-results") from None
    return every, per_name, stored


def check_stored_gpus(stored, specs, gpus: list[str], across_gpus: bool, path) -> None:
    """Refuse (`UsageError`, exit 2) stored results none of whose cases of the `specs`' is of the run's GPU models
    (`gpus`, read before anything runs): `compare` matches cases by GPU model, so the regression gate would compare
    nothing. ``--across-gpus`` lets them be compared across models."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..planning.cases import cases_of
    from ..report.gates import GateError, check_stored_matches

    if stored is None or not gpus:
        return
    try:
        check_stored_matches(stored, {(case.label, case.shape.label) for spec in specs for case in cases_of(spec)},
                             gpus=gpus, across_gpus=across_gpus)
    except GateError as error:
        raise UsageError(str(error), where=str(path), field="--baseline-results") from None


def _run_gpu_models(args, ordinals) -> list[str]:
    """The names of the GPUs of this machine the run will use (after the driver answered); none with --scheduler."""
    if args.scheduler:
        return []
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..cuda.device import device_count, read_properties

    present = device_count()
    devices = list(range(present)) if ordinals == "all" else ordinals or [args.device]
    return list(dict.fromkeys(read_properties(ordinal).name for ordinal in devices if 0 <= ordinal < present))


def check_run_gates(spec, result, gates, threshold_pct: float, out: Output, across_gpus: bool = False) -> bool:
    """Every gate over `result`; each failure is one line on stderr. True when all hold."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.gates import check_gates, kernel_min_pcts

    every, per_name, stored = gates
    per_kernel = kernel_min_pcts(spec.kernels, per_name)
    if every is None and not per_kernel and stored is None:
        return True
    failures = check_gates(result, min_pct=every, per_kernel=per_kernel, stored=stored,
                           threshold=threshold_pct / 100, across_gpus=across_gpus)
    for failure in failures:
        out.error(f"gate failed: {failure}")
    if not failures:
        out.note("performance gates: every case holds")
    return not failures


class Progress:
    """Live progress on a terminal (cases done, failures, ETA, the case running); plain lines elsewhere."""

    def __init__(self, errors: Console, total: int, quiet: bool):
        # rich.progress: only for the live progress bar of a run on a terminal
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as LiveProgress

        self.errors, self.total, self.quiet = errors, total, quiet
        self.done = self.failed = 0
        self.live = None
        if not quiet and errors.is_terminal:
            self.live = LiveProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[failed]} failed"), TimeRemainingColumn(),
                                     console=errors, transient=True)
            self.task = self.live.add_task("starting", total=total, failed=0)
            self.live.start()

    def started(self, case) -> None:
        if self.live:   # a description is rich markup: the kernel's label is escaped
            self.live.update(self.task, description=escape(f"{case.label} {case.shape.label}"))

    def finished(self, case) -> None:
        # lazy: a command imports this when it runs, after its GPUs' workers are spawned
        from ..report.tables import case_line, say

        self.done += 1
        self.failed += not case.ok
        if self.live:
            self.live.update(self.task, advance=1, failed=self.failed)
            if not case.ok:
                say(self.live.console, case_line(case))
        elif not self.quiet:
            say(self.errors, f"[{self.done}/{self.total}] {case_line(case)}")

    def close(self) -> None:
        if self.live:
            self.live.stop()


def recorder(result, log, progress):
    """A run's on_result: each finished case goes to the case log (after the run's header), then to progress."""
    def finished(case) -> None:
        log.write_header(result)
        log.append(case)
        progress.finished(case)
    return finished


def show_run(result, out: Output) -> None:
    """The run's tables in the chosen format."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.formats import run_csv, run_markdown
    from ..report.tables import print_run
    from ..report.notes import markdown_notes

    if out.format == "markdown":
        out.data(run_markdown(result) + markdown_notes(result))
    elif out.format == "csv":
        out.data(run_csv(result))
    else:
        print_run(result, out.console)


def execute(args, out: Output) -> int:
    # Mistakes in the options alone are said first: before any worker is spawned or any GPU is asked for.
    _check_option_combinations(args)
    check_environment()
    args.json = _output_path(args.json, "--json", folder=False)
    args.artifacts = _output_path(args.artifacts, "--artifacts", folder=True)
    ordinals = _parse_devices(args.device)
    # One GPU named is a run on that GPU; several, or 'all', spread the cases over them (`args.devices`).
    several = ordinals == "all" or (ordinals is not None and len(ordinals) > 1)
    args.device = ordinals[0] if ordinals and not several else env_device()
    args.devices = ordinals = ordinals if several else None
    options = _run_options(args)
    sample_pattern(args.samples)          # refused before any worker is started
    round_count(args.rounds)
    with contextlib.ExitStack() as held:
        early = _spawn_workers_early(args, ordinals, options, held)
        return _execute(args, out, ordinals, options, early, held)


def _execute(args, out: Output, ordinals, options, early: dict, held: contextlib.ExitStack) -> int:
    """`execute` once the GPUs' worker processes (if any) are on their way: read, check, then run."""
    specs = with_rounds(with_sample_pattern(load_specs(args.specs, args.kernel, args.shape,
                                                       args.allow_outside_sources), args.samples), args.rounds)
    timeline.mark("specs read", first=True)
    for option, given in (("--json", args.json), ("--resume", args.resume)):
        if given is not None and given.suffix.lower() == ".gz":
            raise UsageError(f"{given}: a compressed results file is for reading (show, compare, plot, tune "
                             f"--from); {'resume from' if option == '--resume' else 'write'} a plain one "
                             f"({'gunzip it first' if option == '--resume' else 'compress it afterwards'})",
                             field=option)
    if args.resume and len(specs) > 1:
        raise UsageError("--resume continues one run; give the one spec that wrote it", field="--resume")
    if args.resume and args.resume.suffix.lower() != ".jsonl":   # its results file goes beside it, as FILE.json
        raise UsageError(f"{args.resume}: --resume takes the case log a run writes beside its results (FILE.jsonl), "
                         "not the results file", field="--resume")
    if args.json and len(specs) > 1:
        stems = [spec.file_stem for spec in specs]
        twice = sorted({stem for stem in stems if stems.count(stem) > 1})
        if twice:
            raise UsageError(f"--json with several specs writes one file per spec, named by each spec's name, and "
                             f"{', '.join(twice)} names more than one", field="--json",
                             hint="give the specs different name: fields, or run them one at a time")
    previous: list = []
    if args.resume and not args.sanitize:   # read and checked before anything runs, or what goes beside it is said
        previous = read_log_to_resume(args.resume, specs[0].name, out)
    _check_outputs(args, specs)
    if args.no_baseline:
        specs = [dataclasses.replace(spec, baseline=False) for spec in specs]
    if args.sanitize:
        if args.lock_clocks is not None:
            raise UsageError("--sanitize does not time anything: it takes no --lock-clocks", field="--lock-clocks")
        return _sanitize(args, specs, out)
    if args.devices and args.in_process:   # --scheduler with --in-process is refused before anything starts
        raise UsageError("several GPUs (--device 0,1) and --scheduler run cases in worker processes: they do not "
                         "take --in-process", field="--device")
    lock_mhz = _lock_clock_value(args)
    gates = read_gates(args, out, specs)
    profiler = _profiler(args, out)
    early = _begin_early_workers(early, specs, previous)
    if not args.scheduler:   # the cluster's workers hold the GPUs: this machine needs none
        _check_before_asking_for_a_gpu(specs, out)
        timeline.mark("driver answered", first=True)
        if gates[2] is not None:
            check_stored_gpus(gates[2], specs, _run_gpu_models(args, ordinals), args.across_gpus,
                              args.baseline_results)
    locked = _lock_clocks(args, lock_mhz, ordinals, held)
    return _run_specs(args, specs, ordinals, options, previous, gates, profiler, locked, out, early)


def read_log_to_resume(path: Path, spec_name: str, out: Output) -> list:
    """The finished cases of the case log `path` that ``--resume`` continues, for the spec named `spec_name`.

    Refused (`UsageError`): a log without its header line (a run writes one before its first case, so such a file
    was not written by a run as it is, and may hold any spec's cases) and a log of another spec. What reading
    skipped (a torn last line, cut before the run appends) is said on stderr.
    """
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.lines import say
    from ..results.read import read_results

    loaded = read_results(path)
    made_by = loaded.header.get("spec")
    if not loaded.header:   # its cases would be taken as this spec's, and the new ones appended to them
        header = '{"type": "run", "spec": ' + json.dumps(spec_name) + ', ...}'
        raise UsageError(f"no header line: a case log a run writes begins with one ({header}) naming its spec, so "
                         f"this file is no log of a run of {spec_name!r} to continue", where=str(path),
                         field="--resume",
                         hint="resume the .jsonl a run of this spec wrote, or start a new run without --resume")
    if made_by != spec_name:   # its cases would be skipped, the new ones appended to it
        raise UsageError(f"this is the case log of spec {made_by!r}, not {spec_name!r}: resume it with the "
                         "spec that wrote it", where=str(path), field="--resume")
    for note in loaded.notes:
        say(out.errors, f"driver-gemm: {note}", "yellow")
    return loaded.run.cases


def _spawn_workers_early(args, ordinals, options, held: contextlib.ExitStack) -> dict:
    """The GPUs' worker processes, spawned before this process reads its specs; by GPU ordinal.

    A worker's start (interpreter, imports, context) then overlaps this process's imports, spec
    reading, cuInit and planning. Until `_begin_early_workers` says whether the specs want cuBLAS a
    child makes no session, so bad input just kills it. Only for GPUs named up front, with worker
    processes (not ``--in-process``, ``--scheduler``, ``--sanitize`` or ``--profile``) and a driver
    library present. The workers serve every spec of the command; once the results are written they
    are told to stop and left to exit on their own (`held`), and killed when the command fails.
    """
    if args.in_process or args.scheduler or args.sanitize or args.profile or ordinals == "all":
        return {}
    # looked up when the command runs, so that a test can stand in for the driver's presence and the workers
    from ..cuda.presence import driver_library_present
    from ..runners.worker import GpuWorker

    if not driver_library_present():
        return {}
    workers = {device: GpuWorker(device, options, want_cublas=None)
               for device in dict.fromkeys(ordinals or [args.device]) if device >= 0}

    def end(error_type, error, traceback) -> None:
        for worker in workers.values():
            if error_type is not None or worker.want_cublas is None:
                worker.cancel()           # nothing will run on it: no need to wait for its start-up
                worker.close()
            else:                         # told to stop once done, it closes its session and exits on its own
                worker.close(wait=False)
        timeline.mark("workers let go")

    held.push(end)
    for worker in workers.values():
        worker.start()
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..cuda.device import initialise_in_background

    initialise_in_background()
    return workers


def _run_options(args):
    """How the run goes beyond its specs (`RunOptions`), from the command line: its module is light enough to
    import before the workers are spawned."""
    try:   # not given: None, so that `_check_option_combinations` can tell a choice from the default
        choice = BaselineChoice.parse("best" if args.baseline is None else args.baseline)
    except ValueError as exc:
        raise UsageError(str(exc), field="--baseline") from None
    if args.timer == "cupti" and importlib.util.find_spec("cupti") is None:
        raise ToolMissingError("--timer cupti needs NVIDIA's cupti-python: pip install 'driver-gemm[cupti]' (or "
                               "time with --timer events)")
    return RunOptions(time=not args.no_timing, artifacts=args.artifacts, baseline_choice=choice,
                      timer=args.timer or "events")


def sample_pattern(text: str | None) -> str | None:
    """``--samples`` checked (`specfile.sample_patterns`), in the form settings record; None when not given."""
    if text is None:
        return None
    # lazy: the specfile package imports NumPy, which the workers' start must not wait for
    from ..specfile.sample_patterns import SamplePattern

    try:
        return SamplePattern.parse(text).label
    except ValueError as exc:
        raise UsageError(str(exc), field="--samples") from None


def with_sample_pattern(specs, text: str | None):
    """The specs with ``--samples`` in place of their own ``measure.samples``; a graph-mode spec takes flush
    only."""
    pattern = sample_pattern(text)
    if pattern is None:
        return specs
    for spec in specs:
        if spec.measure.mode == "graph" and pattern != "flush":
            raise UsageError(f"{spec.name} times in graph mode, which replays its launches back to back: it takes "
                             "flush only", field="--samples")
    return [spec.with_measure(samples=pattern) for spec in specs]


def round_count(text: str | None) -> int | None:
    """``--rounds`` checked: a whole number from 1 to the spec field's maximum; None when not given."""
    if text is None:
        return None
    from ..specfile.load import MAX_ROUNDS      # lazy, as in `sample_pattern`

    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_ROUNDS):
        raise UsageError(f"give a whole number of rounds from 1 to {MAX_ROUNDS}, not {text!r}", field="--rounds")
    return int(text)


def with_rounds(specs, text: str | None):
    """The specs with ``--rounds`` in place of their own ``measure.rounds``."""
    rounds = round_count(text)
    if rounds is None:
        return specs
    return [spec.with_measure(rounds=rounds) for spec in specs]


def record_options(result, options: RunOptions) -> None:
    """What of `options` a run's settings record: how the cuBLASLt rows chose their algorithm, and the timer."""
    result.settings.baseline_algorithm = options.baseline_choice.as_json()
    result.settings.timer = options.timer


def _begin_early_workers(workers: dict, specs, previous) -> dict:
    """Let the early workers make their sessions (with cuBLAS where a spec has a baseline); none when no case
    is left to run (a finished run resumed): those are ended here, before they make one."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..planning.cases import left_to_run

    if not any(left_to_run(spec, previous) for spec in specs):
        for worker in workers.values():
            worker.cancel()
        return {}
    want_cublas = any(spec.baseline for spec in specs)
    for worker in workers.values():
        worker.begin(want_cublas)
    return workers


def _run_specs(args, specs, ordinals, options, previous, gates, profiler, locked: dict[str, int], out: Output,
               early: dict | None = None) -> int:
    """`execute` once everything is checked (and the clocks locked): each spec run, written once and shown."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..planning.cases import cases_of
    from ..results.records import CaseLog, RunResult
    from ..results.text import path_text

    exit_code = EXIT_OK
    with contextlib.ExitStack() as claimed:   # default names taken; each let go if its run writes nothing
        for spec in specs:
            last = spec is specs[-1]          # the early workers serve no later spec: they may stop as soon as done
            result = RunResult(spec=spec.name, spec_path=path_text(spec.path) if spec.path else None)
            if locked:
                result.settings.locked_sm_clock_mhz = locked
            record_options(result, options)
            path = json_path(args.json, spec, len(specs))
            if args.resume:     # its results go beside the log it continues
                lines, path = args.resume, path or args.resume.with_suffix(".json")
            else:
                path = path or claimed.enter_context(claimed_default_json(spec.file_stem))
                lines = path.with_suffix(".jsonl")
                if lines.is_file() and lines.stat().st_size:     # --json names an earlier run's files
                    out.note(f"{lines}: the case log of an earlier run, replaced by this run's once its first case "
                             f"is done (--resume {lines} continues that run instead)", "yellow")
            progress = Progress(out.errors, len(cases_of(spec)) - len(previous), args.quiet)
            log = CaseLog(lines, fresh=not args.resume)
            finished = recorder(result, log, progress)
            interrupted = False
            try:
                with contextlib.ExitStack() as connection:
                    runner = _runner(args, ordinals, early or {}, last, connection)
                    runner.run(spec, options, on_start=progress.started, on_result=finished, result=result,
                               previous=previous)
                if profiler is not None:
                    _profile_cases(spec, result, profiler, args, out)
            except KeyboardInterrupt:
                interrupted = result.interrupted = True
            finally:
                progress.close()
                log.close()
                if result.cases or result.environment:     # written once, whatever happened
                    timeline.mark("writing results")
                    result.settings.timeline_s = timeline.marks()
                    result.write_json(path)
                    timeline.mark("results written")      # this and what follows are not in the file: the
                                                          # command's own timeline ends at its exit
                    remember_costs(result, out)
            if interrupted:
                if not log.has_header:   # no case finished: the log holds nothing --resume could continue
                    out.error("interrupted before any case finished: nothing to continue from; run again to start")
                else:
                    out.error(f"interrupted: {len(result.cases)} finished cases kept{_per_gpu(result)} in {lines} "
                              f"and {path}; continue with --resume {lines}")
                return EXIT_INTERRUPTED
            show_run(result, out)
            timeline.mark("tables shown")
            if profiler is not None:
                # lazy: a command imports this when it runs, after its GPUs' workers are spawned
                from ..report.tables import print_profile
                print_profile(result, out.console)
            out.note(f"results: {path} (case by case: {lines})")
            if not result.ok:
                exit_code = EXIT_FAILED
            if not check_run_gates(spec, result, gates, args.threshold or 0.0, out, args.across_gpus):
                exit_code = EXIT_FAILED
    return exit_code


def remember_costs(result, out: Output) -> None:
    """What each case took, kept for later runs on several GPUs to deal their work by (`runners.estimates`).

    Best effort, after the results are written: the figures only steer how work is dealt, so a failure to keep
    them (a cache that cannot be written, a record it cannot read) is one line, never the run's end.
    """
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..runners import estimates

    try:
        estimates.remember(result)
    except Exception as error:     # whatever it is, the results are written and the run's outcome stands
        out.error(f"warning: the cases' costs were not kept for later runs ({type(error).__name__}: {error})")


def json_path(given: Path | None, spec, spec_count: int) -> Path | None:
    """Where ``--json`` puts `spec`'s results: the file it names for one spec; for several, one file per spec
    beside it, its stem followed by the spec's name (``--json out/all.json`` with specs a and b writes
    ``out/all-a.json`` and ``out/all-b.json``, each with its ``.jsonl`` case log). None without ``--json``."""
    if given is None or spec_count <= 1:
        return given
    return given.with_name(f"{given.stem}-{spec.file_stem}{given.suffix or '.json'}")


def _check_before_asking_for_a_gpu(specs, out: Output) -> None:
    """On a machine without a GPU, a spec whose launches cannot work gets its spec errors, not only 'no GPU'.

    With a GPU the run goes on: cases refused by their launch checks are
    INVALID rows with the same messages, as `plan` shows them.
    """
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..cuda.device import device_count
    from ..planning.spec_plan import plan_spec

    try:
        device_count()
        return
    except NoGpuError:
        planned = [plan_spec(spec, "sm_90") for spec in specs]
        refused = [plan for spec_plan in planned for plan in spec_plan.plans if not plan.valid]
        # Each led by the spec's line of the kernel it kept out; once per message.
        failed = list({str(error): error for spec_plan in planned for error in spec_plan.compile_errors}.values())
        if not refused and not failed:
            raise
    for error in failed:           # as plan says them; a run on a GPU would record them as the cases' errors
        out.error(str(error))
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..report.tables import per_kernel_lines, problem_text

    for (label, text, is_problem), shapes in per_kernel_lines(refused).items():
        if is_problem:     # once per kernel, with the shapes it holds for
            out.error(problem_text(label, text, shapes))
    said = [f"{len(failed)} kernel build(s) failed"] if failed else []
    said += [f"{len(refused)} case(s) cannot launch as written"] if refused else []
    text = (f"{' and '.join(said)} (the lines above; `driver-gemm plan` shows every case); this machine has no "
            "GPU either")
    # One rule for every command: an INVALID case or a failed build is exit 1, as `plan` and a run on a GPU end.
    raise DriverGemmError(text)


def _scheduler_address(text: str) -> bool:
    """Whether `text` can be a Dask scheduler's address: a scheme (tcp://, tls://, inproc://, ucx://, ...) or none,
    then a place that starts with a host, no whitespace anywhere. Anything else Dask would only fail to reach,
    after its connect timeout."""
    scheme, separator, place = text.partition("://")
    if not separator:
        scheme, place = "", text
    return (bool(place) and place[0] not in ":/" and not any(character.isspace() for character in text)
            and (not separator or re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme) is not None))


def _scheduler_port(text: str) -> int | None:
    """The port of a scheduler's address (``HOST:PORT``, ``[IPv6]:PORT``, after any scheme), None where it names
    none."""
    place = text.partition("://")[2] or text
    found = re.fullmatch(r"(?:\[[^\]]*\]|[^:/\[\]]+):(\d+)", place)
    return int(found.group(1)) if found else None


def _check_option_combinations(args) -> None:
    """Options that cannot go together, or that nothing would read, refused before anything starts."""
    if args.scheduler is not None:
        if not _scheduler_address(args.scheduler):
            raise UsageError(f"give a Dask scheduler's address, such as tcp://HOST:8786 or HOST:8786, not "
                             f"{args.scheduler!r}", field="--scheduler")
        port = _scheduler_port(args.scheduler)
        if port is not None and not 1 <= port <= 65535:   # Dask would only time out trying it
            raise UsageError(f"{args.scheduler!r} names port {port}, and a port is 1 to 65535", field="--scheduler")
        if args.device is not None:
            raise UsageError("--scheduler runs the cases on the cluster's GPU workers, one GPU each: it takes no "
                             "--device", field="--scheduler")
        if args.in_process:
            raise UsageError("--scheduler runs cases in worker processes on the cluster: it takes no --in-process",
                             field="--scheduler")
    if args.threshold is not None and args.baseline_results is None:
        raise UsageError("the threshold of the comparison with stored results: give --baseline-results too, or "
                         "leave --threshold out", field="--threshold")
    if args.across_gpus and args.baseline_results is None:
        raise UsageError("it widens the comparison with stored results: give --baseline-results too, or leave "
                         "--across-gpus out", field="--across-gpus")
    turned_off = {"--no-timing": args.no_timing, "--no-baseline": args.no_baseline}
    # Each option that only shapes what a run times or its vendor rows, the options that turn those off, and why
    # it then does nothing.
    for option, given, offs, why in (
            ("--min-pct", bool(args.min_pct), ("--no-timing", "--no-baseline"),
             "a percentage of cuBLAS cannot be judged with {off} (it needs the kernel's time and cuBLAS's)"),
            ("--rounds", args.rounds is not None, ("--no-timing",),
             "rounds alternate the timing of a kernel and of its vendor row, and {off} times nothing"),
            ("--samples", args.samples is not None, ("--no-timing",),
             "the pattern run between timed samples does nothing with {off}, which times nothing"),
            ("--timer", args.timer is not None, ("--no-timing",),
             "what times a sample does nothing with {off}, which times nothing"),
            ("--baseline", args.baseline is not None, ("--no-baseline",),
             "the cuBLASLt rows' algorithm does nothing with {off}, which runs no cuBLAS row"),
            ("--baseline", args.baseline is not None, ("--no-timing",),
             "the cuBLASLt rows' algorithm is chosen by timing them, and {off} times nothing (the rows take the "
             "heuristic's first)")):
        off = next((name for name in offs if turned_off[name]), None)
        if given and off is not None:
            raise UsageError(f"{why.format(off=off)}: leave one of them out", field=option)


def _output_path(text: str | None, option: str, *, folder: bool) -> Path | None:
    """An output path as given on the command line, refused when it can name no file (or, `folder`, no folder).

    Read as text: a Path would turn "" into "." and drop the separator of "out/", which names a folder.
    """
    if text is None:
        return None
    if not folder:
        return output_path(text, option, "results.json")
    if not text.strip():
        raise UsageError(f"give the path of a folder, not {text!r}", field=option)
    return Path(text)


def _check_outputs(args, specs) -> None:
    """Every file and folder the run will write, checked before anything runs (see `check_output_file`)."""
    if args.json is not None and args.json.suffix.lower() == ".jsonl":
        raise UsageError(f"{args.json}: --json names the whole results file (.json); the case log is written "
                         "beside it under the same name with .jsonl", field="--json")
    for spec in specs:   # as `_run_specs` names them: a resumed run's results go beside its log
        path = json_path(args.json, spec, len(specs)) or (args.resume.with_suffix(".json") if args.resume
                                                          else default_json(spec.file_stem))
        check_output_file(path, "--json")
        outputs = [("--json", path)]
        if not args.sanitize and not args.resume:     # a log to resume is read (and checked) before anything
            check_output_file(path.with_suffix(".jsonl"), "--json")
            outputs.append(("the case log beside --json", path.with_suffix(".jsonl")))
        refuse_aliases(outputs, [*spec_inputs(spec), ("--baseline-results", args.baseline_results),
                                 ("--resume", args.resume)])
    if args.resume is not None and args.resume.is_file():   # appended to: a read-only log is said now (what is
        check_output_file(args.resume, "--resume")          # not a file is the reading's to say)
    check_output_folder(args.artifacts, "--artifacts")


def _lock_clock_value(args) -> str | int | None:
    """``--lock-clocks`` read before any GPU is asked for: MHz, ``"max"``, or None when not given."""
    if args.lock_clocks is None:
        return None
    if args.scheduler:
        raise UsageError("--lock-clocks locks this machine's GPUs; with --scheduler the GPUs are elsewhere",
                         field="--lock-clocks")
    value = args.lock_clocks
    if value == "max":
        return value
    if not value.isascii() or not value.isdigit() or not 0 < int(value) < 100_000:
        raise UsageError(f"give a clock in MHz (e.g. 1500) or 'max', not {value!r}", field="--lock-clocks")
    return int(value)


def _lock_clocks(args, value: str | int | None, ordinals, held: contextlib.ExitStack) -> dict[str, int]:
    """``--lock-clocks``: each GPU of the run locked for as long as `held` is (then reset); MHz by ordinal."""
    if value is None:
        return {}
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..cuda.device import device_count, read_properties
    from ..measure.clocks import lock_sm_clock

    present = device_count()
    devices = list(range(present)) if ordinals == "all" else ordinals or [args.device]
    missing = [ordinal for ordinal in devices if not 0 <= ordinal < present]
    if missing:
        raise UsageError(f"no GPU {missing[0]} on this machine ({present} found)",
                         field="--device")
    # A run ended by SIGTERM (`timeout`, a job scheduler) must still reset the clocks: it ends as Ctrl-C does.
    previous_handler = signal.signal(signal.SIGTERM, _interrupt)
    held.callback(signal.signal, signal.SIGTERM, previous_handler)
    return {str(ordinal): held.enter_context(lock_sm_clock(read_properties(ordinal).uuid, value))
            for ordinal in devices}


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _parse_devices(text: str | None) -> list[int] | str | None:
    """``--device``: a list of one or more ordinals, ``"all"``, or None when not given."""
    if text is None or text == "all":
        return text
    parts = text.split(",")
    if any(read_whole_number(part) is None for part in parts):   # int() would take '１' and '1_0' too
        raise UsageError(f"give a GPU ordinal, GPU ordinals such as 0,1, or 'all', not {text!r}", field="--device",
                         hint="ordinals are written with the digits 0-9")
    ordinals = [check_ordinal(int(part), "--device") for part in parts]
    if len(set(ordinals)) != len(ordinals):
        raise UsageError(f"each GPU once, not {text!r}", field="--device")
    return ordinals


def _profiler(args, out: Output) -> str | None:
    """ncu's path when --profile is asked for and ncu is here; without it one line says so and the run goes on."""
    if not args.profile:
        return None
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..measure.profile import find_ncu

    if args.devices or args.scheduler or args.sanitize:
        raise UsageError("--profile runs each case again in a child process on one GPU: it takes neither "
                         "several GPUs (--device 0,1), --scheduler nor --sanitize", field="--profile")
    try:
        return find_ncu()
    except ToolMissingError as missing:
        out.error(f"not profiling: {missing}")
        return None


def _profile_cases(spec, result, ncu: str, args, out: Output) -> None:
    """Each verified kernel case, once more under ncu in a child process; its counters go to ``case.profile``."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..session.profile_case import profile_case

    for case in result.cases:
        if case.is_baseline or not case.ok or case.not_run:
            continue
        case.profile = profile_case(spec, case, ncu, device=args.device)
        if not args.quiet and "error" in case.profile:
            out.error(f"profile of {case.kernel} at {case.shape.label}: {case.profile['error']}")


def _per_gpu(result) -> str:
    """How many of the finished cases each GPU ran, where more than one did."""
    counts: dict = {}
    for case in result.cases:
        ordinal = case.device.ordinal
        counts[ordinal] = counts.get(ordinal, 0) + 1
    if len(counts) < 2:
        return ""
    return " (" + ", ".join(f"GPU {ordinal}: {count}" for ordinal, count in sorted(counts.items(),
                                                                                     key=lambda item: str(item[0]))) + ")"


def _runner(args, ordinals, early: dict, last: bool, connection: contextlib.ExitStack):
    """The `Runner` of a spec, by the options: a Dask cluster's GPU workers (--scheduler, connected for as long as
    `connection` is), this machine's GPUs (--device 0,1 or all: one thread each) or one GPU; on the `early`
    workers where started, each told to stop when its GPU is done if this is the `last` spec (its teardown then
    overlaps the writing and the tables)."""
    if args.scheduler:
        # lazy: a command imports this when it runs, after its GPUs' workers are spawned
        from ..runners.distribute import DaskWorkers, gpu_cluster

        return DaskWorkers(*connection.enter_context(gpu_cluster(None, args.scheduler)))
    if args.devices:
        # lazy: a command imports this when it runs, after its GPUs' workers are spawned
        from ..cuda.device import device_count
        from ..runners.local_gpus import LocalGpus

        count = device_count()   # before any worker process starts: no GPU is one clear line
        devices = list(range(count)) if ordinals == "all" else ordinals
        missing = [d for d in devices if not 0 <= d < count]
        if missing:
            raise UsageError(f"no GPU {', '.join(map(str, missing))} on this machine (it has {count})",
                             field="--device")
        return LocalGpus(devices, gpu_workers=early, release_given=last)
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..runners.one_gpu import OneGpu
    from ..session.options import Placement

    return OneGpu(Placement(args.device, isolate=not args.in_process, gpu_worker=early.get(args.device)),
                  release_given=last)


def _sanitize(args, specs, out: Output) -> int:
    """Each selected case under compute-sanitizer (see `session.sanitize.sanitize_spec`)."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..session.sanitize import sanitize_spec

    if args.resume or args.devices or args.scheduler:
        raise UsageError("--sanitize runs each case in its own child process on one GPU: it takes neither "
                         "--resume, several GPUs (--device 0,1) nor --scheduler", field="--sanitize")

    def finished(case, findings: int) -> None:
        if not args.quiet:
            # lazy: a command imports this when it runs, after its GPUs' workers are spawned
            from ..report.tables import say
            say(out.errors, f"{case.kernel} {case.shape.label} {case.status} ({findings} {args.sanitize} findings)")

    exit_code = EXIT_OK
    for spec in specs:
        result = sanitize_spec(spec, args.sanitize, args.device, on_case=finished)
        with contextlib.ExitStack() as claimed:
            path = result.write_json(args.json or claimed.enter_context(
                claimed_default_json(f"{spec.file_stem}-{args.sanitize}")))
        show_run(result, out)
        out.note(f"results: {path}")
        if not result.ok:
            exit_code = EXIT_FAILED
    return exit_code
