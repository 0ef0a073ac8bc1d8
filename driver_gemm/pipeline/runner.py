"""The whole data flow for a spec: compile, then per shape and kernel plan, load, launch, verify, time.

`run_spec` is what ``driver-gemm run`` and library users call. Each case ends
as a `CaseResult`, whatever happens to it: a kernel that does not compile, an
invalid launch configuration or a CUDA error is recorded with its message and
the run goes on; a fault that leaves CUDA unusable (an illegal address, a
trap) is recorded and, in an isolated run, the rest continue in a new worker
process (`worker.py`). Results are handed to `on_result` as they land, so
nothing already measured is lost.
"""

from __future__ import annotations

import concurrent.futures
import datetime as _dt
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .. import __version__

from ..cuda import nvtx as ranges
from ..measure.baseline import CublasSgemm, CublasUnavailable
from ..cuda.compile import Cubin, compile_source, nvrtc_version
from ..cuda.device import Device, DeviceBuffer
from ..errors import CompileError, CudaError
from ..cuda.launch import PackedArguments, PreparedLaunch
from ..cuda.module import Module
from ..cuda.occupancy import occupancy
from .plan import limits_for_device, plan_case
from ..results.records import CaseResult, RunResult, case_key
from ..status import BASELINE_LABELS, Status
from ..spec.model import KernelSpec, Shape, Spec
from ..measure.stats import gflops
from ..measure.timing import L2Flusher, LaunchGate, measure
from ..measure.verify import POISON_WORD, case_seed, compare, make_inputs, reference



def refused_everywhere(spec: Spec, limits) -> set[str]:
    """Labels of the kernels whose launch checks fail on every shape before any compiler output is needed.

    A sweep's `require:` constraints often rule out configurations that the
    source cannot even instantiate (its static_asserts say the same thing):
    those are not compiled, and their cases are Status.INVALID with the constraint
    that failed rather than Status.ERROR with a compiler message.
    """
    return {kernel.label for kernel in spec.kernels
            if not any(plan_case(kernel, shape, limits).valid for shape in spec.shapes)}


def compile_spec(spec: Spec, arch: str, jobs: int | None = None,
                 skip: set[str] = frozenset()) -> dict[str, Cubin | CompileError]:
    """Compile every kernel of `spec` for `arch`, or for its own ``arch``: NVRTC programs, in parallel.

    The value for a kernel label is its `Cubin`, or the `CompileError` that
    its source raised (recorded against each of its cases, not raised). The
    instances of one source are shared out over up to `jobs` programs
    (default: one per CPU, at most 16) compiled on as many threads (NVRTC
    compiles separate programs concurrently), so a sweep of a hundred
    template instances takes minutes off its start. When a program with
    several instances fails, each is compiled alone, so that one bad instance
    does not take its siblings down. Kernels named in `skip` are left out.
    """
    jobs = max(1, jobs or min(os.cpu_count() or 1, 16))
    groups: dict[tuple, list[KernelSpec]] = {}
    for kernel in (k for k in spec.kernels if k.label not in skip):
        groups.setdefault((kernel.source, kernel.options, kernel.target(arch)), []).append(kernel)
    programs = []
    for (source, options, target), kernels in groups.items():
        count = min(jobs, len(kernels))
        programs.extend((source, options, target, kernels[part::count]) for part in range(count))
    compiled: dict[str, Cubin | CompileError] = {}

    def compile_program(source, options, target, kernels) -> None:
        try:
            cubin: Cubin | CompileError = compile_source(source, [k.instance for k in kernels], target, options)
        except CompileError as exc:
            if len(kernels) > 1:
                for kernel in kernels:
                    compile_program(source, options, target, [kernel])
                return
            cubin = exc
        for kernel in kernels:
            compiled[kernel.label] = cubin

    if len(programs) <= 1:
        for program in programs:
            compile_program(*program)
    else:
        with concurrent.futures.ThreadPoolExecutor(min(jobs, len(programs))) as pool:
            for done in [pool.submit(compile_program, *program) for program in programs]:
                done.result()
    return compiled


