"""Tuning strategies against each other on a GPU: exhaustive, successive halving, and random sampling given the
seconds halving took, on the same spec and shapes, each with the tuning cache ignored (``--fresh``).

    python3 scripts/tune_strategies.py specs/sweep-v8.yaml --shapes 4096x4096x4096 8192x8192x8192 \
        --json bench/results/tune-strategies-h200.json

prints, per shape, each strategy's best (ms, and % of the exhaustive best: 100 is as fast) against its
wall time (and % of the exhaustive wall time). The criterion this answers: halving within 1% of the
exhaustive best in at most 25% of the exhaustive wall time. ``--configurations N`` runs all three on
the same seeded sample of N configurations (when the whole sweep does not fit the GPU time at hand).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from driver_gemm.spec import load_spec  # noqa: E402
from driver_gemm.tune.search import tune_spec  # noqa: E402
from driver_gemm.tune.strategies import Budget, Exhaustive, RandomSampling, SuccessiveHalving  # noqa: E402


def sampled(spec, count: int | None, seed: int):
    """`spec` with a seeded sample of `count` of its kernel configurations (all when None)."""
    if count is None or count >= len(spec.kernels):
        return spec
    chosen = set(random.Random(seed).sample(range(len(spec.kernels)), count))
    return dataclasses.replace(spec, kernels=tuple(k for i, k in enumerate(spec.kernels) if i in chosen))


def run_strategy(spec, strategy, budget, device: int) -> dict:
    began = time.monotonic()
    result, searches = tune_spec(spec, strategy, budget, device=device, fresh=True)
    wall = time.monotonic() - began
    return {"strategy": strategy.name, "wall_s": wall,
            "budget_s": budget.seconds,
            "searches": [{"shape": s.shape.label, "best": s.best.label if s.best else None, "best_ms": s.best_ms,
                          "seconds": s.seconds, "configurations": s.configurations_tried,
                          "full_measurements": len(s.full_measurements), "stopped_by": s.stopped_by}
                         for s in searches],
            "environment": result.environment}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("--shapes", nargs="+", required=True, metavar="MxNxK")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--configurations", type=int, default=None,
                        help="the same seeded sample of this many configurations for every strategy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args(argv)

    spec = sampled(load_spec(args.spec).select(shapes=args.shapes), args.configurations, args.seed)
    runs = [run_strategy(spec, Exhaustive(), Budget(), args.device),
            run_strategy(spec, SuccessiveHalving(seed=args.seed), Budget(), args.device)]
    halving_seconds = sum(s["seconds"] for s in runs[1]["searches"])
    runs.append(run_strategy(spec, RandomSampling(seed=args.seed), Budget(seconds=max(halving_seconds, 1.0)),
                             args.device))

    exhaustive = {s["shape"]: s for s in runs[0]["searches"]}
    rows = []
    for run in runs:
        for search in run["searches"]:
            reference = exhaustive[search["shape"]]
            rows.append({**search, "strategy": run["strategy"],
                         "pct_of_exhaustive_best": (100 * reference["best_ms"] / search["best_ms"]
                                                    if search["best_ms"] and reference["best_ms"] else None),
                         "pct_of_exhaustive_wall": (100 * search["seconds"] / reference["seconds"]
                                                    if reference["seconds"] else None)})
    print(f"| {spec.name}, {len(spec.kernels)} configurations | shape | best ms | % of exhaustive best | wall s | "
          f"% of exhaustive wall | configurations | full measurements |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        best = f"{row['best_ms']:.4f}" if row["best_ms"] else "-"
        pct = f"{row['pct_of_exhaustive_best']:.1f}" if row["pct_of_exhaustive_best"] else "-"
        wall = f"{row['pct_of_exhaustive_wall']:.0f}" if row["pct_of_exhaustive_wall"] is not None else "-"
        print(f"| {row['strategy']} | {row['shape']} | {best} | {pct} | {row['seconds']:.1f} | {wall} | "
              f"{row['configurations']} | {row['full_measurements']} |")
    halving = [r for r in rows if r["strategy"] == "halving"]
    met = all(r["pct_of_exhaustive_best"] and r["pct_of_exhaustive_best"] >= 99.0
              and r["pct_of_exhaustive_wall"] is not None and r["pct_of_exhaustive_wall"] <= 25.0 for r in halving)
    print(f"criterion (halving within 1% of the exhaustive best in at most 25% of its wall time): "
          f"{'met' if met else 'NOT met'}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"spec": spec.name, "configurations": len(spec.kernels), "rows": rows,
                                     "runs": runs, "criterion_met": met}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
