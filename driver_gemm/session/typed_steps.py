"""The steps of typed cases: a kernel that declares its operands, and a cuBLASLt baseline row.

A typed kernel case runs the same steps as any other (`steps` puts them together), with these in
place of the FP32 inputs, reference and check: inputs drawn exactly representable in each operand's
type and uploaded raw in the case's layout (padding poisoned), C poisoned or set to C0, a float64
reference, and the raw output decoded and checked with the types' tolerance. A cuBLASLt row runs
the same on the same kinds of buffers. Each step takes the case's `steps.CaseRun`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
import math
from typing import Any

import numpy as np

from ..cuda import nvtx as ranges
from ..gemm import dtypes
from ..measure.cublaslt import CublasLtUnsupported
from ..measure.timing import measure
from ..measure.vendor_choice import HEURISTIC, BaselineChoice, choose_candidate, final_settings, preselect_settings
from ..gemm.dtypes import GemmTypes
from ..gemm.elementwise import MAX_TOLERANCE, ElementwiseFunction, FunctionsBound, apply_functions
from ..measure.inputs import case_seed
from ..gemm.operands import (GemmOperands, KernelOutput, TypedInputs, input_bytes, make_typed_inputs, output_bytes,
                                read_output, reference)
from ..measure.reference import CPU_REFERENCE
from ..planning.buffer_plans import BiasVector, drawn_bias
from ..planning.quantized_layouts import draw_quantized
from ..planning.tensor_scales import product_alpha
from ..measure.verify import Verdict, compare_typed, compare_written_part
from ..results.records import VerificationRecord
from ..specfile.model import VerifySettings
from ..status import Status
from .bind import build_launch
from .state import HeldTypedInputs

# Above verify.cpu_reference_max_gflop, outputs of 16 bits or fewer are checked against a float32 product of
# the (exact) inputs: its error is far below their tolerance, and it takes half the time of float64.
FLOAT32_REFERENCE = "numpy-float32"


@dataclass
class TypedCase:
    """What a typed case computes: types, operands in memory, alpha and beta, and its inputs once drawn."""

    types: GemmTypes
    operands: GemmOperands
    alpha: float                 # the product's: alpha x the fp8 scales, however they reach the kernel
    beta: float
    inputs: TypedInputs | None = None
    held: HeldTypedInputs | None = None    # where the session keeps the inputs (and their references)
    output: KernelOutput | None = None
    # A kernel's ``elementwise:`` functions, once the reference has applied them: what its tolerance follows from.
    functions_bound: FunctionsBound | None = None


@dataclass(frozen=True)
class WorkedReference:
    """How a reference was worked out, kept beside it: the name the verdict gives it, and the bound of the
    element-wise functions applied to it (None: the product alone)."""

    name: str
    functions_bound: FunctionsBound | None = None


def typed_case(run) -> TypedCase:
    """The `TypedCase` of `run`: from the kernel's plan, or from the cuBLASLt row."""
    case = run.case
    if case.lt is not None:
        scale = case.lt.scales[0] * case.lt.scales[1]
        return TypedCase(case.lt.types, case.lt.operands, case.lt.alpha * scale, case.lt.beta)
    values = case.plan.argument_values
    reads_c = case.kernel.reads_c()
    return TypedCase(case.kernel.operands.types, case.plan.operands, product_alpha(case.kernel, values),
                     float(values.get("beta", 0.0)) if reads_c else 0.0)


def typed_tolerance(settings: VerifySettings, types: GemmTypes, K: int,
                    functions_bound: FunctionsBound | None = None) -> float:
    """The spec's ``verify.rel_tolerance`` when it sets one, else the types' own (`dtypes.error_bound`), carried
    through the kernel's element-wise functions where it applies some (`FunctionsBound.tolerance`), and then at
    most `MAX_TOLERANCE` (also where the values leave nothing finite to bound: the check then fails on them)."""
    if settings.rel_tolerance is not None:
        return settings.rel_tolerance
    product = dtypes.error_bound(types, K)
    if functions_bound is None:
        return product
    worked = functions_bound.tolerance(product, types.c.unit_roundoff, dtypes.SAFETY)
    return min(worked, MAX_TOLERANCE) if math.isfinite(worked) else MAX_TOLERANCE


