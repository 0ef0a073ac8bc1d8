"""The steps of one case, each a function over the case's `CaseRun`, in the order the runner calls them.

A kernel case: plan -> load -> inputs -> reference -> launch_verify -> diagnose -> time; a cuBLAS
case: load -> inputs -> launch_verify -> time -> keep (for its shape's kernels to be timed against in
rounds); typed cases take inputs, reference and check from `typed_steps`. A step that decides the
case (a refused plan, a failed compile) sets its status and marks the run `stopped`, and no further
step runs. Steps raise freely: the funnel records it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence, cast

import numpy as np

from ..cuda import nvtx as ranges
from ..cuda.compile import Cubin
from ..cuda.module import Kernel
from ..cuda.occupancy import Occupancy, cluster_waves, occupancy, waves
from ..errors import CompileError
from ..measure.inputs import Inputs, ShapeOperands, case_seed, make_inputs
from ..measure import memory as memory_needs
from ..measure.reference import (CPU_REFERENCE, CUBLAS_REFERENCE, cpu_reference, scaled_product, tolerance,
                                 uses_cpu_reference)
from ..measure.rounds import interleave
from ..measure.timing import measure
from ..measure.verify import POISON_WORD, Verdict, compare
from ..results.records import (AttributeRecord, CaseResult, DiagnosisRecord, InterleavedRecord, LaunchRecord,
                               OccupancyRecord, ResourceRecord, VerificationRecord)
from ..specfile.model import Spec
from ..status import Status
from ..planning.build import led_by_spec_line, plan_with_drivers_count
from ..planning.case_plan import cooperative_grid_refusal
from ..planning.cases import Case, new_record
from ..cuda.occupancy import limits_from_device
from .bind import build_launch
from .state import Session
from . import typed_steps


@dataclass
class CaseRun:
    """What one case's steps hand on to each other, and the record they fill in."""

    case: Case
    session: Session
    spec: Spec
    compiled: Cubin | CompileError | None
    record: CaseResult
    stopped: bool = False
    kernel: Kernel | None = None
    launch: Callable[[], None] | None = None
    operands: ShapeOperands | None = None          # the shape's operands and references, as the session keeps them
    inputs: Inputs | None = None
    expected: np.ndarray | None = None
    reference_name: str = CPU_REFERENCE
    output: np.ndarray | None = None
    verdict: Verdict | None = None
    typed: typed_steps.TypedCase | None = None     # typed kernels and cuBLASLt rows

    def stop(self, status: Status, message: str) -> None:
        """End the case here with `status`: no later step runs."""
        self.record.status = status
        self.record.message = message
        self.stopped = True


Step = Callable[[CaseRun], None]


# ----------------------------------------------------------------------------------------------- kernels

def plan(run: CaseRun) -> None:
    """Settle the case when it cannot run: its source did not compile, or its plan refuses the launch."""
    case_plan, record = run.case.plan, run.record
    if isinstance(run.compiled, CompileError):
        # Led by the kernel's line in the spec, as `plan` says it.
        run.stop(Status.ERROR, str(led_by_spec_line(run.compiled, [run.case.kernel])))
        return
    assert case_plan is not None, "kernel cases are planned before they run (build.plan_cases)"
    record.resources = ResourceRecord.from_json(case_plan.resources.as_dict()) if case_plan.resources else None
    record.launch = LaunchRecord.from_json(case_plan.config.as_dict()) if case_plan.config else None
    record.occupancy = OccupancyRecord.from_json(case_plan.occupancy.as_dict()) if case_plan.occupancy else None
    if not case_plan.valid:
        record.problems = [str(p) for p in case_plan.problems]
        run.stop(Status.INVALID, record.problems[0])
    elif run.compiled is None:
        run.stop(Status.ERROR, "not compiled: its launch checks failed on every shape of the spec")