@dataclass(frozen=True)
class RunOptions:
    """How a run goes beyond its spec: whether cases are timed, and where failure pictures go."""

    time: bool = True                 # False: verify only (one checked launch per case)
    artifacts: Path | None = None     # an error map of C is saved here for every failing case


class _Session:
    """The CUDA state of a run on one GPU: context, stream, L2 flusher, cuBLAS, loaded modules, buffers."""

    def __init__(self, ordinal: int, want_cublas: bool, options: RunOptions = RunOptions(), *,
                 context=None, stream=None):
        self.ordinal = ordinal
        self.want_cublas = want_cublas
        self.options = options
        self.cublas_error: str | None = None
        self.device = Device(self.ordinal, context=context)
        self.stream = self.device.stream(handle=stream)
        self.flusher = L2Flusher(self.device, self.stream)
        self.gate = LaunchGate(self.device, self.stream)
        self.modules: dict[int, Module] = {}
        self.buffers: dict[str, DeviceBuffer] = {}
        self.buffer_shape: Shape | None = None
        self._tf32: CublasSgemm | None = None
        self.cublas = self.baseline("fp32") if want_cublas else None

    def baseline(self, precision: str) -> CublasSgemm | None:
        """cuBLAS SGEMM in FP32 math, or in TF32 tensor-op math (made on first use); None if unavailable."""
        if precision == "fp32" and getattr(self, "cublas", None) is not None:   # (None while __init__ makes it)
            return self.cublas
        if precision == "tf32" and self._tf32 is not None:
            return self._tf32
        try:
            handle = CublasSgemm(self.device, self.stream, tf32=precision == "tf32")
        except (CublasUnavailable, CudaError) as exc:
            self.cublas_error = str(exc)
            return None
        if precision == "tf32":
            self._tf32 = handle
        return handle

    def module(self, cubin: Cubin) -> Module:
        if id(cubin) not in self.modules:
            self.modules[id(cubin)] = Module(self.device, cubin)
        return self.modules[id(cubin)]

    def buffers_for(self, shape: Shape) -> dict[str, DeviceBuffer]:
        """A, B, C and a cuBLAS reference output sized for `shape` (kept while the shape stays the same)."""
        if self.buffer_shape != shape:
            for buffer in self.buffers.values():
                buffer.close()
            sizes = {"A": shape.M * shape.K, "B": shape.K * shape.N, "C": shape.M * shape.N,
                     "C_ref": shape.M * shape.N}
            self.buffers = {name: self.device.alloc(4 * count) for name, count in sizes.items()}
            self.buffer_shape = shape
        return self.buffers

    def close(self) -> None:
        if not self.device.poisoned:
            for handle in (self.cublas, self._tf32):
                if handle is not None:
                    handle.close()
        self.device.close()


def environment(props=None) -> dict:
    """Where a run happened: GPU, driver, NVRTC and package versions, host."""
    from importlib import metadata

    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    out = {
        "driver_gemm": __version__,
        "nvrtc_version": ".".join(map(str, nvrtc_version())),
        "cuda_bindings": version("cuda-bindings"),
        "nvmath_python": version("nvmath-python"),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
    }
    if props is not None:
        out["device"] = props.as_dict()
        out["driver_version"] = props.driver_version
    return out


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Case:
    """One unit of work: a kernel (None for cuBLAS, in the math of `precision`) on a shape, numbered in run order."""

    index: int
    kernel: KernelSpec | None
    shape: Shape
    precision: str = "fp32"

    @property
    def label(self) -> str:
        return BASELINE_LABELS[self.precision] if self.kernel is None else self.kernel.label


def cases_of(spec: Spec) -> list[Case]:
    """Per shape, cuBLAS first (its time is the 100% of the others), then every kernel.

    cuBLAS runs in FP32 math, and also in TF32 tensor-op math when a kernel of the spec is TF32.
    """
    precisions = ["fp32"] + (["tf32"] if any(k.precision == "tf32" for k in spec.kernels) else [])
    out: list[Case] = []
    for shape in spec.shapes:
        if spec.baseline:
            for precision in precisions:
                out.append(Case(len(out), None, shape, precision))
        for kernel in spec.kernels:
            out.append(Case(len(out), kernel, shape, kernel.precision))
    return out


