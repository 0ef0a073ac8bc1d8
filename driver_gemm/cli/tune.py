"""``driver-gemm tune SPEC``: search a sweep within a budget, or read one (``--from``), and write a spec of the winners."""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from rich.markup import escape

from .common import (Output, add_source_option, check_environment, check_ordinal, check_output_file,
                     claimed_default_json, default_json, env_device, SPEC_HELP, load_specs, read_results_files,
                     refuse_aliases, results_argument, spec_argument, spec_inputs, whole_number)
from ..errors import DriverGemmError, NoGpuError, UsageError
from ..output_files import output_path
from ..results.text import path_text, printable
from ..status import Status
from .exit_codes import EXIT_OK

STRATEGY_NAMES = ("exhaustive", "random", "halving", "tpe")

_log = logging.getLogger(__name__)


def add_parser(commands, **common) -> None:
    tune = commands.add_parser("tune", help="search a sweep (params given as lists) for each kernel's best "
                                            "configuration per shape; write a spec of the winners", **common)
    tune.add_argument("spec", type=spec_argument, metavar="SPEC", help=f"a spec whose kernels sweep their params: {SPEC_HELP}")
    add_source_option(tune)
    tune.add_argument("--device", type=whole_number, default=None,
                      help="GPU ordinal (default $DRIVER_GEMM_DEVICE, or 0)")
    tune.add_argument("--kernel", "-k", action="append", default=[], help="tune only this kernel (repeatable)")
    tune.add_argument("--shape", "-s", action="append", default=[],
                      help="tune for this MxNxK shape instead of the spec's (repeatable)")
    tune.add_argument("--strategy", choices=STRATEGY_NAMES,
                      help="exhaustive (every valid configuration, fully measured; the default), random (seeded "
                           "order, fully measured, until the budget ends), halving (successive halving: short warm "
                           "screens of everything, full measurements of the best), tpe (Optuna's TPE sampler)")
    tune.add_argument("--budget", metavar="LIMIT",
                      help="how much the whole search may spend: seconds (300s, 5m, 1h), configurations (40), "
                           "or both (300s,40); shared out between the kernel families and shapes")
    tune.add_argument("--seed", type=whole_number, help="seed of the strategies that draw (default 0)")
    tune.add_argument("--fresh", action="store_true",
                      help="measure again what the tuning cache already knows (and record the new results)")
    # Output paths read as text (`read_output_paths`): a Path would turn "" into "." and drop a trailing separator.
    tune.add_argument("--json", help="results of every full measurement (default "
                                     "results/SPEC-tune-TIMESTAMP.json)")
    tune.add_argument("--out", help="the winners spec (default results/SPEC-winners.yaml)")
    tune.add_argument("--dispatch", metavar="SPEC.yaml",
                      help="also write a spec with one kernel per family and a dispatch: table of its winners "
                           "per shape (a run on any shape then picks the nearest winner)")
    tune.add_argument("--from", dest="recorded", type=results_argument, metavar="RESULTS",
                      help="pick the winners from recorded results (.json or .jsonl, e.g. of a tune stopped "
                           "before it finished) instead of running; no GPU needed")
    tune.add_argument("--across-gpus", action="store_true",
                      help="rank results of more than one GPU model together (else refused: a winner would be "
                           "what ran on the faster GPU)")
    tune.add_argument("--quiet", "-q", action="store_true", help="no progress lines")


def _recorded(spec, path: Path, out: Output):
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..planning.cases import cases_of
    from ..results.records import latest_rows
    from ..tune.winners import check_results_match

    result, = read_results_files([path], out)
    check_results_match(spec, result, path)
    repeated = len(result.cases) - len(latest_rows(result.cases))
    if repeated:      # pick_winners counts each case once, as its last row has it: said, as a case log's reader does
        out.note(f"{path}: {repeated} case(s) recorded again later in the file: each read as its last row", "yellow")
    wanted = {(case.label, case.shape.label) for case in cases_of(spec)}
    _warn_of_other_shapes(spec, result.cases, {label for label, _ in wanted}, {shape.label for shape in spec.shapes},
                          path)
    result.cases = [case for case in result.cases if (case.kernel, case.shape.label) in wanted]
    if not result.cases:
        raise UsageError(f"no case of {spec.name} (as selected) in these results", where=str(path))
    return result


def _warn_of_other_shapes(spec, cases, labels: set[str], shapes: set[str], path: Path) -> None:
    """Say which recorded shapes the spec (as selected) does not have, and how many cases of its rows are left out
    with them; a case of a label the spec lacks is said by `check_results_match`."""
    others: dict[str, int] = {}
    for case in cases:
        if case.kernel in labels and case.shape.label not in shapes:
            others[case.shape.label] = others.get(case.shape.label, 0) + 1
    if others:
        named = ", ".join(printable(label) for label in sorted(others)[:3]) + (", ..." if len(others) > 3 else "")
        _log.warning("%s: %d case(s) at %s left out: %s (as selected) has no such shape",
                     path_text(path), sum(others.values()), named, spec.name)


