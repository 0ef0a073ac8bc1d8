"""driver-gemm's cuBLASLt baseline against an independent harness: torch, timed like-for-like.

usage: python3 scripts/baseline_check.py [--json FILE] [--lock-clocks MHZ|max] [--kernels] [--shapes MxNxK ...]
                                       [--samples PATTERN ...] [--kernel SPEC.yaml:NAME ...]

On a GPU machine with torch and triton (about 70-90 s on an H200; each step prints as it goes). The
headline run is step `baselines` of scripts/regenerate.py.

Combinations: bf16 and fp16 (layout NN, C of the input type) with torch.mm,
and fp8 e4m3 -> bf16 (layout NT: A row-major, B column-major, the only fp8
layout cuBLASLt has on sm_90; per-tensor scales 1) with torch._scaled_mm; at
1024x512x1024, 4096^3 and 8192^3. alpha = 1, beta = 0 on both sides.

Our side is driver-gemm's cuBLASLt row as the pipeline builds and times it:
`cublaslt.plan_matmul`, `CublasLtMatmul.prepare`, then `timing.measure` (an
L2 flush before every sample, events around the launch alone behind the
launch gate, median; --our-timeout caps each measurement), but without the
pipeline's float64 check of the whole product, which at 8192^3 takes the host
minutes: instead 16 rows of C, picked at random, are checked against a
float64 product of the same rows (a wrong layout or type fails it at once).
No batch is discarded for a low clock on either side (the throttle threshold
is off here): both sides keep every sample and the clock is reported instead.

Why the comparison is like-for-like (an H200 under sustained tensor-core load
drops its SM clock from 1980 MHz to ~1500-1600 under its power limit, so two
timings taken at different times can differ by 5-10% for no other reason):

- Interleaved: both sides live in one process and one CUDA context (torch's;
  driver-gemm adopts it), and each (combination, shape) is timed in --rounds
  rounds, our side and torch's alternating in the order ours, torch | torch,
  ours | ours, torch ... (a slow drift of the clock then weighs on both
  alike). Each side's figure is the median over rounds of its per-round medians.
- Same duration: torch is given the wall time our measurement took in the
  round before (do_bench's `rep`, or the graph timer's budget), so both
  sides spend about as long under load.
- Same data: both sides multiply torch's operands, byte for byte (torch.rand * 2 - 1 in the type; --operands
  own draws ours instead). A power-bound GEMM's clock depends on its data: values with few mantissa bits
  set switch fewer transistors than uniform ones with full mantissas, so the GPU holds a higher clock.
- Same starting state: --soak seconds of an 8192^3 bf16 torch.mm before the
  first case, so that neither side starts on a cool, unthrottled GPU.
- The SM clock (NVML, read every 20 ms on a helper thread while each side is
  measured; readings NVML marks as idle left out) is in the table for both
  sides: ours MHz, torch MHz.
- Launch overhead: our samples exclude it (the launch gate holds the stream
  while a batch is queued). Triton's do_bench does not hold the stream, so for
  kernels under SMALL_KERNEL_MS (0.1 ms) torch is timed by a CUDA graph of
  GRAPH_SAMPLES x (L2 flush, event, op, event) with the events recorded as
  graph nodes (torch.cuda.Event(external=True)), each sample read on its own:
  no host work between the events. Where that graph cannot be built, do_bench
  is used and the row's timer reads "do_bench+launch". do_bench_cudagraph is not used: it does not
  flush L2 between launches. Larger kernels keep do_bench (its flush, median):
  at >= 0.1 ms a launch's host cost hides behind the queue.

With --kernels, each case also gets a third figure that no event timer
enters: the kernels each side launches and their own durations as CUPTI
records them (through torch.profiler), over --kernel-launches launches of each
side back to back, unflushed. Where both sides run the same kernel, the
CUPTI durations say whether a difference between the timers' figures is the
kernel's or the timer's (under 0.1 ms, half a microsecond of timer is 5%).

With --samples, our side is timed once per sample pattern (`measure.samples`: flush, flush-idle:MS,
do-bench, burst[:N[:MS]]; docs/timing.md), each against torch in its own interleaved rounds, a row
per pattern: how each pattern moves our clock and our figure. torch is timed by do_bench, except
against a burst pattern: then by a warm-burst harness of its own (the same rest, the same launches
back to back between one event pair, no flush), as many authors time their kernels.
Our side runs the heuristic's first algorithm, as torch does (`CublasLtMatmul.prepare`).

With --kernel SPEC.yaml:NAME (repeatable), one of our kernels is set against torch instead, a row per kernel,
shape and pattern: torch's A, B and an empty C in the types and layout of the kernel's spec entry (bf16 or fp16
NN with C of the input type or fp32, bf16 NT likewise, e4m3 NT with bf16 or fp32 C and the entry's scales, tf32
NN or NT, fp32 NN; another is a row with an error; NT's B is a transposed view of an N x K tensor), torch's op
on them (torch.mm, with out_dtype for an fp32 C; torch._scaled_mm for fp8), and our side as `dg.check_kernel`
runs the entry on those tensors in torch's context, checked in every round against their float64 product (torch,
on the GPU) and timed with the pattern (do-bench unless --samples says) for --our-timeout seconds. The params
are the entry's, or the spec's dispatch entry for the shape (the row says which). Our sampler keeps its throttle
threshold (a batch under 75% of the maximum clock is dropped and counted); both clocks are read by the same watch.
The cuBLASLt rows then run only for the combinations --only names.

Each shape has a wall-time budget (--shape-timeout); a shape over it is
reported as a timeout and the check goes on. Exit status 1 unless every row
is within --limit % (3) and its check passed, and every kernel row passed its check.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from driver_gemm.measure.clocks import GPU_IDLE

SHAPES = [(1024, 512, 1024), (4096, 4096, 4096), (8192, 8192, 8192)]
COMBINATIONS = {          # name: (driver-gemm types, layout)
    "bf16": ({"a": "bf16"}, "NN"),
    "fp16": ({"a": "fp16"}, "NN"),
    "e4m3-bf16": ({"a": "e4m3", "c": "bf16"}, "NT"),
}
CHECKED_ROWS = 16
SMALL_KERNEL_MS = 0.1      # under this, torch is timed in a CUDA graph: do_bench's figure would carry launch cost
GRAPH_SAMPLES = 50         # flushed samples per graph replay (about 2 ms of GPU time at 1024x512x1024)
DO_BENCH_WARMUP_MS = 25    # do_bench's default warm-up
MIN_REP_MS = 50            # do_bench's budget is never shorter than this
CLOCK_INTERVAL_S = 0.02    # SM clock readings while a side is measured
STARTED = time.perf_counter()


def say(*parts) -> None:
    print(f"[{time.perf_counter() - STARTED:6.1f} s]", *parts, flush=True)


class ShapeTimeout(Exception):
    pass


class budget:
    """SIGALRM after `seconds`: a shape that takes longer raises ShapeTimeout when Python next runs."""

    def __init__(self, seconds: int):
        self.seconds = seconds

    def __enter__(self):
        def expire(signum, frame):
            raise ShapeTimeout(f"over {self.seconds} s")
        self.previous = signal.signal(signal.SIGALRM, expire)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.previous)


# ------------------------------------------------------------------------------------------ inputs

def random_codes(element: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` storage codes of `element`, values in (-2, 2), none NaN or infinite: fast at 8192^2."""
    if element == "e4m3":
        # sign | exponent 0..7 | mantissa: magnitudes up to 1.875 (exponent field 7 is 2^0)
        return (rng.integers(0, 0x40, count, dtype=np.uint8) | (rng.integers(0, 2, count, dtype=np.uint8) << 7))
    values = rng.uniform(-1.0, 1.0, count).astype(np.float32)
    if element == "bf16":
        return (values.view(np.uint32) >> 16).astype(np.uint16)          # truncation: an exact bf16 value
    return values.astype(np.float16).view(np.uint16)


