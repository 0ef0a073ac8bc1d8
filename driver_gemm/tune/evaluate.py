"""The evaluation callback of a tuning search on a live `Session`: screen cheaply, verify what is fully timed.

`tune.strategies` searches through ``evaluate(configuration, shape, fidelity) -> median ms | None``;
`Evaluator` is that callback on a GPU. Fidelity 1.0 is the spec's full cold measurement, verified
first as ``run`` verifies a case; a lower fidelity is a short warm screen, not verified (a
verification costs far more than a screen), so a wrong kernel is caught when it reaches a full
measurement. Inputs and references are shared per shape. How it works: docs/tuning.md.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ..errors import DriverGemmError
from ..measure.inputs import Inputs, case_seed, make_inputs
from ..gemm.operands import make_typed_inputs
from ..measure.reference import CPU_REFERENCE, CUBLAS_REFERENCE, cpu_reference, scaled_product, uses_cpu_reference
from ..measure.stats import gflops
from ..measure.timing import measure
from ..results.records import CaseDevice, CaseResult
from ..specfile.model import MeasureSettings, Shape, Spec
from ..status import Status
from ..session import steps as case_steps
from ..session import typed_steps
from ..session.bind import build_launch
from ..planning.cases import Case, cases_of
from .tune_cache import TuningCache
from ..session.execute import execute_case
from ..session.state import Session

FULL = 1.0
FP32_INPUTS = "fp32"            # the shape's fp32 A and B are in the shape's buffers
MIN_SCREEN_SAMPLES = 3          # what a median needs
# A screen at fidelity f takes at most f x this many samples: the lowest rung of halving (1/27) the three a
# median needs, a rung of 1/3 at most 27. Without a cap, the batch the sampling loop queues ahead (about
# 20 ms of launches) would triple the cost of a short kernel's lowest-rung screen.
SCREEN_SAMPLES_AT_FULL = 81


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
class SharedShape:
    """What every configuration of one shape is checked against: its inputs and the expected output."""

    shape: Shape
    inputs: Inputs
    expected: np.ndarray
    reference_name: str


@dataclass
class SharedTyped:
    """What the typed configurations of one shape and one matmul (types, layouts, batch, scalars) share."""

    inputs: object                   # operands.TypedInputs
    seed: int
    expected: np.ndarray | None = None
    reference_name: str | None = None


def typed_key(typed: typed_steps.TypedCase) -> tuple:
    """The matmul a typed case computes, all that its inputs and reference depend on besides the shape."""
    return repr(typed.types), repr(typed.operands), typed.alpha, typed.beta


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
    (given a case) names its tuning-cache entry; `timer` is
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
    shared: dict = field(default_factory=dict)        # per "reads C": the current shape's inputs and reference
    typed_shared: dict = field(default_factory=dict)  # per typed_key: the current shape's typed inputs, reference
    _launches: dict = field(default_factory=dict)
    _uploaded: object = None                           # whose inputs A and B hold: FP32_INPUTS, a typed_key,
                                                       # or None (none of the shared ones)
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
        """On a new shape: forget the last one's launches and reference, and run its cuBLAS rows."""
        if self.shape == shape:
            return
        self.verified, self.screened, self.shared, self.shape, self._uploaded = {}, {}, {}, shape, None
        self.typed_shared = {}
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

    def _shared(self, run: case_steps.CaseRun) -> SharedShape:
        shape, reads_c = run.case.shape, run.case.kernel.reads_c()
        if reads_c not in self.shared:
            began = time.perf_counter()
            inputs = make_inputs(shape, case_seed(self.spec.verify.seed, "tune", shape.label), with_c=reads_c)
            self.counts["inputs"] += 1
            self.shared[reads_c] = SharedShape(shape, inputs, None, CPU_REFERENCE)
            self._charge("inputs", began)
        return self.shared[reads_c]

    # ---------------------------------------------------------------------------------------- the case steps

    def _shared_inputs(self, run: case_steps.CaseRun) -> None:
        """Before a checked launch: A and B uploaded again, so that no earlier kernel's stray write can fail it."""
        shared = self._shared(run)
        run.inputs, run.record.seed = shared.inputs, shared.inputs.seed
        buffers = run.session.buffers_for(run.case.shape)
        buffers["A"].upload(shared.inputs.A, run.session.stream)
        buffers["B"].upload(shared.inputs.B, run.session.stream)
        self._uploaded = FP32_INPUTS

    def _screen_inputs(self, run: case_steps.CaseRun) -> None:
        """Before a screen: the shape's A and B on the device, uploaded once for every screen of the shape."""
        shared = self._shared(run)
        run.inputs, run.record.seed = shared.inputs, shared.inputs.seed
        if self._uploaded != FP32_INPUTS:
            buffers = run.session.buffers_for(run.case.shape)
            buffers["A"].upload(shared.inputs.A, run.session.stream)
            buffers["B"].upload(shared.inputs.B, run.session.stream)
            self._uploaded = FP32_INPUTS

    def _typed_shared(self, run: case_steps.CaseRun) -> SharedTyped:
        """The typed inputs of `run`'s matmul on this shape, drawn once (from the shape's seed) and kept."""
        typed = run.typed = typed_steps.typed_case(run)
        key = typed_key(typed)
        if key not in self.typed_shared:
            began = time.perf_counter()
            seed = case_seed(self.spec.verify.seed, "tune", run.case.shape.label)
            inputs = make_typed_inputs(typed.operands, typed.types, seed, with_c=typed.beta != 0.0)
            self.typed_shared[key] = SharedTyped(inputs, seed)
            self.counts["inputs"] += 1
            self._charge("inputs", began)
        shared = self.typed_shared[key]
        typed.inputs, run.record.seed = shared.inputs, shared.seed
        return shared

    def _typed_inputs(self, run: case_steps.CaseRun) -> None:
        """Before a checked launch of a typed kernel: its matmul's A and B uploaded again (as `_shared_inputs`)."""
        self._typed_shared(run)
        typed_steps.upload_inputs(run)
        self._uploaded = typed_key(run.typed)

    def _typed_screen_inputs(self, run: case_steps.CaseRun) -> None:
        """Before a screen of a typed kernel: its matmul's A and B on the device, uploaded when not already there."""
        self._typed_shared(run)
        if self._uploaded != typed_key(run.typed):
            typed_steps.upload_inputs(run)
            self._uploaded = typed_key(run.typed)

    def _typed_reference(self, run: case_steps.CaseRun) -> None:
        shared = self._typed_shared(run)
        if shared.expected is None:
            began = time.perf_counter()
            typed_steps.reference_step(run)
            shared.expected, shared.reference_name = run.expected, run.reference_name
            self.counts["reference"] += 1
            self._charge("reference", began)
        run.expected, run.reference_name = shared.expected, shared.reference_name

    def _bind(self, run: case_steps.CaseRun) -> None:
        if run.case.kernel.is_typed:
            run.launch = build_launch(run, run.session.typed_buffers)
        else:
            case_steps.bind(run)
        self._launches[run.case.key] = run.launch

    def _shared_reference(self, run: case_steps.CaseRun) -> None:
        shared = self._shared(run)
        if shared.expected is None:
            began = time.perf_counter()
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
            self._charge("reference", began)
        run.expected, run.reference_name = shared.expected, shared.reference_name

    def _verify_steps(self, case: Case):
        typed = case.kernel.is_typed
        checked_launch = typed_steps.launch_verify if typed else case_steps.launch_verify

        def launch_verify(run):
            self.counts["verify"] += 1
            checked_launch(run)
            self._launches[run.case.key] = run.launch

        return (("plan", case_steps.plan), ("load", case_steps.load),
                ("inputs", self._typed_inputs if typed else self._shared_inputs),
                ("reference", self._typed_reference if typed else self._shared_reference),
                ("launch_verify", launch_verify), ("diagnose", case_steps.diagnose))

    def _screen_steps(self, case: Case):
        inputs = self._typed_screen_inputs if case.kernel.is_typed else self._screen_inputs
        return (("plan", case_steps.plan), ("load", case_steps.load), ("inputs", inputs), ("bind", self._bind))

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
        if self.cache is not None and self.cache_key is not None:
            self.cache.store(self.cache_key(case), record)
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
            record.gflops = gflops(record.shape.flops, record.timing.median_ms)
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


def _scalars(run: case_steps.CaseRun) -> tuple[float, float]:
    values = run.case.plan.argument_values
    alpha = float(values.get("alpha", 1.0))
    beta = float(values.get("beta", 0.0)) if run.inputs is not None and run.inputs.C0 is not None else 0.0
    return alpha, beta