def capped_note(settings: VerifySettings, types: GemmTypes, K: int,
                functions_bound: FunctionsBound | None = None) -> str:
    """What the verdict's reference adds where `typed_tolerance` capped the bound of the functions: ''
    elsewhere."""
    if settings.rel_tolerance is not None or functions_bound is None:
        return ""
    worked = functions_bound.tolerance(dtypes.error_bound(types, K), types.c.unit_roundoff, dtypes.SAFETY)
    if math.isfinite(worked) and worked <= MAX_TOLERANCE:
        return ""
    shown = f"{worked:.3g}" if math.isfinite(worked) else "not finite"
    return (f" (tolerance capped at {MAX_TOLERANCE:g}: the bound carried through the element-wise functions is "
            f"{shown}; set verify: {{tolerance: ...}} to check with another)")


def inputs(run) -> None:
    """The case's inputs in their types (`held_inputs`), and A and B uploaded as laid out: again for every case, so
    that a stray write of an earlier kernel into them cannot fail this one."""
    held_inputs(run)
    upload_inputs(run)


def held_inputs(run) -> None:
    """The case's inputs in their types, drawn from the shape's seed by the first case of the same matmul (types,
    layouts, batch; C0 where beta is not 0) on this GPU and kept by the session, so that the other kernels of the
    shape and its vendor row multiply the same numbers."""
    typed = run.typed = typed_case(run)
    seed = case_seed(run.spec.verify.seed, run.case.shape.label)
    with_c = typed.beta != 0.0
    operands, types = typed.operands, typed.types
    quantized = _quantization(run)

    def draw():
        drawn = make_typed_inputs(operands, types, seed, with_c=with_c)
        codes = None
        if quantized is not None:
            # B is what the kernel dequantizes its codes to: (q - z) * s or codebook[q] * s, exact in B's type, so
            # the reference and the check take it as any B.
            bits, group, with_zeros, codebook = quantized
            codes = draw_quantized(operands.b.rows, operands.b.cols, bits, group, with_zeros, seed, codebook)
            values = codes.values()
            assert dtypes.is_representable(values, types.b).all(), "B's drawn values are exact in its type"
            drawn = replace(drawn, b=values[None])
        return HeldTypedInputs(run.case.shape, drawn, _uploads(operands, types, drawn), quantized=codes)

    # float64 values and their uploads: at most 8 + 4 bytes an element of A and B (and C0), and a code of B
    draw_bytes = 12 * (operands.a.elements + operands.b.elements + (operands.c.elements if with_c else 0)) \
        + (operands.b.elements if quantized is not None else 0)
    # A quantized B is drawn apart: kernels of the shape that take B as it is, and the vendor row, keep theirs.
    key = (run.case.shape, seed, repr(types), repr(operands), with_c) + ((("quantized", *quantized),) if quantized
                                                                          else ())
    held = run.session.typed_inputs_for(key, draw, draw_bytes)
    typed.inputs, typed.held, run.record.seed = held.inputs, held, seed


def _quantization(run) -> tuple[int, int, bool, tuple[float, ...] | None] | None:
    """(bits, group, whether it takes zero points, its codebook) of the kernel's quantized B on this shape, from the
    plan of its codes part; None for a kernel that takes B as it is, and for a vendor row."""
    if run.case.lt is not None:
        return None
    parts = [plan.quantized for plan in run.case.plan.buffers.values() if plan.quantized is not None]
    codes = next((part for part in parts if part.part == "codes"), None)
    return (codes.bits, codes.group, codes.zeros, codes.codebook) if codes is not None else None


