"""pytest integration for GPU test rigs: a GPU marker, device and runner fixtures, and spec cases as tests.

Every name carries a ``driver_gemm`` prefix, so a session that uses none of them is left as it was
(``DRIVER_GEMM_DEVICE`` is read only where one of them asks for a GPU) and a project's own ``gpu``
marker keeps its meaning. ``@pytest.mark.driver_gemm_gpu`` skips a test
where there is no GPU; ``driver_gemm_device`` is the `Device` of ``--driver-gemm-device``;
``driver_gemm_run`` runs a spec and returns its `RunResult`; ``--driver-gemm-spec PATH`` makes every
case of a spec a test with a readable id, failing with its diagnosis; the gates of
`driver_gemm.report.gates` (``--driver-gemm-min-pct``, ``--driver-gemm-baseline-results``) fail a
case's test; ``--driver-gemm-results FILE`` judges recorded results without a GPU (each of these
without ``--driver-gemm-spec`` is a usage error: it would judge nothing). Options in full:
docs/embedding.md.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from .errors import DriverGemmError, NoGpuError, WrongArgumentType

_NO_GPU = pytest.StashKey[object]()
GPU_MARKER = "driver_gemm_gpu"
GPU_FIXTURES = ("driver_gemm_device", "driver_gemm_run")
# The options that judge the cases of --driver-gemm-spec (a threshold of 0 is the default: not given).
GATE_OPTIONS = ("--driver-gemm-results", "--driver-gemm-min-pct", "--driver-gemm-baseline-results",
                "--driver-gemm-threshold")


def pytest_addoption(parser):
    group = parser.getgroup("driver-gemm")
    group.addoption("--driver-gemm-spec", action="append", default=[], metavar="PATH",
                    help="run every case of this driver-gemm spec (a file or a shipped spec's name) as a test "
                         "(repeatable)")
    group.addoption("--driver-gemm-allow-outside-sources", action="store_true", default=False,
                    help="let --driver-gemm-spec specs name kernel sources outside their project (absolute paths too)")
    group.addoption("--driver-gemm-device", type=int, default=None, metavar="N",
                    help="GPU for driver-gemm tests (default $DRIVER_GEMM_DEVICE or 0)")
    group.addoption("--driver-gemm-results", default=None, metavar="FILE",
                    help="judge these recorded results of the --driver-gemm-spec spec instead of running it (no GPU)")
    group.addoption("--driver-gemm-min-pct", action="append", default=[], metavar="PCT|NAME=PCT",
                    help="each kernel case must reach PCT %% of cuBLAS (or kernel NAME must; repeatable)")
    group.addoption("--driver-gemm-baseline-results", default=None, metavar="OLD.json",
                    help="no case may be SLOWER beyond noise or BROKEN against these stored results")
    group.addoption("--driver-gemm-threshold", type=float, default=0.0, metavar="PERCENT",
                    help="with --driver-gemm-baseline-results: also call differences up to this many percent SAME, so "
                         "that a slowdown must exceed it to fail (default 0: noise only)")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{GPU_MARKER}: needs a CUDA driver and a GPU (skipped with the reason where "
                                       "there is none)")
    if config.getoption("--driver-gemm-device") is not None:   # given: checked at once (the variable where used)
        _ordinal(config)
    threshold = config.getoption("--driver-gemm-threshold")
    if threshold and not config.getoption("--driver-gemm-baseline-results"):   # the CLI refuses it alike
        raise pytest.UsageError("--driver-gemm-threshold: it widens the regression gate of "
                                "--driver-gemm-baseline-results, which is not given: it would check nothing")
    given = [option for option in GATE_OPTIONS if config.getoption(option)]
    if given and not config.getoption("--driver-gemm-spec"):   # a gate on no case would pass without checking any
        raise pytest.UsageError(f"{given[0]}: it judges the cases of --driver-gemm-spec, which is not given: it "
                                "would check nothing (give the spec, or leave the option out)")


def missing_gpu_reason(ordinal: int = 0) -> str | None:
    """Why GPU `ordinal` cannot be used here (no driver, no such GPU), or None."""
    # lazy: pytest loads this plugin in every run; the package is imported only when a test uses it
    from .cuda.device import device_count

    try:
        count = device_count()
    except NoGpuError as exc:
        return str(exc)
    return None if count > ordinal else f"no GPU {ordinal} (this machine has {count})"


def gpu_missing_reason(config) -> str | None:
    """`missing_gpu_reason` for the session's chosen GPU, asked once per session."""
    if _NO_GPU not in config.stash:
        config.stash[_NO_GPU] = missing_gpu_reason(_ordinal(config))
    return config.stash[_NO_GPU]


