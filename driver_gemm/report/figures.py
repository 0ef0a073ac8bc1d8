"""Pictures of one comparison, of a run's raw samples and clocks, and of a tune's search.

- `comparison_figure`: the change of each matched case's median, with the
  band its interquartile ranges allow, coloured FASTER, SLOWER or SAME as
  `compare` judged it;
- `samples_figure`: per case, the distribution of its raw samples and the
  samples in the order they were taken, beside the SM clock of the sampling
  window (every batch's clock where the results keep them, else the median
  and lowest clock they record);
- `tune_figure`: per kernel and shape of a tune, each configuration's time
  in the order it was measured, and the best so far.

Each builder returns a matplotlib figure (tests read its axes); `plots.save`
writes it through `output_files` (staged beside the target, then renamed).
matplotlib is the ``plots`` extra, imported when a picture is drawn.
"""

from __future__ import annotations

import math

from ..errors import UsageError
from ..results.records import CaseResult, RunResult
from .comparison import FASTER, SAME, SLOWER, Comparison
from .labels import short_labels
from .plots import drawn_text, require_matplotlib

VERDICT_COLOURS = {FASTER: "tab:green", SLOWER: "tab:red", SAME: "tab:gray"}
MAX_SAMPLE_CASES = 24    # rows of a samples picture: more would be unreadable
MAX_TUNE_PANELS = 12
MAX_COMPARISON_ROWS = 200   # a row is a third of an inch: more would pass the largest picture matplotlib draws


def change_band(comparison: Comparison) -> tuple[float, float] | None:
    """The relative changes the two runs' interquartile ranges allow: new q1 / old q3 - 1 to new q3 / old q1 - 1."""
    old, new = comparison.old.timing if comparison.old else None, comparison.new.timing if comparison.new else None
    if old is None or new is None or not old.q1_ms or not old.q3_ms:
        return None
    return new.q1_ms / old.q3_ms - 1, new.q3_ms / old.q1_ms - 1


def comparison_figure(comparisons: list[Comparison], title: str = ""):
    """One row per case that both runs timed (the first `MAX_COMPARISON_ROWS`; the title counts them all): its change
    in %, the band of `change_band`, coloured by verdict."""
    plt = require_matplotlib()
    every = [c for c in comparisons if c.change is not None and c.verdict in VERDICT_COLOURS]
    if not every:
        raise UsageError("no case timed in both runs: nothing to draw")
    timed = every[:MAX_COMPARISON_ROWS]
    names = short_labels(c.kernel for c in timed)
    figure, axes = plt.subplots(figsize=(10, 1.2 + 0.32 * len(timed)), dpi=100)
    rows = list(range(len(timed)))[::-1]
    for row, comparison in zip(rows, timed):
        colour = VERDICT_COLOURS[comparison.verdict]
        band = change_band(comparison)
        if band is not None:
            axes.plot([100 * band[0], 100 * band[1]], [row, row], color=colour, alpha=0.35, linewidth=6,
                      solid_capstyle="butt")
        axes.scatter([100 * comparison.change], [row], color=colour, zorder=3, s=24)
    axes.axvline(0, color="black", linewidth=0.8)
    axes.set_yticks(rows, [drawn_text(f"{names[c.kernel]} {c.shape}" + (f" {c.gpu}" if c.gpu else ""))
                           for c in timed], fontsize=7)
    axes.set_xlabel("change of the median time, % (band: from the interquartile ranges; left is faster)")
    counts = ", ".join(f"{sum(c.verdict == v for c in every)} {v}" for v in VERDICT_COLOURS)
    shown = f" (the first {len(timed)} of {len(every)} drawn)" if len(timed) < len(every) else ""
    axes.set_title(drawn_text(f"{title}: " if title else "") + counts + shown, fontsize=9)
    for verdict, colour in VERDICT_COLOURS.items():
        axes.scatter([], [], color=colour, label=verdict)
    axes.legend(loc="lower right", fontsize=7)
    axes.grid(True, axis="x", alpha=0.3)
    figure.tight_layout()
    return figure


def _batch_clocks(case: CaseResult) -> list[float]:
    """Every batch's SM clock, where the timing keeps them (older results keep only the median and lowest)."""
    clocks = getattr(case.timing, "sm_clocks_mhz", None) or []
    return [float(clock) for clock in clocks]


def sampled_cases(runs: list[RunResult]) -> list[CaseResult]:
    """The cases with raw samples, in the runs' order."""
    return [case for run in runs for case in run.cases if case.timing is not None and case.timing.samples_ms]