def _uploads(operands: GemmOperands, types: GemmTypes, inputs: TypedInputs) -> dict[str, bytes]:
    """The bytes of A and B as laid out in memory, ready to upload: of a Gram product's one input only, whose buffer
    holds the tied operand too (`operand_buffers`)."""
    drawn = "ab" if operands.gram is None else operands.gram.of
    return {key.upper(): input_bytes(getattr(operands, key), getattr(inputs, key), getattr(types, key))
            for key in drawn}


def operand_buffers(buffers: dict[str, Any], operands: GemmOperands) -> dict[str, Any]:
    """`buffers` (A, B and C by name) as a case's launch reads them: a Gram product's tied operand at the other's
    buffer, which holds it read transposed; `buffers` itself otherwise."""
    gram = operands.gram
    if gram is None:
        return buffers
    return {**buffers, gram.tied.upper(): buffers[gram.of.upper()]}


def upload_inputs(run) -> None:
    """Upload `run.typed`'s A and B, laid out, into the session's typed buffers (sized for A, B and C; a Gram
    product's one input alone)."""
    typed = run.typed
    operands, types = typed.operands, typed.types
    assert typed.held is not None, "held_inputs comes first"
    uploads = typed.held.uploads
    sizes = {**{name: len(data) for name, data in uploads.items()},
             "C": operands.c.elements * types.c.storage_bytes}
    buffers = run.session.buffers_of_sizes(sizes)
    for name, data in uploads.items():
        buffers[name].upload(np.frombuffer(data, dtype=np.uint8), run.session.stream)


def reference_step(run) -> None:
    """alpha * A @ B + beta * C0 for every batch, in float64 (float32 for large shapes with narrow outputs), A and B
    each multiplied by its block scales, a bias added and the element-wise functions applied where the kernel takes
    them (`worked_reference`): worked out by the first case that needs it for these inputs, scalars, scales, bias
    and functions, kept with the inputs."""
    typed, settings = run.typed, run.spec.verify
    assert typed.held is not None, "held_inputs comes first"
    known = typed.held.references
    drawn, functions = _drawn_buffers(run), kernel_functions(run)
    grids, bias = _scales_and_bias(drawn)
    key = (typed.alpha, typed.beta, tuple(sorted(grids.items())), bias, typed.operands.groups) + \
        ((functions,) if functions else ())
    if key not in known:
        float32 = typed.operands.flops > settings.cpu_reference_max_gflop * 1e9 and typed.types.c.storage_bytes <= 2
        expected, bound = worked_reference(typed, drawn, functions, float32=float32)
        known[key] = expected, WorkedReference(FLOAT32_REFERENCE if float32 else CPU_REFERENCE, bound)
    run.expected, worked = known[key]
    run.reference_name, typed.functions_bound = worked.name, worked.functions_bound


def worked_reference(typed: TypedCase, drawn, functions: tuple[ElementwiseFunction, ...] = (), *,
                     float32: bool = False) -> tuple[np.ndarray, FunctionsBound | None]:
    """What a typed case's C is checked against, from its inputs (`typed.inputs`, batch x rows x cols), alpha and
    beta, and its kernel's own buffers `drawn` (`buffer_plans.BufferPlan`s): A and B each multiplied by its block
    scales (`ScaleGrid`; a Gram product's tied operand by its input's, transposed), alpha * A @ B + beta * C0 in
    float64 (in float32 with `float32`; by group for a grouped product), the bias (`BiasVector`) added, and then
    `functions` applied in order, in float64, with no rounding to C's type before them. Returns it and the
    functions' `FunctionsBound` (None without functions). A spec's case and `check_kernel`'s both work out their
    reference here."""
    grids, bias = _scales_and_bias(tuple(drawn))
    a, b = _scaled(typed.inputs.a, grids.get("a")), _scaled(typed.inputs.b, grids.get("b"))
    gram = typed.operands.gram
    if gram is not None:
        # The tied operand is the input's buffer read transposed, so its elements carry the input's block scales:
        # the product is (S o X)(S o X)^T, symmetric, as a kernel scaling what it reads computes.
        scaled_input = a if gram.of == "a" else b
        a, b = (scaled_input, np.swapaxes(scaled_input, -1, -2)) if gram.of == "a" else \
            (np.swapaxes(scaled_input, -1, -2), scaled_input)
    if float32:
        a, b = a.astype(np.float32), b.astype(np.float32)
    groups = typed.operands.groups
    if groups is not None:
        expected = groups.product(a, b, typed.alpha, typed.beta, typed.inputs.c0)
    else:
        expected = reference(a, b, typed.alpha, typed.beta, typed.inputs.c0)
    if bias is not None:
        expected = bias.added(expected)
    if not functions:
        return expected, None
    # The bound is over the elements the check compares: a grouped C's held rows only.
    return apply_functions(functions, expected, groups.held_rows() if groups is not None else None)