def _search(spec, args, out: Output, path: Path, strategy, budget):
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..tune.evaluate import TuneAborted
    from ..report.tables import case_line, say
    from ..results.records import CaseLog, RunResult
    from ..tune.search import tune_spec

    device = args.device if args.device is not None else env_device()
    result = RunResult(spec=spec.name, spec_path=path_text(spec.path) if spec.path else None)
    searches: list = []
    bar = LiveTune(out.errors, spec, budget) if not args.quiet and out.errors.is_terminal else None
    with CaseLog(path.with_suffix(".jsonl"), fresh=True) as log:
        def finished(case) -> None:
            log.write_header(result)
            log.append(case)
            if bar is not None:
                bar.update(case)
            elif not args.quiet:   # off a terminal: a line per case, for logs and pipes
                say(out.errors, case_line(case))
        try:
            result, searches = tune_spec(spec, strategy, budget, device=device, fresh=args.fresh, result=result,
                                         on_result=finished)
        except TuneAborted as aborted:
            out.error(str(aborted))
        finally:
            if bar is not None:
                bar.close()
            if result.cases:
                result.write_json(path)
    for search in searches:
        found = f"best {search.best.label} {search.best_ms:.4g} ms" if search.best else "nothing usable"
        out.note(f"{search.strategy} at {search.shape.label}: {search.configurations_tried} configuration(s), "
                 f"{len(search.full_measurements)} full measurement(s), {search.seconds:.1f} s, stopped: "
                 f"{search.stopped_by}; {found}")
    return result