def samples_figure(cases: list[CaseResult]):
    """Per case (at most `MAX_SAMPLE_CASES`), two panels: the raw samples' histogram with median and quartiles,
    and the samples in the order they were taken with the SM clock on a second axis."""
    plt = require_matplotlib()
    if not cases:
        raise UsageError("no case with raw samples to draw")
    shown = cases[:MAX_SAMPLE_CASES]
    names = short_labels(case.kernel for case in shown)
    figure, axes = plt.subplots(len(shown), 2, figsize=(13, 2.3 * len(shown) + 0.6), dpi=100, squeeze=False)
    for (histogram, window), case in zip(axes, shown):
        timing = case.timing
        samples = list(timing.samples_ms)
        name = drawn_text(f"{names[case.kernel]} {case.shape.label}")
        histogram.hist(samples, bins=min(60, max(10, int(math.sqrt(len(samples))))), color="tab:blue", alpha=0.8)
        for value, style in ((timing.median_ms, "-"), (timing.q1_ms, ":"), (timing.q3_ms, ":")):
            histogram.axvline(value, color="black", linestyle=style, linewidth=1)
        histogram.set_title(f"{name}: {len(samples)} samples, median {timing.median_ms:.4g} ms, "
                            f"IQR {100 * timing.rel_spread:.1f}%", fontsize=8)
        histogram.set_xlabel("ms per launch", fontsize=7)
        window.plot(range(len(samples)), samples, color="tab:blue", linewidth=0.6, label="sample")
        window.set_xlabel("sample, in the order taken", fontsize=7)
        window.set_ylabel("ms", fontsize=7)
        clock = window.twinx()
        batches = _batch_clocks(case)
        if batches:
            step = len(samples) / len(batches)
            clock.step([index * step for index in range(len(batches))], batches, where="post", color="tab:orange",
                       linewidth=1, label="SM clock per batch")
        for value, style, label in ((timing.sm_clock_mhz, "-", "median SM clock"),
                                    (timing.sm_clock_min_mhz, "--", "lowest SM clock")):
            if value:
                clock.axhline(value, color="tab:orange", linestyle=style, linewidth=1, label=label)
        clock.set_ylabel("MHz", fontsize=7)
        window.set_title(f"{name}: the sampling window" + (
            f" (SM clock median {timing.sm_clock_mhz:.0f} MHz)" if timing.sm_clock_mhz else " (no clock read)"),
            fontsize=8)
    if len(cases) > len(shown):
        figure.suptitle(f"the first {len(shown)} of {len(cases)} cases with samples", fontsize=9)
    figure.tight_layout()
    return figure


def tune_groups(run: RunResult) -> dict[tuple[str, str], list[CaseResult]]:
    """A tune's kernel configurations by (kernel name, shape), each in the order they were measured."""
    groups: dict[tuple[str, str], list[CaseResult]] = {}
    for case in run.cases:
        if not case.is_baseline:
            groups.setdefault((case.name, case.shape.label), []).append(case)
    return groups


def best_so_far(times: list[float | None]) -> list[float | None]:
    """The lowest time up to each position (None before the first time)."""
    best, out = None, []
    for time in times:
        if time is not None and (best is None or time < best):
            best = time
        out.append(best)
    return out


def tune_figure(run: RunResult, where: str | None = None):
    """Per kernel and shape (at most `MAX_TUNE_PANELS`): each passing configuration's median time in evaluation
    order, and the best so far as a step line; the configurations that did not pass are counted in the title.
    `where`: the results file, which a refusal names."""
    plt = require_matplotlib()
    groups = tune_groups(run)
    if not any(case.ok and case.median_ms for cases in groups.values() for case in cases):
        raise UsageError("no timed, passing configuration in these results: nothing to draw", where=where)
    keys = list(groups)[:MAX_TUNE_PANELS]
    columns = min(3, len(keys))
    rows = -(-len(keys) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 3.6 * rows), dpi=100, squeeze=False)
    for panel, key in zip(axes.flat, keys):
        cases = groups[key]
        times = [case.median_ms if case.ok else None for case in cases]
        order = [index for index, time in enumerate(times) if time is not None]
        panel.scatter(order, [times[index] for index in order], s=10, color="tab:blue", label="configuration")
        panel.step(range(len(times)), best_so_far(times), where="post", color="tab:green", label="best so far")
        failed = len(times) - len(order)
        best = min((times[index] for index in order), default=None)
        panel.set_title(f"{drawn_text(key[0])} at {key[1]}: {len(times)} measured"
                        + (f", {failed} not passing" if failed else "") + (f"; best {best:.4g} ms" if best else ""),
                        fontsize=8)
        panel.set_xlabel("configuration, in evaluation order", fontsize=7)
        panel.set_ylabel("median ms", fontsize=7)
        panel.grid(True, alpha=0.3)
        panel.legend(fontsize=7)
    for panel in list(axes.flat)[len(keys):]:
        panel.set_axis_off()
    if len(groups) > len(keys):
        figure.suptitle(f"the first {len(keys)} of {len(groups)} kernels and shapes", fontsize=9)
    figure.tight_layout()
    return figure

