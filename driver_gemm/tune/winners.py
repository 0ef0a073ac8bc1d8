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
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import SpecError, WrongArgumentType, path_argument
from ..output_files import refuse_aliases, write_file
from ..planning.spec_files import spec_inputs
from ..report.comparison import SAME, judge
from ..results.read import ResultsFile, read_results
from ..results.records import CaseResult, RunResult
from ..specfile.load import load_spec
from ..specfile.model import KernelSpec, Spec
from ..specfile.project import project_root
from ..status import Status
from .dispatch_table import build_dispatch, dispatch_document

RESULTS_DIR = Path("results")      # untracked (.gitignore): where a winners spec goes unless --out says otherwise
_log = logging.getLogger(__name__)


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


def pick_winners(run: RunResult | ResultsFile | str | os.PathLike) -> list[Pick]:
    """Per kernel name and shape, the fastest passing configuration and how clearly it won.

    `run` is a `RunResult` (from `tune_spec`, `run_spec` or `load_results`), a `ResultsFile` (from
    `read_results`: its run), or the path of a results file (read with `read_results`).
    """
    run = _run_argument(run)
    groups: dict[tuple[str, str], list[CaseResult]] = {}
    for case in run.cases:
        if not case.is_baseline:
            groups.setdefault((case.name, case.shape.label), []).append(case)
    picks = []
    for (name, shape), cases in groups.items():
        timed = sorted((c for c in cases if c.ok and c.timing), key=lambda c: c.timing.median_ms)
        pick = Pick(name, shape, timed[0] if timed else None, timed[1] if len(timed) > 1 else None,
                    tried=len(cases), passed=len(timed), invalid=sum(c.status == Status.INVALID for c in cases))
        if pick.best and pick.runner_up:
            pick.margin = pick.runner_up.timing.median_ms / pick.best.timing.median_ms - 1
            pick.tie = judge(pick.best, pick.runner_up)[0] == SAME
        picks.append(pick)
    return picks


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
    says it), and a plain YAML file, not a ``.gz`` name its readers would take for gzip data (`ValueError`)."""
    path = Path(path_argument(function, "path", path))
    if path.suffix.lower() == ".gz":
        raise ValueError(f"{function}: {path}: a .gz name is for a compressed file; write the spec as plain YAML")
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


def _check_picks_of(function: str, spec: Spec, picks: list[Pick]) -> None:
    """A `ValueError` naming the first winner that is no kernel configuration of `spec`: picks of another sweep
    would otherwise fail with a KeyError while the file is written."""
    labels = {kernel.label for kernel in spec.kernels}
    for pick in picks:
        if pick.best is not None and pick.best.kernel not in labels:
            raise ValueError(f"{function}: spec {spec.name} has no kernel {pick.best.kernel} (the winner of "
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
    if isinstance(entry.get("signature"), list):
        _rebase_signature_files(entry["signature"], kernel, relative_to)
    return entry


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
    if run.spec_path and spec.path and Path(run.spec_path).name != Path(spec.path).name:
        raise SpecError(f"these results were made from {run.spec_path}, not {spec.path}", where=where)
    labels = {kernel.label for kernel in spec.kernels}
    if not any(case.kernel in labels for case in run.cases):
        raise SpecError(f"no case of these results is a kernel configuration of {spec.name} "
                        f"(as selected); nothing to pick from", where=where)


def winners_spec(spec: Spec | str | os.PathLike, picks: list[Pick], path: str | Path) -> Path:
    """Write a spec with one kernel per winning configuration, on the shapes of the sweep.

    A kernel whose best configuration is the same on every shape keeps its
    name; otherwise each winning configuration is named ``NAME-1``, ``NAME-2``...
    and a comment at the top says which shape each one won. `spec` is the
    sweep's `Spec` or its path; `picks` are `pick_winners`' of a run of it (a
    winner the spec does not have is a `ValueError` naming it).
    """
    spec = _spec_argument("winners_spec", spec)
    picks = _picks_argument("winners_spec", picks)
    path = _output_argument("winners_spec", spec, path)
    _check_picks_of("winners_spec", spec, picks)
    by_label = {k.label: k for k in spec.kernels}
    winning = list(dict.fromkeys(p.best.kernel for p in picks if p.best is not None))
    if not winning:
        raise SpecError(f"no configuration of {spec.name} passed: there is no winner to write", where=str(path))
    per_name: dict[str, list[str]] = {}
    for label in winning:
        per_name.setdefault(by_label[label].name, []).append(label)
    names = {label: name if len(labels) == 1 else f"{name}-{i + 1}"
             for name, labels in per_name.items() for i, label in enumerate(labels)}
    document = {
        "name": f"{spec.name}-winners",
        "description": f"the fastest passing configuration of each kernel per shape, from a sweep of {spec.name}",
        "shapes": [[s.M, s.N, s.K] for s in spec.shapes],
        **settings_of(spec),
        "kernels": [_entry(by_label[label], names[label], path.parent.resolve()) for label in winning],
    }
    lines = [_leave_needed(spec, (by_label[label] for label in winning), path)]
    for p in picks:
        outcome = "nothing passed" if p.best is None else f"{names[p.best.kernel]} = {p.best.kernel}"
        if p.margin is not None:
            outcome += f", {'a tie with' if p.tie else 'ahead of'} the runner-up ({100 * p.margin:+.1f}%)"
        lines.append(f"# {p.kernel} at {p.shape}: {outcome}\n")
    return write_file(path, "".join(lines) + yaml.safe_dump(document, sort_keys=False))


def dispatch_spec(spec: Spec, picks: list[Pick], path: str | Path) -> Path:
    """Write a spec with one kernel per family and a ``dispatch:`` table choosing its params per shape.

    The kernel entry carries the parameters that won the first shape (so the
    file reads as a whole kernel); `driver_gemm.tune.dispatch_table` says how a run
    picks the parameters for any other shape. Needs the spec front end to
    accept ``dispatch:`` (`tune.dispatch_table.parse_dispatch`).
    """
    spec = _spec_argument("dispatch_spec", spec)
    picks = _picks_argument("dispatch_spec", picks)
    path = _output_argument("dispatch_spec", spec, path)
    _check_picks_of("dispatch_spec", spec, picks)
    tables = build_dispatch(picks)
    if not tables:
        raise SpecError(f"no configuration of {spec.name} passed: there is no winner to write", where=str(path))
    by_label = {k.label: k for k in spec.kernels}
    firsts = {name: by_label[table.entries[0].label] for name, table in tables.items()}
    kernels = [_entry(kernel, name, path.parent.resolve()) for name, kernel in firsts.items()]
    document = {
        "name": f"{spec.name}-dispatch",
        "description": f"per shape, the fastest passing configuration of each kernel, from a sweep of {spec.name}",
        "shapes": [[s.M, s.N, s.K] for s in spec.shapes],
        **settings_of(spec),
        "kernels": kernels,
        "dispatch": dispatch_document(tables),
    }
    return write_file(path, _leave_needed(spec, firsts.values(), path) + yaml.safe_dump(document, sort_keys=False))