def _ordinal(config) -> int:
    chosen = config.getoption("--driver-gemm-device")
    if chosen is not None:
        if not 0 <= chosen < 1 << 31:   # as DRIVER_GEMM_DEVICE and the CLI's --device refuse it (a CUDA int)
            raise pytest.UsageError(f"--driver-gemm-device: a GPU's ordinal is 0, 1, ... ; got {chosen}")
        return int(chosen)
    text = os.environ.get("DRIVER_GEMM_DEVICE", "").strip()
    if not text:
        return 0
    if not (text.isascii() and text.isdigit()):    # int() would also take full-width digits, 1_0 and -1
        raise pytest.UsageError(f"DRIVER_GEMM_DEVICE: a GPU's ordinal is a whole number of at least 0 in ASCII "
                                f"digits, got {text!r}")
    return int(text)


def pytest_runtest_setup(item):
    # A marker given at collection is skipped there (`_skip_marked_tests`, reported at the test); this one sees
    # a marker added later (a fixture's applymarker) or a session without pytest's skipping plugin.
    if item.get_closest_marker(GPU_MARKER) is not None:
        reason = gpu_missing_reason(item.config)
        if reason:
            pytest.skip(f"needs a GPU: {reason}")


@pytest.fixture(scope="session")
def driver_gemm_device(pytestconfig):
    """The GPU chosen for driver-gemm tests, with a context of its own for the session."""
    reason = gpu_missing_reason(pytestconfig)
    if reason:
        pytest.skip(f"needs a GPU: {reason}")
    # lazy: pytest loads this plugin in every run; the package is imported only when a test uses it
    from .cuda.device import Device

    with Device(_ordinal(pytestconfig)) as device:
        yield device


@pytest.fixture
def driver_gemm_run(pytestconfig):
    """Run a spec (path, `Spec` or dict) on the chosen GPU, isolated in a worker process; return the `RunResult`.

    The function it gives takes the spec, a `RunOptions` (``options=``) and the
    fields of a `Placement` to change (``isolate=False``, ``stream=...``).
    """
    reason = gpu_missing_reason(pytestconfig)
    if reason:
        pytest.skip(f"needs a GPU: {reason}")
    # lazy: pytest loads this plugin in every run; the package is imported only when a test uses it
    from .runners.one_gpu import run_spec
    from .session.options import Placement, RunOptions
    from .specfile.model import Spec
    from .specfile import load_spec, spec_from_dict

    def run(spec, options: RunOptions = RunOptions(), **placement):
        if isinstance(spec, (str, os.PathLike)):
            spec = load_spec(spec)
        elif isinstance(spec, dict):
            spec = spec_from_dict(spec)
        elif not isinstance(spec, Spec):
            raise WrongArgumentType(f"driver_gemm_run: spec is a spec file's path, a shipped spec's name, a Spec "
                                    f"or a dict, got {spec!r:.60} ({type(spec).__name__})")
        unknown = sorted(set(placement) - {field.name for field in dataclasses.fields(Placement)})
        if unknown:   # Placement's own TypeError would name neither the fixture nor the fields it takes
            raise WrongArgumentType(f"driver_gemm_run: {unknown[0]}= is no field of a Placement (it takes "
                                    f"{', '.join(field.name + '=' for field in dataclasses.fields(Placement))})")
        return run_spec(spec, options, Placement(**{"device": _ordinal(pytestconfig), "isolate": True, **placement}))

    return run


# ------------------------------------------------------------------------------------- spec cases as tests


class GemmCaseFailed(AssertionError):
    """A spec case that did not pass (a test failure, as pytest reports one); its message is the case's diagnosis."""