def run_spec(spec: Spec, *, device: int = 0, isolate: bool = False, options: RunOptions = RunOptions(),
             on_result: Callable[[CaseResult], None] | None = None,
             on_start: Callable[[Case], None] | None = None, result: RunResult | None = None,
             previous: list[CaseResult] = (), context=None, stream=None) -> RunResult:
    """Run every kernel of `spec` (and cuBLAS, unless the spec turns it off) on every shape.

    Results go into `result` (a new `RunResult` if none) as they finish and
    are passed to `on_result`; if the caller interrupts the run, what was
    collected stays in `result`. Cases in `previous` (from an interrupted run
    being resumed) are kept as they are and not run again. With ``isolate=True`` the cases run in a
    child process, replaced after a kernel fault or a hang (a fault leaves the
    whole process's CUDA state unusable, so only a new process recovers);
    in-process, a fault ends the run and the remaining cases are recorded as
    not run. In-process runs can use a CUDA context and a stream that the
    caller already has (raw handles, e.g. from CuPy or PyTorch): `context`
    and `stream`; they are used, never destroyed.
    """
    if isolate and (context is not None or stream is not None):
        raise ValueError("a caller's context or stream can only be used in-process (isolate=False)")
    from ..cuda.device import read_properties

    result = result or RunResult(spec=spec.name, spec_path=str(spec.path) if spec.path else None)
    result.started = _now()
    result.settings = {"measure": asdict(spec.measure), "verify": asdict(spec.verify), "scalars": dict(spec.scalars),
                       "isolate": isolate}
    props = read_properties(device)
    result.environment = environment(props)
    done = {case_key(case) for case in previous}
    cases = [case for case in cases_of(spec) if (case.label, case.shape.label) not in done]
    compiled = compile_spec(spec, props.arch, skip=refused_everywhere(spec, limits_for_device(props))) if cases else {}
    baselines: dict[tuple[Shape, str], float] = {(case.shape, case.precision): case.timing.median_ms
                                                 for case in previous if _is_baseline(case)}
    result.cases.extend(previous)

    def finish(case: CaseResult) -> None:
        if _is_baseline(case):
            baselines[case.shape, case.precision] = case.timing.median_ms
        _finish_figures(case, case.shape, baselines.get((case.shape, case.precision)),
                        props.fp32_peak_gflops if case.precision == "fp32" else None)
        case.device = {"name": props.name, "uuid": props.uuid, "ordinal": props.ordinal}
        result.cases.append(case)
        if on_result:
            on_result(case)

    try:
        if isolate:
            from .worker import run_isolated
            run_isolated(spec, cases, compiled, device, options, finish, on_start)
        else:
            run_in_process(spec, cases, compiled, device, options, finish, on_start, context=context, stream=stream)
    finally:
        result.finished = _now()
    return result


def run_in_process(spec: Spec, cases: list[Case], compiled, device: int, options: RunOptions, finish,
                   on_start=None, *, context=None, stream=None) -> None:
    """Run `cases` in this process; after a fault that poisons CUDA, the rest are recorded as not run."""
    session = _Session(device, spec.baseline, options, context=context, stream=stream)
    try:
        for position, case in enumerate(cases):
            if on_start:
                on_start(case)
            outcome = execute_case(session, spec, case, compiled)
            finish(outcome)
            if session.device.poisoned:
                for rest in cases[position + 1:]:
                    finish(_error_case(rest.kernel, rest.shape,
                                       f"not run: CUDA is unusable in this process after {case.label} at "
                                       f"{case.shape.label} faulted (run isolated to go on past faults)"))
                return
    finally:
        session.close()


