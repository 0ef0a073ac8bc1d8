"""Pick each kernel's best configuration per shape from a sweep, and write a spec of the winners.

A sweep is a spec whose kernels give lists for their template parameters;
configurations that break the kernel's `require:` constraints never launch.
For each kernel and shape, the passing configurations are ranked by median
time. The best wins clearly only when its interquartile range does not
overlap the runner-up's; otherwise the two are a tie, and the report says so.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import (DriverGemmError, FilePath, SpecError, UsageError, WrongArgumentType, WrongArgumentValue,
                      flag_argument, path_argument)
from ..output_files import refuse_aliases, write_file
from ..results.text import path_text, printable
from ..planning.spec_files import spec_inputs
from ..report.comparison import SAME, judge
from ..results.read import ResultsFile, read_results
from ..results.records import CaseResult, RunResult, latest_rows
from ..specfile.kernels import (INCLUDE_OPTION, INCLUDE_PATTERN, PRE_INCLUDE_OPTION, PRE_INCLUDE_PATTERN,
                                joined_options)
from ..specfile.load import load_spec, parse_spec
from ..specfile.model import KernelSpec, Spec
from ..specfile.project import project_root
from ..status import Status
from .dispatch_table import build_dispatch, dispatch_document

RESULTS_DIR = Path("results")      # untracked (.gitignore): where a winners spec goes unless --out says otherwise
_log = logging.getLogger(__name__)


class NoWinnerError(DriverGemmError):
    """No configuration passed with a time (exit 1, as for a run whose cases failed): there is no winner to write."""


class UnreadableSpecError(DriverGemmError):
    """The spec a winners or dispatch file would hold does not read back (exit 1): nothing is written."""


class MixedGpusError(SpecError):
    """Results of more than one GPU model, ranked together only when asked (``--across-gpus``)."""


@dataclass
class Pick:
    """The outcome for one kernel on one shape."""

    kernel: str                    # the kernel's name (its configurations differ in params)
    shape: str
    best: CaseResult | None
    runner_up: CaseResult | None
    tried: int                     # configurations run (passing or not)
    passed: int
    invalid: int
    margin: float | None = None    # runner-up median / best median - 1
    tie: bool = False
    untimed: int = 0               # configurations that passed with no time (a verify-only run): none can win


def pick_winners(run: RunResult | ResultsFile | str | os.PathLike, *, across_gpus: bool = False,
                 where: FilePath | None = None) -> list[Pick]:
    """Per kernel name and shape, the fastest passing configuration and how clearly it won.

    `run` is a `RunResult` (from `tune_spec`, `run_spec` or `load_results`), a `ResultsFile` (from
    `read_results`: its run), or the path of a results file (read with `read_results`). Times of more
    than one GPU model are a `MixedGpusError` (said at `where`, the results' file; by default `run` where it is
    a path) unless `across_gpus` (as ``compare --across-gpus``).
    """
    # "no" is truthy: it would rank configurations timed on different GPU models against each other
    across_gpus = flag_argument("pick_winners", "across_gpus", across_gpus)
    if where is not None and not isinstance(where, str):   # it becomes an error's text: said now, not then
        if not isinstance(where, os.PathLike):
            raise WrongArgumentType(f"pick_winners: where is the results' file (its path, or text) that an error "
                                    f"names, or None, got {where!r:.40} ({type(where).__name__})")
        where = path_argument("pick_winners", "where", where)
    if where is None and isinstance(run, (str, os.PathLike)):
        where = path_argument("pick_winners", "run", run)   # the file the runs are read from
    run = _run_argument(run)
    if not across_gpus:
        check_one_gpu(run, where)
    groups: dict[tuple[str, str], list[CaseResult]] = {}
    # a case recorded twice (a .json file's repeated row, a search that measured it again) is one configuration, as
    # its last row has it, as a case log is read: twice, it would tie with itself and hide the true runner-up
    for case in latest_rows(run.cases):
        if not case.is_baseline:
            groups.setdefault((case.name, case.shape.label), []).append(case)
    picks = []
    for (name, shape), cases in groups.items():
        timed = sorted((c for c in cases if c.ok and c.timing), key=lambda c: c.timing.median_ms)
        pick = Pick(name, shape, timed[0] if timed else None, timed[1] if len(timed) > 1 else None,
                    tried=len(cases), passed=len(timed), invalid=sum(c.status == Status.INVALID for c in cases),
                    untimed=sum(c.ok and not c.timing for c in cases))
        if pick.best and pick.runner_up:
            pick.margin = pick.runner_up.timing.median_ms / pick.best.timing.median_ms - 1
            pick.tie = judge(pick.best, pick.runner_up)[0] == SAME
        picks.append(pick)
    return picks


def check_one_gpu(run: RunResult, where: str | None = None) -> None:
    """`MixedGpusError` where the timed kernel rows of `run` come from more than one GPU model: a winner would
    be the configuration that ran on the faster GPU (the rule of ``compare``, which keys cases by GPU name)."""
    models = sorted({case.device.name for case in run.cases
                     if not case.is_baseline and case.ok and case.timing and case.device.name})
    if len(models) > 1:
        raise MixedGpusError(f"these results hold times of {len(models)} GPU models ({', '.join(models)}): ranked "
                             "together, a winner is what ran on the faster GPU", where=where,
                             hint="pick from one GPU's results, or pass --across-gpus (across_gpus=True) to rank "
                                  "them together")


def no_winner(spec: Spec, picks: list[Pick], results: str | None = None) -> NoWinnerError:
    """The error for picks with no winner: nothing passed, or what passed was not timed (a verify-only run)."""
    untimed = sum(pick.untimed for pick in picks)
    where = f"{results}: " if results else ""
    if untimed:
        return NoWinnerError(f"{where}{untimed} configuration(s) of {spec.name} passed, but none was timed: run "
                             "with timing (a verify-only run has no times to rank)")
    return NoWinnerError(f"{where}no configuration of {spec.name} passed: there is no winner to write")


def _run_argument(run) -> RunResult:
    """`pick_winners`' run: a ResultsFile and a path are taken too, since they hold exactly one run."""
    if isinstance(run, RunResult):
        return run
    if isinstance(run, ResultsFile):
        return run.run
    if isinstance(run, (str, os.PathLike)):
        return read_results(os.fspath(run)).run
    raise WrongArgumentType(f"pick_winners: run is a RunResult (from tune_spec or load_results), a ResultsFile "
                            f"(from read_results) or the path of a results file, got {type(run).__name__}")