class GemmSpecItems(pytest.Collector):
    """The cases of one spec; the spec runs once, when the first of them is run."""

    def __init__(self, *, spec_path: Path, **kwargs):
        super().__init__(**kwargs)
        self.spec_path = spec_path
        self._results: dict | None = None
        self.gate_failures: dict[str, list[str]] = {}
        self.missing_reason = "the run produced no result for this case"   # said by a case the results lack

    def collect(self):
        # lazy: pytest loads this plugin in every run; the package is imported only when a test uses it
        from .planning.cases import cases_of
        from .specfile import load_spec

        try:
            spec = load_spec(self.spec_path,
                             allow_outside_sources=self.config.getoption("--driver-gemm-allow-outside-sources"))
        except DriverGemmError as exc:   # the user's spec is wrong: one line, not an internal error
            raise pytest.UsageError(f"--driver-gemm-spec: {exc}") from None
        self.spec = spec
        _check_options_against_spec(self.config, spec, {(case.label, case.shape.label) for case in cases_of(spec)})
        for case in cases_of(spec):
            yield GemmCaseItem.from_parent(self, name=f"{case.label}-{case.shape.label}",
                                           key=(case.label, case.shape.label), line=_kernel_line(case))

    def results(self) -> dict:
        if self._results is None:
            recorded = self.config.getoption("--driver-gemm-results")
            if recorded:
                # lazy: pytest loads this plugin in every run; the package is imported only when a test uses it
                from .results.read import read_results

                run = read_results(recorded).run
                # No run took place: a case without a result is one the file lacks, said with whose run it is.
                other = f", not of {self.spec.name!r}" if run.spec != self.spec.name else ""
                self.missing_reason = (f"{recorded} (a run of spec {run.spec!r}{other}) holds no result for this "
                                       "case")
            else:
                # lazy: pytest loads this plugin in every run; the package is imported only when a test uses it
                from .runners.one_gpu import run_spec
                from .session.options import Placement, RunOptions

                run = run_spec(self.spec, RunOptions(), Placement(_ordinal(self.config), isolate=True))
            self._results = {(case.kernel, case.shape.label): case for case in run.cases}
            self.gate_failures = _gate_failures(self.config, self.spec, run)
        return self._results


def _kernel_line(case) -> int:
    """The 0-based line of the case's kernel entry in its spec file (0 for a baseline): where pytest reports a
    skip of the case."""
    place = case.kernel.where if case.kernel is not None else ""
    line = place.rsplit(":", 1)[-1]
    return int(line) - 1 if line.isdigit() and int(line) > 0 else 0


def _check_options_against_spec(config, spec, case_keys) -> None:
    """Options that name kernels or hold results, refused when they have nothing to do with `spec`: a gate on
    a kernel it lacks, or results of another spec, would pass (or fail) every case without checking it."""
    # lazy: pytest loads this plugin in every run; the package is imported only when a test uses it
    from .report.gates import check_gate_names, check_stored_matches, gpu_models, parse_min_pct
    from .results.read import read_results

    option = "--driver-gemm-min-pct"
    try:
        check_gate_names(parse_min_pct(config.getoption(option))[1], [kernel.name for kernel in spec.kernels])
        gpus = None
        for option, consequence in (("--driver-gemm-results", "no case of the spec would have a result"),
                                    ("--driver-gemm-baseline-results", "the regression gate would compare nothing")):
            path = config.getoption(option)
            if path:
                stored = read_results(path).run
                check_stored_matches(stored, case_keys, consequence, gpus=gpus, across_option=None)
                if option == "--driver-gemm-results":
                    # Judging recorded results, their GPUs are known before any test: stored results of other
                    # GPU models are refused now, as the command line refuses them once it knows its GPUs.
                    gpus = gpu_models(stored)
    except DriverGemmError as error:
        where = f"{config.getoption(option)}: " if option != "--driver-gemm-min-pct" else ""
        raise pytest.UsageError(f"{option}: {where}{error}") from None


def _gate_failures(config, spec, run) -> dict[str, list[str]]:
    """Per "LABEL at SHAPE", the gates its case fails (empty when no gate is asked for)."""
    # lazy: pytest loads this plugin in every run; the package is imported only when a test uses it
    from .report.gates import check_gates, kernel_min_pcts, parse_min_pct
    from .results.read import read_results

    every, per_name = parse_min_pct(config.getoption("--driver-gemm-min-pct"))
    stored_path = config.getoption("--driver-gemm-baseline-results")
    stored = read_results(stored_path).run if stored_path else None
    failures: dict[str, list[str]] = {}
    for failure in check_gates(run, min_pct=every, per_kernel=kernel_min_pcts(spec.kernels, per_name),
                               stored=stored, threshold=config.getoption("--driver-gemm-threshold") / 100,
                               across_option=None):
        failures.setdefault(failure.case, []).append(str(failure))
    return failures