def decode(codes: np.ndarray, element: str) -> np.ndarray:
    from driver_gemm.gemm import dtypes
    return dtypes.decode(codes, element)


# ------------------------------------------------------------------ pure logic (tested without a GPU)

@dataclass(frozen=True)
class SideRound:
    """One side's measurement in one round: its median, the wall time it took, the SM clock meanwhile."""

    ms: float
    seconds: float
    mhz: float | None = None          # median of the busy readings taken during the measurement
    min_mhz: float | None = None


def round_order(rounds: int) -> list[str]:
    """The sides in the order they are timed: ours, torch | torch, ours | ours, torch ...

    Round 0 starts with ours (torch's time budget is the wall time our
    measurement took); later rounds swap the order, so that a clock drifting
    one way over a case weighs on both sides alike.
    """
    order = []
    for index in range(rounds):
        order += ["ours", "torch"] if index % 2 == 0 else ["torch", "ours"]
    return order


def median_or_none(values) -> float | None:
    present = [float(v) for v in values if v is not None]
    return float(statistics.median(present)) if present else None


def side_figures(rounds: list[SideRound]) -> dict:
    """A side's figures over its rounds: the median of the per-round medians, clocks, per-round values."""
    return {"ms": median_or_none(r.ms for r in rounds),
            "mhz": median_or_none(r.mhz for r in rounds),
            "min_mhz": min((r.min_mhz for r in rounds if r.min_mhz is not None), default=None),
            "round_ms": [r.ms for r in rounds],
            "round_s": [round(r.seconds, 3) for r in rounds],
            "round_mhz": [r.mhz for r in rounds]}


def torch_timer_kind(ours_ms: float, graph_possible: bool) -> str:
    """"cuda-graph" for a kernel short enough that do_bench's figure would carry launch cost, else "do_bench".

    A short kernel without the graph timer gets "do_bench+launch": its figure
    carries launch cost, and the table says so.
    """
    if ours_ms >= SMALL_KERNEL_MS:
        return "do_bench"
    return "cuda-graph" if graph_possible else "do_bench+launch"


def do_bench_rep_ms(seconds: float) -> int:
    """do_bench's `rep` (ms) for a measurement that should last as long as ours did (`seconds`)."""
    return max(MIN_REP_MS, round(seconds * 1000.0))


def clock_figures(readings) -> tuple[float | None, float | None]:
    """(median, lowest) SM clock of the readings NVML did not mark as taken on an idle GPU."""
    busy = [reading.sm_mhz for reading in readings if not reading.reasons & GPU_IDLE]
    return (float(statistics.median(busy)), float(min(busy))) if busy else (None, None)


def case_row(name: str, layout: str, label: str, ours: list[SideRound], theirs: list[SideRound], *,
             torch_timer: str | None, check: str | None, error: str | None, limit_pct: float,
             samples: str = "flush") -> dict:
    """One row of the table: each side's median of medians, their ratio, clocks, and whether it is within."""
    our, their = side_figures(ours), side_figures(theirs)
    ratio = our["ms"] / their["ms"] if our["ms"] is not None and their["ms"] else None
    within = (ratio is not None and abs(ratio - 1.0) * 100.0 <= limit_pct and error is None
              and (check or "").startswith("ok"))
    return {"combination": name, "layout": layout, "shape": label,
            "ours_ms": our["ms"], "torch_ms": their["ms"], "ratio": ratio,
            "ours_mhz": our["mhz"], "torch_mhz": their["mhz"],
            "ours_min_mhz": our["min_mhz"], "torch_min_mhz": their["min_mhz"],
            "torch_timer": torch_timer, "rounds": min(len(ours), len(theirs)),
            "ours_round_ms": our["round_ms"], "torch_round_ms": their["round_ms"],
            "ours_round_s": our["round_s"], "torch_round_s": their["round_s"],
            "ours_round_mhz": our["round_mhz"], "torch_round_mhz": their["round_mhz"],
            "within_limit": within, "check": check, "error": error, "samples": samples}


def format_table(rows: list[dict], limit_pct: float) -> list[str]:
    """The table as printed: figures, ratio, both sides' SM clocks, torch's timer, the verdict."""
    def number(value, width, digits):
        return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}}"
    patterns = any(row.get("samples", "flush") != "flush" for row in rows)
    lines = [f"{'combination':<11} {'layout':<6} {'shape':<15} " + (f"{'samples':<14} " if patterns else "")
             + f"{'ours ms':>9} {'torch ms':>9} {'ratio':>7} "
             f"{'ours MHz':>8} {'torch MHz':>9}  {'torch timer':<11} within {limit_pct:g}%  check"]
    for row in rows:
        note = row["error"] or row["check"] or ""
        pattern = f"{row.get('samples', 'flush'):<14} " if patterns else ""
        lines.append(f"{row['combination']:<11} {row['layout']:<6} {row['shape']:<15} {pattern}"
                     f"{number(row['ours_ms'], 9, 4)} {number(row['torch_ms'], 9, 4)} {number(row['ratio'], 7, 3)} "
                     f"{number(row['ours_mhz'], 8, 0)} {number(row['torch_mhz'], 9, 0)}  "
                     f"{row['torch_timer'] or '-':<11} {'yes' if row['within_limit'] else 'NO':<10} {note}")
    return lines


def kernel_table(rows: list[dict]) -> list[str]:
    """With --kernels: per row, each side's summed CUPTI kernel medians, their ratio, and whether the kernels match."""
    measured = [row for row in rows if row.get("kernels")]
    if not measured:
        return []
    lines = [f"{'combination':<11} {'shape':<15} {'ours us':>9} {'torch us':>9} {'ratio':>7}  same kernels  "
             "(CUPTI durations, unflushed, back to back)"]
    for row in measured:
        k = row["kernels"]
        ratio = f"{k['ratio']:7.3f}" if k["ratio"] is not None else f"{'-':>7}"
        lines.append(f"{row['combination']:<11} {row['shape']:<15} {k['ours_us'] or 0:9.2f} {k['torch_us'] or 0:9.2f} "
                     f"{ratio}  {'yes' if k['same_kernels'] else 'NO: ' + ' | '.join(sorted(k['torch']))}")
    return lines


