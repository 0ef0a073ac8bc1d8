"""Benchmark check: driver-gemm's medians against the C++ harness's on the same H200.

usage: python3 scripts/anchor_check.py RESULTS.json   (from `driver-gemm run specs/anchors.yaml --json RESULTS.json`)

The C++ figures (nvcc -O3 -arch=sm_90, median of 50 launches, one event pair
per launch, no L2 flush) are the project's reference measurements; run
`driver-gemm run specs/anchors.yaml --json FILE` (timed the same way) and
pass FILE here. Prints each pair and the difference; the target is within 5%.
"""

from __future__ import annotations

import json
import sys

# Median ms from the C++ harness on an H200.
CPP_MEDIAN_MS = {
    ("v2", "1024x512x1024"): 0.1259, ("v3", "1024x512x1024"): 0.1271, ("v4", "1024x512x1024"): 0.0806,
    ("cublas", "1024x512x1024"): 0.0400,
    ("v2", "1001x513x777"): 0.1228, ("v3", "1001x513x777"): 0.1618, ("v4", "1001x513x777"): 0.0833,
    ("cublas", "1001x513x777"): 0.0441,
    ("v2", "4096x4096x4096"): 15.45, ("v3", "4096x4096x4096"): 12.57, ("v4", "4096x4096x4096"): 5.616,
    ("cublas", "4096x4096x4096"): 2.692,
}
TOLERANCE = 0.05


def main(path: str) -> int:
    data = json.load(open(path))
    print("| kernel | shape | driver-gemm ms | C++ ms | difference | within 5% |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for case in data["cases"]:
        key = (case["name"], case["shape"]["label"])
        if key not in CPP_MEDIAN_MS or not case.get("timing"):
            continue
        ours, theirs = case["timing"]["median_ms"], CPP_MEDIAN_MS[key]
        difference = ours / theirs - 1
        if case["name"] != "cublas":
            worst = max(worst, abs(difference))
        print(f"| {key[0]} | {key[1]} | {ours:.4f} | {theirs:.4f} | {100 * difference:+.1f}% | "
              f"{'yes' if abs(difference) <= TOLERANCE else 'no'} |")
    print(f"\nlargest difference over the seed kernels: {100 * worst:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
