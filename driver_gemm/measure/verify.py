"""Step 5 of the data flow: an output checked against its float64 reference, and the verdict.

Inputs come from `inputs`, the reference from `reference`. C is poisoned before the launch with a
NaN whose bit pattern no arithmetic produces, so an element still holding it was never written;
kernels that read C start from random values instead, and an element unchanged where the
reference differs counts as unwritten. Typed outputs are checked the same way by `compare_typed`,
and a write into the padding fails. How checks work: docs/debugging.md.
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
            reference_name: str = "numpy-float64", start: np.ndarray | None = None) -> Verdict:
    """Compare a float32 `output` with a float64 `expected`.

    `start` is what C held before the launch (for kernels that read C); without
    it, unwritten elements are those still holding the poison pattern. The
    relative Frobenius error and the maximum absolute error are over the
    written, finite elements. An element is counted wrong when its error is
    far outside what a correct kernel's rounding gives (10 x the tolerance,
    scaled by the reference's RMS and the element's own size). PASS needs
    every element written, finite and not wrong, and the errors within
    tolerance.
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
    return _verdict(output, expected, unwritten, rel_tolerance, abs_tolerance, reference_name)


def compare_typed(output: KernelOutput, expected: np.ndarray, element: dtypes.ElementType | str, *,
                  rel_tolerance: float, abs_tolerance: float | None = None, reference_name: str = "numpy-float64",
                  start: np.ndarray | None = None) -> Verdict:
    """Compare a typed `output` (batch x M x N, from `operands.read_output`) with a float64 `expected`.

    As `compare`, with `element`'s poison code for unwritten elements (or,
    when C started from `start`, an element whose code still equals its
    starting one where the reference differs), and FAIL when the kernel
    wrote into the padding.
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
    verdict = _verdict(output.values, expected, lambda piece, out: np.copyto(out, flat_unwritten[piece]),
                       rel_tolerance, abs_tolerance, reference_name)
    verdict.padding_written = output.padding_written
    if output.padding_written:
        verdict.status = Status.FAIL
    return verdict


def compare_written_part(output: KernelOutput, expected: np.ndarray, element: dtypes.ElementType | str,
                         written: np.ndarray, *, rel_tolerance: float, abs_tolerance: float | None = None,
                         reference_name: str = "numpy-float64", start: np.ndarray | None = None) -> Verdict:
    """Compare the typed `output` of a kernel that writes only part of C, `written` (M x N, True where it writes:
    a SYRK's triangle, diagonal included), with a float64 `expected` (batch x M x N).

    The written part is checked as `compare_typed` checks a whole C, and its
    errors are the verdict's. Every other element must still hold what C held
    before the launch (its code of `start`, or the poison pattern): one that
    does not is counted wrong, so the counts and the maps cover all of C and
    the diagnosis finds writes on the wrong side.
    """
    element = dtypes.element_type(element)
    shape = output.values.shape
    inside = np.broadcast_to(np.asarray(written, dtype=bool), shape)
    expected = np.asarray(expected, dtype=np.float64).reshape(shape)
    start = np.asarray(start, np.float64).reshape(shape) if start is not None else None
    part = KernelOutput(output.values[inside][None, None], output.codes[inside][None, None], output.padding_written)
    verdict = compare_typed(part, expected[inside], element, rel_tolerance=rel_tolerance,
                            abs_tolerance=abs_tolerance, reference_name=reference_name,
                            start=start[inside] if start is not None else None)
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


FP32_ROUNDOFF = 2.0 ** -24   # half the spacing of float32's numbers just above 1
FP32_SMALLEST = float(np.finfo(np.float32).smallest_subnormal)


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
             rel_tolerance: float, abs_tolerance: float | None, reference_name: str) -> Verdict:
    """The verdict on `output` (float32 or float64) against float64 `expected`; `unwritten_in(piece, out)` marks
    the unwritten elements of a piece of the flattened output in the boolean array `out`.

    The relative Frobenius error is over the written, finite elements; an
    element is wrong when its error exceeds 10 x the tolerance scaled by the
    reference's RMS and the element's own size (or `abs_tolerance`, if larger).
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

    def measure(piece: slice) -> tuple[float, float, float, float, float]:
        """A piece's unwritten map; its sums of squared reference and error, its largest error, its largest
        |error| - 10 x tolerance x |reference| (the screen) and its largest 10 x tolerance x |reference|."""
        unwritten_in(piece, unwritten[piece])
        reference = expected[piece]
        error, _ = errors(piece)
        reference_sq, error_sq = _sum_of_squares(reference), _sum_of_squares(error)
        np.abs(error, out=error)
        scaled = np.abs(reference, out=scratch.bound[:error.size])
        scaled *= scale
        largest_scaled = float(scaled.max())
        np.subtract(error, scaled, out=scaled)
        return reference_sq, error_sq, float(error.max()), float(scaled.max()), largest_scaled

    def mark_wrong(piece: slice, rms: float) -> None:
        """The exact test of every element of a piece the screen did not clear."""
        error, usable = errors(piece)
        np.abs(error, out=error)
        tolerance = np.abs(expected[piece], out=scratch.bound[:error.size])
        tolerance += rms
        tolerance *= scale
        if abs_tolerance is not None:
            np.maximum(tolerance, abs_tolerance, out=tolerance)
        np.greater(error, tolerance, out=wrong[piece])
        if usable is not None:
            wrong[piece] &= usable

    with _pool(len(pieces)) as pool:
        measured = list(pool.map(measure, pieces))
        reference_norm = math.sqrt(sum(reference_sq for reference_sq, *_ in measured))
        rms = reference_norm / math.sqrt(max(expected.size, 1))
        doubtful = [piece for piece, (_, _, largest, screen, largest_scaled) in zip(pieces, measured)
                    if not screen < scale * rms - SCREEN_MARGIN * (largest + largest_scaled + scale * rms)]
        list(pool.map(lambda piece: mark_wrong(piece, rms), doubtful))
        counts = [sum(pool.map(lambda piece: int(np.count_nonzero(mask[piece])), pieces))
                  for mask in (unwritten, nonfinite, wrong)]
    error_norm = math.sqrt(sum(error_sq for _, error_sq, *_ in measured))
    rel_fro = error_norm / reference_norm if reference_norm > 0 else error_norm
    max_abs = max((largest for _, _, largest, *_ in measured), default=0.0)
    # Every element written, finite and none far off, and the whole within tolerance: a tile of zeros among
    # millions of right elements moves the Frobenius error of a narrow type less than its tolerance allows.
    passed = (counts == [0, 0, 0] and rel_fro <= rel_tolerance
              and (abs_tolerance is None or max_abs <= abs_tolerance))
    return Verdict(Status.PASS if passed else Status.FAIL, rel_fro, max_abs, counts[0], counts[1], counts[2],
                   elements=int(expected.size),
                   reference=reference_name, tolerance=rel_tolerance, abs_tolerance=abs_tolerance,
                   masks={"unwritten": unwritten.reshape(shape), "nonfinite": nonfinite.reshape(shape),
                          "wrong": wrong.reshape(shape)})


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