class ClockWatch:
    """Reads the SM clock every `interval_s` on a helper thread for the length of a `with` block.

    Both sides are watched the same way (NVML only, no CUDA call from the
    thread); `source` is an `NvmlClocks` or None (no NVML: no figures).
    """

    def __init__(self, source, interval_s: float = CLOCK_INTERVAL_S):
        self.source, self.interval_s = source, interval_s
        self.readings: list = []
        self.stamps: list[float] = []        # time.perf_counter() of each reading
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _watch(self) -> None:
        while True:
            reading = self.source.read()
            if reading is not None:
                self.stamps.append(time.perf_counter())
                self.readings.append(reading)
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> "ClockWatch":
        if self.source is not None:
            self._thread = threading.Thread(target=self._watch, name="clock-watch", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()

    def figures(self, since: float | None = None) -> tuple[float | None, float | None]:
        """(median, lowest) busy SM clock of the readings, or of those taken at `since` (perf_counter) or later."""
        if since is None:
            return clock_figures(self.readings)
        return clock_figures(r for r, stamp in zip(self.readings, self.stamps) if stamp >= since)


# ------------------------------------------------------------------------- a spec's kernel (--kernel)

# What a spec kernel's (A, B, C, layout) is set against: torch's op on tensors of those types.
KERNEL_COMBINATIONS = {
    ("bf16", "bf16", "bf16", "NN"): "torch.mm",
    ("bf16", "bf16", "fp32", "NN"): "torch.mm out_dtype=float32",
    ("fp16", "fp16", "fp16", "NN"): "torch.mm",
    ("fp16", "fp16", "fp32", "NN"): "torch.mm out_dtype=float32",
    ("bf16", "bf16", "bf16", "NT"): "torch.mm",
    ("bf16", "bf16", "fp32", "NT"): "torch.mm out_dtype=float32",
    ("e4m3", "e4m3", "bf16", "NT"): "torch._scaled_mm",
    ("e4m3", "e4m3", "fp32", "NT"): "torch._scaled_mm out_dtype=float32",
    ("tf32", "tf32", "fp32", "NN"): "torch.mm allow_tf32",
    ("tf32", "tf32", "fp32", "NT"): "torch.mm allow_tf32",
    ("fp32", "fp32", "fp32", "NN"): "torch.mm",
}
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "tf32": "float32",
                "e4m3": "float8_e4m3fn"}
# Fields of a kernel entry this check sets itself: the tensors give the layout, both sides run alpha 1, beta 0.
KERNEL_FIELDS_REFUSED = ("layouts", "ld", "batch", "scalars", "binary")
KERNEL_SHAPE_TIMEOUT_S = 120   # a kernel row's budget: a first compile, and the check of every round


class KernelUnsupported(Exception):
    """A spec kernel this check cannot set against torch: that row's error."""


@dataclass(frozen=True)
class SpecKernel:
    """A kernel entry named by --kernel SPEC.yaml:NAME: its fields as the spec writes them (`source` made absolute),
    the kernel as the spec loaded it (its params and label), and the spec's dispatch table for it (None without
    one) with the members its entries name, each as (entry, loaded kernel)."""

    text: str
    spec_path: Path
    name: str
    entry: dict
    loaded: object
    dispatch: object = None
    members: dict = dataclasses.field(default_factory=dict)


def read_spec_kernel(text: str) -> SpecKernel:
    """--kernel's value read: the spec loaded (checked) and the named entry found; ValueError naming what is wrong."""
    import yaml

    from driver_gemm.errors import SpecError
    from driver_gemm.specfile import load_spec

    spec_text, colon, name = text.rpartition(":")
    if not colon or not spec_text or not name:
        raise ValueError(f"--kernel {text!r}: give SPEC.yaml:NAME (a spec file, a colon, one of its kernels' names)")
    path = Path(spec_text)
    if not path.is_file():
        raise ValueError(f"--kernel {text!r}: no spec file {spec_text!r}")
    try:
        spec = load_spec(path)
    except SpecError as exc:
        raise ValueError(f"--kernel {text!r}: {exc}") from None
    entries = {}
    for entry in (yaml.safe_load(path.read_text()) or {}).get("kernels", []):
        if isinstance(entry, dict) and entry.get("name") not in entries:
            entry = dict(entry)
            if "source" in entry:
                entry["source"] = str((path.resolve().parent / entry["source"]).resolve())
            entries[entry.get("name")] = entry
    if name not in entries:
        names = sorted({kernel.name for kernel in spec.kernels})
        raise ValueError(f"--kernel {text!r}: {spec_text} has no kernel named {name!r} (its kernels: "
                         f"{', '.join(names)})")
    entry = entries[name]
    swept = sorted(key for key, value in (entry.get("params") or {}).items() if isinstance(value, list))
    if swept:
        raise ValueError(f"--kernel {text!r}: kernel {name} sweeps {', '.join(swept)}; name a kernel with one "
                         "configuration (or give the spec a dispatch: table for it)")
    loaded = {kernel.name: kernel for kernel in spec.kernels}
    table = spec.dispatch.get(name)
    members = {member: (entries[member], loaded[member]) for member in (table.members if table else ())}
    return SpecKernel(text, path, name, entry, loaded[name], table, members)


@dataclass(frozen=True)
class KernelCombination:
    """A spec kernel's element types (driver-gemm's names), layout and fp8 scales, and the torch op set against it."""

    a: str
    b: str
    c: str
    layout: str
    scales: tuple[float, float]
    torch_op: str

    @property
    def name(self) -> str:
        return f"{self.a}-{self.c}" if self.a == self.b else f"{self.a}.{self.b}-{self.c}"


def kernel_combination(entry: dict) -> KernelCombination:
    """The combination of a kernel entry (`types:`, `precision:`, `layout:`, `scales:`); KernelUnsupported if
    KERNEL_COMBINATIONS has none for it."""
    refused = [key for key in KERNEL_FIELDS_REFUSED if key in entry]
    if refused:
        raise KernelUnsupported(f"the kernel sets {refused[0]}: this check lays the operands out itself (NN or NT, "
                                "tight) and runs alpha 1, beta 0 on both sides")
    types = entry.get("types")
    if types is None:
        a = b = "tf32" if entry.get("precision") == "tf32" else "fp32"
        c = "fp32"
    else:
        a = types.get("a", "fp32")
        b = types.get("b", a)
        c = types.get("c", a if a in ("fp32", "fp16", "bf16") else "int32" if a == "int8" else "fp32")   # as specs
    layout = str(entry.get("layout", "NN")).upper()
    torch_op = KERNEL_COMBINATIONS.get((a, b, c, layout))
    if torch_op is None:
        built = "; ".join(f"{ka}/{kb} -> {kc} {kl}" for ka, kb, kc, kl in KERNEL_COMBINATIONS)
        raise KernelUnsupported(f"{a}/{b} -> {c}, layout {layout}: not a combination this check sets against torch "
                                f"(it has {built})")
    scales = entry.get("scales") or {}
    return KernelCombination(a, b, c, layout, (float(scales.get("a", 1.0)), float(scales.get("b", 1.0))), torch_op)