def _scales_and_bias(drawn: tuple) -> tuple[dict, BiasVector | None]:
    """The block scales of `drawn` buffers by operand (``a``, ``b``), and their bias (None: none)."""
    grids = {plan.grid.operand: plan.grid for plan in drawn if plan.grid is not None}
    return grids, drawn_bias(drawn)


def _drawn_buffers(run) -> tuple:
    """The kernel's own buffers, whose block scales (`buffer_plans.ScaleGrid`) and bias (`BiasVector`) the reference
    applies; none for a vendor row, which computes the plain product."""
    return () if run.case.lt is not None else tuple(run.case.plan.buffers.values())


def kernel_functions(run) -> tuple[ElementwiseFunction, ...]:
    """The element-wise functions of the case's kernel (``elementwise:``) that the reference applies; none for a
    vendor row, which computes the plain product."""
    if run.case.lt is not None:
        return ()
    operands = run.case.plan.kernel.operands
    return operands.elementwise if operands is not None else ()


def _scaled(values: np.ndarray, grid) -> np.ndarray:
    """An operand's values (batch x rows x cols) with each element multiplied by its block's factor: exact, the
    factors being powers of two."""
    return values if grid is None else grid.applied(values)


def _reset_output(run) -> None:
    typed = run.typed
    start = output_bytes(typed.operands.c, typed.types.c, typed.inputs.c0)
    run.session.typed_buffers["C"].upload(np.frombuffer(start, dtype=np.uint8), run.session.stream)