def execute_case(session: _Session, spec: Spec, case: Case, compiled) -> CaseResult:
    """One case, whatever happens to it: a CUDA error becomes an Status.ERROR result (and marks a poisoned context)."""
    try:
        with ranges.annotate(f"{case.label} {case.shape.label}", color="blue"):
            if case.kernel is None:
                return _run_cublas(session, spec, case.shape, case.precision)
            return _run_kernel(session, spec, case.kernel, case.shape, compiled.get(case.kernel.label))
    except CudaError as exc:
        session.device.mark_poisoned(exc)
        message = str(exc)
        if session.device.poisoned:
            message += " (this fault leaves CUDA unusable in the process that ran it)"
        return _error_case(case.kernel, case.shape, message)


def _is_baseline(case: CaseResult) -> bool:
    """A cuBLAS case that passed and was timed: its median is the 100% of its shape and precision."""
    return case.is_baseline and case.timing is not None and case.ok


def _finish_figures(case: CaseResult, shape: Shape, baseline_ms: float | None, peak: float | None) -> None:
    if case.timing is None:
        return
    case.gflops = gflops(shape.flops, case.timing.median_ms)
    if baseline_ms:
        case.pct_cublas = 100.0 * baseline_ms / case.timing.median_ms
    if peak:
        case.pct_peak = 100.0 * case.gflops / peak


def _error_case(kernel: KernelSpec | None, shape: Shape, message: str, status: str = Status.ERROR,
                precision: str = "fp32") -> CaseResult:
    if kernel is None:
        label = BASELINE_LABELS[precision]
        return CaseResult(kernel=label, name=label, shape=shape, status=status, message=message, precision=precision)
    return CaseResult(kernel=kernel.label, name=kernel.name, shape=shape, status=status, message=message,
                      params=dict(kernel.params), instance=kernel.instance, source=str(kernel.source),
                      precision=kernel.precision)


def _tolerance(spec: Spec, precision: str) -> float:
    return spec.verify.tf32_rel_tolerance if precision == "tf32" else spec.verify.rel_tolerance


def _uses_cpu_reference(spec: Spec, shape: Shape, session: _Session) -> bool:
    if spec.verify.reference == "cpu" or session.cublas is None:
        return True
    if spec.verify.reference == "cublas":
        return False
    return shape.flops <= spec.verify.cpu_reference_max_gflop * 1e9


def _run_cublas(session: _Session, spec: Spec, shape: Shape, precision: str = "fp32") -> CaseResult:
    cublas = session.baseline(precision)
    if cublas is None:
        return _error_case(None, shape, session.cublas_error or "cuBLAS is unavailable", precision=precision)
    label = BASELINE_LABELS[precision]
    buffers = session.buffers_for(shape)
    seed = case_seed(spec.verify.seed, label, shape.label)
    inputs = make_inputs(shape, seed)
    buffers["A"].upload(inputs.A, session.stream)
    buffers["B"].upload(inputs.B, session.stream)
    buffers["C"].fill_u32(POISON_WORD, session.stream)
    launch = cublas.prepare(buffers["A"], buffers["B"], buffers["C"], shape)
    launch()
    session.stream.synchronize()
    case = CaseResult(kernel=label, name=label, shape=shape, status=Status.REF, seed=seed, precision=precision)
    if _uses_cpu_reference(spec, shape, session):
        output = buffers["C"].download((shape.M, shape.N), np.float32, session.stream)
        verdict = compare(output, reference(inputs), rel_tolerance=_tolerance(spec, precision),
                          abs_tolerance=spec.verify.abs_tolerance)
        case.verification = verdict.as_dict()
        case.status = verdict.status
    else:
        case.message = "reference for this shape (float64 on the CPU would be slow); not itself checked"
    if session.options.time:
        case.timing, _ = measure(launch, session.device, session.stream, spec.measure, session.flusher,
                                 session.gate)
    return case