def memory(run: CaseRun) -> None:
    """Refuse the case, before anything of it is allocated, when its operands, reference and copies do not fit
    the host's available memory or the GPU's free memory (`measure.memory`); a cuBLAS row also when a size does not
    fit cuBLAS's int."""
    case, session = run.case, run.session
    if case.is_baseline and case.lt is None:
        too_large = memory_needs.cublas_size_refusal(case.shape.M, case.shape.N, case.shape.K)
        if too_large:
            run.stop(Status.INVALID, too_large)
            return
    if case.lt is not None or (case.kernel is not None and case.kernel.is_typed):
        typed = typed_steps.typed_case(run)
        if typed.operands is None:
            return
        needs = memory_needs.typed_needs(typed.operands, typed.types, reads_c=typed.beta != 0.0)
    else:
        reads_c = case.kernel is not None and case.kernel.reads_c()
        needs = memory_needs.fp32_needs(case.shape.M, case.shape.N, case.shape.K, reads_c=reads_c)
    host = memory_needs.host_available()
    if host is not None:
        # What the session already holds for this shape is reused, not allocated again.
        host += session.held_bytes(case.shape)
    device = memory_needs.device_available(session.device)
    if device is not None:
        # The session's buffers are reused or freed before a case's own are allocated.
        device += sum(buffer.nbytes for buffer in [*session.buffers.values(), *session.typed_buffers.values()])
    refusal = memory_needs.memory_refusal(needs, host, device, device_name=f"GPU {session.ordinal}")
    if refusal:
        run.stop(Status.INVALID, refusal)


def load(run: CaseRun) -> None:
    """Load the kernel, opt in to its dynamic shared memory (and clusters past 8 blocks), plan a grid of the clusters
    that fit with the driver's count of them, and cross-check occupancy with the driver."""
    config = run.case.plan.config
    compiled = cast(Cubin, run.compiled)      # a case whose kernel did not compile stopped at its first step
    kernel = run.session.module(compiled).kernel(run.case.kernel.instance, compiled)
    kernel.allow_dynamic_shared(config.shared_bytes)
    if run.case.plan.attributes is not None and run.case.plan.attributes.non_portable:
        kernel.allow_non_portable_cluster()
    if run.case.plan.active_clusters is not None:
        _plan_with_drivers_count(run, kernel, compiled)
        if run.stopped:
            return
        config = run.case.plan.config
    attributes = kernel.attributes
    run.record.attributes = AttributeRecord.from_json(attributes.as_dict())
    # Occupancy of what was loaded (the driver's register and shared-memory figures, the compiler's barriers,
    # which the driver does not report), with the driver's own answer beside ours as a cross-check.
    properties = run.session.device.properties
    resources = run.case.plan.resources
    loaded = occupancy(limits_from_device(properties), config.threads_per_block,
                       attributes.registers, attributes.static_shared_bytes, config.shared_bytes,
                       barriers=resources.barriers if resources is not None else 0)
    blocks_per_sm = kernel.max_active_blocks_per_sm(config.threads_per_block, config.shared_bytes)
    figures = {**loaded.as_dict(), "driver_blocks_per_sm": blocks_per_sm,
               "driver_waves": _finite(waves(config.total_blocks, blocks_per_sm, properties.sm_count))}
    disagreement = occupancy_disagreement(loaded, blocks_per_sm)
    if disagreement:
        figures[OCCUPANCY_DISAGREEMENT_KEY] = disagreement
        run.record.message = run.record.message or disagreement
    run.record.occupancy = OccupancyRecord.from_json(figures)
    run.record.attributes = replace(run.record.attributes, param_info=kernel.param_layout_check())
    run.kernel = kernel
    if run.case.plan.attributes is not None and run.case.plan.attributes.cooperative:
        refusal = cooperative_grid_refusal(config.total_blocks, blocks_per_sm, properties.sm_count)
        if refusal:     # the driver would refuse the launch (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
            run.stop(Status.INVALID, f"{refusal}, by the driver's count for the loaded kernel")
            return
    _load_cluster(run)


OCCUPANCY_DISAGREEMENT_KEY = "driver_disagrees"   # the occupancy record's key for `occupancy_disagreement`


def occupancy_disagreement(ours: Occupancy, driver_blocks_per_sm: int) -> str | None:
    """What to say where the blocks an SM the plan computes (`cuda.occupancy.occupancy`, for the loaded kernel)
    are not the driver's (cuOccupancyMaxActiveBlocksPerMultiprocessor); None where they agree. The run's waves and
    cooperative-grid check use the driver's count; the plan's figure, which `plan` gives offline, is then wrong for
    this kernel, and saying so keeps that from passing unseen."""
    if ours.blocks_per_sm == driver_blocks_per_sm:
        return None
    limited_by = f", limited by {', '.join(ours.limited_by)}" if ours.limited_by else ""
    return (f"occupancy: the plan counts {ours.blocks_per_sm} blocks an SM{limited_by}, the driver "
            f"{driver_blocks_per_sm} (cuOccupancyMaxActiveBlocksPerMultiprocessor): the run's waves and cooperative "
            "check use the driver's count, and the plan's blk/SM, occ and waves for this kernel are not this GPU's")


