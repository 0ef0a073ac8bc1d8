"""Step 5 of the data flow: an output checked against its float64 reference, and the verdict.

Inputs come from `inputs`, the reference from `reference`. C is poisoned before the launch with a
NaN whose bit pattern no arithmetic produces, so an element still holding it was never written;
kernels that read C start from random values instead, and an element unchanged where the
reference differs counts as unwritten. Typed outputs are checked the same way by `compare_typed`,
and a write into the padding fails. Where C started from beta C0, what the kernel added to it is also
held against alpha A @ B (`BetaPart`), a 16-bit C may be checked for rounding one way (toward zero, down or up)
where it should round to nearest, and a C in its type's subnormal range for being flushed to zero. How checks
work: docs/debugging.md; the tolerances: docs/kernels.md.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import os
import threading
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..gemm import dtypes
from ..gemm.operands import KernelOutput
from ..status import Status

POISON_WORD = 0x7FC0DEAD
FP32_ROUNDOFF = 2.0 ** -24   # half the spacing of float32's numbers just above 1
FP32_SMALLEST = float(np.finfo(np.float32).smallest_subnormal)


@dataclass
class Verdict:
    """The check of one output against its reference."""

    status: Status
    rel_fro_error: float
    max_abs_error: float
    unwritten: int
    nonfinite: int
    wrong: int
    elements: int
    reference: str
    tolerance: float
    abs_tolerance: float | None = None
    padding_written: int | None = None    # typed outputs: elements written outside the matrices (out of bounds)
    masks: dict = field(default_factory=dict, repr=False)   # unwritten / wrong boolean maps, for diagnosis
    # Why C fails where its counts and errors do not say it (the product missing beside beta C0, C rounded
    # one way), or what a failure means for how the case ran (C started poisoned): said before the diagnosis.
    note: str | None = None

    @property
    def right(self) -> int:
        return self.elements - self.unwritten - self.nonfinite - self.wrong

    def as_dict(self) -> dict:
        return {"status": self.status, "rel_fro_error": self.rel_fro_error, "max_abs_error": self.max_abs_error,
                "unwritten": self.unwritten, "nonfinite": self.nonfinite, "wrong": self.wrong,
                "right": self.right, "elements": self.elements, "reference": self.reference,
                "tolerance": self.tolerance, "abs_tolerance": self.abs_tolerance,
                **({} if self.padding_written is None else {"padding_written": self.padding_written})}


def compare(output: np.ndarray, expected: np.ndarray, *, rel_tolerance: float, abs_tolerance: float | None = None,
            reference_name: str = "numpy-float64", start: np.ndarray | None = None, beta: float = 0.0) -> Verdict:
    """Compare a float32 `output` with a float64 `expected`.

    `start` is what C held before the launch (for kernels that read C); without
    it, unwritten elements are those still holding the poison pattern. The
    relative Frobenius error and the maximum absolute error are over the
    written, finite elements. An element is counted wrong when its error is
    far outside what a correct kernel's rounding gives (10 x the tolerance,
    scaled by the reference's RMS and the element's own size; never less than
    float32's rounding in its subnormal range, `dtypes.subnormal_floor`). PASS
    needs every element written, finite and not wrong, and the errors within
    tolerance; with `start` and a `beta` not 0, also C - beta x `start` within
    tolerance of the rest of the reference, alpha A @ B (`BetaPart`); and C
    not flushed to zero in float32's subnormal range (`flushed_to_zero`).
    """
    output = np.asarray(output, dtype=np.float32)
    if output.shape != expected.shape:
        raise ValueError(f"output shape {output.shape} does not match the reference's {expected.shape}")
    words = output.reshape(-1).view(np.uint32)
    if start is None:
        def unwritten(piece: slice, out: np.ndarray) -> None:
            np.equal(words[piece], np.uint32(POISON_WORD), out=out)
    else:
        start_values, reference = np.asarray(start).reshape(-1), expected.reshape(-1)
        start_words = start_values.astype(np.float32, copy=False).view(np.uint32)
        rms = _rms(reference)
        untouched = bool(np.array_equal(words, start_words))

        def unwritten(piece: slice, out: np.ndarray) -> None:
            np.equal(words[piece], start_words[piece], out=out)
            out &= ~_could_be_the_answer(start_values[piece].astype(np.float64), reference[piece], FP32_ROUNDOFF,
                                         rel_tolerance, abs_tolerance, rms, untouched, FP32_SMALLEST)
    beta_part = BetaPart(np.asarray(start).reshape(-1), beta, FP32_ROUNDOFF, FP32_ROUNDOFF) \
        if start is not None and beta != 0.0 else None
    fp32 = dtypes.ELEMENT_TYPES["fp32"]
    verdict = _verdict(output, expected, unwritten, rel_tolerance, abs_tolerance, reference_name, _floor_of(fp32),
                       beta_part)
    _fail_if_flushed(verdict, output, expected, fp32)
    return verdict


def compare_typed(output: KernelOutput, expected: np.ndarray, element: dtypes.ElementType | str, *,
                  rel_tolerance: float, abs_tolerance: float | None = None, reference_name: str = "numpy-float64",
                  start: np.ndarray | None = None, beta: float = 0.0, epilogue_roundoff: float = FP32_ROUNDOFF,
                  check_rounding: bool = False) -> Verdict:
    """Compare a typed `output` (batch x M x N, from `operands.read_output`) with a float64 `expected`.

    As `compare`, with `element`'s poison code for unwritten elements (or,
    when C started from `start`, an element whose code still equals its
    starting one where the reference differs), `element`'s subnormal floor
    and its check for a C flushed to zero (`flushed_to_zero`), and FAIL when
    the kernel wrote into the padding. With `start` and a
    `beta` not 0, C - beta x `start` is held against the rest of the
    reference (`BetaPart`; `epilogue_roundoff`: the unit roundoff of the type
    the kernel adds beta C0 in, its accumulator's, fp32's unless said). With
    `check_rounding` (where `dtypes.rounding_direction_visible` says a correct
    kernel's C is rounded to nearest closely enough), a C that passes
    otherwise but is rounded one way (toward zero, down or up) fails
    (`rounded_one_way`).
    """
    element = dtypes.element_type(element)
    expected = np.asarray(expected, dtype=np.float64).reshape(output.values.shape)
    if start is None:
        unwritten = output.unwritten(element)
    else:
        start = np.asarray(start, np.float64).reshape(output.values.shape)
        held = output.codes == dtypes.encode(start, element)
        unwritten = held & ~_could_be_the_answer(start, expected, element.unit_roundoff, rel_tolerance,
                                                 abs_tolerance, _rms(expected), bool(held.all()),
                                                 0.0 if element.is_integer else dtypes.smallest_positive(element))
    flat_unwritten = unwritten.reshape(-1)
    beta_part = BetaPart(start.reshape(-1), beta, element.unit_roundoff, epilogue_roundoff) \
        if start is not None and beta != 0.0 and not element.is_integer else None
    verdict = _verdict(output.values, expected, lambda piece, out: np.copyto(out, flat_unwritten[piece]),
                       rel_tolerance, abs_tolerance, reference_name, _floor_of(element), beta_part)
    verdict.padding_written = output.padding_written
    if output.padding_written:
        verdict.status = Status.FAIL
    _fail_if_flushed(verdict, output.values, expected, element)
    if check_rounding and verdict.status == Status.PASS:
        verdict.note = rounded_one_way(output.values, expected, element)
        if verdict.note is not None:
            verdict.status = Status.FAIL
    return verdict


def compare_written_part(output: KernelOutput, expected: np.ndarray, element: dtypes.ElementType | str,
                         written: np.ndarray, *, rel_tolerance: float, abs_tolerance: float | None = None,
                         reference_name: str = "numpy-float64", start: np.ndarray | None = None, beta: float = 0.0,
                         epilogue_roundoff: float = FP32_ROUNDOFF, check_rounding: bool = False) -> Verdict:
    """Compare the typed `output` of a kernel that writes only part of C, `written` (M x N, True where it writes:
    a SYRK's triangle, diagonal included), with a float64 `expected` (batch x M x N).

    The written part is checked as `compare_typed` checks a whole C, and its
    errors are the verdict's. Every other element must still hold what C held
    before the launch (its code of `start`, or the poison pattern): one that
    does not is counted wrong, so the counts and the maps cover all of C and
    the diagnosis finds writes on the wrong side. `beta`, `epilogue_roundoff`
    and `check_rounding` apply to the written part, as `compare_typed` takes
    them.
    """
    element = dtypes.element_type(element)
    shape = output.values.shape
    inside = np.broadcast_to(np.asarray(written, dtype=bool), shape)
    expected = np.asarray(expected, dtype=np.float64).reshape(shape)
    start = np.asarray(start, np.float64).reshape(shape) if start is not None else None
    part = KernelOutput(output.values[inside][None, None], output.codes[inside][None, None], output.padding_written)
    verdict = compare_typed(part, expected[inside], element, rel_tolerance=rel_tolerance,
                            abs_tolerance=abs_tolerance, reference_name=reference_name,
                            start=start[inside] if start is not None else None, beta=beta,
                            epilogue_roundoff=epilogue_roundoff, check_rounding=check_rounding)
    outside = ~inside
    if start is None:
        kept = dtypes.unwritten_mask(output.codes[outside], element)
    else:
        kept = output.codes[outside] == dtypes.encode(start[outside], element)
    masks = {}
    for name, mask in verdict.masks.items():
        whole = np.zeros(shape, dtype=bool)
        whole[inside] = mask.reshape(-1)
        masks[name] = whole
    masks["wrong"][outside] = ~kept
    written_outside = int(np.count_nonzero(~kept))
    verdict.wrong += written_outside
    verdict.elements = int(np.prod(shape))
    verdict.masks = masks
    if written_outside:
        verdict.status = Status.FAIL
    return verdict


def _fail_if_flushed(verdict: Verdict, values: np.ndarray, expected: np.ndarray, element: dtypes.ElementType) -> None:
    """A passing `verdict` turned FAIL, saying why, where C is flushed to zero below its smallest normal number
    (`flushed_to_zero`)."""
    if verdict.status == Status.PASS:
        verdict.note = flushed_to_zero(values, expected, element)
        if verdict.note is not None:
            verdict.status = Status.FAIL


@dataclass(frozen=True)
class SubnormalFloor:
    """The least error a check allows an element of C, whatever its size: `per_element` (`dtypes.subnormal_floor`)
    for each element whose reference is below `below` (the smallest normal number of C's type) in the Frobenius
    test, and 10 x `per_element` for any element in the element test, as that test scales the tolerance.
    Rounding into C's subnormal range loses relative precision that no kernel can keep; from `below` up, the
    relative tolerance covers it (the element test's allowance there is larger than 10 x `per_element`)."""

    per_element: float
    below: float


NO_FLOOR = SubnormalFloor(0.0, 0.0)


def _floor_of(element: dtypes.ElementType) -> SubnormalFloor:
    return SubnormalFloor(dtypes.subnormal_floor(element), dtypes.smallest_normal(element))


@dataclass(frozen=True)
class BetaPart:
    """What C started from, for a check that also holds what the kernel added to it against alpha A @ B.

    Where beta C0 outweighs alpha A @ B, C as a whole is within its tolerance
    even when the kernel wrote beta C0 alone: the product is a small share of
    C. So C - beta C0 (`start` x `beta`) is held against the reference less
    beta C0 (alpha A @ B, and a bias): its Frobenius error may be the check's
    relative tolerance of that product, plus C's roundings to its type as the
    whole-C tolerance allows them (`dtypes.SAFETY` x `output_roundoff` x |C|:
    a kernel may round at C's size more than once, as a split-K that reduces
    its partial sums through C, CUTLASS's serial split-K or atomic adds into
    a C set to beta C0, or a 16-bit epilogue that rounds beta C0 before the
    add), plus the epilogue's roundings in the type it adds beta C0 in
    (`epilogue_roundoff` x (|C| + |beta C0|)). A kernel that leaves the
    product out fails wherever the product is larger than that; a product
    smaller than C's roundings cannot be told from none.
    """

    start: np.ndarray        # C's starting values, flattened as the output is
    beta: float
    output_roundoff: float
    epilogue_roundoff: float

    def allowed(self, rel_tolerance: float, product_norm: float, reference_norm: float,
                beta_start_norm: float) -> float:
        """The Frobenius norm of C's error this part allows (its subnormal floor apart), from the norms of alpha A @ B,
        of the reference and of beta C0."""
        return (rel_tolerance * product_norm + dtypes.SAFETY * self.output_roundoff * reference_norm
                + self.epilogue_roundoff * (reference_norm + beta_start_norm))

    def note(self, error_norm: float, allowed: float, product_norm: float) -> str:
        """What to say where C - beta C0 is farther from alpha A @ B than `allowed` (Frobenius norms)."""
        if product_norm == 0:
            return (f"C - beta C0 is not alpha A @ B: alpha A @ B is 0 here, but C - beta C0 is off by "
                    f"{error_norm:.3g}, over the {allowed:.3g} that C's roundings allow")
        return (f"C - beta C0 is not alpha A @ B: its error is {error_norm / product_norm:.3g} times the product's "
                f"norm, over the {allowed / product_norm:.3g} times that the tolerance and C's roundings allow (C as a "
                "whole is within its tolerance only because beta C0 outweighs the product): the product is missing "
                "or wrong (a K loop skipped, or alpha A @ B left out of the sum?)")


# How many elements `rounded_one_way` looks at (evenly spread over C), and how many of them must move one way, as
# shares of those it looks at, for it to say so: rounding toward zero (or toward -inf, or +inf) moves about half of
# the elements whose value C cannot hold, every one the same way, where a correct kernel's rounding moves a few, both
# ways.
ROUNDING_SAMPLE = 1 << 20
ROUNDING_LEAST_MOVED = 100
ROUNDING_MOVED_SHARE = 0.25
ROUNDING_ONE_WAY_SHARE = 0.9


def rounded_one_way(values: np.ndarray, expected: np.ndarray, element: dtypes.ElementType) -> str | None:
    """What to say where C's elements are rounded one way (toward zero, down toward -inf or up toward +inf), not
    to nearest; None where they are not.

    Of the elements whose exact value `element` cannot hold (finite, at least
    its smallest normal number and a sixteenth of C's RMS, where the
    accumulation's error is far below C's rounding), those whose code is not
    the nearest one are counted, and of these, those smaller in magnitude
    than the nearest number, those below it and those above it: a directed
    rounding moves about half of them, each to the next code its way. Said
    only where at least a quarter move, at least `ROUNDING_LEAST_MOVED`, nine
    in ten or more the same way (toward zero is looked for first: on a C of
    one sign it is also down or up). Meaningful only where
    `dtypes.rounding_direction_visible` holds."""
    got, exact = _evenly_sampled(values, expected)
    if not exact.size:
        return None
    nearest = dtypes.round_to(exact, element)
    size = np.abs(exact)
    with np.errstate(invalid="ignore"):
        looked_at = (np.isfinite(got) & np.isfinite(nearest) & (nearest != exact)
                     & (size >= max(dtypes.smallest_normal(element), _rms(exact) / 16)))
        moved = looked_at & (got != nearest)
        toward_zero = moved & (got * nearest >= 0) & (np.abs(got) < np.abs(nearest))
        down, up = moved & (got < nearest), moved & (got > nearest)
    counted, moved_count = int(np.count_nonzero(looked_at)), int(np.count_nonzero(moved))
    if moved_count < ROUNDING_MOVED_SHARE * counted:
        return None
    cuda = _cuda_name(element)
    seen = (f"of {counted:,} elements whose value {element.name} cannot hold, {moved_count:,} are not the nearest "
            f"{element.name} number")
    one_ways = (
        (toward_zero, f"C is rounded toward zero, not to nearest: {seen}, and {{count:,}} of them are smaller in "
                      f"magnitude than it. A conversion that truncates does this (__float2{cuda}_rz, or dropping "
                      f"the low bits), as does a scale such as alpha rounded toward zero before it is applied (alpha "
                      f"converted to {element.name}, say): round to nearest, as __float2{cuda}_rn does, and apply "
                      "alpha and the scales in fp32"),
        (down, f"C is rounded down (toward -inf), not to nearest: {seen}, and {{count:,}} of them are below it. A "
               f"conversion that rounds down does this (__float2{cuda}_rd): round to nearest, as __float2{cuda}_rn "
               "does"),
        (up, f"C is rounded up (toward +inf), not to nearest: {seen}, and {{count:,}} of them are above it. A "
             f"conversion that rounds up does this (__float2{cuda}_ru): round to nearest, as __float2{cuda}_rn does"),
    )
    for mask, message in one_ways:
        count = int(np.count_nonzero(mask))
        if count >= max(ROUNDING_LEAST_MOVED, ROUNDING_ONE_WAY_SHARE * moved_count):
            return message.format(count=count)
    return None


def _evenly_sampled(values: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most about `ROUNDING_SAMPLE` elements of C and of its reference, evenly spread over C, as float64."""
    flat_values, flat_expected = values.reshape(-1), np.asarray(expected, np.float64).reshape(-1)
    step = max(1, -(-flat_expected.size // ROUNDING_SAMPLE))
    return flat_values[::step].astype(np.float64), flat_expected[::step]


# How many elements whose reference lies in C's subnormal range (at least its smallest positive number) must be 0,
# in number and as a share of them, for `flushed_to_zero` to say C was flushed: a correct kernel's C is 0 in few
# of them, even after a split-K's several roundings there, while a flushed C is 0 in every one.
FLUSH_LEAST_ZEROS = 100
FLUSH_ZERO_SHARE = 0.9


def flushed_to_zero(values: np.ndarray, expected: np.ndarray, element: dtypes.ElementType) -> str | None:
    """What to say where C is 0 wherever its reference lies in `element`'s subnormal range, as a kernel that
    flushes subnormal results to zero leaves it; None where it is not.

    The subnormal floor (`dtypes.subnormal_floor`) lets an element below C's
    smallest normal number be off by a few spacings there, which a C of 0
    is too where the reference is about that small. Of the elements whose
    reference is at least `element`'s smallest positive number and below its
    smallest normal one (a correct kernel rounds these to a number not 0),
    those that are 0 are counted (sampled evenly, as `rounded_one_way` does):
    said where at least `FLUSH_LEAST_ZEROS` are, nine in ten or more."""
    if element.is_integer:
        return None
    got, exact = _evenly_sampled(values, expected)
    size = np.abs(exact)
    smallest_normal = dtypes.smallest_normal(element)
    with np.errstate(invalid="ignore"):
        looked_at = np.isfinite(got) & (size >= dtypes.smallest_positive(element)) & (size < smallest_normal)
    counted = int(np.count_nonzero(looked_at))
    zeros = int(np.count_nonzero(got[looked_at] == 0))
    if zeros < max(FLUSH_LEAST_ZEROS, FLUSH_ZERO_SHARE * counted):
        return None
    return (f"C is flushed to zero below {element.name}'s smallest normal number ({smallest_normal:.3g}): of "
            f"{counted:,} elements whose reference lies between {element.name}'s smallest positive number and it, "
            f"{zeros:,} are 0, where a correct kernel rounds them to a subnormal number. A build that flushes "
            "subnormal results to zero does this (NVRTC's or nvcc's --use_fast_math or -ftz=true): compile without "
            "it, or scale the product into C's normal range")


def _cuda_name(element: dtypes.ElementType) -> str:
    """The name CUDA's conversion intrinsics give `element` (__float2half_rn, __float2bfloat16_rn)."""
    return {"fp16": "half", "bf16": "bfloat16"}.get(element.name, element.name)


def _could_be_the_answer(start: np.ndarray, expected: np.ndarray, unit_roundoff: float, rel_tolerance: float,
                         abs_tolerance: float | None, rms: float, untouched: bool = False,
                         smallest: float = 0.0) -> np.ndarray:
    """Where C's starting value would pass the element check as the kernel's answer: within what the verdict allows
    a written element (10 x the tolerance, scaled by the reference's RMS and the element's own size, or the
    absolute tolerance), or within two units in the last place of the output type. A kernel that wrote its right
    answer there may have written the very code C started with (a half-precision C = A @ B + 0.5 C lands on its
    start wherever A @ B is about half of it), so an element still holding its start is counted unwritten only
    where that start could not be the answer.

    `untouched`: every element of C still holds its start. A kernel writing its answers lands on every start only
    where each answer rounds to it, so then the start counts as a possible answer within two units in the last
    place (or the absolute tolerance) only: where beta C0 outweighs alpha A @ B (a small alpha), C left as it
    started is otherwise within the tolerance and would pass unwritten. Two units in the last place are never less
    than twice `smallest`, the output type's smallest positive number: an answer too small to hold rounds to a
    start of zero."""
    magnitude = np.maximum(np.abs(start), np.abs(expected))
    allowed = np.maximum(4.0 * unit_roundoff * magnitude, 2.0 * smallest)
    if not untouched:
        np.maximum(allowed, 10 * rel_tolerance * (np.abs(expected) + rms), out=allowed)
    if abs_tolerance is not None:
        np.maximum(allowed, abs_tolerance, out=allowed)
    return np.abs(start - expected) <= allowed


def _rms(values: np.ndarray) -> float:
    """The root mean square of `values` (0 for none), as the verdict scales its element test by."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    return math.sqrt(_sum_of_squares(flat) / flat.size) if flat.size else 0.0


# Elements per piece of an output: small enough that a piece's float64 working arrays (2 MiB each, made once
# per thread and reused) stay in the CPU's cache while a dozen passes go over them: several times faster than
# larger pieces or fresh arrays.
PIECE_ELEMENTS = 1 << 18
# Threads checking pieces side by side (NumPy releases the GIL in its loops).
CHECK_THREADS = max(1, min(8, os.cpu_count() or 1))
# How far below the wrong-element threshold a piece's largest |error| - 10 x tolerance x |reference| must be for
# the piece to be cleared without the exact per-element test, as a share of the terms' sizes: ten thousand
# times the rounding of either form, so that the screen never clears an element the exact test would not.
SCREEN_MARGIN = 1e-12


def _sum_of_squares(values: np.ndarray) -> float:
    """NumPy's own loop, not BLAS: a threaded BLAS wakes all its threads for every piece's dot product, which
    costs more than the product itself when several threads each check pieces."""
    return float(np.einsum("i,i->", values, values))


class _Scratch(threading.local):
    """One thread's working arrays for pieces of a check: made on the thread's first piece, reused after."""

    def __init__(self, elements: int):
        self.error = np.empty(elements, dtype=np.float64)
        self.bound = np.empty(elements, dtype=np.float64)
        self.finite = np.empty(elements, dtype=bool)


def _verdict(output: np.ndarray, expected: np.ndarray, unwritten_in: Callable[[slice, np.ndarray], None],
             rel_tolerance: float, abs_tolerance: float | None, reference_name: str,
             floor: SubnormalFloor = NO_FLOOR, beta_part: BetaPart | None = None) -> Verdict:
    """The verdict on `output` (float32 or float64) against float64 `expected`; `unwritten_in(piece, out)` marks
    the unwritten elements of a piece of the flattened output in the boolean array `out`.

    The relative Frobenius error is over the written, finite elements; an
    element is wrong when its error exceeds 10 x the tolerance scaled by the
    reference's RMS and the element's own size (or `abs_tolerance`, or 10 x
    the `floor`'s, if larger). The Frobenius error may also reach the floor's
    per element below C's smallest normal number: the verdict's tolerance is
    the relative tolerance widened by that, where C has such elements. With
    `beta_part`, C - beta C0 is held against the reference less beta C0 too.
    The output is checked piece by piece (`PIECE_ELEMENTS`), on
    `CHECK_THREADS` threads, in one pass over memory: the sums of squares are
    added in piece order, so the figures do not depend on the threads. The
    reference's RMS is only known at the end of that pass, so each piece
    keeps its largest |error| - 10 x tolerance x |reference|: a piece whose
    largest is clearly below 10 x tolerance x RMS has no wrong element, and
    only the others get the exact test, in a second pass.
    """
    shape = output.shape
    output, expected = output.reshape(-1), expected.reshape(-1)
    pieces = [slice(start, min(start + PIECE_ELEMENTS, expected.size))
              for start in range(0, expected.size, PIECE_ELEMENTS)]
    scale = 10 * rel_tolerance
    scratch = _Scratch(min(PIECE_ELEMENTS, max(expected.size, 1)))
    # Zeroed maps cost nothing until written: the pieces of a passing output never write theirs.
    unwritten = np.empty(expected.size, dtype=bool)
    nonfinite = np.zeros(expected.size, dtype=bool)
    wrong = np.zeros(expected.size, dtype=bool)

    def errors(piece: slice) -> tuple[np.ndarray, np.ndarray | None]:
        """The piece's errors (0 where unusable), in the thread's scratch, and its usable elements (None: all)."""
        count = piece.stop - piece.start
        error, reference, missing = scratch.error[:count], expected[piece], unwritten[piece]
        np.copyto(error, output[piece])
        finite = np.isfinite(error, out=scratch.finite[:count])
        if finite.all() and not missing.any():
            np.subtract(error, reference, out=error)
            return error, None
        nonfinite[piece] = ~finite & ~missing
        usable = finite & ~missing
        with np.errstate(invalid="ignore"):
            np.subtract(error, reference, out=error)
        error[~usable] = 0.0
        return error, usable

    def measure(piece: slice) -> _PieceFigures:
        """A piece's unwritten map and its figures (`_PieceFigures`)."""
        unwritten_in(piece, unwritten[piece])
        reference = expected[piece]
        error, _ = errors(piece)
        reference_sq, error_sq = _sum_of_squares(reference), _sum_of_squares(error)
        beta_start_sq = product_sq = 0.0
        if beta_part is not None:
            part = np.multiply(beta_part.start[piece], beta_part.beta, out=scratch.bound[:error.size], dtype=np.float64)
            beta_start_sq = _sum_of_squares(part)
            np.subtract(reference, part, out=part)
            product_sq = _sum_of_squares(part)
        np.abs(error, out=error)
        scaled = np.abs(reference, out=scratch.bound[:error.size])
        below_normal = int(np.count_nonzero(scaled < floor.below)) if floor.per_element > 0 else 0
        scaled *= scale
        largest_scaled = float(scaled.max())
        np.subtract(error, scaled, out=scaled)
        return _PieceFigures(reference_sq, error_sq, float(error.max()), float(scaled.max()), largest_scaled,
                             below_normal, beta_start_sq, product_sq)

    def mark_wrong(piece: slice, rms: float) -> None:
        """The exact test of every element of a piece the screen did not clear."""
        error, usable = errors(piece)
        np.abs(error, out=error)
        tolerance = np.abs(expected[piece], out=scratch.bound[:error.size])
        tolerance += rms
        tolerance *= scale
        if abs_tolerance is not None:
            np.maximum(tolerance, abs_tolerance, out=tolerance)
        np.maximum(tolerance, 10 * floor.per_element, out=tolerance)
        np.greater(error, tolerance, out=wrong[piece])
        if usable is not None:
            wrong[piece] &= usable

    with _pool(len(pieces)) as pool:
        measured = list(pool.map(measure, pieces))
        reference_norm = math.sqrt(sum(figures.reference_sq for figures in measured))
        rms = reference_norm / math.sqrt(max(expected.size, 1))
        doubtful = [piece for piece, figures in zip(pieces, measured)
                    if not figures.screen < scale * rms - SCREEN_MARGIN * (figures.largest_error
                                                                           + figures.largest_scaled + scale * rms)]
        list(pool.map(lambda piece: mark_wrong(piece, rms), doubtful))
        counts = [sum(pool.map(lambda piece: int(np.count_nonzero(mask[piece])), pieces))
                  for mask in (unwritten, nonfinite, wrong)]
    error_norm = math.sqrt(sum(figures.error_sq for figures in measured))
    rel_fro = error_norm / reference_norm if reference_norm > 0 else error_norm
    max_abs = max((figures.largest_error for figures in measured), default=0.0)
    # The rounding of elements below C's smallest normal number, which a relative tolerance does not cover.
    floor_norm = floor.per_element * math.sqrt(sum(figures.below_normal for figures in measured))
    tolerance = rel_tolerance + (floor_norm / reference_norm if reference_norm > 0 else floor_norm)
    # Every element written, finite and none far off, and the whole within tolerance: a tile of zeros among
    # millions of right elements moves the Frobenius error of a narrow type less than its tolerance allows.
    passed = (counts == [0, 0, 0] and rel_fro <= tolerance
              and (abs_tolerance is None or max_abs <= abs_tolerance))
    note = None
    if passed and beta_part is not None:
        product_norm = math.sqrt(sum(figures.product_sq for figures in measured))
        beta_start_norm = math.sqrt(sum(figures.beta_start_sq for figures in measured))
        allowed = beta_part.allowed(rel_tolerance, product_norm, reference_norm, beta_start_norm) + floor_norm
        if error_norm > allowed:
            passed, note = False, beta_part.note(error_norm, allowed, product_norm)
    return Verdict(Status.PASS if passed else Status.FAIL, rel_fro, max_abs, counts[0], counts[1], counts[2],
                   elements=int(expected.size),
                   reference=reference_name, tolerance=tolerance, abs_tolerance=abs_tolerance,
                   masks={"unwritten": unwritten.reshape(shape), "nonfinite": nonfinite.reshape(shape),
                          "wrong": wrong.reshape(shape)}, note=note)


@dataclass(frozen=True)
class _PieceFigures:
    """What `_verdict` keeps of one piece of the output: its sums of squared reference and error, its largest error,
    its largest |error| - 10 x tolerance x |reference| (the screen), its largest 10 x tolerance x |reference|, its
    elements below C's smallest normal number, and with a `BetaPart`, its sums of squared beta C0 and reference
    less beta C0."""

    reference_sq: float
    error_sq: float
    largest_error: float
    screen: float
    largest_scaled: float
    below_normal: int
    beta_start_sq: float
    product_sq: float


@contextlib.contextmanager
def _pool(pieces: int):
    """Threads for `pieces` pieces: none (the calling thread) for one."""
    if pieces <= 1 or CHECK_THREADS <= 1:
        yield _InThisThread()
        return
    with concurrent.futures.ThreadPoolExecutor(min(CHECK_THREADS, pieces)) as pool:
        yield pool


class _InThisThread:
    @staticmethod
    def map(function, items):
        return map(function, items)