def kernel_params(kernel: SpecKernel, shape):
    """The kernel as it runs at `shape` (the spec's dispatch entry for the shape applied by `select_kernel`, else
    as loaded) and where its params come from (the dispatch rule: exact, when, nearest)."""
    from driver_gemm.specfile import Shape
    from driver_gemm.specfile.dispatch import select_kernel

    if kernel.dispatch is None:
        return kernel.loaded, "its own params"
    index, rule = kernel.dispatch.choose(Shape(*shape))
    members = {name: loaded for name, (_, loaded) in kernel.members.items()}
    return (select_kernel(kernel.loaded, kernel.dispatch, Shape(*shape), members),
            f"dispatch: {rule} entry {index} ({kernel.dispatch.entries[index].shape.label})")


def kernel_fields(entry: dict, combination: KernelCombination) -> dict:
    """The entry's fields as `check_kernel` takes them beside source, function, grid, block and params: the tensors
    give the layout; an untyped TF32 kernel says so in its types, as a typed entry does."""
    fields = {key: value for key, value in entry.items()
              if key not in ("name", "source", "function", "grid", "block", "params", "layout", "precision")}
    if combination.a == "tf32" and "types" not in entry:
        fields["types"] = {"a": "tf32", "b": "tf32"}
    return fields


def kernel_check_text(record) -> str:
    """PASS with its error, or the record's status and message."""
    if record.ok:
        error = record.verification.rel_fro_error if record.verification is not None else None
        return "PASS" + (f" (rel err {error:.1e})" if error is not None else "")
    return f"{record.status}: {record.message or 'no message'}"


def kernel_row(kernel: SpecKernel, label: str, params_from: str, combination: KernelCombination | None,
               shape_label: str, ours: list[SideRound], theirs: list[SideRound], *, torch_timer: str | None,
               check: str | None, error: str | None, samples: str) -> dict:
    """One kernel row: the figures of `case_row`, the kernel and where its params came from, % of torch."""
    row = case_row(combination.name if combination else "-", combination.layout if combination else "-",
                   shape_label, ours, theirs, torch_timer=torch_timer, check=check, error=error, limit_pct=0.0,
                   samples=samples)
    row.update({"kernel": label, "spec": str(kernel.spec_path), "params_from": params_from,
                "torch_op": combination.torch_op if combination else None,
                "pct_of_torch": 100.0 / row["ratio"] if row["ratio"] else None,
                "passed": error is None and (check or "").startswith("PASS")})
    row["within_limit"] = None          # our kernel is not meant to equal torch: the row reports, it does not judge
    return row


def format_kernel_table(rows: list[dict]) -> list[str]:
    """The kernel rows as printed: kernel, shape, pattern, both figures, % of torch, both clocks, torch's op and
    timer, the check."""
    def number(value, width, digits):
        return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}}"
    width = max([len("kernel")] + [len(row["kernel"]) for row in rows])
    lines = [f"{'kernel':<{width}} {'types':<10} {'shape':<15} {'samples':<14} {'ours ms':>9} {'torch ms':>9} "
             f"{'% torch':>8} {'ours MHz':>8} {'torch MHz':>9}  {'torch op':<27} {'torch timer':<11} check"]
    for row in rows:
        lines.append(f"{row['kernel']:<{width}} {row['combination'] + ' ' + row['layout']:<10} {row['shape']:<15} "
                     f"{row['samples']:<14} {number(row['ours_ms'], 9, 4)} {number(row['torch_ms'], 9, 4)} "
                     f"{number(row['pct_of_torch'], 8, 1)} {number(row['ours_mhz'], 8, 0)} "
                     f"{number(row['torch_mhz'], 9, 0)}  {row['torch_op'] or '-':<27} {row['torch_timer'] or '-':<11} "
                     f"{row['error'] or row['check'] or ''}  ({row['params_from']})")
    return lines


@dataclass
class KernelOperands:
    """torch's tensors for a kernel row, the op torch times on them, and the expected C both are checked against."""

    a: object
    b: object
    c: object
    operation: object
    reference: object
    torch_op: str


def kernel_torch_operands(torch, combination: KernelCombination, M: int, N: int, K: int) -> KernelOperands:
    """A and B as `draw_torch_operands` draws them in the kernel's types (B a transposed view for NT), an empty C of
    the kernel's C type, torch's op on them, and a reference: their float64 product on the GPU (scaled for fp8),
    worked out once."""
    def dtype(element: str):
        return getattr(torch, TORCH_DTYPES[element])

    a, b, _ = draw_torch_operands(torch, dtype(combination.a), dtype(combination.b), combination.layout, M, N, K)
    c = torch.empty(M, N, device="cuda", dtype=dtype(combination.c))
    torch_op = combination.torch_op
    scale_a, scale_b = combination.scales
    if combination.a == "e4m3":
        scales = (torch.tensor(scale_a, device="cuda"), torch.tensor(scale_b, device="cuda"))

        def operation():
            return torch._scaled_mm(a, b, scale_a=scales[0], scale_b=scales[1], out_dtype=dtype(combination.c))
    elif combination.a in ("fp32", "tf32"):
        allow_tf32 = combination.a == "tf32"

        def operation():
            torch.backends.cuda.matmul.allow_tf32 = allow_tf32      # process-wide: set for this op each time
            return torch.mm(a, b)
    elif combination.c != combination.a:
        def operation():
            return torch.mm(a, b, out_dtype=dtype(combination.c))
        try:
            operation()
        except (TypeError, RuntimeError) as exc:
            torch_op = f"torch.mm ({combination.a} out: no out_dtype here)"
            say(f"torch.mm(out_dtype={TORCH_DTYPES[combination.c]}) refused ({type(exc).__name__}: "
                f"{str(exc)[:120]}); torch's side writes {combination.a}")

            def operation():
                return torch.mm(a, b)
    else:
        def operation():
            return torch.mm(a, b)
    expected: list = []

    def reference(*_):
        if not expected:
            wide = torch.float64
            product = torch.mm(a.to(torch.float32).to(wide), b.to(torch.float32).to(wide))
            expected.append(product * (scale_a * scale_b) if (scale_a, scale_b) != (1.0, 1.0) else product)
        return expected[0]
    return KernelOperands(a, b, c, operation, reference, torch_op)