def _plan_with_drivers_count(run: CaseRun, kernel: Kernel, compiled: Cubin) -> None:
    """The case planned again where its grid reads `max_active_clusters` and the driver counts otherwise than the
    plan's estimate: clusters of its launch (cuOccupancyMaxActiveClusters), or for a launch without one, blocks
    (those an SM holds times the SMs)."""
    plan, session = run.case.plan, run.session
    config, attributes = plan.config, plan.attributes
    if attributes is not None and attributes.cluster:
        count = kernel.max_active_clusters(config, attributes, session.stream)
    else:
        count = kernel.max_active_blocks_per_sm(config.threads_per_block, config.shared_bytes) \
            * session.device.properties.sm_count
    if plan.active_clusters.count == count:
        return
    plan = plan_with_drivers_count(plan, compiled, limits_from_device(session.device.properties), count)
    run.case = replace(run.case, plan=plan)
    run.record.launch = LaunchRecord.from_json(plan.config.as_dict()) if plan.config else None
    if not plan.valid:
        run.record.problems = [str(p) for p in plan.problems]
        run.stop(Status.INVALID, run.record.problems[0])


def _finite(value: float) -> float | None:
    """`value`, or None where no block or cluster fits (infinite waves: the case stops INVALID for that)."""
    return value if math.isfinite(value) else None


def _load_cluster(run: CaseRun) -> None:
    """For a cluster launch: the driver's count of clusters that fit at once, and the grid's waves of them."""
    attributes = run.case.plan.attributes
    if attributes is None or not attributes.cluster:
        return
    config = run.case.plan.config
    clusters = run.kernel.max_active_clusters(config, attributes, run.session.stream)
    run.record.occupancy = replace(run.record.occupancy, cluster=tuple(attributes.cluster),
                                   driver_max_active_clusters=clusters,
                                   driver_cluster_waves=_finite(cluster_waves(config.total_blocks,
                                                                              math.prod(attributes.cluster), clusters)))
    if clusters == 0:
        run.stop(Status.INVALID, f"no cluster of {'x'.join(map(str, attributes.cluster))} blocks fits this GPU "
                                   "with this kernel's resources (cuOccupancyMaxActiveClusters is 0)")


def inputs(run: CaseRun) -> None:
    """The shape's inputs (`held_inputs`), A and B uploaded.

    A and B are uploaded for every case, so that a stray write of an earlier
    kernel into them cannot fail this one.
    """
    held_inputs(run)
    upload_inputs(run)


def held_inputs(run: CaseRun) -> None:
    """The shape's inputs, drawn from its seed by its first case on this GPU and kept by the session."""
    session, shape = run.session, run.case.shape
    reads_c = run.case.kernel is not None and run.case.kernel.reads_c()
    seed = case_seed(run.spec.verify.seed, shape.label)
    run.operands = session.operands_for(shape, seed, lambda: ShapeOperands(shape, make_inputs(shape, seed,
                                                                                             with_c=reads_c)))
    run.inputs = run.operands.inputs_for(reads_c)
    run.record.seed = run.inputs.seed
    for operand in (run.inputs.A, run.inputs.B, run.inputs.C0):
        session.lock_operand(run.operands, operand)


def upload_inputs(run: CaseRun) -> None:
    """`run`'s A and B into the shape's buffers."""
    buffers = run.session.buffers_for(run.case.shape)
    buffers["A"].upload(run.inputs.A, run.session.stream)
    buffers["B"].upload(run.inputs.B, run.session.stream)


def _scalars(run: CaseRun) -> tuple[float, float]:
    values = run.case.plan.argument_values
    alpha = float(values.get("alpha", 1.0))
    beta = float(values.get("beta", 0.0)) if run.inputs.C0 is not None else 0.0
    return alpha, beta


def reference(run: CaseRun) -> None:
    """The float64 output to check against: NumPy's, or cuBLAS's for shapes too large for the CPU."""
    run.expected, run.reference_name = _expected(run, *_scalars(run))