def check_output(run) -> Verdict:
    """Read C back, decode it, and set the case's verdict and status (PASS or FAIL)."""
    typed, session = run.typed, run.session
    layout, element = typed.operands.c, typed.types.c
    raw = session.typed_buffers["C"].download((layout.elements * element.storage_bytes,), np.uint8, session.stream)
    typed.output = read_output(layout, raw.tobytes(), element)
    output, expected, start = typed.output, run.expected, typed.inputs.c0
    groups = typed.operands.groups
    if groups is not None:
        # Only the rows a group holds are the kernel's answer: the others are its to write or leave.
        held = groups.held_rows()
        output = KernelOutput(output.values[held][None], output.codes[held][None], output.padding_written)
        expected = np.asarray(expected)[held][None]
        start = start[held][None] if start is not None else None
    K = run.case.shape.K
    tolerance = typed_tolerance(run.spec.verify, typed.types, K, typed.functions_bound)
    reference_name = run.reference_name + capped_note(run.spec.verify, typed.types, K, typed.functions_bound)
    held_to = product_checks(typed, K)
    gram = typed.operands.gram
    if gram is not None and gram.triangle is not None:
        # A SYRK writes one triangle: the other is checked to hold what C held before the launch.
        written = gram.written(typed.operands.M, typed.operands.N)
        run.verdict = compare_written_part(output, expected, element, written, rel_tolerance=tolerance,
                                           abs_tolerance=run.spec.verify.abs_tolerance,
                                           reference_name=reference_name, start=start, **held_to)
        output, expected = _as_diagnosed(output, expected, written, start, run.verdict.masks["wrong"])
    else:
        run.verdict = compare_typed(output, expected, element, rel_tolerance=tolerance,
                                    abs_tolerance=run.spec.verify.abs_tolerance, reference_name=reference_name,
                                    start=start, **held_to)
    if run.verdict.nonfinite and run.verdict.note is None:
        run.verdict.note = nonfinite_note(run, run.verdict, expected, element)
    # A batch is checked and mapped as its matrices stacked (row b * M + i); the diagnosis names each matrix. The
    # groups' rows, checked one after another, are put back in their places, rows no group holds blank (0 and 0,
    # no mark), so that the diagnosis and the error map name C's own rows and the blocks that write them.
    rows = output.values.shape[0] * output.values.shape[1]
    N = typed.operands.N
    run.output = output.values.reshape(rows, N)
    run.expected = np.asarray(expected).reshape(rows, N)
    masks = {name: mask.reshape(rows, N) for name, mask in run.verdict.masks.items()}
    if groups is not None:
        held = groups.held_rows().reshape(-1)

        def in_place(stacked: np.ndarray, blank) -> np.ndarray:
            whole = np.full((held.size, N), blank, dtype=stacked.dtype)
            whole[held] = stacked
            return whole

        run.output, run.expected = in_place(run.output, 0), in_place(run.expected, 0)
        masks = {name: in_place(mask, False) for name, mask in masks.items()}
    run.verdict.masks = masks
    run.record.verification = VerificationRecord.from_json(run.verdict.as_dict())
    if gram is not None and gram.triangle is not None and run.verdict.status == Status.FAIL:
        other = "upper" if gram.triangle == "lower" else "lower"
        run.record.verification = replace(run.record.verification,
                                          rows=f"C's {gram.triangle} triangle checked against {gram.product}, its "
                                               f"{other} triangle against what C held before the launch: an element "
                                               "written there is wrong")
    run.record.status = run.verdict.status
    return run.verdict


def product_checks(typed: TypedCase, K: int) -> dict[str, Any]:
    """The options of `measure.verify.compare_typed` that hold C to the plain product: what the kernel added to
    beta C0 (`beta`, in the accumulator's `epilogue_roundoff`) and C's rounding direction (`check_rounding`).
    Element-wise functions make C no sum of alpha A @ B and beta C0, and may round their own way, so a kernel with
    them is held to neither (a bias is part of the product)."""
    plain = typed.functions_bound is None
    return {"beta": typed.beta if plain else 0.0, "epilogue_roundoff": typed.types.accumulate.unit_roundoff,
            "check_rounding": plain and dtypes.rounding_direction_visible(typed.types, K)}


def diagnosis_facts(run) -> dict[str, Any]:
    """What the diagnosis of a typed case's wrong C may read beside C and the reference, laid out as `check_output`
    leaves them (a batch's matrices stacked, groups' rows in their places): ``alpha`` and ``beta`` with ``start``
    (C0, where C started from values; 0 in the rows no group holds) name alpha or beta misapplied, and ``row_groups``
    names the groups. A kernel with element-wise functions, or one writing a triangle (whose reference outside it is
    C's start), makes C no sum of alpha A @ B and beta C0: it is given the groups alone."""
    typed = run.typed
    groups = typed.operands.groups
    facts: dict[str, Any] = {"row_groups": groups.row_groups() if groups is not None else None,
                             "levels": typed.operands.levels}
    gram = typed.operands.gram
    if typed.functions_bound is not None or (gram is not None and gram.triangle is not None):
        return facts
    start = typed.inputs.c0 if typed.inputs is not None else None
    if start is not None:
        start = np.asarray(start, dtype=np.float64).reshape(-1, typed.operands.N)
        if groups is not None:
            start = np.where(groups.held_rows().reshape(-1)[:, None], start, 0.0)
    return {**facts, "alpha": typed.alpha, "beta": typed.beta, "start": start}


