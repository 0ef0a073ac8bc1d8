"""The CUPTI timer (`run --timer cupti`) against the event timer and against torch.profiler's kernel durations.

usage: python3 scripts/cupti_check.py [--json FILE] [--rounds N]

On a GPU machine with cupti-python and torch (about 30 s). driver-gemm's cuBLASLt BF16 row (layout NN,
the heuristic's first algorithm, inputs and a sampled check as scripts/baseline_check.py makes them):

- at 4096^3, `timing.measure` with events and with the CUPTI timer in alternating rounds: the two
  medians should agree within 0.5% (an event pair adds a few tenths of a microsecond to 0.2 ms);
- at 1024x512x1024 (about 8 us), the CUPTI timer's median against the median of the same launches'
  kernel durations as torch.profiler records them, each launch after the same L2 flush (no event timer
  on either side): they should agree within 1%, where the event timer reads a few percent above.

Exit status 1 unless both agreements hold.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EVENTS_LIMIT_PCT = 0.5
PROFILER_LIMIT_PCT = 1.0
PROFILED_LAUNCHES = 200


def baseline_check():
    """scripts/baseline_check.py as a module (its inputs, check and torch set-up)."""
    spec = importlib.util.spec_from_file_location("baseline_check", HERE / "baseline_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def profiler_kernel_us(torch, launch, flush, synchronize, launches: int) -> float:
    """The median over `launches` (each after `flush`) of the summed durations of the kernels one launch runs
    (us), as torch.profiler (CUPTI through Kineto) records them; the flush's own work is left out."""
    from torch.profiler import ProfilerActivity, profile

    launch()
    synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as session:
        for _ in range(launches):
            flush()
            launch()
        synchronize()
    names: dict[str, list[float]] = {}
    for event in session.events():
        if str(getattr(event, "device_type", "")).endswith("CUDA") and event.time_range.elapsed_us() > 0:
            names.setdefault(event.name, []).append(float(event.time_range.elapsed_us()))
    gemm = {name: values for name, values in names.items()
            if len(values) == launches and "memset" not in name.lower()}
    if not gemm:
        raise RuntimeError(f"torch.profiler recorded no kernel once per launch: {sorted(names)}")
    return sum(statistics.median(values) for values in gemm.values())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each timer")
    args = parser.parse_args(argv)

    check = baseline_check()
    import torch

    import driver_gemm as dg
    from driver_gemm.gemm.dtypes import parse_types
    from driver_gemm.gemm.operands import gemm_operands, parse_layout
    from driver_gemm.measure import cublaslt
    from driver_gemm.measure.cupti_timer import CuptiRecorder
    from driver_gemm.measure.timing import L2Flusher, LaunchGate, measure
    from driver_gemm.specfile.model import MeasureSettings

    context = check.torch_context(torch)
    figures: dict = {}
    with dg.Device(0, context=context) as device:
        stream = device.stream()
        flusher, gate = L2Flusher(device, stream), LaunchGate(device, stream)
        recorder = CuptiRecorder()
        settings = MeasureSettings(timeout_s=1.0)
        try:
            with cublaslt.CublasLtMatmul(device, stream) as lt:
                for label, (M, N, K) in (("4096^3", (4096, 4096, 4096)), ("1024x512x1024", (1024, 512, 1024))):
                    case = check.OurCase(device, stream, lt, parse_types({"a": "bf16"}),
                                         gemm_operands(M, N, K, orders=parse_layout("NN")))
                    try:
                        events, cupti = [], []
                        for _ in range(args.rounds):
                            events.append(measure(case.launch, device, stream, settings, flusher, gate)[0].median_ms)
                            cupti.append(measure(case.launch, device, stream, settings, flusher, gate,
                                                 timer=recorder)[0].median_ms)
                        row = {"check": case.check, "events_ms": statistics.median(events),
                               "cupti_ms": statistics.median(cupti), "events_rounds": events, "cupti_rounds": cupti}
                        row["cupti_over_events"] = row["cupti_ms"] / row["events_ms"]
                        if label != "4096^3":
                            recorder.close()      # torch.profiler takes CUPTI's activity API next
                            profiled = profiler_kernel_us(torch, case.launch, flusher.flush, stream.synchronize,
                                                          PROFILED_LAUNCHES) / 1e3
                            row["profiler_ms"] = profiled
                            row["cupti_over_profiler"] = row["cupti_ms"] / profiled
                        figures[label] = row
                    finally:
                        case.close()
        finally:
            gate.close()
            flusher.close()

    big, small = figures["4096^3"], figures["1024x512x1024"]
    print(f"{'shape':<15} {'events ms':>10} {'cupti ms':>10} {'cupti/events':>12} {'profiler ms':>11} "
          f"{'cupti/profiler':>14}  check")
    for label, row in figures.items():
        profiled = f"{row['profiler_ms']:11.5f} {row['cupti_over_profiler']:14.4f}" if "profiler_ms" in row \
            else f"{'-':>11} {'-':>14}"
        print(f"{label:<15} {row['events_ms']:10.5f} {row['cupti_ms']:10.5f} {row['cupti_over_events']:12.4f} "
              f"{profiled}  {row['check']}")
    agree = (abs(big["cupti_over_events"] - 1) * 100 <= EVENTS_LIMIT_PCT
             and abs(small["cupti_over_profiler"] - 1) * 100 <= PROFILER_LIMIT_PCT)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"events_limit_pct": EVENTS_LIMIT_PCT, "profiler_limit_pct": PROFILER_LIMIT_PCT,
                                         "rounds": args.rounds, "cases": figures}, indent=1) + "\n")
    print(("agree" if agree else "DO NOT agree") + f": CUPTI vs events within {EVENTS_LIMIT_PCT}% at 4096^3, vs "
          f"torch.profiler within {PROFILER_LIMIT_PCT}% at 1024x512x1024")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
