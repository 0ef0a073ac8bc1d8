"""The evaluation callback of a tuning search on a live `Session`: verify once, then time at any fidelity.

`tune.strategies` searches through one callback, ``evaluate(configuration,
shape, fidelity) -> median ms | None``; `Evaluator` is that callback on a GPU.

- Inputs and the float64 reference are made once per shape and shared by
  every configuration of it (the seed comes from the shape alone, so every
  configuration is checked against the same product); the shape before is
  dropped when the search moves on, so that one shape's reference (512 MiB
  at 8192^3) is held at a time.
- A configuration is verified once, by its first evaluation, through the
  same steps and error funnel as ``run`` (`funnel.execute_case`); one that
  fails, faults or is refused is None from then on.
- Fidelity 1.0 is the spec's full cold measurement (its measure settings,
  L2 flushed before each sample): a `CaseResult` handed to `record`, as
  ``run`` records a case. A fidelity below 1 is a warm screen: sampling for
  that fraction of ``min_time_s`` with no flush, reported to `note` only.
- The `TuningCache` answers a full measurement it already holds and keeps
  every new one.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ..errors import DriverGemmError
from ..measure.inputs import Inputs, case_seed, make_inputs
from ..measure.reference import CPU_REFERENCE, CUBLAS_REFERENCE, cpu_reference, scaled_product, uses_cpu_reference
from ..measure.stats import gflops
from ..measure.timing import measure
from ..results.records import CaseResult
from ..spec.model import MeasureSettings, Shape, Spec
from ..status import Status
from . import steps as case_steps
from .cases import Case, cases_of
from .funnel import execute_case
from .session import Session

FULL = 1.0
MIN_SCREEN_SAMPLES = 3


class TuneAborted(DriverGemmError):
    """A fault left CUDA unusable in this process: the search cannot go on here (what was measured is kept)."""


def screen_settings(settings: MeasureSettings, fidelity: float) -> MeasureSettings:
    """The measure settings of a warm screen at `fidelity`: that fraction of the sampling time, no L2 flush."""
    return dataclasses.replace(
        settings, flush_l2=False, warmup=min(settings.warmup, 1), min_time_s=settings.min_time_s * fidelity,
        timeout_s=max(settings.timeout_s * fidelity, 1e-3),
        min_samples=max(MIN_SCREEN_SAMPLES, min(settings.min_samples, round(settings.min_samples * fidelity))),
        max_samples=max(MIN_SCREEN_SAMPLES, settings.max_samples), mode="events")


@dataclass
class SharedShape:
    """What every configuration of one shape is checked against: its inputs and the expected output."""

    shape: Shape
    inputs: Inputs
    expected: np.ndarray
    reference_name: str


@dataclass
class _Verified:
    record: CaseResult
    launch: Callable[[], None]


@dataclass
class Evaluator:
    """``evaluate(configuration, shape, fidelity)`` on `session`; see the module's docstring.

    `cases` maps (kernel label, shape label) to the planned `Case`; `compiled`
    is `build.compile_spec`'s outcome. `record` receives every full
    measurement and every baseline row; `note` every screen. `cache_key`
    (given a case) names its tuning-cache entry; `timer` is
    `measure.timing.measure` (a test passes its own).
    """

    session: Session
    spec: Spec
    cases: Mapping[tuple[str, str], Case]
    compiled: Mapping
    record: Callable[[CaseResult], None] = lambda case: None
    note: Callable[[dict], None] = lambda screen: None
    cache: object | None = None
    cache_key: Callable[[Case], str] | None = None
    timer: Callable = measure
    device_info: dict | None = None
    peak_gflops: float | None = None
    verified: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    baselines: dict = field(default_factory=dict)
    shape: Shape | None = None
    shared: dict = field(default_factory=dict)        # per "reads C": the current shape's inputs and reference
    _launches: dict = field(default_factory=dict)
    counts: dict = field(default_factory=lambda: {"inputs": 0, "reference": 0, "verify": 0, "full": 0,
                                                  "screen": 0, "cache_hits": 0})

    def __call__(self, configuration, shape: Shape, fidelity: float) -> float | None:
        key = (configuration.label, shape.label)
        if key in self.failed:
            return None
        case = self.cases.get(key)
        if case is None:
            raise ValueError(f"no planned case for {configuration.label} at {shape.label}")
        self._enter_shape(shape)
        if fidelity >= FULL and (cached := self._cached(case)) is not None:
            return cached
        if key not in self.verified and not self._verify(case, key):
            return None
        verified = self.verified[key]
        try:
            if fidelity >= FULL:
                return self._full(case, verified)
            return self._screen(case, verified, fidelity)
        except Exception as exc:   # a launch that fails while timed drops out like one that failed its check
            self._drop(case, key, exc)
            return None

    # ------------------------------------------------------------------------------------------------ shapes

    def _enter_shape(self, shape: Shape) -> None:
        """On a new shape: forget the last one's launches and reference, and run its cuBLAS rows."""
        if self.shape == shape:
            return
        self.verified, self.shared, self.shape = {}, {}, shape
        if self.spec.baseline:
            for case in cases_of(dataclasses.replace(self.spec, shapes=(shape,))):
                if case.is_baseline:
                    self._baseline(case)

    def _baseline(self, case: Case) -> None:
        record = execute_case(self.session, self.spec, case, {})
        self._check_process()
        if record.timing is not None and record.ok:
            self.baselines[case.shape, case.precision] = record.timing.median_ms
        self._finish(record)

    def _shared(self, run: case_steps.CaseRun) -> SharedShape:
        shape, reads_c = run.case.shape, run.case.kernel.reads_c()
        if reads_c not in self.shared:
            inputs = make_inputs(shape, case_seed(self.spec.verify.seed, "tune", shape.label), with_c=reads_c)
            self.counts["inputs"] += 1
            self.shared[reads_c] = SharedShape(shape, inputs, None, CPU_REFERENCE)
        return self.shared[reads_c]

    # ---------------------------------------------------------------------------------------- the case steps

    def _shared_inputs(self, run: case_steps.CaseRun) -> None:
        shared = self._shared(run)
        run.inputs, run.record.seed = shared.inputs, shared.inputs.seed
        buffers = run.session.buffers_for(run.case.shape)
        buffers["A"].upload(shared.inputs.A, run.session.stream)
        buffers["B"].upload(shared.inputs.B, run.session.stream)

    def _shared_reference(self, run: case_steps.CaseRun) -> None:
        shared = self._shared(run)
        if shared.expected is None:
            alpha, beta = _scalars(run)
            session, shape = run.session, run.case.shape
            if uses_cpu_reference(self.spec.verify, shape, session.cublas is not None):
                shared.expected, shared.reference_name = cpu_reference(shared.inputs, alpha, beta), CPU_REFERENCE
            else:
                buffers = session.buffers_for(shape)
                session.cublas.prepare(buffers["A"], buffers["B"], buffers["C_ref"], shape)()
                product = buffers["C_ref"].download((shape.M, shape.N), np.float32, session.stream)
                shared.expected = scaled_product(product, shared.inputs, alpha, beta)
                shared.reference_name = CUBLAS_REFERENCE
            self.counts["reference"] += 1
        run.expected, run.reference_name = shared.expected, shared.reference_name

    def _verify_steps(self, case: Case):
        def launch_verify(run):
            self.counts["verify"] += 1
            case_steps.launch_verify(run)
            self._launches[run.case.key] = run.launch

        return (("plan", case_steps.plan), ("load", case_steps.load), ("inputs", self._shared_inputs),
                ("reference", self._shared_reference), ("launch_verify", launch_verify),
                ("diagnose", case_steps.diagnose))

    def _verify(self, case: Case, key) -> bool:
        record = execute_case(self.session, self.spec, case, self.compiled, steps_for=self._verify_steps)
        self._check_process()
        launch = self._launches.pop(key, None)
        if not record.ok or launch is None:
            self.failed[key] = record
            self._finish(record)
            return False
        self.verified[key] = _Verified(record, launch)
        return True

    def _full(self, case: Case, verified: _Verified) -> float:
        self.counts["full"] += 1
        session = self.session
        began = time.perf_counter()
        timing, _ = self.timer(verified.launch, session.device, session.stream, self.spec.measure,
                               session.flusher, session.gate)
        record = dataclasses.replace(verified.record, timing=timing,
                                     phases={**(verified.record.phases or {}), "time": time.perf_counter() - began})
        self._finish(record)
        if self.cache is not None and self.cache_key is not None:
            self.cache.store(self.cache_key(case), record)
        return timing.median_ms

    def _screen(self, case: Case, verified: _Verified, fidelity: float) -> float:
        self.counts["screen"] += 1
        session = self.session
        timing, _ = self.timer(verified.launch, session.device, session.stream,
                               screen_settings(self.spec.measure, fidelity), None, session.gate)
        self.note({"kernel": case.label, "shape": case.shape.label, "fidelity": fidelity,
                   "median_ms": timing.median_ms, "samples": timing.samples})
        return timing.median_ms

    def _cached(self, case: Case) -> float | None:
        if self.cache is None or self.cache_key is None:
            return None
        found = self.cache.lookup(self.cache_key(case))
        if found is None or found.timing is None:
            return None
        self.counts["cache_hits"] += 1
        found.message = (found.message + "; " if found.message else "") + "from the tuning cache"
        self._finish(found)
        return found.timing.median_ms

    def _drop(self, case: Case, key, error: Exception) -> None:
        self._check_process()
        record = dataclasses.replace(self.verified.pop(key).record, status=Status.ERROR,
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
            record.gflops = gflops(record.shape.flops, record.timing.median_ms)
            baseline = self.baselines.get((record.shape, record.precision))
            if baseline and not record.is_baseline:
                record.pct_cublas = 100.0 * baseline / record.timing.median_ms
            elif record.is_baseline and record.ok:
                record.pct_cublas = 100.0
            if self.peak_gflops and record.precision == "fp32":
                record.pct_peak = 100.0 * record.gflops / self.peak_gflops
        if self.device_info is not None:
            record.device = dict(self.device_info)
        self.record(record)


def _scalars(run: case_steps.CaseRun) -> tuple[float, float]:
    values = run.case.plan.argument_values
    alpha = float(values.get("alpha", 1.0))
    beta = float(values.get("beta", 0.0)) if run.inputs is not None and run.inputs.C0 is not None else 0.0
    return alpha, beta