def _spec_argument(function: str, spec) -> Spec:
    """`spec` as a `Spec`: one already, or read from its path (as `plan_spec` reads one)."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return load_spec(os.fspath(spec))
    raise WrongArgumentType(f"{function}: spec is a Spec (from load_spec or spec_from_dict) or the path of a spec "
                            f"file, got {type(spec).__name__}")


def _output_argument(function: str, spec: Spec, path) -> Path:
    """`path` as the spec file to write: never one of the files `spec` reads (`UsageError`, as the CLI's ``--out``
    says it), and a plain YAML file, not a ``.gz`` name its readers would take for gzip data (`WrongArgumentValue`)."""
    path = Path(path_argument(function, "path", path))
    if path.suffix.lower() == ".gz":
        raise WrongArgumentValue(f"{function}: {path}: a .gz name is for a compressed file; write the spec as plain "
                                 "YAML")
    refuse_aliases([("path", path)], spec_inputs(spec))
    return path


def _picks_argument(function: str, picks) -> list[Pick]:
    """`picks` as a list of `Pick`s, else `WrongArgumentType` saying they come from `pick_winners`."""
    if isinstance(picks, (str, bytes, RunResult, ResultsFile)) or not isinstance(picks, Iterable):
        raise WrongArgumentType(f"{function}: picks is the list pick_winners(run) returns, got "
                                f"{type(picks).__name__}")
    picks = list(picks)
    for pick in picks:
        if not isinstance(pick, Pick):
            raise WrongArgumentType(f"{function}: picks is the list pick_winners(run) returns, got a "
                                    f"{type(pick).__name__} in it")
    return picks


def _configurations_of(spec: Spec) -> dict[str, KernelSpec]:
    """Every kernel configuration a run of `spec` can record, by label: its kernels' and, where a ``dispatch:``
    table picks params (or a member kernel) per shape, those it picks: a row of a dispatched run is one of these."""
    # lazy: the planning package is not needed to pick from a sweep without a table
    from ..planning.cases import kernels_of

    found = {kernel.label: kernel for kernel in spec.kernels}
    if spec.dispatch:
        found.update((kernel.label, kernel) for kernel in kernels_of(spec))
    return found


def _check_picks_of(function: str, spec: Spec, picks: list[Pick]) -> None:
    """A `WrongArgumentValue` naming the first winner that is no kernel configuration of `spec`: picks of another sweep
    would otherwise fail with a KeyError while the file is written."""
    labels = set(_configurations_of(spec))
    for pick in picks:
        if pick.best is not None and pick.best.kernel not in labels:
            raise WrongArgumentValue(f"{function}: spec {spec.name} has no kernel {pick.best.kernel} (the winner of "
                                     f"{pick.kernel} at {pick.shape}): pick the winners from a run of this spec")


def _entry(kernel: KernelSpec, name: str, relative_to: Path) -> dict:
    """A kernel entry of a spec file that describes `kernel` with its parameters fixed.

    It is the entry the sweep's spec wrote (every field it had: signature and
    tensor maps, cluster, types, layouts, leading dimensions, batch, scales,
    require, options, gates), with `name`, the configuration's params, and
    its paths (source or binary, builders and fill files) made relative to the winners spec's folder.
    """
    if kernel.entry is None:
        raise SpecError(f"{kernel.label} was built in code, not read from a spec entry: a winners spec copies "
                        "the entry the kernel was read from", where=kernel.where or None)
    entry = copy.deepcopy(dict(kernel.entry))
    entry["name"] = name
    entry["params"] = {name: value for name, value in kernel.params.items() if name not in kernel.launch_values}
    if kernel.launch_values:
        entry["values"] = {name: kernel.params[name] for name in kernel.params if name in kernel.launch_values}
    if not entry["params"]:
        del entry["params"]
    if "source" in entry:
        entry["source"] = os.path.relpath(kernel.source, relative_to)
    if "binary" in entry and kernel.binary is not None:
        entry["binary"] = os.path.relpath(kernel.binary, relative_to)
    if isinstance(entry.get("options"), list):
        entry["options"] = _rebased_options(entry["options"], kernel, relative_to)
    if isinstance(entry.get("signature"), list):
        _rebase_signature_files(entry["signature"], kernel, relative_to)
    return entry


def _rebased_options(written: list, kernel: KernelSpec, relative_to: Path) -> list:
    """The entry's options with each relative include folder and project header (``-I inc``,
    ``--pre-include=prelude.h``), which the spec reader took relative to the sweep's folder, made relative to
    `relative_to`: the folder and file the kernel was compiled with. Others stay as written."""
    joined = joined_options([str(option) for option in written])
    if len(joined) != len(kernel.options):      # not the options the kernel was read with: left as they are
        return written
    out = []
    for option, resolved in zip(joined, kernel.options):
        text = option.strip()
        include = INCLUDE_PATTERN.fullmatch(text)
        pre = PRE_INCLUDE_PATTERN.fullmatch(text)
        if include and resolved.startswith(INCLUDE_OPTION) and not Path(include.group(1).strip()).is_absolute():
            text = f"-I{os.path.relpath(resolved[len(INCLUDE_OPTION):], relative_to)}"
        elif pre and resolved.startswith(PRE_INCLUDE_OPTION) and not Path(pre.group(1).strip()).is_absolute() \
                and resolved != text:      # a project header found by its relative path, not a compiler's own
            text = f"{PRE_INCLUDE_OPTION}{os.path.relpath(resolved[len(PRE_INCLUDE_OPTION):], relative_to)}"
        else:
            text = option
        out.append(text)
    return out


def _rebase_signature_files(items: list, kernel: KernelSpec, relative_to: Path) -> None:
    """The files the signature names (a struct's builder, a buffer's fill file or builder), in place, relative to the
    winners spec's folder: each argument by name (names are unique across a signature), its structs' fields included."""
    builders = {argument.name: argument.builder for argument in kernel.signature if argument.builder is not None}
    fills = {argument.name: argument.buffer for _, argument in kernel.device_buffers()
             if argument.buffer is not None and argument.buffer.file is not None
             and argument.buffer.file_folder is not None}
    built = {argument.name: argument.buffer.builder for _, argument in kernel.device_buffers()
             if argument.buffer is not None and argument.buffer.builder is not None}

    def rebased(builder) -> str:
        return f"{os.path.relpath(builder.path, relative_to)}:{builder.function}"

    def walk(items: list) -> None:
        for item in items:
            if not isinstance(item, dict):
                continue
            name = item.get("name")
            if name in builders and "builder" in item:
                item["builder"] = rebased(builders[name])
            fill = item.get("fill")
            if name in fills and isinstance(fill, dict) and "file" in fill:
                buffer = fills[name]
                # the name may hold {M}, {N}...: only the folder it is read from changes
                item["fill"] = {**fill, "file": os.path.relpath(Path(buffer.file_folder) / buffer.file, relative_to)}
            if name in built and isinstance(fill, dict) and "builder" in fill:
                item["fill"] = {**fill, "builder": rebased(built[name])}
            quantized = item.get("quantized")
            pack = quantized.get("pack") if isinstance(quantized, dict) else None
            if name in built and isinstance(pack, dict) and "builder" in pack:
                item["quantized"] = {**quantized, "pack": {**pack, "builder": rebased(built[name])}}
            if isinstance(item.get("fields"), list):
                walk(item["fields"])

    walk(items)


def _leave_needed(spec: Spec, kernels: Iterable[KernelSpec], path: Path) -> str:
    """Where the kernels' files lie outside the project of a spec written at `path`, a comment line saying that
    `plan` and `run` of it need the user's leave (and a logged warning naming the first file); else "".

    Its paths are relative to its own folder, so they still name the files;
    but the spec reader takes only files inside the written spec's project
    (`specfile.project.project_root`), as it does for any spec. A winners
    spec written outside the kernels' project (``tune`` run from elsewhere,
    its default ``results/`` under the current folder) is such a file.
    """
    root = project_root(path.parent)
    unique = {kernel.label: kernel for kernel in kernels}
    chosen = dataclasses.replace(spec, path=None, kernels=tuple(unique.values()))
    outside = [file for _, file in spec_inputs(chosen) if not Path(file).resolve().is_relative_to(root)]
    if not outside:
        return ""
    _log.warning("%s names files outside its project (%s), %s the first: plan and run it with "
                 "--allow-outside-sources (allow_outside_sources=True), or write it inside the project that holds "
                 "its kernels", path, root, outside[0])
    return "# its kernels' files lie outside this file's project: plan and run it with --allow-outside-sources\n"


def settings_of(spec: Spec) -> dict:
    """The top-level fields of `spec` that made its measurements, as a spec file writes them."""
    verify = spec.verify
    # A tolerance the spec left to the kernel's types stays left out, so the winners get their own too.
    tolerance = {key: value for key, value in (("rel", verify.rel_tolerance), ("abs", verify.abs_tolerance))
                 if value is not None}
    out = {
        "measure": dataclasses.asdict(spec.measure),
        "verify": {**({"tolerance": tolerance["rel"] if list(tolerance) == ["rel"] else tolerance}
                      if tolerance else {}),
                   "tf32_tolerance": verify.tf32_rel_tolerance, "seed": verify.seed,
                   "reference": verify.reference, "cpu_reference_max_gflop": verify.cpu_reference_max_gflop},
        "baseline": spec.baseline,
        "scalars": dict(spec.scalars),
    }
    types = getattr(spec, "types", None)
    if types:
        out["types"] = types if isinstance(types, (str, list, dict)) else dict(types)
    return out


def default_winners_path(spec: Spec, results_dir: str | Path = RESULTS_DIR) -> Path:
    """Where ``tune`` writes the winners without ``--out``: under ``results/``, never into the tracked tree."""
    return Path(results_dir) / f"{spec.name}-winners.yaml"


def check_results_match(spec: Spec, run: RunResult, results_path: str | Path) -> None:
    """Refuse recorded results that are not of `spec` (``tune --from``), with a message naming both.

    They must name the same spec (by name, or by path when both record one)
    and hold at least one case of a kernel configuration of the spec; without
    this, picks from another sweep would write a winners spec of ``kernels: []``.
    """
    where = str(results_path)
    if run.spec and run.spec != spec.name:
        raise SpecError(f"these results are of spec {run.spec!r}, not {spec.name!r}: pick winners with the spec "
                        f"that made them", where=where)
    if run.spec_path and spec.path and Path(run.spec_path).name != Path(path_text(spec.path)).name:
        raise SpecError(f"these results were made from {run.spec_path}, not {spec.path}", where=where)
    configurations = _configurations_of(spec)
    if not any(case.kernel in configurations for case in run.cases):
        raise SpecError(f"no case of these results is a kernel configuration of {spec.name} "
                        f"(as selected); nothing to pick from", where=where)
    # A winner is written out by its label: a case whose params are not those its label names (an edited or merged
    # file) would hand its time to a configuration it was not.
    in_case_log = Path(where).name.lower().removesuffix(".gz").endswith(".jsonl")
    others: dict[str, int] = {}
    for index, case in enumerate(run.cases):
        if case.is_baseline:
            continue
        configuration = configurations.get(case.kernel)
        if configuration is None:
            others[case.kernel] = others.get(case.kernel, 0) + 1
            continue
        wanted = dict(configuration.params)
        if case.params and _params_text(case.params) != _params_text(wanted):   # none recorded: nothing to contradict
            differ = sorted(set(wanted) ^ set(case.params)) or \
                [name for name in wanted if _params_text(wanted[name]) != _params_text(case.params[name])]
            said = ", ".join(f"{name} = {_params_text(case.params[name])}" if name in case.params else
                             f"{name} missing" for name in differ[:3])
            raise UsageError(f"a case of {case.kernel} at {case.shape.label} records params {said}, which are not "
                             f"those its kernel label names ({_params_text(wanted)}): the file was edited or merged, "
                             "and its times cannot be told apart by configuration", where=where,
                             field=None if in_case_log else f"cases[{index}].params",
                             hint="pick the winners from the results as the run wrote them")
    if others:
        named = ", ".join(printable(label) for label in sorted(others)[:3]) + (", ..." if len(others) > 3 else "")
        _log.warning("%s: %d case(s) of %s left out: no kernel configuration of %s (as selected) has that label",
                     where, sum(others.values()), named, spec.name)


def _params_text(value) -> str:
    """Params (or one value) as JSON text: compared so, true is not 1 and "64" is not 64."""
    return json.dumps(value, sort_keys=True, default=str)


def winners_spec(spec: Spec | FilePath, picks: list[Pick], path: FilePath) -> Path:
    """Write a spec with one kernel per winning configuration, on the shapes of the sweep.

    A kernel whose best configuration is the same on every shape keeps its
    name; otherwise each winning configuration is named ``NAME-1``, ``NAME-2``...
    (skipping names the sweep's kernels have) and a comment at the top says
    which shape each one won. `spec` is the sweep's `Spec` or its path;
    `picks` are `pick_winners`' of a run of it (a winner the spec does not
    have is a `WrongArgumentValue` naming it). No winner at all is a `NoWinnerError`;
    a spec that would not read back, an `UnreadableSpecError`, and nothing is written.
    """
    spec = _spec_argument("winners_spec", spec)
    picks = _picks_argument("winners_spec", picks)
    path = _output_argument("winners_spec", spec, path)
    _check_picks_of("winners_spec", spec, picks)
    by_label = _configurations_of(spec)
    winning = list(dict.fromkeys(p.best.kernel for p in picks if p.best is not None))
    if not winning:
        raise no_winner(spec, picks)
    per_name: dict[str, list[str]] = {}
    for label in winning:
        per_name.setdefault(by_label[label].name, []).append(label)
    # names that stay: a kernel with one winner keeps its own, and no renamed winner may take one of the sweep's
    taken = {kernel.name for kernel in by_label.values()} | set(per_name)
    names: dict[str, str] = {}
    for name, labels in per_name.items():
        if len(labels) == 1:
            names[labels[0]] = name
            continue
        for label in labels:
            names[label] = _free_name(name, taken)
            taken.add(names[label])
    document = {
        "name": f"{spec.name}-winners",
        "description": f"the fastest passing configuration of each kernel per shape, from a sweep of {spec.name}",
        "shapes": [[s.M, s.N, s.K] for s in spec.shapes],
        **settings_of(spec),
        "kernels": [_entry(by_label[label], names[label], path.parent.resolve()) for label in winning],
    }
    lines = [_leave_needed(spec, (by_label[label] for label in winning), path)]
    for p in picks:
        outcome = (f"{names[p.best.kernel]} = {p.best.kernel}" if p.best is not None else
                   "passed, but none was timed" if p.untimed else "nothing passed")
        if p.margin is not None:
            outcome += f", {'a tie with' if p.tie else 'ahead of'} the runner-up ({100 * p.margin:+.1f}%)"
        lines.append(f"# {p.kernel} at {p.shape}: {outcome}\n")
    return _write_readable(path, "".join(lines) + yaml.safe_dump(document, sort_keys=False))


def _free_name(name: str, taken: set[str]) -> str:
    """``NAME-1``, ``NAME-2``...: the first not in `taken` (another kernel of that name would join its family)."""
    number = 1
    while f"{name}-{number}" in taken:
        number += 1
    return f"{name}-{number}"


def _write_readable(path: Path, text: str) -> Path:
    """Write `text` at `path` only if it reads back as a spec there (``plan`` and ``run`` would read it so): a
    file that means nothing to them is an `UnreadableSpecError` naming why, and is not written."""
    try:
        # its files may lie outside its project: that is said in the file itself (`_leave_needed`), not refused
        parse_spec(text, path, allow_outside_sources=True)
    except SpecError as error:
        raise UnreadableSpecError(f"{path}: the spec tune would write does not read back, so it is not written: "
                                  f"{error}") from None
    return write_file(path, text)


def _entry_key(kernel: KernelSpec) -> tuple:
    """Which kernel entry of the spec `kernel` was read from: configurations of one entry differ only in params,
    and share the entry as written (its field path names it by its name, which two entries may share)."""
    return kernel.name, json.dumps(kernel.entry, sort_keys=True, default=str)


def dispatch_spec(spec: Spec, picks: list[Pick], path: str | Path) -> Path:
    """Write a spec with one kernel per family and a ``dispatch:`` table choosing its params per shape.

    The family's own kernel entry keeps the family's name and carries the
    parameters of the first shape it won, or its own where it won none (so the
    file reads as a whole kernel); each table entry's params are those of the
    configuration its winner's label names. `driver_gemm.tune.dispatch_table` says
    how a run picks the parameters for any other shape. Where a family's winners
    come from more than one kernel entry (two entries of one name, or a table's
    member kernels), each other entry is written as a member kernel under its
    own name (``NAME-1``... where that is taken) that the table's entries name
    (``kernel:``), so that each shape runs the function, source and launch that
    won there. The table has an entry per shape with a winner, and no ``when:``:
    a ``dispatch:`` table of `spec` is not carried over, which a warning and a
    comment at the top of the file say where it had rules or other shapes. A
    spec that would not read back (members that compute another GEMM than their
    family, say) is an `UnreadableSpecError`, and nothing is written.
    """
    spec = _spec_argument("dispatch_spec", spec)
    picks = _picks_argument("dispatch_spec", picks)
    path = _output_argument("dispatch_spec", spec, path)
    _check_picks_of("dispatch_spec", spec, picks)
    by_label = _configurations_of(spec)
    tables = build_dispatch(picks, by_label)
    if not tables:
        raise no_winner(spec, picks)
    taken = set(tables)       # the names of the written spec's kernels, as they are given out
    written: dict[str, KernelSpec] = {}
    for name, table in tables.items():
        own = _family_kernel(spec, name, [by_label[entry.label] for entry in table.entries])
        member_of: dict[tuple, str] = {_entry_key(own): name}      # kernel entry -> the name it is written under
        written[name] = own
        entries = []
        for entry in table.entries:
            kernel = by_label[entry.label]
            key = _entry_key(kernel)
            if key not in member_of:
                member_of[key] = kernel.name if kernel.name not in taken else _free_name(kernel.name, taken)
                taken.add(member_of[key])
                written[member_of[key]] = kernel
            member = member_of[key]
            entries.append(dataclasses.replace(entry, kernel=None if member == name else member))
        tables[name] = dataclasses.replace(table, entries=tuple(entries))
    kernels = [_entry(kernel, name, path.parent.resolve()) for name, kernel in written.items()]
    document = {
        "name": f"{spec.name}-dispatch",
        "description": f"per shape, the fastest passing configuration of each kernel, from a sweep of {spec.name}",
        "shapes": [[s.M, s.N, s.K] for s in spec.shapes],
        **settings_of(spec),
        "kernels": kernels,
        "dispatch": dispatch_document(tables),
    }
    return _write_readable(path, _leave_needed(spec, written.values(), path) + _tables_not_carried(spec, tables, path)
                           + yaml.safe_dump(document, sort_keys=False))


def _entries(count: int) -> str:
    return f"{count} entry" if count == 1 else f"{count} entries"


def _family_kernel(spec: Spec, name: str, winners: list[KernelSpec]) -> KernelSpec:
    """The kernel a written dispatch spec names `name`: the family's own entry, with the params of the first shape it
    won (`winners`, in the table's order), else as `spec` has it (a family whose table picked a member everywhere);
    the first winner where `spec` has no kernel of that name."""
    return next((kernel for kernel in winners if kernel.name == name), None) \
        or next((kernel for kernel in spec.kernels if kernel.name == name), winners[0])


def _tables_not_carried(spec: Spec, tables: dict, path: Path) -> str:
    """Where `spec`'s own ``dispatch:`` tables of the written families hold what the written ones cannot (``when:``
    ranges, ``if:`` conditions, entries of shapes with no winner here), a comment line saying so, and a warning."""
    lost = []
    for name, table in tables.items():
        source = spec.dispatch.get(name)
        if source is None:
            continue
        ruled = sum(bool(entry.when) or entry.condition is not None for entry in source.entries)
        measured = {entry.shape for entry in table.entries}
        elsewhere = sum(entry.shape not in measured for entry in source.entries)
        if ruled or elsewhere:
            said = [f"when: or if: rules in {_entries(ruled)}"] if ruled else []
            said += [f"{_entries(elsewhere)} of shapes with no winner here"] if elsewhere else []
            lost.append(f"{name} ({', '.join(said)})")
    if not lost:
        return ""
    note = (f"{spec.name}'s dispatch: tables are not carried over for {'; '.join(lost)}: the written table has an "
            "entry per shape with a winner, of exactly that shape, so any other shape takes the nearest entry")
    _log.warning("%s: %s", path, note)
    return f"# {note}\n"