def nonfinite_note(run, verdict: Verdict, expected: np.ndarray, element: dtypes.ElementType) -> str | None:
    """What to say of a typed case whose C came out NaN or infinite in places, `expected` being its reference laid
    out as the verdict's maps: where the reference itself is beyond C's largest finite number, that the product
    overflows C's type (`overflow_note`); of the other such elements, what `poisoned_c_read_note` says. None where
    neither applies."""
    nonfinite = np.asarray(verdict.masks["nonfinite"]).reshape(-1)
    reference = np.asarray(expected, dtype=np.float64).reshape(-1)
    with np.errstate(invalid="ignore"):
        beyond = nonfinite & ~(np.abs(reference) <= element.max_finite)     # a NaN reference is beyond too
    overflowed = int(np.count_nonzero(beyond))
    notes = [overflow_note(verdict, overflowed, float(np.nanmax(np.abs(reference[beyond]), initial=0.0)), element)
             if overflowed else None,
             poisoned_c_read_note(run, verdict, verdict.nonfinite - overflowed) if verdict.nonfinite > overflowed
             else None]
    said = [note for note in notes if note]
    return "; ".join(said) if said else None


def overflow_note(verdict: Verdict, overflowed: int, largest: float, element: dtypes.ElementType) -> str:
    """What to say where `overflowed` elements of C are NaN or infinite because their reference, up to `largest` in
    magnitude, is beyond `element`'s largest finite number: no kernel can write those, so the case cannot pass as
    it is; what would make the product fit."""
    written = verdict.elements - verdict.unwritten
    which = "every element the kernel wrote is" if overflowed == written else \
        f"{overflowed:,} of the {written:,} elements the kernel wrote are"
    wider = ", or have the kernel write a wider C (fp32)" if element.storage_bytes < 4 else ""
    return (f"{which} NaN or infinite where the reference itself is beyond {element.name}'s largest finite number, "
            f"{element.max_finite:g} (|reference| up to {largest:.3g}): the product does not fit in {element.name} "
            f"there, so no kernel can write it; lower alpha (or the inputs' range){wider}")


def poisoned_c_read_note(run, verdict: Verdict, nonfinite: int | None = None) -> str | None:
    """What to say of a typed kernel that takes beta, run with beta 0, whose C came out NaN or infinite: C started
    as NaN poison, since BLAS does not read C where beta is 0 (a kernel may then leave C unread, and C0 is not
    drawn), so a kernel that computes beta * C anyway turns what it writes into NaN. `nonfinite`: how many of the
    NaN or infinite elements to say this of (the verdict's count unless said; `nonfinite_note` leaves out those
    whose reference overflows C). None for any other case."""
    if run.case.lt is not None or run.typed.beta != 0.0 or not run.case.kernel.reads_c():
        return None
    nonfinite = verdict.nonfinite if nonfinite is None else nonfinite
    written = verdict.elements - verdict.unwritten
    every = "every element the kernel wrote is" if nonfinite == written else \
        f"{nonfinite:,} of the {written:,} elements the kernel wrote are"
    return (f"{every} NaN or infinite, and beta is 0: C started as NaN poison, as BLAS does not read C where beta is "
            "0, so a kernel that reads C (computing beta * C even where beta is 0) writes NaN; read C only where "
            "beta is not 0")


def _as_diagnosed(output: KernelOutput, expected: np.ndarray, written: np.ndarray, start: np.ndarray | None,
                  wrong: np.ndarray) -> tuple[KernelOutput, np.ndarray]:
    """The output and reference of a kernel that writes part of C, as the diagnosis and the error map read them:
    outside the written part, the reference is what C held before the launch (for a C that started poisoned, the
    product, whose triangles mirror each other), and an element left so reads as that, so that only the elements
    written there stand out."""
    expected = np.asarray(expected, dtype=np.float64).reshape(output.values.shape)
    outside = np.broadcast_to(~written, output.values.shape)
    before = np.asarray(start, np.float64).reshape(expected.shape) if start is not None else expected
    expected = np.where(outside, before, expected)
    left = outside & ~wrong.reshape(expected.shape)
    return KernelOutput(np.where(left, expected, output.values), output.codes, output.padding_written), expected


