"""The unit of work of a run: a `Case` is one kernel (or a baseline row) on one shape, planned once.

`cases_of` lists a spec's cases in run order; `new_record` and `not_run_record` make the
`CaseResult` a case starts from, or ends as when it cannot run. Baseline rows: cuBLAS SGEMM in FP32
(and TF32 where a kernel is ``precision: tf32``) for untyped kernels, and one cuBLASLt row per
distinct matmul (`MatmulPlan.key`) of a shape's typed kernels; each kernel case names its row
(`Case.baseline_label`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ..errors import SpecError, WrongArgumentType
from ..measure.cublaslt import CublasLtUnsupported, MatmulPlan, plan_matmul
from ..gemm.dtypes import GemmTypes
from ..gemm.operands import GemmOperands
from ..results.records import CaseResult, DispatchChoice, OperandsRecord
from ..specfile import expr
from ..specfile.load import SAME_GEMM_HINT, load_spec
from ..specfile.model import KernelSpec, Shape, Spec
from ..specfile.same_gemm import computes_differently
from ..specfile.typed import evaluate_operands
from ..status import BASELINE_LABELS, Status
from ..specfile.dispatch import select_kernel
from .buffer_plans import drawn_bias
from .case_plan import CasePlan
from .image_checks import REGISTER_MOVE_NOTE


@dataclass(frozen=True)
class LtBaseline:
    """One cuBLASLt row of a shape: the matmul its typed kernels compute, and cuBLASLt's plan for it.

    `plan` is None when cuBLASLt has no such matmul; `reason` then says why,
    and the row ends INVALID with it (its kernels get no % figure).
    """

    label: str
    types: GemmTypes
    operands: GemmOperands
    alpha: float
    beta: float
    scales: tuple[float, float]
    plan: MatmulPlan | None
    reason: str = ""

    @property
    def reads_c(self) -> bool:
        return self.beta != 0.0

# The message of a case that a run gave up on before reaching it; a resumed run runs it again.
NOT_RUN = "not run: "


@dataclass(frozen=True)
class Case:
    """One unit of work: a kernel (None for cuBLAS, in the math of `precision`) on a shape, numbered in run order.

    `plan` is the kernel's launch plan for the shape, made once before any
    process touches the GPU (None for a baseline, or before planning).
    """

    index: int
    kernel: KernelSpec | None
    shape: Shape
    precision: str = "fp32"
    plan: CasePlan | None = None
    lt: LtBaseline | None = None            # a cuBLASLt baseline row
    baseline_label: str | None = None       # a kernel's: the row its % of baseline is against
    dispatch: DispatchChoice | None = None   # for a kernel whose params a dispatch table chose: which entry, how

    @property
    def label(self) -> str:
        if self.lt is not None:
            return self.lt.label
        return BASELINE_LABELS[self.precision] if self.kernel is None else self.kernel.label

    @property
    def is_baseline(self) -> bool:
        return self.kernel is None

    @property
    def key(self) -> tuple[str, str]:
        """What names the case within a run, as `results.records.case_key` names its record."""
        return self.label, self.shape.label


def cases_of(spec: Spec | str | os.PathLike) -> list[Case]:
    """Per shape, the baseline rows first (their times are the 100% of the others), then every kernel.

    cuBLAS runs in FP32 math when the spec has an untyped kernel, and also in
    TF32 tensor-op math when one is TF32; each distinct cuBLASLt matmul of
    the typed kernels gets its row (see the module's docstring). `spec` is a
    `Spec`, or a spec file or a shipped spec's name, read with `load_spec`
    as `plan_spec` reads it.
    """
    if not isinstance(spec, Spec):
        if not isinstance(spec, (str, os.PathLike)):
            raise WrongArgumentType(f"cases_of: spec is a Spec (from load_spec or spec_from_dict) or the path of a "
                                    f"spec file, got {type(spec).__name__}")
        spec = load_spec(os.fspath(spec))
    untyped = [k for k in spec.kernels if not k.is_typed]
    precisions = ["fp32"] if untyped or not spec.kernels else []
    precisions += ["tf32"] if any(k.precision == "tf32" for k in untyped) else []
    out: list[Case] = []
    for shape in spec.shapes:
        rows, row_of = lt_baselines(spec, shape)
        if spec.baseline:
            for precision in precisions:
                out.append(Case(len(out), None, shape, precision))
            for row in rows:
                out.append(Case(len(out), None, shape, lt=row))
        for kernel in standalone(spec):
            kernel, chosen = dispatched(spec, kernel, shape)
            label = row_of.get(kernel.label) if kernel.is_typed else BASELINE_LABELS[kernel.precision]
            out.append(Case(len(out), kernel, shape, kernel.precision,
                            baseline_label=label if spec.baseline else None, dispatch=chosen))
    return out


def gemm_scalars(kernel: KernelSpec, shape: Shape, scalars: dict[str, float]) -> tuple[float, float]:
    """The alpha and beta `kernel` computes with (1 and 0 where its signature takes none; beta only when it reads C),
    before fp8 scales are folded into alpha."""
    env = {**scalars, **shape.as_env(), **kernel.numeric_params}
    found = kernel.epilogue_scalars()   # overwrite: 1 and 0; accumulate: 1 and 1
    for _, argument in kernel.leaf_arguments():
        if argument.name in ("alpha", "beta") and argument.value is not None:
            try:
                found[argument.name] = float(argument.value.evaluate(env))
            except expr.ExpressionError:
                continue
    return found.get("alpha", 1.0), found.get("beta", 0.0)


def lt_baselines(spec: Spec, shape: Shape) -> tuple[list[LtBaseline], dict[str, str]]:
    """The cuBLASLt rows of `shape`, one per distinct matmul of its typed kernels, and each kernel's row label.

    A kernel whose operands do not evaluate on this shape (its case is
    INVALID) has no row. Two different matmuls that would share a label
    (they differ only in padding) are told apart by a suffix ``-2``, ``-3``.
    """
    rows: dict[tuple, LtBaseline] = {}
    row_of: dict[str, str] = {}
    labels: set[str] = set()
    for kernel in kernels_on(spec, shape):
        if not kernel.is_typed:
            continue
        try:
            operands, _ = evaluate_operands(kernel, shape)
        except SpecError:
            continue
        # A grouped kernel is timed against the product that holds its groups in one call (`GemmOperands.dense`).
        operands = operands.dense()
        if operands.gram is not None:
            # cuBLASLt's GEMM of the one buffer with itself writes all of C, whichever triangle the kernel writes.
            operands = replace(operands, gram=operands.gram.whole())
        alpha, beta = gemm_scalars(kernel, shape, dict(spec.scalars))
        types, scales = kernel.operands.types, kernel.operands.scales
        try:
            plan: MatmulPlan | None = plan_matmul(types, operands, alpha, beta, scale_a=scales[0], scale_b=scales[1])
            key, label, reason = plan.key, plan.label, ""
        except CublasLtUnsupported as exc:
            plan, label, reason = None, exc.label, exc.reason
            key = ("unsupported", label, reason)
        if key not in rows:
            unique, count = label, 1
            while unique in labels:
                count += 1
                unique = f"{label}-{count}"
            labels.add(unique)
            rows[key] = LtBaseline(unique, types, operands, alpha, beta, scales, plan, reason)
        row_of[kernel.label] = rows[key].label
    return list(rows.values()), row_of


def operands_summary(types: GemmTypes, operands: GemmOperands, bias: str | None = None,
                     elementwise: tuple = ()) -> OperandsRecord:
    """What a typed record says about its operands: types, layout code, batch, leading dimensions, strides, a
    grouped GEMM's groups, a Gram product's one input (and the triangle of C written), and what C is checked against
    beside the product: the inputs' structure, a drawn bias
    (along N or M) and the kernel's element-wise functions (`gemm.elementwise.ElementwiseFunction`s)."""
    return OperandsRecord(types=types.as_dict(), layout=operands.layout_code, batch=operands.batch,
                          ld={key: getattr(operands, key).ld for key in "abc"},
                          batch_stride={key: getattr(operands, key).recorded_stride for key in "abc"},
                          batch_levels=list(operands.levels) if operands.levels is not None else None,
                          groups=operands.groups.as_dict() if operands.groups is not None else None,
                          structure=dict(operands.structure) or None,
                          gram=operands.gram.as_dict() if operands.gram is not None else None, bias=bias,
                          elementwise=[function.name if not function.argument else
                                       {function.name: list(function.argument) if len(function.argument) > 1
                                        else function.argument[0]} for function in elementwise] or None)


def standalone(spec: Spec) -> list[KernelSpec]:
    """The spec's kernels that run on every shape: all but the members of a dispatch table (`Spec.dispatch_members`),
    which run where their family's table picks them."""
    members = spec.dispatch_members
    return [kernel for kernel in spec.kernels if kernel.name not in members] if members else list(spec.kernels)


def dispatched(spec: Spec, kernel: KernelSpec, shape: Shape) -> tuple[KernelSpec, DispatchChoice | None]:
    """`kernel` with the params the spec's ``dispatch:`` table picks for `shape`, and which entry it picked; where
    the entry names a member, that member with the entry's params.

    A kernel without a table is returned as it is, with None.
    """
    table = spec.dispatch.get(kernel.name)
    if table is None:
        return kernel, None
    index, rule = table.choose(shape)
    entry = table.entries[index]
    members = {k.name: k for k in spec.kernels if k.name in table.members} if table.members else None
    chosen = select_kernel(kernel, table, shape, members)
    return chosen, DispatchChoice(index, entry.shape.label, rule, table=kernel.name if chosen.name != kernel.name
                                  else None)


# How a plan says which rule of a table picked a case (`specfile.dispatch.DispatchTable.choose`'s rules).
PICKED_BY = {"exact": "the entry of this very shape", "when": "its when: holds here",
             "nearest": "the nearest of its shapes"}


def picked_text(family: str, choice: DispatchChoice) -> str:
    """``picked by v4's dispatch table: entry 1 (64x64x64), the entry of this very shape``: why a case runs the
    configuration it runs, as a plan says it."""
    return f"picked by {family}'s dispatch table: entry {choice.entry} ({choice.shape}), {PICKED_BY[choice.rule]}"


def member_problem(spec: Spec, kernel: KernelSpec, shape: Shape) -> SpecError | None:
    """Where `kernel` (with the params its entry gives) is a member that its family's table picks for `shape`, and
    computes another GEMM there than the family with its own params (`specfile.same_gemm`): the problem that makes
    its case INVALID, naming the table's entry, the rule that picked it and what differs. None otherwise.

    The spec reader compares the two on the entry's own shape; a `when:` or the nearest-shape rule picks the member
    on other shapes too, where a batch count, a leading dimension, alpha or a block scale computed from the shape
    may differ, and the member's rows would then be counted as the family's for another product.
    """
    for family_name, table in spec.dispatch.items():
        if kernel.name not in table.members:
            continue
        index, rule = table.choose(shape)
        family = next((k for k in spec.kernels if k.name == family_name), None)
        if table.entries[index].kernel != kernel.name or family is None:
            return None      # not run through the table here: a kernel of its own
        try:
            evaluate_operands(kernel, shape)
        except SpecError:    # its case is INVALID at the field that does not evaluate, which says more
            return None
        differs = computes_differently(family, kernel, shape, spec.scalars)
        if not differs:
            return None
        choice = DispatchChoice(index, table.entries[index].shape.label, rule, table=family_name)
        entry_path = f"dispatch.{family_name}[{index}]"
        return SpecError(f"kernel {kernel.name} computes another GEMM than {family_name} on {shape.label}: "
                         f"{differs}; {picked_text(family_name, choice)}", where=kernel.where or None,
                         field=kernel.field_path,
                         hint=f"{SAME_GEMM_HINT}; keep {entry_path} off the shapes where they differ (its when:, or "
                              "an entry of the family's own for such a shape)")
    return None


def kernels_on(spec: Spec, shape: Shape) -> list[KernelSpec]:
    """The kernel configurations that run on `shape` (a dispatched kernel's as its table picks them)."""
    return [dispatched(spec, kernel, shape)[0] for kernel in standalone(spec)]


def kernels_of(spec: Spec) -> list[KernelSpec]:
    """Every kernel configuration that runs on some shape of `spec`, once each, in order."""
    return list({kernel.label: kernel for shape in spec.shapes for kernel in kernels_on(spec, shape)}.values())


def new_record(case: Case, status: Status, message: str = "") -> CaseResult:
    """The record of `case` with what names it filled in, and `status` and `message`."""
    if case.lt is not None:
        return CaseResult(kernel=case.label, name=case.label, shape=case.shape, status=status, message=message,
                          operands=operands_summary(case.lt.types, case.lt.operands))
    if case.kernel is None:
        return CaseResult(kernel=case.label, name=case.label, shape=case.shape, status=status, message=message,
                          precision=case.precision)
    kernel = case.kernel
    family = case.dispatch.table if case.dispatch is not None and case.dispatch.table else kernel.name
    record = CaseResult(kernel=kernel.label, name=family, shape=case.shape, status=status, message=message,
                        params=dict(kernel.params), instance=kernel.instance, source=str(kernel.source),
                        precision=kernel.precision, dispatch=case.dispatch)
    if kernel.is_typed:
        record.baseline = case.baseline_label
        operands = case.plan.operands if case.plan is not None else None
        if operands is not None:
            bias = drawn_bias(case.plan.buffers.values())
            record.operands = operands_summary(kernel.operands.types, operands, bias.along if bias else None,
                                              kernel.operands.elementwise)
    return record


def timeout_record(case: Case, seconds: float) -> CaseResult:
    """The TIMEOUT record of `case`, stopped after `seconds` without a result; where its plan foresaw a hang (a
    setmaxnreg request beyond the block's registers), the message says so."""
    message = f"no result after {seconds:g} s: the case was stopped (measure.case_timeout_s)"
    foreseen = [note for note in (case.plan.notes if case.plan is not None else ()) if
                note.startswith(REGISTER_MOVE_NOTE)]
    if foreseen:
        message += f"; its plan noted why it may hang: {foreseen[0]}"
    return new_record(case, Status.TIMEOUT, message)


def not_run_record(case: Case, reason: str) -> CaseResult:
    """An ERROR record for a case the run never reached; `ran` says it did not run, so a resume runs it."""
    record = new_record(case, Status.ERROR, NOT_RUN + reason)
    record.not_run = True
    return record


def ran(record: CaseResult) -> bool:
    """Whether `record` is of a case that really ran (or was refused), as opposed to one given up on unreached."""
    return not (record.not_run or (record.status == Status.ERROR and record.message.startswith(NOT_RUN)))


def left_to_run(spec: Spec, previous) -> bool:
    """Whether any case of `spec` is still to run after `previous` (a resumed run's records): a GPU worker is wanted."""
    done = {(record.kernel, record.shape.label) for record in previous if ran(record)}
    return any(case.key not in done for case in cases_of(spec))