# ------------------------------------------------------------------------------------------- ours

class OurCase:
    """driver-gemm's cuBLASLt row for one (combination, shape): inputs uploaded, planned, checked once."""

    def __init__(self, device, stream, lt, types, gemm, codes=None):
        """codes: A's and B's storage codes as laid out in memory (torch's, for --operands torch), or None to draw
        our own."""
        from driver_gemm.measure import cublaslt
        self.stream = stream
        rng = np.random.default_rng(7)
        if codes is None:
            codes = (random_codes(types.a.name, gemm.a.elements, rng), random_codes(types.b.name, gemm.b.elements, rng))
        a_codes, b_codes = codes
        plan = cublaslt.plan_matmul(types, gemm, 1.0, 0.0)
        self.buffers = [device.upload(a_codes, stream), device.upload(b_codes, stream),
                        device.alloc(gemm.c.elements * types.c.storage_bytes)]
        A, B, C = self.buffers
        self.launch = lt.prepare(plan, A, B, C)
        self.launch()
        stream.synchronize()
        self.check = sampled_check(gemm, types, a_codes, b_codes, C, stream, rng)

    def close(self) -> None:
        for buffer in self.buffers:
            buffer.close()


def sampled_check(gemm, types, a_codes, b_codes, C, stream, rng) -> str:
    """CHECKED_ROWS random rows of C against float64 (A row-major; B row-major for NN, column-major for NT)."""
    M, N, K = gemm.M, gemm.N, gemm.K
    rows = np.sort(rng.choice(M, size=min(CHECKED_ROWS, M), replace=False))
    a = decode(a_codes.reshape(M, K)[rows], types.a.name).astype(np.float64)
    b = decode(b_codes, types.b.name).astype(np.float64)
    b = b.reshape(K, N) if gemm.b.order == "row" else b.reshape(N, K).T
    expected = a @ b
    raw = C.download((M * N,), np.dtype(types.c.storage_dtype), stream)
    got = decode(raw.reshape(M, N)[rows], types.c.name).astype(np.float64)
    error = float(np.linalg.norm(got - expected) / max(np.linalg.norm(expected), 1e-300))
    unit = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}.get(types.c.name, 2.0 ** -24)
    return f"{'ok' if error < 4 * unit else 'FAILED'} (rel err {error:.1e} over {len(rows)} rows)"


# ------------------------------------------------------------------------------------------ torch

def torch_operands(torch, name: str, M: int, N: int, K: int):
    """torch's random A and B for the combination (`draw_torch_operands`)."""
    if name == "e4m3-bf16":
        return draw_torch_operands(torch, torch.float8_e4m3fn, torch.float8_e4m3fn, "NT", M, N, K)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[name]
    return draw_torch_operands(torch, dtype, dtype, "NN", M, N, K)


def draw_torch_operands(torch, a_dtype, b_dtype, layout: str, M: int, N: int, K: int):
    """A and B as torch's benchmarks draw them (rand * 2 - 1 in the type; through float32 for NT, whose fp8 torch
    cannot draw directly), and B as it lies in memory: K x N row-major for NN, an N x K row-major tensor (B
    column-major) for NT. The one rule both the cuBLASLt rows and the kernel rows draw by."""
    if layout == "NT":
        a = (torch.rand(M, K, device="cuda") * 2 - 1).to(a_dtype)
        stored_b = (torch.rand(N, K, device="cuda") * 2 - 1).to(b_dtype)
        return a, stored_b.t(), stored_b
    a = torch.rand(M, K, device="cuda", dtype=a_dtype) * 2 - 1
    b = torch.rand(K, N, device="cuda", dtype=b_dtype) * 2 - 1
    return a, b, b


def storage_codes(torch, tensor) -> np.ndarray:
    """A contiguous tensor's storage codes on the host (uint8 for 1-byte types, uint16 for 2-byte ones)."""
    width = tensor.element_size()
    raw = tensor.contiguous().view(torch.uint8 if width == 1 else torch.int16).cpu().numpy().ravel()
    return raw if width == 1 else raw.view(np.uint16)


def torch_operation(torch, name: str, operands):
    """A callable that runs torch's product of the combination once on `operands` (kept alive by it)."""
    a, b, _ = operands
    if name == "e4m3-bf16":
        one = torch.ones((), device="cuda")
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return lambda: torch.mm(a, b)


class GraphTimer:
    """torch's op in a CUDA graph of GRAPH_SAMPLES x (L2 flush, event, op, event); each sample read on its own.

    The events are graph nodes (torch.cuda.Event(external=True)), so no host
    work falls between them: the launch cost that do_bench's figure carries
    for a short kernel is not in these samples. The flush writes twice the L2,
    as ours does. Raises where the installed torch cannot build it.
    """

    def __init__(self, torch, operation, flush_bytes: int, samples: int = GRAPH_SAMPLES):
        self.torch = torch
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
        self.starts = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(samples)]
        self.ends = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(samples)]
        self.stream = torch.cuda.Stream()
        with torch.cuda.stream(self.stream):
            for _ in range(3):          # cuBLAS settles its algorithm and workspace before the capture
                operation()
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=self.stream):
            for start, end in zip(self.starts, self.ends):
                self.flush.zero_()
                start.record()
                operation()
                end.record()
        first = self._replay()
        if not all(t > 0 for t in first):
            raise RuntimeError(f"the graph's events gave times {first[:3]}...")

    def _replay(self) -> list[float]:
        with self.torch.cuda.stream(self.stream):
            self.graph.replay()
        self.stream.synchronize()
        return [start.elapsed_time(end) for start, end in zip(self.starts, self.ends)]

    def median_ms(self, seconds: float) -> float:
        times, began = [], time.perf_counter()
        while not times or time.perf_counter() - began < seconds:
            times += self._replay()
        return float(np.median(times))


