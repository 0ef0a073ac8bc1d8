"""The notes under a results table: which cuBLASLt algorithm each vendor row ran and how it was chosen
(`measure.vendor_choice`), the times behind the % of a kernel timed in rounds with its vendor row
(`measure.rounds`), and the figures at equal clock (`clock_figures`)."""

from __future__ import annotations

from ..results.records import CaseResult, RunResult
from ..specfile.model import Shape
from .clock_figures import clock_notes


def algorithm_notes(run: RunResult, shape: Shape) -> list[str]:
    """One line per cuBLASLt row of `shape` that records its algorithm, e.g.
    ``cublaslt-bf16-TN: best of 8: heuristic #3, algo 66, tile 256x128, stages 64x4, split-K 1``."""
    return [f"{case.kernel}: {case.algorithm.describe()}" for case in run.cases
            if case.shape == shape and case.algorithm is not None]


def rounds_notes(cases: list[CaseResult]) -> list[str]:
    """One line per kernel timed in rounds alternating with its vendor row (``measure.rounds``): the two times
    whose ratio is its % of cuBLAS, e.g. ``v15: 97.2% of cublaslt-bf16-NN in 3 interleaved rounds: 0.1801 ms
    against 0.1750 ms, each the median of its rounds' medians``."""
    timed = [(case, case.timed_in_rounds) for case in cases if case.timed_in_rounds is not None]
    return [f"{case.kernel}: {rounds.pct_vendor:.1f}% of {rounds.vendor} in {rounds.rounds} interleaved rounds: "
            f"{rounds.kernel_ms:.4g} ms against {rounds.vendor_ms:.4g} ms, each the median of its rounds' medians"
            for case, rounds in timed]


def table_notes(run: RunResult, shape: Shape, cases: list[CaseResult]) -> list[str]:
    """Every note under `shape`'s table: the vendor rows' algorithms, the kernels timed in rounds, the figures
    at equal clock."""
    return algorithm_notes(run, shape) + rounds_notes(cases) + clock_notes(run, cases)


def markdown_notes(run: RunResult) -> str:
    """The notes of every shape's table (`table_notes`) as a Markdown list after the tables; empty when there are
    none."""
    lines = []
    for shape in dict.fromkeys(case.shape for case in run.cases):
        cases = [case for case in run.cases if case.shape == shape]
        lines += [f"- {shape.label}: {note}" for note in table_notes(run, shape, cases)]
    return "\n" + "\n".join(lines) + "\n" if lines else ""