def launch_verify(run) -> None:
    """Bind the kernel's arguments (buffers, sizes, leading dimensions, strides), launch once, and check C."""
    session = run.session
    _reset_output(run)
    run.launch = build_launch(run, operand_buffers(session.typed_buffers, run.typed.operands))
    with ranges.annotate("checked launch", color="green"):
        run.launch()
        session.stream.synchronize()
    check_output(run)
    operands = run.typed.operands
    if run.verdict.status == Status.FAIL and operands.groups is not None:
        run.record.verification = replace(run.record.verification,
                                          rows=f"C's rows in the error map ({operands.groups.describe()}, left "
                                               "blank)" + (": matrix g's row i at g * M + i"
                                                           if operands.groups.layout == "masked" else ""))
    elif operands.batch > 1 and run.verdict.status == Status.FAIL:
        stacked = f"{operands.batch} matrices stacked in the error map: row b * M + i"
        if operands.levels is not None:
            stacked += f", matrix (i, j) of the batch of two levels at b = i * {operands.levels[1]} + j"
        said = run.record.verification.rows    # what `check_output` said of a triangle's check stays
        run.record.verification = replace(run.record.verification, rows=f"{said}; {stacked}" if said else stacked)


# ---------------------------------------------------------------------------------------------- cuBLASLt


def load_lt(run) -> None:
    """The session's cuBLASLt; a combination cuBLASLt does not support ends INVALID with the reason."""
    row = run.case.lt
    if row.plan is None:
        run.stop(Status.INVALID, f"no cuBLASLt matmul for this combination: {row.reason}")
        return
    if run.session.cublaslt() is None:
        run.stop(Status.ERROR, run.session.lt_error or "cuBLASLt is unavailable")
        return
    run.record.status = Status.PASS


def choose_lt_algorithm(run):
    """The cuBLASLt algorithm the row runs (`measure.vendor_choice`): the fastest of the heuristic's first N by a
    short screen and a longer final between the screen's two fastest, with the case's own pattern, or its first
    alone (``--baseline heuristic``, or a run that does not time)."""
    session = run.session
    buffers = operand_buffers(session.typed_buffers, run.typed.operands)
    choice = session.options.baseline_choice if session.options.time else BaselineChoice(HEURISTIC, 1)
    if choice.requested > 1:
        session.wait_for_cublas()       # nothing competes with the pre-selection's timing for the GIL
    candidates = session.cublaslt().prepare_candidates(run.case.lt.plan, buffers["A"], buffers["B"], buffers["C"],
                                                       choice.requested)

    def timer(settings):
        def time_one(launch) -> float:
            summary, _ = measure(launch, session.device, session.stream, settings, session.flusher, session.gate,
                                 clocks=session.clocks)
            return summary.median_ms
        return time_one

    with ranges.annotate("choose algorithm", color="orange"):
        return choose_candidate(candidates, timer(preselect_settings(run.spec.measure)), choice,
                                refused=(CublasLtUnsupported,), time_final=timer(final_settings(run.spec.measure)))


def launch_verify_lt(run) -> None:
    """Choose the algorithm, prepare the planned matmul on the case's buffers, run it once, and check it against
    the reference."""
    session = run.session
    try:
        chosen = choose_lt_algorithm(run)
        run.launch = chosen.launch
        run.record.algorithm = chosen.algorithm
        calls = run.case.lt.plan.calls
        if calls > 1:     # said on the row, since its times are of several library calls
            run.record.message = (f"{calls} cuBLASLt calls, one per outer index of the batch of two levels (its "
                                  "strides are no single strided batch), timed together as one sample")
        _reset_output(run)
        run.launch()
    except CublasLtUnsupported as exc:
        run.stop(Status.INVALID, exc.reason)
        return
    session.stream.synchronize()
    check_output(run)