class LiveTune:
    """A tune's progress bar on a terminal: configurations landed of those planned, failures, the time left and
    the best so far of the kernel and shape being searched (`tune.progress.TuneProgress`); failures that are
    not refusals ahead of the GPU print above it."""

    def __init__(self, errors, spec, budget, clock=time.monotonic):
        # rich.progress, and the planning and tune modules: only for the live bar of a tune on a terminal
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
        from ..planning.cases import cases_of
        from ..tune.progress import TuneProgress

        self.clock = clock
        self.state = TuneProgress(planned=len(cases_of(spec)), started=clock(), budget_s=budget.seconds)
        self.live = Progress(TextColumn("tune"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("{task.fields[failed]} failed"), TextColumn("ETA {task.fields[eta]}"),
                             TextColumn("best {task.fields[best]}"), console=errors, transient=True)
        self.task = self.live.add_task("tune", total=self.state.planned, failed=0, eta="-:--", best="-")
        self.live.start()

    def update(self, case) -> None:
        # the report's line and the progress text: imported with the bar's first update
        from ..report.tables import case_line, say
        from ..tune.progress import clock_text

        self.state.record(case)
        self.live.update(self.task, completed=self.state.done, failed=self.state.failed,
                         eta=clock_text(self.state.eta_s(self.clock())), best=escape(self.state.best_text()),
                         refresh=True)
        if not case.ok and case.status != Status.INVALID:
            say(self.live.console, case_line(case))

    def close(self) -> None:
        self.live.stop()


def _check_before_asking_for_a_gpu(spec) -> None:
    """Without a GPU, a sweep none of whose configurations can launch or build is said to be so, not 'no GPU'.

    Some configurations of a sweep being refused is normal (tune skips them);
    all of them is a spec to fix before any GPU can help.
    """
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..cuda.device import device_count
    from ..planning.build import offline_problems
    from ..planning.cases import cases_of

    try:
        device_count()
        return
    except NoGpuError:
        refused, failed = offline_problems(spec)
        wanted = {(case.label, case.shape.label) for case in cases_of(spec) if not case.is_baseline}
        unlaunchable = {(plan.kernel.label, plan.shape.label) for plan in refused} & wanted
        unbuilt = {key for key in wanted if key[0] in failed} - unlaunchable
        if not wanted or unlaunchable | unbuilt != wanted:
            raise
    first = refused[0].problems[0] if refused else next(iter(failed.values()))
    # Exit 1, as for a sweep none of whose configurations ran on a GPU: INVALID cases and failed builds alike.
    raise DriverGemmError(f"none of the {len(wanted)} kernel case(s) of the sweep can run ({len(unlaunchable)} cannot launch "
                f"as written, {len(unbuilt)} do not build; `driver-gemm plan` shows each); the first: {first}; "
                "this machine has no GPU either")


def _check_outputs(args, spec) -> None:
    """The files tune will write, checked before it searches or picks anything (a late failure loses the work)."""
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..tune.winners import default_winners_path

    if not args.recorded:
        json_path = args.json or default_json(f"{spec.file_stem}-tune")
        if json_path.suffix.lower() in (".gz", ".jsonl"):
            raise UsageError(f"{json_path}: --json names the whole results file (.json); its case log is written "
                             "beside it as .jsonl, and either may be compressed afterwards", field="--json")
        check_output_file(json_path, "--json")
        check_output_file(json_path.with_suffix(".jsonl"), "--json")
    check_output_file(args.out or default_winners_path(spec), "--out")
    check_output_file(args.dispatch, "--dispatch")
    for option, written in (("--out", args.out), ("--dispatch", args.dispatch)):
        if written is not None and written.suffix.lower() == ".gz":
            # a spec is read as plain YAML: a .gz name would be taken for gzip data by every reader of it
            raise UsageError(f"{written}: {option} names a spec, written as plain YAML; a .gz name is for a "
                             "compressed file", field=option)
    outputs = [("--json", json_path), ("the case log beside --json", json_path.with_suffix(".jsonl"))] \
        if not args.recorded else []
    refuse_aliases([*outputs, ("--out", args.out or default_winners_path(spec)), ("--dispatch", args.dispatch)],
                   [*spec_inputs(spec), ("--from", args.recorded)])


def read_output_paths(args) -> None:
    """``--json``, ``--out`` and ``--dispatch`` as paths, each refused by name where its text can name no file (empty,
    or ending in a separator: see `output_files.output_path`)."""
    for option, attribute, example in (("--json", "json", "results.json"), ("--out", "out", "winners.yaml"),
                                       ("--dispatch", "dispatch", "dispatch.yaml")):
        text = getattr(args, attribute)
        setattr(args, attribute, None if text is None else output_path(text, option, example))


def _refuse_search_options_with_recorded(args) -> None:
    """With ``--from`` nothing is searched or measured: an option of the search would be silently ignored."""
    if not args.recorded:
        return
    given = [option for option, value in (("--strategy", args.strategy is not None),
                                          ("--budget", args.budget is not None),
                                          ("--seed", args.seed is not None), ("--fresh", args.fresh),
                                          ("--device", args.device is not None),
                                          ("--json", args.json is not None)) if value]
    if given:
        what = ("writes the results of a search, and --from only reads recorded ones" if given[0] == "--json"
                else "is an option of the search on a GPU, and --from only picks from recorded results")
        raise UsageError(f"{given[0]} {what}: give one or the other", field="--from")


def execute(args, out: Output) -> int:
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..planning.cases import cases_of
    from ..report.tables import print_tune
    from ..tune.strategies import Budget, BudgetError, make_strategy, parse_budget
    from ..tune.winners import default_winners_path, dispatch_spec, no_winner, pick_winners, winners_spec

    _refuse_search_options_with_recorded(args)
    read_output_paths(args)
    check_environment()
    # None: not given (so that --from can tell what was asked of a search); the search's defaults from here on
    args.strategy = args.strategy or "exhaustive"
    args.seed = 0 if args.seed is None else args.seed
    spec, = load_specs([args.spec], args.kernel, args.shape, args.allow_outside_sources)
    if not 0 <= args.seed < 1 << 63:
        raise UsageError(f"a seed is a whole number from 0 to 2**63 - 1, got {args.seed}", field="--seed")
    if args.budget is not None and (not args.budget.isascii() or "_" in args.budget):
        # parse_budget reads its numbers with float() and int(), which also take '５m' and '1_0'
        raise UsageError(f"a budget is written with the digits 0-9 (300s, 5m, 40), got {args.budget!r}",
                         field="--budget")
    try:      # refused before any GPU work, as a mistake on the command line
        strategy = make_strategy(args.strategy, seed=args.seed)
        budget = parse_budget(args.budget) if args.budget is not None else Budget()
    except BudgetError as error:
        raise UsageError(str(error), field="--budget" if args.budget is not None else "--strategy") from None
    _check_outputs(args, spec)
    if args.recorded:
        path = args.recorded
        result = _recorded(spec, path, out)
    else:
        args.device = check_ordinal(args.device, "--device") if args.device is not None else env_device()
        _check_before_asking_for_a_gpu(spec)
        with contextlib.ExitStack() as claimed:   # a default name let go if the search writes nothing
            path = args.json or claimed.enter_context(claimed_default_json(f"{spec.file_stem}-tune"))
            result = _search(spec, args, out, path, strategy, budget)
    picks = pick_winners(result, across_gpus=args.across_gpus, where=str(path))
    print_tune(picks, f"{spec.name}: best configuration per kernel and shape", out.console)
    if not any(pick.best for pick in picks):
        # the results are sound; their cases failed (exit 1, as a run's), and the message names the results
        raise no_winner(spec, picks, str(path))
    winners = winners_spec(spec, picks, args.out or default_winners_path(spec))
    measured = {(case.kernel, case.shape.label) for case in result.cases}
    untried = sum((case.label, case.shape.label) not in measured for case in cases_of(spec) if not case.is_baseline)
    if untried > 0:
        out.note(f"{untried} configuration(s) of the sweep have no result here: the winners are of what was tried",
                 "yellow")
    out.note(f"results: {path}; winners: {winners}")
    if args.dispatch:
        out.note(f"dispatch spec: {dispatch_spec(spec, picks, args.dispatch)}")
    return EXIT_OK