class TorchSide:
    """torch's timers: do_bench (or CUDA events with a flush where triton is unusable), and the graph timer."""

    def __init__(self, torch, flush_bytes: int):
        self.torch, self.flush_bytes = torch, flush_bytes
        self.large_harness = "triton do_bench"
        try:
            from triton.testing import do_bench
            self.do_bench = do_bench
            # The first call sets triton's driver up (on a fresh machine it may build a helper): once, on a tiny op.
            scratch = torch.zeros(1024, device="cuda")
            do_bench(lambda: scratch.add_(1.0), warmup=5, rep=20, return_mode="median")
        except Exception as exc:  # noqa: BLE001
            say(f"triton's do_bench unusable ({type(exc).__name__}: {str(exc)[:200]}); "
                "timing torch's large kernels with CUDA events and a flush of twice the L2 instead")
            self.do_bench, self.large_harness = None, "events"
            self.events_flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")

    def time_burst(self, operation, seconds: float, launches: int, rest_ms: float) -> float:
        """A warm-burst harness, as many authors write their own: rest `rest_ms`, one warm-up launch (it warms the
        L2 and wakes the GPU from its idle state), then `launches` back to back between one event pair; the median
        per launch over bursts for about `seconds` (at least 3)."""
        torch, times, began = self.torch, [], time.perf_counter()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        while len(times) < 3 or time.perf_counter() - began < seconds:
            torch.cuda.synchronize()
            time.sleep(rest_ms / 1e3)
            operation()
            torch.cuda.synchronize()
            start.record()
            for _ in range(launches):
                operation()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / launches)
        return float(np.median(times))

    def time_large(self, operation, seconds: float) -> float:
        """Median ms of `operation` over about `seconds`: do_bench with rep = `seconds` (its flush, median)."""
        if self.do_bench is not None:
            return float(self.do_bench(operation, warmup=DO_BENCH_WARMUP_MS, rep=do_bench_rep_ms(seconds),
                                       return_mode="median"))
        torch, times, began = self.torch, [], time.perf_counter()
        for _ in range(5):
            operation()
        while len(times) < 10 or time.perf_counter() - began < seconds:
            self.events_flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            operation()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return float(np.median(times))


