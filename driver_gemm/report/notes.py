"""The notes under a results table: which cuBLASLt algorithm each vendor row ran and how it was chosen
(`measure.vendor_choice`), the times behind the % of a kernel timed in rounds with its vendor row
(`measure.rounds`), the figures at equal clock (`clock_figures`), the cluster launches that took more waves
than their blocks would have alone, and the memory rate of cases that move more bytes than their multiplies can
hide."""

from __future__ import annotations

import math

from ..gemm.peaks import ELEMENT_BYTES, bytes_moved
from ..results.records import CaseResult, RunResult
from ..results.text import printable
from ..specfile.model import Shape
from .clock_figures import TimedRows, clock_notes


def cases_by_shape(run: RunResult) -> dict[Shape, list[CaseResult]]:
    """The run's cases grouped by shape, shapes in the order they first appear (one pass, not one per shape)."""
    groups: dict[Shape, list[CaseResult]] = {}
    for case in run.cases:
        groups.setdefault(case.shape, []).append(case)
    return groups


def algorithm_notes(run: RunResult, shape: Shape) -> list[str]:
    """One line per cuBLASLt row of `shape` that records its algorithm, e.g.
    ``cublaslt-bf16-TN: best of 8: heuristic #3, algo 66, tile 256x128, stages 64x4, split-K 1``."""
    return _algorithm_lines([case for case in run.cases if case.shape == shape])


def _algorithm_lines(cases: list[CaseResult]) -> list[str]:
    """`algorithm_notes` of the cases of one shape."""
    return [f"{case.kernel}: {case.algorithm.describe()}" for case in cases if case.algorithm is not None]


def rounds_notes(cases: list[CaseResult]) -> list[str]:
    """One line per kernel timed in rounds alternating with its vendor row (``measure.rounds``): the two times
    whose ratio is its % of cuBLAS: ``KERNEL: P% of VENDOR in N interleaved rounds: T ms against V ms, each the
    median of its rounds' medians``."""
    timed = [(case, case.timed_in_rounds) for case in cases if case.timed_in_rounds is not None]
    return [f"{case.kernel}: {rounds.pct_vendor:.1f}% of {rounds.vendor} in {rounds.rounds} interleaved rounds: "
            f"{rounds.kernel_ms:.4g} ms against {rounds.vendor_ms:.4g} ms, each the median of its rounds' medians"
            for case, rounds in timed]


def _whole_waves(value: float) -> int:
    """The waves a launch takes, counting a partial last one (a hair over a whole number, from division, is not
    one)."""
    return math.ceil(value - 1e-9)


def residency_notes(cases: list[CaseResult]) -> list[str]:
    """One line per cluster launch that takes more waves of clusters than its blocks would take alone, e.g.
    ``v15[...]: its 33 clusters of 4 blocks take 2 waves (1.10): 30 fit at once (cuOccupancyMaxActiveClusters),
    where its 132 blocks alone would take 1 (1.00); ...``: the GPU's SMs do not divide into such clusters evenly, so
    a persistent grid sized by the SM count leaves some clusters to start only when others end."""
    notes = []
    for case in cases:
        occupancy, launch = case.occupancy, case.launch
        if occupancy is None or launch is None or not occupancy.cluster or not launch.total_blocks:
            continue
        by_cluster, by_block = occupancy.driver_cluster_waves, occupancy.driver_waves
        if by_cluster is None or by_block is None or _whole_waves(by_cluster) <= _whole_waves(by_block):
            continue
        size = math.prod(occupancy.cluster)
        notes.append(f"{case.kernel}: its {launch.total_blocks // size} clusters of {size} blocks take "
                     f"{_whole_waves(by_cluster)} waves ({by_cluster:.2f}): {occupancy.driver_max_active_clusters} fit "
                     f"at once (cuOccupancyMaxActiveClusters), where its {launch.total_blocks} blocks alone would "
                     f"take {_whole_waves(by_block)} ({by_block:.2f}); a persistent grid that reads "
                     f"max_active_clusters asks for no more than fit")
    return notes


def least_bytes(case: CaseResult) -> int:
    """The bytes a GEMM must move at the least, every matrix of its batch: A and B read once and C written once, in
    their storage types (`gemm.peaks.bytes_moved`, as the roofline counts them; an untyped case's are FP32); for a
    grouped GEMM, the rows its groups hold and a B per group."""
    types = case.operands.types if case.operands else None
    shape, rows = case.shape, case.group_rows
    if rows is not None:
        # bytes_moved of no rows is one B's: every group past the first reads its own
        return bytes_moved(sum(rows), shape.N, shape.K, types) + (len(rows) - 1) * bytes_moved(0, shape.N, shape.K,
                                                                                              types)
    return case.matrices * bytes_moved(shape.M, shape.N, shape.K, types)


