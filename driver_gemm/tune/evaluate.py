"""The evaluation callback of a tuning search on a live `Session`: screen cheaply, verify what is fully timed.

`tune.strategies` searches through ``evaluate(configuration, shape, fidelity) -> median ms | None``;
`Evaluator` is that callback on a GPU. Fidelity 1.0 is the spec's full cold measurement, verified
first as ``run`` verifies a case; a lower fidelity is a short warm screen, not verified (a
verification costs far more than a screen), so a wrong kernel is caught when it reaches a full
measurement. Inputs and references are a run's: drawn from the shape's seed once per shape and matmul and
kept by the session, so a configuration is checked on the numbers a run of it multiplies. How it works:
docs/tuning.md.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..errors import DriverGemmError
from ..measure.stats import gflops
from ..measure.timing import measure
from ..results.records import CaseDevice, CaseResult
from ..specfile.model import MeasureSettings, Shape, Spec
from ..status import Status
from ..session import steps as case_steps
from ..session import typed_steps
from ..session.bind import build_launch
from ..planning.cases import Case, cases_of, new_record
from .tune_cache import TuningCache
from ..session.execute import execute_case
from ..session.state import Session

FULL = 1.0
MIN_SCREEN_SAMPLES = 3          # what a median needs
# A screen at fidelity f takes at most f x this many samples: the lowest rung of halving (1/27) the three a
# median needs, a rung of 1/3 at most 27. Without a cap, the batch the sampling loop queues ahead (about
# 20 ms of launches) would triple the cost of a short kernel's lowest-rung screen.
SCREEN_SAMPLES_AT_FULL = 81

_log = logging.getLogger(__name__)


class TuneAborted(DriverGemmError):
    """A fault left CUDA unusable in this process: the search cannot go on here (what was measured is kept)."""


def screen_samples_cap(fidelity: float) -> int:
    """The most samples a screen at `fidelity` takes (see `SCREEN_SAMPLES_AT_FULL`)."""
    return max(MIN_SCREEN_SAMPLES, math.ceil(fidelity * SCREEN_SAMPLES_AT_FULL - 1e-9))


def screen_settings(settings: MeasureSettings, fidelity: float) -> MeasureSettings:
    """The measure settings of a warm screen at `fidelity`: one warm-up launch, that fraction of the sampling
    time, at most `screen_samples_cap` samples, no L2 flush (no verification either: see the module's docstring)."""
    min_samples = max(MIN_SCREEN_SAMPLES, min(settings.min_samples, round(settings.min_samples * fidelity)))
    return dataclasses.replace(
        settings, flush_l2=False, warmup=min(settings.warmup, 1), min_time_s=settings.min_time_s * fidelity,
        timeout_s=max(settings.timeout_s * fidelity, 1e-3), min_samples=min_samples,
        max_samples=max(min_samples, min(settings.max_samples, screen_samples_cap(fidelity))), mode="events")


@dataclass
class _Loaded:
    """A configuration ready to launch on the current shape, and its record so far."""

    record: CaseResult
    launch: Callable[[], None]


@dataclass
class Evaluator:
    """``evaluate(configuration, shape, fidelity)`` on `session`; see the module's docstring.

    `cases` maps (kernel label, shape label) to the planned `Case`; `compiled`
    is `build.compile_spec`'s outcome. `record` receives every full
    measurement and every baseline row; `note` every screen. `cache_key`
    (given a case) names its tuning-cache entry, worked out only where a
    `cache` is given and on (its ``enabled``); `timer` is
    `measure.timing.measure` (a test passes its own). `counts` and
    `seconds` say where the time went: per kind of work, how often, and per
    shape label how many wall seconds (kinds: ``inputs``, ``reference``,
    ``baseline``, ``screen_load`` (plan, load and bind of a configuration
    screened before it was verified), ``verify`` (load, upload, checked
    launch and comparison), ``screen``, ``full``). ``inputs`` and
    ``reference`` are also inside the ``screen_load`` or ``verify`` that
    first needed them.
    """

    session: Session
    spec: Spec
    cases: Mapping[tuple[str, str], Case]
    compiled: Mapping
    record: Callable[[CaseResult], None] = lambda case: None
    note: Callable[[dict], None] = lambda screen: None
    cache: TuningCache | None = None
    cache_key: Callable[[Case], str] | None = None
    timer: Callable = measure
    device_info: CaseDevice | None = None
    peak_gflops: float | None = None
    device_properties: dict | None = None   # the GPU's ``device`` object: the peak of each case's own math
    verified: dict = field(default_factory=dict)       # verified on the current shape
    screened: dict = field(default_factory=dict)       # loaded for screens, not verified, on the current shape
    failed: dict = field(default_factory=dict)
    baselines: dict = field(default_factory=dict)
    shape: Shape | None = None
    _launches: dict = field(default_factory=dict)
    _cache_keys: dict = field(default_factory=dict)   # by case key: its tuning-cache key (None: not cached)
    _uploaded: object = None    # the held inputs whose A and B the device holds (ShapeOperands or HeldTypedInputs)
    counts: dict = field(default_factory=lambda: {"inputs": 0, "reference": 0, "verify": 0, "full": 0,
                                                  "screen_load": 0, "screen": 0, "cache_hits": 0})
    seconds: dict = field(default_factory=dict)

    def __call__(self, configuration, shape: Shape, fidelity: float) -> float | None:
        key = (configuration.label, shape.label)
        if key in self.failed:
            return None
        case = self.cases.get(key)
        if case is None:
            raise ValueError(f"no planned case for {configuration.label} at {shape.label}")
        self._enter_shape(shape)
        if fidelity >= FULL:
            if (cached := self._cached(case)) is not None:
                return cached
            if key not in self.verified and not self._verify(case, key):
                return None
            loaded = self.verified[key]
        else:
            loaded = self.verified.get(key) or self.screened.get(key) or self._load_for_screens(case, key)
            if loaded is None:
                return None
        try:
            if fidelity >= FULL:
                return self._full(case, loaded)
            return self._screen(case, loaded, fidelity)
        except Exception as exc:   # a launch that fails while timed drops out like one that failed its check
            self._drop(case, key, exc)
            return None

    def _charge(self, kind: str, began: float) -> None:
        per_shape = self.seconds.setdefault(self.shape.label, {})
        per_shape[kind] = per_shape.get(kind, 0.0) + time.perf_counter() - began

    # ------------------------------------------------------------------------------------------------ shapes

    def _enter_shape(self, shape: Shape) -> None:
        """On a new shape: forget the last one's launches, and run its cuBLAS rows (its inputs and references stay
        with the session, within its budget, for a later run or tune of the shape)."""
        if self.shape == shape:
            return
        self.verified, self.screened, self.shape, self._uploaded = {}, {}, shape, None
        if self.spec.baseline:
            began = time.perf_counter()
            for case in cases_of(dataclasses.replace(self.spec, shapes=(shape,))):
                if case.is_baseline:
                    self._baseline(case)
            self._charge("baseline", began)

    def _baseline(self, case: Case) -> None:
        record = execute_case(self.session, self.spec, case, {})
        self._check_process()
        if record.timing is not None and record.ok:
            self.baselines[case.shape, case.precision] = record.timing.median_ms
        self._finish(record)

    # ---------------------------------------------------------------------------------------- the case steps

    def _inputs(self, run: case_steps.CaseRun, upload: bool) -> None:
        """`run`'s inputs as a run draws them (from the shape's seed, once per shape and matmul, kept by the
        session), A and B uploaded where `upload` says (before every checked launch, so that no earlier kernel's
        stray write can fail it) or where the device holds another matmul's (before a screen)."""
        began = time.perf_counter()
        kept = {id(held) for held in self.session.held.values()}
        typed = run.case.kernel.is_typed
        (typed_steps.held_inputs if typed else case_steps.held_inputs)(run)
        if any(id(held) not in kept for held in self.session.held.values()):
            self.counts["inputs"] += 1
            self._charge("inputs", began)
        held = run.typed.held if typed else run.operands
        if upload or self._uploaded is not held:
            (typed_steps.upload_inputs if typed else case_steps.upload_inputs)(run)
            self._uploaded = held

    def _checked_inputs(self, run: case_steps.CaseRun) -> None:
        self._inputs(run, upload=True)

    def _screen_inputs(self, run: case_steps.CaseRun) -> None:
        self._inputs(run, upload=False)

    def _reference(self, run: case_steps.CaseRun) -> None:
        """The reference a run checks against, worked out by the first case of the shape and matmul that needs it
        and kept with its inputs."""
        began = time.perf_counter()
        typed = run.case.kernel.is_typed
        known = run.typed.held.references if typed else run.operands.references
        before = len(known)
        (typed_steps.reference_step if typed else case_steps.reference)(run)
        if len(known) > before:
            self.counts["reference"] += 1
            self._charge("reference", began)

    def _bind(self, run: case_steps.CaseRun) -> None:
        if run.case.kernel.is_typed:
            run.launch = build_launch(run, typed_steps.operand_buffers(run.session.typed_buffers, run.typed.operands))
        else:
            case_steps.bind(run)
        self._launches[run.case.key] = run.launch

    def _verify_steps(self, case: Case):
        typed = case.kernel.is_typed
        checked_launch = typed_steps.launch_verify if typed else case_steps.launch_verify

        def launch_verify(run):
            self.counts["verify"] += 1
            checked_launch(run)
            self._launches[run.case.key] = run.launch

        return (("plan", case_steps.plan), ("load", case_steps.load),
                ("inputs", self._checked_inputs), ("reference", self._reference),
                ("launch_verify", launch_verify), ("diagnose", case_steps.diagnose))

    def _screen_steps(self, case: Case):
        return (("plan", case_steps.plan), ("load", case_steps.load), ("inputs", self._screen_inputs),
                ("bind", self._bind))

    def _verify(self, case: Case, key) -> bool:
        began = time.perf_counter()
        record = execute_case(self.session, self.spec, case, self.compiled, steps_for=self._verify_steps)
        self.screened.pop(key, None)
        self._check_process()
        launch = self._launches.pop(key, None)
        ok = record.ok and launch is not None
        if ok:
            self.verified[key] = _Loaded(record, launch)
        else:
            self.failed[key] = record
            self._finish(record)
        self._charge("verify", began)
        return ok

    def _load_for_screens(self, case: Case, key) -> _Loaded | None:
        """Plan, load and bind `case` for screens, without a checked launch; None (and its record) if it cannot run."""
        began = time.perf_counter()
        self.counts["screen_load"] += 1
        record = execute_case(self.session, self.spec, case, self.compiled, steps_for=self._screen_steps)
        self._check_process()
        launch = self._launches.pop(key, None)
        loaded = None
        if record.ok and launch is not None:
            loaded = self.screened[key] = _Loaded(record, launch)
        else:
            self.failed[key] = record
            self._finish(record)
        self._charge("screen_load", began)
        return loaded

    def _full(self, case: Case, verified: _Loaded) -> float:
        self.counts["full"] += 1
        session = self.session
        began = time.perf_counter()
        timing, _ = self.timer(verified.launch, session.device, session.stream, self.spec.measure,
                               session.flusher, session.gate)
        record = dataclasses.replace(verified.record, timing=timing,
                                     phases={**(verified.record.phases or {}), "time": time.perf_counter() - began})
        self._finish(record)
        if self.cache is not None and (key := self._cache_key_of(case)) is not None:
            self.cache.store(key, record)
        self._charge("full", began)
        return timing.median_ms

    def _screen(self, case: Case, loaded: _Loaded, fidelity: float) -> float:
        self.counts["screen"] += 1
        session = self.session
        began = time.perf_counter()
        timing, _ = self.timer(loaded.launch, session.device, session.stream,
                               screen_settings(self.spec.measure, fidelity), None, session.gate)
        self._charge("screen", began)
        self.note({"kernel": case.label, "shape": case.shape.label, "fidelity": fidelity,
                   "median_ms": timing.median_ms, "samples": timing.samples,
                   "verified": case.key in self.verified})
        return timing.median_ms

    def _cache_key_of(self, case: Case) -> str | None:
        """`case`'s tuning-cache key, worked out once; None where there is no cache, or where the key cannot be
        worked out (a file it digests gone unreadable): the case is then measured and not cached, with a warning."""
        # a cache switched off (DRIVER_GEMM_NO_CACHE) is neither asked nor given anything: no key is worked out
        if self.cache is None or self.cache_key is None or not getattr(self.cache, "enabled", True):
            return None
        if case.key not in self._cache_keys:
            try:
                self._cache_keys[case.key] = self.cache_key(case)
            except Exception as error:   # noqa: BLE001 - the cache saves time; its key never stops a search
                _log.warning("%s at %s is measured but not kept in the tuning cache: its key cannot be worked out "
                             "(%s: %s)", case.label, case.shape.label, type(error).__name__, error)
                self._cache_keys[case.key] = None
        return self._cache_keys[case.key]

    def _cached(self, case: Case) -> float | None:
        key = self._cache_key_of(case)
        if key is None or self.cache is None:
            return None
        found = self.cache.lookup(key)
        if found is None or found.timing is None:
            return None
        self.counts["cache_hits"] += 1
        # The key holds what decides the measurement, not what names it: the record is named as the case being
        # measured (a kernel renamed, or picked by another family's table, since it was stored).
        named = new_record(case, found.status)
        found = dataclasses.replace(found, kernel=named.kernel, name=named.name, instance=named.instance,
                                    source=named.source, dispatch=named.dispatch,
                                    baseline=named.baseline if case.kernel is not None and case.kernel.is_typed
                                    else found.baseline)
        found.message = (found.message + "; " if found.message else "") + "from the tuning cache"
        self._finish(found)
        return found.timing.median_ms

    def _drop(self, case: Case, key, error: Exception) -> None:
        self._check_process()
        loaded = self.verified.pop(key, None) or self.screened.pop(key)
        record = dataclasses.replace(loaded.record, status=Status.ERROR,
                                     message=str(error) if isinstance(error, DriverGemmError)
                                     else f"{type(error).__name__}: {error}")
        self.failed[key] = record
        self._finish(record)

    def _check_process(self) -> None:
        if self.session.poisoned:
            raise TuneAborted("a kernel fault left CUDA unusable in this process; what was measured is kept "
                              "(and in the tuning cache): run tune again to go on from there")

    def _finish(self, record: CaseResult) -> None:
        """The figures `run` adds to a finished case (GFLOP/s, % of cuBLAS, % of peak), then `record`."""
        if record.timing is not None:
            record.gflops = gflops(record.flops, record.timing.median_ms)
            baseline = self.baselines.get((record.shape, record.precision))
            if baseline and not record.is_baseline:
                record.pct_cublas = 100.0 * baseline / record.timing.median_ms
            elif record.is_baseline and record.ok:
                record.pct_cublas = 100.0
            peak = record.peak_gflops(self.device_properties) if self.device_properties else \
                self.peak_gflops if record.math == "fp32" else None
            if peak:
                record.pct_peak = 100.0 * record.gflops / peak
        if self.device_info is not None:
            record.device = self.device_info
        self.record(record)