class GemmCaseItem(pytest.Item):
    """One kernel on one shape of a spec."""

    def __init__(self, *, key, line: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.key = key
        self.line = line
        if not self.config.getoption("--driver-gemm-results"):
            self.add_marker(GPU_MARKER)

    def runtest(self):
        case = self.parent.results().get(self.key)
        if case is None:
            raise GemmCaseFailed(self.parent.missing_reason)
        if not case.ok:
            raise GemmCaseFailed(f"{case.status}: {case.message}")
        gates = self.parent.gate_failures.get(f"{self.key[0]} at {self.key[1]}")
        if gates:
            raise GemmCaseFailed("; ".join(gates))
        if case.timing is not None:
            self.user_properties.append(("median_ms", case.timing.median_ms))
            if case.pct_cublas is not None:
                self.user_properties.append(("pct_cublas", case.pct_cublas))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, GemmCaseFailed):
            return f"{self.key[0]} at {self.key[1]}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.parent.spec_path, self.line, f"{self.key[0]} at {self.key[1]}"


def _check_gate_options(config) -> None:
    """Gate options read once, before any test: a mistake is a usage error, not a failure of every case."""
    given = [config.getoption(option) for option in ("--driver-gemm-min-pct", "--driver-gemm-baseline-results",
                                                       "--driver-gemm-results")]
    if not any(given) and config.getoption("--driver-gemm-threshold") == 0:
        return   # a session that uses none of them imports nothing of driver-gemm's
    # lazy: pytest loads this plugin in every run; the package is imported only when a test uses it
    from .report.gates import parse_min_pct
    from .results.read import read_results

    try:
        parse_min_pct(config.getoption("--driver-gemm-min-pct"))   # its errors name the option
    except DriverGemmError as error:
        raise pytest.UsageError(str(error)) from None
    for option in ("--driver-gemm-baseline-results", "--driver-gemm-results"):
        if config.getoption(option):
            try:
                read_results(config.getoption(option))
            except DriverGemmError as error:   # names the file; the option says what the file was given as
                raise pytest.UsageError(f"{option}: {error}") from None
    if not 0 <= config.getoption("--driver-gemm-threshold") < 1e6:   # also refuses NaN; compare_runs' bound
        raise pytest.UsageError("--driver-gemm-threshold is a percentage from 0 to below 1,000,000")


def _uses_a_gpu(item) -> bool:
    """Whether a collected test asks for a GPU through the plugin: its marker or one of its GPU fixtures."""
    return (item.get_closest_marker(GPU_MARKER) is not None
            or not set(GPU_FIXTURES).isdisjoint(getattr(item, "fixturenames", ())))


def _spec_node_id(config, text: str, path: Path) -> str:
    """A spec's part of its cases' ids: an absolute path as given, else the spec's path from the rootdir (its
    absolute path outside the rootdir). pytest prints an id from the current folder by joining it to the rootdir,
    so a relative path typed elsewhere, or a shipped spec's name, would print as a file that does not exist."""
    if Path(text).is_absolute():
        return text
    try:
        return path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return path.as_posix()


def _skip_marked_tests(config, items) -> None:
    """The marked tests, skipped where there is no GPU: a skip marker, which pytest reports at the test (a skip
    raised by this plugin would be reported at the plugin's line)."""
    marked = [item for item in items if item.get_closest_marker(GPU_MARKER) is not None]
    if not marked or config.getoption("collectonly"):   # only listing tests: the driver need not be asked
        return
    reason = gpu_missing_reason(config)
    if reason:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))


def pytest_collection_modifyitems(session, config, items):
    _check_gate_options(config)
    # A DRIVER_GEMM_DEVICE that names no GPU is said once, before any test, and only to a session that uses a GPU
    # through the plugin: the variable means nothing to the others.
    if config.getoption("--driver-gemm-spec") or any(map(_uses_a_gpu, items)):
        _ordinal(config)
    collected: set[Path] = set()
    for text in config.getoption("--driver-gemm-spec"):
        # a shipped spec's name too ("seed"), as load_spec and the command line take it: the same rule
        from .specfile.shipped import resolve_spec   # lazy, as above: only a session given a spec imports it

        try:
            path = resolve_spec(text)
        except DriverGemmError as error:
            raise pytest.UsageError(f"--driver-gemm-spec: {error}") from None
        if not path.is_file():
            raise pytest.UsageError(f"--driver-gemm-spec: no such spec file {text}")
        path = path.resolve()
        if path in collected:   # as pytest collects a test file named twice: once (its cases would run twice)
            continue
        collected.add(path)
        collector = GemmSpecItems.from_parent(session, name=path.name, nodeid=_spec_node_id(config, text, path),
                                              spec_path=path)
        items.extend(collector.collect())
    _skip_marked_tests(config, items)