def _expected(run: CaseRun, alpha: float, beta: float) -> tuple[np.ndarray, str]:
    """The reference for `run`'s inputs and scalars, worked out by the shape's first case that needs it."""
    session, spec, shape = run.session, run.spec, run.case.shape
    known = run.operands.references
    key = (alpha, beta, run.inputs.C0 is not None)
    if key not in known:
        if uses_cpu_reference(spec.verify, shape, session.cublas is not None):
            known[key] = cpu_reference(run.inputs, alpha, beta), CPU_REFERENCE
        else:
            buffers = session.buffers_for(shape)
            session.cublas.prepare(buffers["A"], buffers["B"], buffers["C_ref"], shape)()
            product = buffers["C_ref"].download((shape.M, shape.N), np.float32, session.stream)
            known[key] = scaled_product(product, run.inputs, alpha, beta), CUBLAS_REFERENCE
    return known[key]


def _reset_output(run: CaseRun) -> None:
    """C before the launch: its starting values for a kernel that reads C, else the poison pattern."""
    output = run.session.buffers_for(run.case.shape)["C"]
    if run.inputs.C0 is not None:
        output.upload(run.inputs.C0, run.session.stream)
    else:
        output.fill_u32(POISON_WORD, run.session.stream)


def _check_output(run: CaseRun, precision: str, beta: float = 0.0) -> None:
    """Read C back and set the case's verdict; `beta`: what the reference multiplied C0 by (0 without C0)."""
    session, shape = run.session, run.case.shape
    run.output = session.buffers_for(shape)["C"].download_into(session.output_array(shape), session.stream)
    run.verdict = compare(run.output, run.expected, rel_tolerance=tolerance(run.spec.verify, precision, shape.K),
                          abs_tolerance=run.spec.verify.abs_tolerance, reference_name=run.reference_name,
                          start=run.inputs.C0, beta=beta)
    run.record.verification = VerificationRecord.from_json(run.verdict.as_dict())
    run.record.status = run.verdict.status


def bind(run: CaseRun) -> None:
    """The launch, its arguments bound from the kernel's signature to the shape's buffers (nothing launched)."""
    run.launch = build_launch(run, run.session.buffers_for(run.case.shape))


def launch_verify(run: CaseRun) -> None:
    """Bind the arguments from the kernel's signature, launch once, and compare C with the reference."""
    session, kernel_spec = run.session, run.case.kernel
    _reset_output(run)
    bind(run)
    with ranges.annotate("checked launch", color="green"):
        run.launch()
        session.stream.synchronize()
    _check_output(run, kernel_spec.precision, _scalars(run)[1])


def untyped_diagnosis_facts(run: CaseRun) -> dict:
    """What the diagnosis of an FP32 kernel's wrong C may read beside C and the reference: alpha and beta, and C0
    where C started from it (`typed_steps.diagnosis_facts` for a typed case); nothing for the vendor row."""
    if run.case.kernel is None or run.inputs is None:
        return {}
    alpha, beta = _scalars(run)
    return {"alpha": alpha, "beta": beta, "start": run.inputs.C0}


def diagnose(run: CaseRun) -> None:
    """For a wrong output: where and how it is wrong, and an error map when the run keeps artifacts."""
    if run.verdict is None or run.verdict.status != Status.FAIL:
        return
    # only for a wrong output: kept out of a GPU worker's start-up
    from ..results.artifacts import save_error_map
    from ..results.diagnose import diagnose_output

    record = run.record
    matrices = run.typed.operands.batch if run.typed is not None else 1
    facts = typed_steps.diagnosis_facts(run) if run.typed is not None else untyped_diagnosis_facts(run)
    found = diagnose_output(run.verdict, run.output, run.expected, run.case.plan, matrices, **facts)
    row_groups = facts.get("row_groups")
    if row_groups is not None:       # C's own rows (typed_steps.check_output): each mismatch names its group too
        height = run.typed.operands.groups.M
        for entry in found["first_mismatches"]:
            entry["group"] = int(row_groups[entry.get("matrix", 0) * height + entry["row"]])
    if run.verdict.note:
        # Said first: what the counts and the places cannot say (the product missing beside beta C0, C rounded
        # toward zero, C started poisoned because beta is 0).
        found["summary"] = "; ".join(text for text in (run.verdict.note, found["summary"]) if text)
    record.diagnosis = DiagnosisRecord.from_json(found)
    record.message = record.diagnosis.summary or ""
    if run.session.options.artifacts is not None:
        picture = save_error_map(run.verdict, record, run.session.options.artifacts, record.diagnosis.tile,
                                 record.message)
        record.diagnosis = replace(record.diagnosis, error_map=str(picture))


