"""The notes under a results table: which cuBLASLt algorithm each vendor row ran and how it was chosen
(`measure.vendor_choice`), and, for Markdown, the figures at equal clock (`clock_figures`)."""

from __future__ import annotations

from ..results.records import RunResult
from ..specfile.model import Shape
from .clock_figures import clock_notes


def algorithm_notes(run: RunResult, shape: Shape) -> list[str]:
    """One line per cuBLASLt row of `shape` that records its algorithm, e.g.
    ``cublaslt-bf16-TN: best of 8: heuristic #3, algo 66, tile 256x128, stages 64x4, split-K 1``."""
    return [f"{case.kernel}: {case.algorithm.describe()}" for case in run.cases
            if case.shape == shape and case.algorithm is not None]


def markdown_notes(run: RunResult) -> str:
    """The notes of every shape's table (the vendor rows' algorithms, figures at equal clock) as a Markdown list
    after the tables; empty when there are none."""
    lines = []
    for shape in dict.fromkeys(case.shape for case in run.cases):
        cases = [case for case in run.cases if case.shape == shape]
        lines += [f"- {shape.label}: {note}" for note in algorithm_notes(run, shape) + clock_notes(run, cases)]
    return "\n" + "\n".join(lines) + "\n" if lines else ""
