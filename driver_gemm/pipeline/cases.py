"""The unit of work of a run: a `Case` is one kernel (or a cuBLAS baseline) on one shape, planned once.

`cases_of` lists a spec's cases in run order; `new_record` and `not_run_record`
make the `CaseResult` a case starts from or ends as when it cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..results.records import CaseResult
from ..spec.model import KernelSpec, Shape, Spec
from ..status import BASELINE_LABELS, Status
from ..spec.dispatch import select_kernel
from .plan import CasePlan

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
    dispatch: dict | None = None     # for a kernel whose params a dispatch table chose: which entry, by which rule

    @property
    def label(self) -> str:
        return BASELINE_LABELS[self.precision] if self.kernel is None else self.kernel.label

    @property
    def is_baseline(self) -> bool:
        return self.kernel is None

    @property
    def key(self) -> tuple[str, str]:
        """What names the case within a run, as `results.records.case_key` names its record."""
        return self.label, self.shape.label


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
            kernel, chosen = dispatched(spec, kernel, shape)
            out.append(Case(len(out), kernel, shape, kernel.precision, dispatch=chosen))
    return out


def dispatched(spec: Spec, kernel: KernelSpec, shape: Shape) -> tuple[KernelSpec, dict | None]:
    """`kernel` with the params the spec's ``dispatch:`` table picks for `shape`, and which entry it picked.

    A kernel without a table is returned as it is, with None.
    """
    table = spec.dispatch.get(kernel.name)
    if table is None:
        return kernel, None
    index, rule = table.choose(shape)
    entry = table.entries[index]
    return select_kernel(kernel, table, shape), {"entry": index, "shape": entry.shape.label, "rule": rule}


def kernels_on(spec: Spec, shape: Shape) -> list[KernelSpec]:
    """The kernel configurations that run on `shape` (a dispatched kernel's as its table picks them)."""
    return [dispatched(spec, kernel, shape)[0] for kernel in spec.kernels]


def kernels_of(spec: Spec) -> list[KernelSpec]:
    """Every kernel configuration that runs on some shape of `spec`, once each, in order."""
    return list({kernel.label: kernel for shape in spec.shapes for kernel in kernels_on(spec, shape)}.values())


def new_record(case: Case, status: Status, message: str = "") -> CaseResult:
    """The record of `case` with what names it filled in, and `status` and `message`."""
    if case.kernel is None:
        return CaseResult(kernel=case.label, name=case.label, shape=case.shape, status=status, message=message,
                          precision=case.precision)
    kernel = case.kernel
    return CaseResult(kernel=kernel.label, name=kernel.name, shape=case.shape, status=status, message=message,
                      params=dict(kernel.params), instance=kernel.instance, source=str(kernel.source),
                      precision=kernel.precision, dispatch=case.dispatch)


def not_run_record(case: Case, reason: str) -> CaseResult:
    """An ERROR record for a case the run never reached; `ran` says it did not run, so a resume runs it."""
    record = new_record(case, Status.ERROR, NOT_RUN + reason)
    record.not_run = True
    return record


def ran(record: CaseResult) -> bool:
    """Whether `record` is of a case that really ran (or was refused), as opposed to one given up on unreached."""
    return not (record.not_run or (record.status == Status.ERROR and record.message.startswith(NOT_RUN)))