def time(run: CaseRun) -> None:
    """Time the launch (nvbench's cold measurement), unless the run verifies only; a kernel whose spec asks for
    rounds (``measure.rounds``) is timed in rounds alternating with its vendor row, where this session kept it."""
    session, settings = run.session, run.spec.measure
    if not session.options.time:
        return
    session.wait_for_cublas()

    def measure_launch(launch: Callable[[], None]):
        return lambda each: measure(launch, session.device, session.stream, each, session.flusher, session.gate,
                                    clocks=session.clocks, timer=session.kernel_timer())

    vendor = session.vendor_row(run.case.shape, run.case.baseline_label) \
        if settings.rounds > 1 and not run.case.is_baseline else None
    with ranges.annotate("time", color="orange"):
        if vendor is None:
            run.record.timing, _ = measure_launch(run.launch)(settings)
            return
        outcome = interleave(measure_launch(run.launch), measure_launch(vendor.launch), settings, settings.rounds)
        run.record.timing = outcome.kernel_timing
        run.record.interleaved = InterleavedRecord.of(outcome, run.case.baseline_label)


# ---------------------------------------------------------------------------------------------- baselines

def load_baseline(run: CaseRun) -> None:
    """The cuBLAS handle in the case's math; without one the case is an ERROR saying why."""
    precision = run.case.precision
    handle = run.session.baseline(precision)
    if handle is None:
        run.stop(Status.ERROR, run.session.baseline_errors.get(precision, "cuBLAS is unavailable"))
        return
    buffers = run.session.buffers_for(run.case.shape)
    run.launch = handle.prepare(buffers["A"], buffers["B"], buffers["C"], run.case.shape)
    run.record.status = Status.REF


def keep_vendor_row(run: CaseRun) -> None:
    """Keep a timed vendor row's launch and buffers for its shape's kernels to be timed against in rounds."""
    if run.spec.measure.rounds > 1 and run.record.timing is not None and run.record.ok:
        run.session.keep_vendor_row(run.case.shape, run.case.label, run.launch, typed=run.case.lt is not None)


def launch_verify_baseline(run: CaseRun) -> None:
    """Run cuBLAS once; check it against the CPU where the CPU reference is affordable, else it is the reference."""
    session, shape = run.session, run.case.shape
    _reset_output(run)
    run.launch()
    session.stream.synchronize()
    if uses_cpu_reference(run.spec.verify, shape, session.cublas is not None):
        run.expected, run.reference_name = _expected(run, 1.0, 0.0)
        _check_output(run, run.case.precision)
    else:
        run.record.message = "reference for this shape (float64 on the CPU would be slow); not itself checked"


KERNEL_STEPS: tuple[tuple[str, Step], ...] = (
    ("plan", plan), ("memory", memory), ("load", load), ("inputs", inputs), ("reference", reference),
    ("launch_verify", launch_verify), ("diagnose", diagnose), ("time", time),
)
# The operands first: a worker's first case draws them while its cuBLAS library may still be loading.
BASELINE_STEPS: tuple[tuple[str, Step], ...] = (
    ("memory", memory), ("inputs", inputs), ("load", load_baseline), ("launch_verify", launch_verify_baseline),
    ("diagnose", diagnose), ("time", time), ("keep", keep_vendor_row),
)


TYPED_KERNEL_STEPS: tuple[tuple[str, Step], ...] = (
    ("plan", plan), ("memory", memory), ("load", load), ("inputs", typed_steps.inputs),
    ("reference", typed_steps.reference_step),
    ("launch_verify", typed_steps.launch_verify), ("diagnose", diagnose), ("time", time),
)
CUBLASLT_STEPS: tuple[tuple[str, Step], ...] = (
    ("load", typed_steps.load_lt), ("memory", memory), ("inputs", typed_steps.inputs),
    ("reference", typed_steps.reference_step),
    ("launch_verify", typed_steps.launch_verify_lt), ("diagnose", diagnose), ("time", time), ("keep", keep_vendor_row),
)


def steps_for(case: Case) -> Sequence[tuple[str, Step]]:
    """The named steps of `case`, in order."""
    if case.lt is not None:
        return CUBLASLT_STEPS
    if case.is_baseline:
        return BASELINE_STEPS
    return TYPED_KERNEL_STEPS if case.kernel.is_typed else KERNEL_STEPS


def start(case: Case, session: Session, spec: Spec, compiled: Cubin | CompileError | None) -> CaseRun:
    """The state a case's steps begin from: its record, named, PASS until a step says otherwise."""
    return CaseRun(case, session, spec, compiled, new_record(case, Status.PASS))