def _run_kernel(session: _Session, spec: Spec, kernel: KernelSpec, shape: Shape,
                cubin: Cubin | CompileError | None) -> CaseResult:
    """One kernel on one shape; `cubin` is None for a kernel refused before compiling (see refused_everywhere)."""
    if isinstance(cubin, CompileError):
        return _error_case(kernel, shape, str(cubin))
    device = session.device
    props = device.properties
    resources = cubin.resources_of(kernel.instance) if cubin is not None else None
    limits = limits_for_device(props)
    plan = plan_case(kernel, shape, limits, resources, dict(spec.scalars), props.sm_count)
    case = _error_case(kernel, shape, "", status=Status.PASS)
    case.resources = resources.as_dict() if resources else None
    case.launch = plan.config.as_dict() if plan.config else None
    case.occupancy = plan.occupancy.as_dict() if plan.occupancy else None
    if not plan.valid:
        case.status = Status.INVALID
        case.problems = [str(p) for p in plan.problems]
        case.message = case.problems[0]
        return case
    if cubin is None:
        return _error_case(kernel, shape, "not compiled: its launch checks failed on every shape of the spec")

    function = session.module(cubin).kernel(kernel.instance)
    function.allow_dynamic_shared(plan.config.shared_bytes)
    attributes = function.attributes
    case.attributes = attributes.as_dict()
    # Occupancy of what was loaded (the driver's register and shared-memory figures), with the
    # driver's own answer beside ours as a cross-check.
    loaded = occupancy(limits, plan.config.threads_per_block, attributes.registers,
                       attributes.static_shared_bytes, plan.config.shared_bytes)
    blocks_per_sm = function.max_active_blocks_per_sm(plan.config.threads_per_block, plan.config.shared_bytes)
    case.occupancy = {**loaded.as_dict(), "driver_blocks_per_sm": blocks_per_sm}

    buffers = session.buffers_for(shape)
    case.seed = case_seed(spec.verify.seed, kernel.label, shape.label)
    reads_c = kernel.reads_c()
    inputs = make_inputs(shape, case.seed, with_c=reads_c)
    stream = session.stream
    buffers["A"].upload(inputs.A, stream)
    buffers["B"].upload(inputs.B, stream)
    alpha = float(plan.argument_values.get("alpha", 1.0))
    beta = float(plan.argument_values.get("beta", 0.0)) if reads_c else 0.0
    if _uses_cpu_reference(spec, shape, session):
        expected, reference_name = reference(inputs, alpha, beta), "numpy-float64"
    else:
        product = session.cublas.prepare(buffers["A"], buffers["B"], buffers["C_ref"], shape)
        product()
        expected = buffers["C_ref"].download((shape.M, shape.N), np.float32, stream).astype(np.float64)
        expected = alpha * expected + (beta * inputs.C0.astype(np.float64) if beta else 0.0)
        reference_name = "cublas"
    if reads_c:
        buffers["C"].upload(inputs.C0, stream)
    else:
        buffers["C"].fill_u32(POISON_WORD, stream)

    values = [buffers[a.name] if a.ctype == "ptr" else plan.argument_values[a.name] for a in kernel.signature]
    packed = PackedArguments([a.ctype for a in kernel.signature], values, [a.name for a in kernel.signature])
    launch = PreparedLaunch(function, plan.config, packed, stream)
    with ranges.annotate("checked launch", color="green"):
        launch()
        stream.synchronize()
    output = buffers["C"].download((shape.M, shape.N), np.float32, stream)
    verdict = compare(output, expected, rel_tolerance=_tolerance(spec, kernel.precision),
                      abs_tolerance=spec.verify.abs_tolerance, reference_name=reference_name,
                      start=inputs.C0 if reads_c else None)
    case.verification = verdict.as_dict()
    case.status = verdict.status
    if verdict.status == Status.FAIL:
        from ..results.diagnose import diagnose
        case.diagnosis = diagnose(verdict, output, expected, plan)
        case.message = case.diagnosis.get("summary", "")
        if session.options.artifacts is not None:
            from ..results.artifacts import save_error_map
            picture = save_error_map(verdict, case, session.options.artifacts, case.diagnosis.get("tile"),
                                     case.message)
            case.diagnosis["error_map"] = str(picture)
    if session.options.time:
        with ranges.annotate("time", color="orange"):
            case.timing, _ = measure(launch, device, stream, spec.measure, session.flusher, session.gate)
    return case


