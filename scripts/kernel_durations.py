"""Each timed case's kernel-only duration beside its event-timed median, from torch.profiler, shape by shape.

usage: python3 scripts/kernel_durations.py SPEC [-k KERNEL ...] -s SHAPE [-s SHAPE ...] [--json FILE]

On a GPU machine with torch. An event pair brackets a launch as the GPU's front end sees it, so for a kernel of a
few microseconds part of the event median is the front end's (docs/timing.md, "A kernel-only timer: CUPTI").
`run --timer cupti` separates the two where cupti-python matches the CUPTI library; this script takes the kernels'
durations from torch's own CUPTI (Kineto) instead, for the same run: each shape's cases (the vendor row and the
spec's kernels, timed as `driver-gemm run` times them, in this process on torch's context) run under one
torch.profiler session. A kernel case's launches are the kernels whose names hold its function's name; the vendor
row's are those of the vendor kernel launched most often (its timed algorithm; the other candidates of its
pre-selection run a few dozen times). It prints, per case, the event median, the median kernel duration and their
difference, and the vendor row's kernel-only time over the case's: "% of the vendor, kernels only".
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

HELPER_KERNELS = ("hold_stream",)      # driver-gemm's launch gate (measure/timing.py)
COPY_ENGINE_WORK = ("Memset", "Memcpy")   # the L2 flush (a memset) and operand copies, as Kineto names them


def kernel_durations_us(events) -> dict[str, list[float]]:
    """Every CUDA kernel the profiler recorded, by name: its durations in microseconds."""
    found: dict[str, list[float]] = {}
    for event in events:
        if str(getattr(event, "device_type", "")).endswith("CUDA") and event.time_range.elapsed_us() > 0:
            found.setdefault(event.name, []).append(float(event.time_range.elapsed_us()))
    return {name: values for name, values in found.items()
            if not any(h in name for h in HELPER_KERNELS) and not name.startswith(COPY_ENGINE_WORK)}


def _compact(text: str) -> str:
    return text.replace(" ", "")


def case_kernel_names(case, durations: dict[str, list[float]]) -> list[str]:
    """The recorded kernel names that are `case`'s own: its instance's where the profiler spells it so, else its
    function's."""
    instance = case.instance or case.kernel
    exact = [name for name in durations if _compact(instance) in _compact(name)]
    function = instance.split("<")[0].split("(")[0]
    return exact or [name for name in durations if function and function in name]


def shape_rows(run, durations: dict[str, list[float]]) -> list[dict]:
    """One row a timed case of `run`: its event median and the median of its kernels' durations."""
    kernels = [case for case in run.cases if not case.is_baseline and case.timing is not None]
    own = {case.kernel: case_kernel_names(case, durations) for case in kernels}
    claimed = {name for names in own.values() for name in names}
    vendor_names = Counter({name: len(values) for name, values in durations.items() if name not in claimed})
    rows = []
    for case in run.cases:
        if case.timing is None:
            continue
        if case.is_baseline:
            name = vendor_names.most_common(1)[0][0] if vendor_names else None
            values = durations.get(name, []) if name else []
        else:
            name, values = None, [value for each in own[case.kernel] for value in durations[each]]
        kernel_us = statistics.median(values) if values else None
        event_us = case.timing.median_ms * 1e3
        rows.append({"case": case.kernel, "shape": case.shape.label, "baseline": case.is_baseline,
                     "event_us": event_us, "kernel_us": kernel_us, "launches": len(values),
                     "front_end_us": event_us - kernel_us if kernel_us is not None else None,
                     **({"vendor_kernel": name} if name else {})})
    vendor = next((row for row in rows if row["baseline"] and row["kernel_us"]), None)
    for row in rows:
        if vendor and row["kernel_us"]:
            row["pct_vendor_kernels_only"] = 100.0 * vendor["kernel_us"] / row["kernel_us"]
            row["pct_vendor_events"] = 100.0 * vendor["event_us"] / row["event_us"]
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("-k", "--kernel", action="append", default=[])
    parser.add_argument("-s", "--shape", action="append", required=True)
    parser.add_argument("--json", type=Path, help="write the rows here as JSON")
    args = parser.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile

    import driver_gemm as dg

    torch.cuda.init()
    spec = dg.load_spec(args.spec)
    rows = []
    for shape in args.shape:
        one = spec.select(kernels=args.kernel, shapes=[shape])
        with profile(activities=[ProfilerActivity.CUDA]) as session:
            run = dg.run_spec(one)
            torch.cuda.synchronize()
        durations = kernel_durations_us(session.events())
        found = shape_rows(run, durations)
        for row in (row for row in found if row["baseline"]):   # every kernel that ran: the vendor pick checkable
            row["kernels_seen"] = {name[:160]: len(values) for name, values in
                                   sorted(durations.items(), key=lambda item: -len(item[1]))[:12]}
        rows += found
    print(f"{'case':<44} {'shape':<15} {'events us':>9} {'kernel us':>9} {'front us':>8} {'launches':>8} "
          f"{'% vendor (events)':>17} {'% vendor (kernels)':>18}")
    for row in rows:
        kernel = f"{row['kernel_us']:9.2f}" if row["kernel_us"] else f"{'-':>9}"
        front = f"{row['front_end_us']:8.2f}" if row["front_end_us"] is not None else f"{'-':>8}"
        pcts = (f"{row['pct_vendor_events']:17.1f} {row['pct_vendor_kernels_only']:18.1f}"
                if "pct_vendor_kernels_only" in row else f"{'-':>17} {'-':>18}")
        print(f"{row['case'][:44]:<44} {row['shape']:<15} {row['event_us']:9.2f} {kernel} {front} "
              f"{row['launches']:8d} {pcts}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"spec": args.spec, "rows": rows}, indent=1) + "\n")
    return 0 if rows and all(row["kernel_us"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