def memory_notes(run: RunResult, cases: list[CaseResult]) -> list[str]:
    """For the timed cases of a shape that is memory-bound on the run's GPU (fewer FLOP a byte moved than the
    math's peak over the DRAM's theoretical bandwidth: the roofline's ridge), the rate at which each moved its
    least bytes, e.g. ``memory-bound: 1.0 FLOP a byte, under the ridge at R (BF16 peak over DRAM peak); at least
    B MB to move: cublaslt-bf16-NN X TB/s (P%), v14 Y TB/s (Q%) of the D TB/s DRAM peak``.
    At such a shape % of peak says little, and this says how far the memory lets a kernel go. A case timed in
    rounds with its vendor row is taken at its rounds' median; cases of other types or math make lines of their
    own."""
    device = run.environment.get("device") or {}
    bandwidth = device.get("memory_bandwidth_gbs")
    groups: dict[tuple[int, float, str], list[tuple[CaseResult, float]]] = {}
    for case in cases:
        rounds = case.timed_in_rounds
        ms = rounds.kernel_ms if rounds is not None else case.median_ms
        peak = case.peak_gflops(device) if bandwidth else None
        if not ms or not peak:
            continue
        types = (case.operands.types if case.operands else None) or {}
        if any(types.get(name, "fp32") not in ELEMENT_BYTES for name in "abc"):
            continue            # a results file naming a type this package does not know: no line for the case
        groups.setdefault((least_bytes(case), peak / bandwidth, case.math), []).append((case, ms))
    notes = []
    for (moved, ridge, math_kind), timed in groups.items():
        case = timed[0][0]
        intensity = case.flops / moved
        if intensity >= ridge:
            continue
        rates = [(c, moved / (ms * 1e-3) / 1e9) for c, ms in timed]
        listed = ", ".join(f"{c.kernel} {rate / 1e3:.2f} TB/s ({100 * rate / bandwidth:.0f}%)" for c, rate in rates)
        notes.append(f"memory-bound: {intensity:.1f} FLOP a byte, under the ridge at {ridge:.0f} ({math_kind.upper()} "
                     f"peak over DRAM peak); at least {moved / 1e6:.1f} MB to move: {listed} of the "
                     f"{bandwidth / 1e3:.2f} TB/s DRAM peak")
    return notes


def table_notes(run: RunResult, shape: Shape, cases: list[CaseResult], rows: TimedRows | None = None) -> list[str]:
    """Every note under `shape`'s table: the vendor rows' algorithms, the kernels timed in rounds, the figures
    at equal clock, the cluster launches that spill into another wave, the memory-bound cases' rates.

    `cases` are the run's cases of `shape` (`cases_by_shape`); `rows` the run's `TimedRows`, where the caller
    has them. The names and figures in the notes come from the results file: each line is escaped
    (`printable`)."""
    notes = (_algorithm_lines(cases) + checked_against_notes(cases) + rounds_notes(cases)
             + clock_notes(run, cases, rows) + residency_notes(cases) + memory_notes(run, cases))
    return [printable(note) for note in notes]


def checked_against_notes(cases: list[CaseResult]) -> list[str]:
    """For each case checked against more than its product, what more, as its results file records it: the inputs'
    structure, a Gram product of one input, a drawn bias and the element-wise functions (``structure``, ``gram``,
    ``bias`` and ``elementwise`` of its operands), and the matrices (i, j) of a batch of two levels
    (``batch_levels``). Values of another kind than the tool writes are left out, not guessed at."""
    notes = []
    for case in cases:
        operands = case.operands
        if operands is None:
            continue
        said = []
        levels = operands.batch_levels
        if isinstance(levels, list) and len(levels) == 2 and all(isinstance(count, int) for count in levels):
            said.append(f"each matrix (i, j) of a batch of two levels, {levels[0]} x {levels[1]}")
        if isinstance(operands.structure, dict) and operands.structure:
            said.append("inputs drawn " + ", ".join(f"{operand.upper()} {word}" for operand, word
                                                    in operands.structure.items() if isinstance(word, str)))
        gram = operands.gram
        if isinstance(gram, dict) and gram.get("of") in ("a", "b"):
            product = "A A^T, B read from A's buffer" if gram["of"] == "a" else "B^T B, A read from B's buffer"
            triangle = gram.get("triangle")
            written = f", its {triangle} triangle written and the other left as it was" \
                if triangle in ("lower", "upper") else ""
            added = f", plus beta {gram['of'].upper()} (C0 is the input)" if gram.get("c0") == "input" else ""
            said.append(f"a Gram product, C = {product}{added}{written}")
        if operands.bias in ("N", "M"):
            said.append(f"a bias added per {'column' if operands.bias == 'N' else 'row'}")
        if isinstance(operands.elementwise, list) and operands.elementwise:
            said.append("then " + ", ".join(_function_text(item) for item in operands.elementwise))
        if said:
            notes.append(f"{case.kernel}: C checked with {'; '.join(said)}")
    return notes


def _function_text(item) -> str:
    """One element-wise function as a results file holds it: a name, or a one-name mapping to its argument."""
    if isinstance(item, dict) and len(item) == 1:
        (name, argument), = item.items()
        return f"{name}({', '.join(map(str, argument)) if isinstance(argument, list) else argument})"
    return str(item)


def markdown_notes(run: RunResult) -> str:
    """The notes of every shape's table (`table_notes`) as a Markdown list after the tables; empty when there are
    none."""
    lines = []
    rows = TimedRows(run)
    for shape, cases in cases_by_shape(run).items():
        lines += [f"- {shape.label}: {note}" for note in table_notes(run, shape, cases, rows)]
    return "\n" + "\n".join(lines) + "\n" if lines else ""
