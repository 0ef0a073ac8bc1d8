"""Node acceptance: run the seed spec on every GPU of this machine and fail on any wrong result or slow GPU.

    python examples/node_acceptance.py [--min-pct-cublas 20] [--spec specs/seed.yaml] [--json-dir DIR]

A GPU fails when any case is not PASS, or when its best kernel at any shape
reaches less than the given percentage of cuBLAS on that same GPU. Exit code
0 when every GPU passes, 1 otherwise, 3 when there is no GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import driver_gemm as dg

ROOT = Path(__file__).resolve().parent.parent


def check_gpu(ordinal: int, spec: dg.Spec, min_pct_cublas: float, json_dir: Path | None) -> list[str]:
    """Problems found on one GPU (none: it passes)."""
    run = dg.run_spec(spec, dg.RunOptions(), dg.Placement(device=ordinal, isolate=True))
    if json_dir is not None:
        run.write_json(json_dir / f"gpu{ordinal}.json")
    problems = [f"{c.kernel} at {c.shape.label}: {c.status} {c.message}" for c in run.cases if not c.ok]
    for shape in spec.shapes:
        best = max((c.pct_cublas or 0.0 for c in run.cases if c.shape == shape and not c.is_baseline),
                   default=0.0)
        if best < min_pct_cublas:
            problems.append(f"best kernel at {shape.label} reaches {best:.1f}% of cuBLAS "
                            f"(needs {min_pct_cublas:g}%)")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "specs" / "seed.yaml")
    parser.add_argument("--min-pct-cublas", type=float, default=20.0)
    parser.add_argument("--json-dir", type=Path)
    args = parser.parse_args()
    try:
        count = dg.device_count()
    except dg.NoGpuError as exc:
        print(f"node acceptance: {exc}")
        return 3
    spec = dg.load_spec(args.spec)
    if args.json_dir:
        args.json_dir.mkdir(parents=True, exist_ok=True)
    failed = False
    for ordinal in range(count):
        name = dg.read_properties(ordinal).name
        problems = check_gpu(ordinal, spec, args.min_pct_cublas, args.json_dir)
        print(f"GPU {ordinal} ({name}): {'PASS' if not problems else 'FAIL'}")
        for problem in problems:
            print(f"    {problem}")
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
