"""Print a results file as Markdown tables, one per shape (the README's tables come from here).

    python scripts/results_table.py bench/results/seed-h200.json
"""

from __future__ import annotations

import json
import sys


def main(path: str) -> None:
    data = json.load(open(path))
    device = data["environment"].get("device", {})
    print(f"{data['spec']} on {device.get('name')}, {data['started'][:10]}, NVRTC {data['environment']['nvrtc_version']}, "
          f"driver {data['environment'].get('driver_version')}; L2 flushed before each sample: "
          f"{data['settings']['measure']['flush_l2']}\n")
    shapes = list(dict.fromkeys(case["shape"]["label"] for case in data["cases"]))
    for shape in shapes:
        print(f"| {shape} | status | median ms | GFLOP/s | % of cuBLAS | % of FP32 peak |")
        print("|---|---|---|---|---|---|")
        for case in data["cases"]:
            if case["shape"]["label"] != shape:
                continue
            timing = case.get("timing") or {}
            median = timing.get("median_ms")
            cells = [case["kernel"], case["status"], f"{median:.4f}" if median else "-",
                     f"{case['gflops']:,.0f}" if case.get("gflops") else "-",
                     f"{case['pct_cublas']:.1f}" if case.get("pct_cublas") else "-",
                     f"{case['pct_peak']:.1f}" if case.get("pct_peak") else "-"]
            print("| " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main(sys.argv[1])