def soak(torch, seconds: float) -> None:
    """Run an 8192^3 bf16 torch.mm for `seconds`, so that the first case starts on a GPU as warm as the rest."""
    a = torch.rand(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.rand(8192, 8192, device="cuda", dtype=torch.bfloat16)
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        for _ in range(20):
            torch.mm(a, b)
        torch.cuda.synchronize()


# ------------------------------------------------------------------------------------------- cases

def run_case(name, shape, args, device, stream, lt, flusher, gate, clocks, torch, torch_side,
             pattern: str = "flush") -> dict:
    """Time one (combination, shape) on both sides in interleaved rounds, ours with sample `pattern`; the row."""
    from driver_gemm.gemm.dtypes import parse_types
    from driver_gemm.gemm.operands import gemm_operands, parse_layout
    from driver_gemm.measure.timing import measure
    from driver_gemm.specfile.model import MeasureSettings

    M, N, K = shape
    label, layout = f"{M}x{N}x{K}", COMBINATIONS[name][1]
    settings = MeasureSettings(timeout_s=args.our_timeout, samples=pattern)
    ours: list[SideRound] = []
    theirs: list[SideRound] = []
    timer_kind, check, error, case, kernels = None, None, None, None, None
    tag = f"{name:<10} {label if pattern == 'flush' else f'{label} {pattern}'}"
    say(f"{tag}: inputs, matmul, check ...")
    try:
        with budget(args.shape_timeout):
            operands = torch_operands(torch, name, M, N, K)
            codes = None
            if args.operands == "torch":
                codes = (storage_codes(torch, operands[0]), storage_codes(torch, operands[2]))
            case = OurCase(device, stream, lt, parse_types(COMBINATIONS[name][0]),
                           gemm_operands(M, N, K, orders=parse_layout(layout)), codes)
            check = case.check

            def our_round() -> SideRound:
                with ClockWatch(clocks) as watch:
                    summary, _ = measure(case.launch, device, stream, settings, flusher, gate)
                    stream.synchronize()
                return SideRound(summary.median_ms, summary.wall_s, *watch.figures())

            operation = torch_operation(torch, name, operands)
            timer_kind = interleave(tag, our_round, operation, args, clocks, torch, torch_side,
                                    flusher.buffer.nbytes, pattern, ours, theirs)
            if args.kernels:
                kernels = kernel_figures(
                    kernel_durations(torch, case.launch, stream.synchronize, args.kernel_launches),
                    kernel_durations(torch, operation, torch.cuda.synchronize, args.kernel_launches))
                say(f"{name:<10} {label}: CUPTI kernel time ours {kernels['ours_us'] or 0:.2f} us "
                    f"{sorted(kernels['ours'])}, torch {kernels['torch_us'] or 0:.2f} us {sorted(kernels['torch'])}")
    except ShapeTimeout as exc:
        error = f"timeout ({exc})"
    except Exception as exc:  # noqa: BLE001 -- one row's failure is that row's result
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        try:
            torch.cuda.synchronize()
            stream.synchronize()
        finally:
            if case is not None:
                case.close()
    if error:
        say(f"{name:<10} {label}: {error}")
    row = case_row(name, layout, label, ours, theirs, torch_timer=timer_kind, check=check, error=error,
                   limit_pct=args.limit, samples=pattern)
    if kernels is not None:
        row["kernels"] = kernels
    return row


def run_kernel_case(kernel: SpecKernel, shape, args, clocks, torch, torch_side, flush_bytes: int, stream,
                    pattern: str) -> dict:
    """One spec kernel at `shape` against torch's op, in interleaved rounds on torch's operands; the row.

    Each of our rounds is one `dg.check_kernel` call on torch's tensors, in
    torch's context, on `stream`: compiled (cached after the first), checked
    against the float64 product of the same tensors, and timed with sample
    `pattern` for --our-timeout seconds. Our clock is what the watch read
    during the timing alone (the last `wall_s` of the call).
    """
    import driver_gemm as dg

    M, N, K = shape
    shape_label = f"{M}x{N}x{K}"
    running, params_from = kernel_params(kernel, shape)
    params, label = dict(running.params), running.label
    entry = kernel.members[running.name][0] if running.name in kernel.members else kernel.entry   # the table's pick
    measure = {"samples": pattern, "timeout_s": args.our_timeout, "min_time_s": min(0.5, args.our_timeout)}
    ours: list[SideRound] = []
    theirs: list[SideRound] = []
    timer_kind, check, error, combination = None, None, None, None
    discarded: list[int] = []      # per round of ours: batches dropped as throttled (under 75% of the max clock)
    tag = f"{label} {shape_label} {pattern}"
    say(f"{tag}: inputs, compile, check ...")
    try:
        combination = kernel_combination(entry)
        for required in ("source", "function", "grid", "block"):
            if required not in entry:
                raise KernelUnsupported(f"the kernel entry has no {required}:")
        fields = kernel_fields(entry, combination)
        with budget(args.shape_timeout):
            operands = kernel_torch_operands(torch, combination, M, N, K)
            combination = dataclasses.replace(combination, torch_op=operands.torch_op)

            def our_round() -> SideRound:
                nonlocal check
                with ClockWatch(clocks) as watch:
                    record = dg.check_kernel(entry["source"], entry["function"], operands.a,
                                             operands.b, operands.c, grid=entry["grid"],
                                             block=entry["block"], params=params, name=kernel.name,
                                             reference=operands.reference, stream=stream, measure=measure,
                                             **fields)
                    ended = time.perf_counter()
                check = kernel_check_text(record)
                if not record.ok or record.timing is None:
                    raise KernelCheckFailed(check)
                timing = record.timing
                discarded.append(int(getattr(timing, "discarded_samples", 0) or 0))
                return SideRound(timing.median_ms, timing.wall_s, *watch.figures(since=ended - timing.wall_s))

            timer_kind = interleave(tag, our_round, operands.operation, args, clocks, torch, torch_side,
                                    flush_bytes, pattern, ours, theirs)
    except KernelCheckFailed as exc:
        error = str(exc)
    except KernelUnsupported as exc:
        error = f"not run: {exc}"
    except ShapeTimeout as exc:
        error = f"timeout ({exc})"
    except Exception as exc:  # noqa: BLE001 -- one row's failure is that row's result
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        torch.cuda.synchronize()
    if error:
        say(f"{tag}: {error}")
    row = kernel_row(kernel, label, params_from, combination, shape_label, ours, theirs, torch_timer=timer_kind,
                     check=check, error=error, samples=pattern)
    row["ours_discarded_samples"] = discarded   # torch's side keeps every sample: a row with drops reads us faster
    return row


class KernelCheckFailed(Exception):
    """Our kernel's check (or its compile, or its launch) did not pass: that row's error."""


def interleave(tag: str, our_round, operation, args, clocks, torch, torch_side, flush_bytes: int, pattern: str,
               ours: list[SideRound], theirs: list[SideRound]) -> str | None:
    """Both sides in `round_order`, appended to `ours` and `theirs` as they finish; torch's timer kind.

    `our_round()` times our side once and returns its `SideRound`; torch's
    side is given the wall time of the round of ours before it, timed by
    do_bench, by the graph timer for a short kernel, or as a warm burst
    against a burst `pattern` of ours.
    """
    from driver_gemm.specfile.sample_patterns import BURST, SamplePattern

    burst = SamplePattern.parse(pattern)      # a burst of ours is set against torch timed as a warm burst too
    timer_kind, graph, seconds = None, None, args.our_timeout
    for index, side in enumerate(round_order(args.rounds)):
        if side == "ours":
            ours.append(our_round())
            seconds = ours[-1].seconds
            result = ours[-1]
        else:
            if timer_kind is None and burst.kind != BURST:
                timer_kind = torch_timer_kind(ours[-1].ms, graph_possible=True)
                if timer_kind == "cuda-graph":
                    try:
                        graph = GraphTimer(torch, operation, flush_bytes)
                    except Exception as exc:  # noqa: BLE001 -- say so and use do_bench
                        torch.cuda.synchronize()
                        timer_kind = torch_timer_kind(ours[-1].ms, graph_possible=False)
                        say(f"{tag}: no CUDA-graph timer ({type(exc).__name__}: "
                            f"{str(exc)[:160]}); do_bench, launch cost included")
                if timer_kind != "cuda-graph" and torch_side.large_harness != "triton do_bench":
                    timer_kind = torch_side.large_harness
            if burst.kind == BURST:
                timer_kind = f"burst:{burst.launches}:{burst.pause_ms:g}"
            began = time.perf_counter()
            with ClockWatch(clocks) as watch:
                if burst.kind == BURST:
                    ms = torch_side.time_burst(operation, seconds, burst.launches, burst.pause_ms)
                elif graph is not None:
                    ms = graph.median_ms(seconds)
                else:
                    ms = torch_side.time_large(operation, seconds)
                torch.cuda.synchronize()
            theirs.append(SideRound(ms, time.perf_counter() - began, *watch.figures()))
            result = theirs[-1]
        say(f"{tag}: round {index // 2} {side:<5} {result.ms:.4f} ms in {result.seconds:.2f} s"
            + (f" at {result.mhz:.0f} MHz (lowest {result.min_mhz:.0f})" if result.mhz else "")
            + (f" [{timer_kind}]" if side == "torch" else ""))
    return timer_kind


def kernel_durations(torch, launch, synchronize, launches: int) -> dict:
    """The kernels `launch` runs, by name, with the median of their CUPTI durations (us): timer-independent.

    `launches` calls back to back inside one torch.profiler session (CUDA
    activities only), after one call outside it; `synchronize` waits for the
    side's stream.
    """
    from torch.profiler import ProfilerActivity, profile

    launch()
    synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as session:
        for _ in range(launches):
            launch()
        synchronize()
    durations: dict[str, list[float]] = {}
    for event in session.events():
        if str(getattr(event, "device_type", "")).endswith("CUDA") and event.time_range.elapsed_us() > 0:
            durations.setdefault(event.name, []).append(float(event.time_range.elapsed_us()))
    return {name: {"launches": len(values), "median_us": round(statistics.median(values), 3)}
            for name, values in durations.items()}


def kernel_figures(ours: dict, theirs: dict) -> dict:
    """Both sides' kernels side by side: whether they are the same, and the ratio of their summed medians."""
    def total(side: dict) -> float | None:
        return sum(entry["median_us"] for entry in side.values()) if side else None
    our_us, their_us = total(ours), total(theirs)
    return {"ours": ours, "torch": theirs, "same_kernels": set(ours) == set(theirs) and bool(ours),
            "ours_us": our_us, "torch_us": their_us,
            "ratio": our_us / their_us if our_us and their_us else None}


def torch_context(torch) -> int:
    """The handle of torch's (primary) context on GPU 0, made current by a first allocation."""
    from driver_gemm.cuda.check import check
    from driver_gemm.cuda.device import driver_module
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    handle = int(check(driver_module().cuCtxGetCurrent(), "cuCtxGetCurrent"))
    if not handle:
        raise RuntimeError("torch left no CUDA context current after its first allocation")
    return handle


def environment(started: str, torch) -> dict:
    """When and where the check ran, with the versions of both sides (the results page prints them)."""
    import platform
    from importlib import metadata

    import driver_gemm as dg
    from cuda.bindings import nvrtc

    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    properties = dg.read_properties(0)
    return {"started": started, "gpu": properties.name, "driver_version": properties.driver_version,
            "nvrtc_version": ".".join(map(str, nvrtc.nvrtcVersion()[1:])), "nvmath_python": version("nvmath-python"),
            "cuda_bindings": version("cuda-bindings"), "torch": torch.__version__, "triton": version("triton"),
            "host": platform.node()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the table here as JSON")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per case (ours, torch each)")
    parser.add_argument("--our-timeout", type=float, default=1.0,
                        help="our measurement's timeout (s); torch gets the time ours took")
    parser.add_argument("--soak", type=float, default=2.0, help="seconds of 8192^3 bf16 torch.mm before the first case")
    parser.add_argument("--limit", type=float, default=3.0, help="the agreement asked for, %%")
    parser.add_argument("--shape-timeout", type=int,
                        help=f"wall-time budget of one shape, s (25; {KERNEL_SHAPE_TIMEOUT_S} with --kernel)")
    parser.add_argument("--only", choices=sorted(COMBINATIONS), action="append", help="these combinations")
    parser.add_argument("--shapes", nargs="+", help="MxNxK shapes instead of the three default ones")
    parser.add_argument("--kernels", action="store_true",
                        help="also each side's kernels and their CUPTI durations (torch.profiler), unflushed")
    parser.add_argument("--kernel-launches", type=int, default=50, help="launches of each side for --kernels")
    parser.add_argument("--samples", nargs="+", metavar="PATTERN",
                        help="our side's sample patterns, a row each (flush, flush-idle:MS, do-bench, burst[:N[:MS]]; "
                             "default flush, do-bench with --kernel)")
    parser.add_argument("--kernel", action="append", metavar="SPEC.yaml:NAME", default=[],
                        help="time this kernel of a spec on torch's operands against torch's op (repeatable); "
                             "then the cuBLASLt rows run only for the combinations --only names")
    parser.add_argument("--operands", choices=("torch", "own"), default="torch",
                        help="torch: both sides multiply torch's operands, byte for byte (the default); own: our side "
                             "draws its own (uniform values, full mantissas), to see what the data alone does to the "
                             "power-bound clock")
    parser.add_argument("--lock-clocks", metavar="MHZ|max",
                        help="lock GPU 0's SM clock for the whole check (root, NVML), so both sides run at one "
                             "clock; reset afterwards")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    from driver_gemm.specfile.sample_patterns import SamplePattern
    try:
        args.samples = [SamplePattern.parse(text).label
                        for text in args.samples or (["do-bench"] if args.kernel else ["flush"])]
    except ValueError as exc:
        parser.error(f"--samples: {exc}")
    try:
        kernels = [read_spec_kernel(text) for text in args.kernel]
    except ValueError as exc:
        parser.error(str(exc))
    if kernels and args.kernels:
        parser.error("--kernels (CUPTI durations) is for the cuBLASLt rows; leave it out with --kernel")
    if args.shape_timeout is None:
        args.shape_timeout = KERNEL_SHAPE_TIMEOUT_S if kernels else 25
    try:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes] if args.shapes else SHAPES
    except ValueError:
        parser.error(f"--shapes: give MxNxK with whole numbers, not {' '.join(args.shapes)!r}")
    if any(len(shape) != 3 or min(shape) < 1 for shape in shapes):
        parser.error(f"--shapes: give MxNxK with whole numbers of at least 1, not {' '.join(args.shapes)!r}")
    combinations = args.only or ([] if kernels else list(COMBINATIONS))
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())

    import driver_gemm as dg
    from driver_gemm.measure import cublaslt
    from driver_gemm.measure.clocks import open_device_clocks
    from driver_gemm.measure.timing import L2Flusher, LaunchGate

    say("importing torch and triton ...")
    import torch
    context = torch_context(torch)
    rows: list[dict] = []
    kernel_rows: list[dict] = []
    locked = None
    with contextlib.ExitStack() as held, dg.Device(0, context=context) as device:   # torch's context, adopted
        if args.lock_clocks:
            from driver_gemm.cuda.device import read_properties
            from driver_gemm.measure.clocks import lock_sm_clock

            value = args.lock_clocks if args.lock_clocks == "max" else int(args.lock_clocks)
            locked = held.enter_context(lock_sm_clock(read_properties(0).uuid, value))
            say(f"SM clock locked at {locked} MHz for the check")
        stream = device.stream()
        flusher, gate = L2Flusher(device, stream), LaunchGate(device, stream)
        clocks = open_device_clocks(device)
        say("clocks: " + (f"NVML, maximum SM clock {clocks.reference_mhz:.0f} MHz" if clocks else "no NVML: none"))
        say("torch: setting the timers up (triton's first do_bench) ...")
        torch_side = TorchSide(torch, flusher.buffer.nbytes)
        try:
            with cublaslt.CublasLtMatmul(device, stream) as lt:
                with ClockWatch(clocks) as watch:
                    soak(torch, args.soak)
                mhz, lowest = watch.figures()
                say(f"soak: {args.soak:g} s of 8192^3 bf16 torch.mm"
                    + (f", SM clock median {mhz:.0f} MHz, lowest {lowest:.0f}" if mhz else ""))
                for name in combinations:
                    for shape in shapes:
                        for pattern in args.samples:
                            rows.append(run_case(name, shape, args, device, stream, lt, flusher, gate, clocks,
                                                 torch, torch_side, pattern))
                kernel_stream = torch.cuda.Stream() if kernels else None
                for kernel in kernels:
                    for shape in shapes:
                        for pattern in args.samples:
                            kernel_rows.append(run_kernel_case(kernel, shape, args, clocks, torch, torch_side,
                                                               flusher.buffer.nbytes, kernel_stream, pattern))
        finally:
            gate.close()
            flusher.close()
            if clocks is not None:
                clocks.close()

    say(f"torch timers: do_bench = {torch_side.large_harness} (rep = our wall time of the round); cuda-graph = "
        f"{GRAPH_SAMPLES} x (flush, event, op, event) in one graph, for kernels under {SMALL_KERNEL_MS} ms; "
        "do_bench+launch = do_bench on such a kernel (no graph timer): launch cost included")
    if rows:
        say(f"=== driver-gemm cuBLASLt row vs torch, alpha 1 beta 0, medians of {args.rounds} "
            "interleaved rounds' medians")
        for line in format_table(rows, args.limit):
            print(line, flush=True)
        for line in kernel_table(rows):
            print(line, flush=True)
    if kernel_rows:
        say(f"=== spec kernels vs torch on torch's operands, alpha 1 beta 0, medians of {args.rounds} interleaved "
            "rounds' medians; % torch = torch ms / ours ms * 100")
        for line in format_kernel_table(kernel_rows):
            print(line, flush=True)
    agree = all(row["within_limit"] for row in rows)
    passed = all(row["passed"] for row in kernel_rows)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "limit_pct": args.limit, "rounds": args.rounds, "round_order": round_order(args.rounds),
            "soak_s": args.soak, "our_timeout_s": args.our_timeout, "samples": args.samples,
            "operands": args.operands, "large_harness": torch_side.large_harness,
            "graph_samples": GRAPH_SAMPLES, "small_kernel_ms": SMALL_KERNEL_MS, "checked_rows": CHECKED_ROWS,
            "max_sm_clock_mhz": clocks.reference_mhz if clocks else None, "locked_sm_clock_mhz": locked,
            "environment": environment(started, torch), "cases": rows,
            "kernels": [kernel.text for kernel in kernels], "kernel_cases": kernel_rows}, indent=1) + "\n")
    if rows:
        say("all within" if agree else "NOT all within", f"{args.limit:g}% of the independent harness")
    if kernel_rows:
        say("every kernel row checked and timed" if passed else "NOT every kernel row checked and timed")
    return 0 if agree and passed and (rows or kernel_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
