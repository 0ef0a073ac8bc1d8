"""The notes under a results table about its vendor rows: which cuBLASLt algorithm each ran, and how it was
chosen (`measure.vendor_choice`)."""

from __future__ import annotations

from ..results.records import RunResult
from ..specfile.model import Shape


def algorithm_notes(run: RunResult, shape: Shape) -> list[str]:
    """One line per cuBLASLt row of `shape` that records its algorithm, e.g.
    ``cublaslt-bf16-TN: best of 8: heuristic #3, algo 66, tile 256x128, stages 64x4, split-K 1``."""
    return [f"{case.kernel}: {case.algorithm.describe()}" for case in run.cases
            if case.shape == shape and case.algorithm is not None]
