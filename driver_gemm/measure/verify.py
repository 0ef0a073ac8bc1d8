"""Step 5 of the data flow: an output checked against its float64 reference, and the verdict.

Inputs come from `inputs.py`, the reference from `reference.py`.

Unwritten outputs are found by poisoning C with a NaN whose bit pattern no
arithmetic produces (a quiet NaN with payload 0xDEAD; hardware NaNs carry the
canonical payload): an element that still holds that exact pattern after the
launch was never written. Kernels that read C (they take ``beta``) get finite
random values in C instead, and an element still bit-equal to its starting
value where the reference differs counts as unwritten.

Typed outputs (fp16, bf16, ... read back by `operands.read_output`) are
checked by `compare_typed` the same way, with their type's poison code, and
a write into the padding between rows or matrices is a failure of its own.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import os
from dataclasses import dataclass, field

import numpy as np

from . import dtypes
from .operands import Output
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
    written, finite elements; PASS needs every element written and finite and
    the errors within tolerance. An element is counted wrong when its error
    is far outside what float32 rounding gives (10 x the tolerance, scaled by
    the reference's RMS and the element's own size).
    """
    output = np.asarray(output, dtype=np.float32)
    if output.shape != expected.shape:
        raise ValueError(f"output shape {output.shape} does not match the reference's {expected.shape}")
    if start is None:
        unwritten = output.view(np.uint32) == np.uint32(POISON_WORD)
    else:
        unwritten = (output.view(np.uint32) == np.asarray(start, np.float32).view(np.uint32)) & \
                    (expected != np.asarray(start, np.float64))
    return _verdict(output, expected, unwritten, rel_tolerance, abs_tolerance, reference_name)


def compare_typed(output: Output, expected: np.ndarray, element: dtypes.ElementType | str, *, rel_tolerance: float,
                  abs_tolerance: float | None = None, reference_name: str = "numpy-float64",
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
        unwritten = (output.codes == dtypes.encode(start, element)) & (expected != start)
    verdict = _verdict(output.values, expected, unwritten, rel_tolerance, abs_tolerance, reference_name)
    verdict.padding_written = output.padding_written
    if output.padding_written:
        verdict.status = Status.FAIL
    return verdict


# Elements per piece of a large output: its float64 temporaries (32 MiB each) are made once per piece and
# reused, instead of a dozen full-size arrays (2 GiB each at 16384^2) whose first touch the kernel pays for
# page by page, and which two GPUs' worker processes checking at once would contend for.
PIECE_ELEMENTS = 1 << 22
# Threads checking pieces side by side (NumPy releases the GIL in its loops).
CHECK_THREADS = max(1, min(8, os.cpu_count() or 1))


def _verdict(output: np.ndarray, expected: np.ndarray, unwritten: np.ndarray, rel_tolerance: float,
             abs_tolerance: float | None, reference_name: str) -> Verdict:
    """The verdict on `output` (float32 or float64) against float64 `expected`, the unwritten elements known.

    The relative Frobenius error is over the written, finite elements; an
    element is wrong when its error exceeds 10 x the tolerance scaled by the
    reference's RMS and the element's own size (or `abs_tolerance`, if larger).
    Large outputs are checked piece by piece (`PIECE_ELEMENTS`), on
    `CHECK_THREADS` threads: the sums of squares are added in piece order,
    so the figures do not depend on the threads.
    """
    shape = output.shape
    output, expected, unwritten = output.reshape(-1), expected.reshape(-1), unwritten.reshape(-1)
    pieces = [slice(start, start + PIECE_ELEMENTS) for start in range(0, expected.size, PIECE_ELEMENTS)]
    with _pool(len(pieces)) as pool:
        reference_norm = math.sqrt(sum(pool.map(lambda piece: float(np.dot(expected[piece], expected[piece])),
                                                pieces)))
        rms = reference_norm / math.sqrt(max(expected.size, 1))
        nonfinite = np.empty(expected.size, dtype=bool)
        wrong = np.empty(expected.size, dtype=bool)

        def check(piece: slice) -> tuple[float, float]:
            """Marks `piece`'s nonfinite and wrong elements; its sum of squared errors and its largest error."""
            written, reference = output[piece].astype(np.float64), expected[piece]
            nonfinite[piece] = ~np.isfinite(written) & ~unwritten[piece]
            usable = ~(unwritten[piece] | nonfinite[piece])
            with np.errstate(invalid="ignore"):
                difference = np.where(usable, written - reference, 0.0)
            error_sq = float(np.dot(difference, difference))
            np.abs(difference, out=difference)
            tolerance = np.abs(reference)
            tolerance += rms
            tolerance *= 10 * rel_tolerance
            if abs_tolerance is not None:
                np.maximum(tolerance, abs_tolerance, out=tolerance)
            np.greater(difference, tolerance, out=wrong[piece])
            wrong[piece] &= usable
            return error_sq, float(difference.max()) if difference.size else 0.0

        checked = list(pool.map(check, pieces))
    error_norm = math.sqrt(sum(error_sq for error_sq, _ in checked))
    rel_fro = error_norm / reference_norm if reference_norm > 0 else error_norm
    max_abs = max((largest for _, largest in checked), default=0.0)
    counts = int(unwritten.sum()), int(nonfinite.sum()), int(wrong.sum())
    passed = (counts[0] == 0 and counts[1] == 0 and rel_fro <= rel_tolerance
              and (abs_tolerance is None or max_abs <= abs_tolerance))
    return Verdict(Status.PASS if passed else Status.FAIL, rel_fro, max_abs, *counts, elements=int(expected.size),
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
