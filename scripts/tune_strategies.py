"""Tuning strategies against each other on a GPU: exhaustive, successive halving, and random sampling given the
seconds halving took, on the same spec and shapes, each with the tuning cache ignored (``--fresh``).

usage: python3 scripts/tune_strategies.py SPEC --shapes MxNxK ... --json FILE [--configurations N] [--predict]

    python3 scripts/tune_strategies.py specs/sweep-v8.yaml --shapes 4096x4096x4096 8192x8192x8192 \
        --json tune-strategies.json

The criterion this answers: halving within 1% of the exhaustive best in at most 25% of the exhaustive
wall time. The comparison is of GPU-side search cost: every configuration is compiled first (NVRTC
programs side by side, timed and reported on its own), so every strategy starts from a warm compile
cache; a strategy's wall time is its search (inputs, reference and cuBLAS row per shape, loading,
screens, verification, full measurements), not its compile. Exhaustive verifies and fully measures
every configuration (the reference); halving screens them warm and unverified and verifies only what
reaches a full measurement. Prints, per shape, each strategy's best (ms, and % of the exhaustive best:
100 is as fast) against its wall time (and % of the exhaustive wall time), then where each strategy's
time went; writes the JSON after every strategy, so a run stopped by its time limit keeps what it did.

``--configurations N`` runs all three on the same seeded sample of N configurations (when the whole
sweep does not fit the GPU time at hand). ``--predict`` prints what the replay model
(`driver_gemm.tune.replay`, fitted to earlier H200 runs) expects of the run, and needs no GPU.
``--max-seconds`` skips random sampling when what is left would not pay for it.
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

from driver_gemm.specfile import load_spec  # noqa: E402
from driver_gemm.tune.strategies import (FULL, Budget, Exhaustive, RandomSampling,  # noqa: E402
                                         SuccessiveHalving)

# A recorded H200 run of specs/sweep-v8.yaml (kept with the tests' data): what --predict replays.
RECORDED_SWEEP = Path(__file__).resolve().parent.parent / "tests" / "data" / "results" / "tune-v8-h200.jsonl.gz"
WITHIN_BEST_PCT = 99.0        # halving's best at least this % as fast as the exhaustive best (within 1%)
AT_MOST_WALL_PCT = 25.0       # in at most this % of the exhaustive wall time


def sampled(spec, count: int | None, seed: int):
    """`spec` with a seeded sample of `count` of its kernel configurations (all when None)."""
    if count is None or count >= len(spec.kernels):
        return spec
    chosen = set(random.Random(seed).sample(range(len(spec.kernels)), count))
    return dataclasses.replace(spec, kernels=tuple(k for i, k in enumerate(spec.kernels) if i in chosen))


def compile_ahead(spec, device: int) -> dict:
    """Plan and compile every configuration as `tune` will, twice: the first pass fills the compile cache
    (its seconds are the compile time), the second shows that every strategy then finds it warm."""
    from driver_gemm.cuda.compile import Cubin
    from driver_gemm.cuda.device import read_properties
    from driver_gemm.cuda.occupancy import limits_from_device
    from driver_gemm.tune.search import prepare_cases

    props = read_properties(device)
    limits = limits_from_device(props)
    passes = []
    for _ in range(2):
        began = time.perf_counter()
        prepared = prepare_cases(spec, limits, props.arch, props.sm_count, allow_spills=True)
        cubins = [c for c in prepared.compiled.values() if isinstance(c, Cubin)]
        passes.append({"seconds": time.perf_counter() - began, "kernels": len(prepared.compiled),
                       "from_cache": sum(1 for c in cubins if c.from_cache),
                       "errors": len(prepared.compiled) - len(cubins), "cases": len(prepared.cases)})
    return {"first": passes[0], "warm": passes[1],
            "warm_for_every_strategy": passes[1]["from_cache"] == passes[1]["kernels"] - passes[1]["errors"]}


def search_summary(search) -> dict:
    """One strategy's search of one shape: what it found and what it measured."""
    full = [t for t in search.trials if t.fidelity >= FULL]
    return {"shape": search.shape.label, "best": search.best.label if search.best else None,
            "best_ms": search.best_ms, "seconds": search.seconds, "configurations": search.configurations_tried,
            "screens": sum(1 for t in search.trials if t.fidelity < FULL),
            "full_measurements": len(search.full_measurements),
            "verified": len({t.configuration for t in full}),
            "failed_full": sum(1 for t in full if t.median_ms is None),
            "stopped_by": search.stopped_by}


def run_strategy(spec, strategy, budget, device: int) -> dict:
    from driver_gemm.tune.search import tune_spec

    began = time.monotonic()
    result, searches = tune_spec(spec, strategy, budget, device=device, fresh=True)
    wall = time.monotonic() - began
    searched = sum(s.seconds for s in searches)
    work = (result.settings.tune or {}).get("work", {})
    return {"strategy": strategy.name, "wall_s": wall, "prepare_s": wall - searched, "budget_s": budget.seconds,
            "searches": [search_summary(s) for s in searches], "work": work, "environment": result.environment}


def random_budget_s(halving: dict) -> float:
    """Random sampling gets the seconds halving searched for (all shapes together, shared as it goes)."""
    return max(sum(s["seconds"] for s in halving["searches"]), 1.0)


def comparison_rows(runs: list[dict]) -> list[dict]:
    """Per strategy and shape: its search against the exhaustive one of the same shape."""
    exhaustive = {s["shape"]: s for run in runs if run["strategy"] == "exhaustive" for s in run["searches"]}
    rows = []
    for run in runs:
        for search in run["searches"]:
            reference = exhaustive.get(search["shape"])
            best_pct = wall_pct = None
            if reference and search["best_ms"] and reference["best_ms"]:
                best_pct = 100 * reference["best_ms"] / search["best_ms"]
            if reference and reference["seconds"]:
                wall_pct = 100 * search["seconds"] / reference["seconds"]
            rows.append({**search, "strategy": run["strategy"], "pct_of_exhaustive_best": best_pct,
                         "pct_of_exhaustive_wall": wall_pct})
    return rows


def criterion_met(rows: list[dict]) -> bool:
    """Halving, on every shape, within 1% of the exhaustive best in at most 25% of its wall time."""
    halving = [r for r in rows if r["strategy"] == "halving"]
    return bool(halving) and all(
        r["pct_of_exhaustive_best"] is not None and r["pct_of_exhaustive_best"] >= WITHIN_BEST_PCT
        and r["pct_of_exhaustive_wall"] is not None and r["pct_of_exhaustive_wall"] <= AT_MOST_WALL_PCT
        for r in halving)


def _number(value, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def comparison_table(rows: list[dict], title: str) -> str:
    """A Markdown table per shape: strategy, best ms, % of exhaustive best, wall s, % of exhaustive wall, ..."""
    lines = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        lines += [f"{title} at {shape}", "",
                  "| strategy | best ms | % of exhaustive best | wall s | % of exhaustive wall | configurations "
                  "| screens | verified + fully measured | best configuration |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in (r for r in rows if r["shape"] == shape):
            lines.append(f"| {r['strategy']} | {_number(r['best_ms'], 4)} | {_number(r['pct_of_exhaustive_best'], 1)} "
                         f"| {r['seconds']:.1f} | {_number(r['pct_of_exhaustive_wall'], 1)} | {r['configurations']} "
                         f"| {r.get('screens', 0)} | {r.get('verified', r['full_measurements'])} | {r['best'] or '-'} |")
        lines.append("")
    return "\n".join(lines)


def work_table(runs: list[dict]) -> str:
    """Where each strategy's search time went, per shape and kind of work (wall seconds; inputs and reference
    are also counted in the screen_load or verify that first needed them)."""
    kinds = ("inputs", "reference", "baseline", "screen_load", "screen", "verify", "full")
    lines = ["| strategy | shape | " + " | ".join(kinds) + " |", "|---|---|" + "---|" * len(kinds)]
    for run in runs:
        for shape, seconds in run.get("work", {}).get("seconds", {}).items():
            lines.append(f"| {run['strategy']} | {shape} | " + " | ".join(_number(seconds.get(k), 2) for k in kinds)
                         + " |")
    return "\n".join(lines)


def predict(spec, recorded_path: Path = RECORDED_SWEEP, seed: int = 0) -> dict:
    """What the replay model expects of this run per shape: exhaustive and halving seconds, replayed on the
    recorded sweep and scaled to the number of valid configurations the spec has (what is paid per
    configuration scales, what is paid per shape and for the finalists does not). An estimate, never a
    measurement."""
    from driver_gemm.cuda.occupancy import arch_limits
    from driver_gemm.planning.build import launch_plans
    from driver_gemm.results.read import load_results
    from driver_gemm.tune.replay import RecordedSweep
    from driver_gemm.tune.strategies import search_all

    plans = launch_plans(spec, arch_limits("sm_90"))
    sweep = RecordedSweep(load_results(recorded_path), seed=seed)
    spaces = [entry for entry in sweep.spaces() if any(s.label == entry[1].label for s in spec.shapes)]
    results = search_all([(space, shape) for space, shape, _ in spaces], SuccessiveHalving(seed=seed), sweep,
                         Budget(clock=sweep.clock))
    out = {}
    for (space, shape, name), result in zip(spaces, results):
        valid = sum(1 for k in spec.kernels if plans[k.label, shape.label].valid)
        scale = valid / len(space)
        fixed = sweep._reference_s(shape)          # inputs, reference and cuBLAS row: once per shape
        screens = sum(t.seconds for t in result.trials if t.fidelity < FULL)
        exhaustive = fixed + (sweep.exhaustive_seconds(name, shape) - fixed) * scale
        halving = result.seconds - screens + screens * scale
        out[shape.label] = {"configurations": valid, "recorded_configurations": len(space),
                            "exhaustive_s": exhaustive, "halving_s": halving, "halving_pct": 100 * halving / exhaustive}
    total = sum(p["exhaustive_s"] + 2 * p["halving_s"] for p in out.values())
    return {"shapes": out, "searches_s": total, "note": "replay-model estimate from " + recorded_path.name}


def write(path: Path, report: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", type=Path, help="the sweep spec, e.g. specs/sweep-v8.yaml")
    parser.add_argument("--shapes", nargs="+", required=True, metavar="MxNxK", help="the shapes tuned")
    parser.add_argument("--json", type=Path, required=True, help="write the comparison here (after each strategy)")
    parser.add_argument("--configurations", type=int, default=None,
                        help="the same seeded sample of this many configurations for every strategy")
    parser.add_argument("--seed", type=int, default=0, help="seed of the samples and of random sampling")
    parser.add_argument("--device", type=int, default=0, help="the GPU (ordinal)")
    parser.add_argument("--max-seconds", type=float, default=330.0,
                        help="skip random sampling when it would end after this many seconds of the run")
    parser.add_argument("--predict", action="store_true", help="print the replay model's estimate and stop")
    args = parser.parse_args(argv)
    began = time.monotonic()

    spec = sampled(load_spec(args.spec).select(shapes=args.shapes), args.configurations, args.seed)
    report = {"spec": spec.name, "configurations": len(spec.kernels), "shapes": list(args.shapes),
              "model": predict(spec, seed=args.seed)}
    for shape, p in report["model"]["shapes"].items():
        print(f"model, {shape}: {p['configurations']} valid configurations; exhaustive ~{p['exhaustive_s']:.0f} s, "
              f"halving ~{p['halving_s']:.0f} s (~{_number(p['halving_pct'], 0)}%)")
    print(f"model: the three searches ~{report['model']['searches_s']:.0f} s, plus compiling and start-up")
    if args.predict:
        return 0

    report["compile"] = compile_ahead(spec, args.device)
    first, warm = report["compile"]["first"], report["compile"]["warm"]
    print(f"compiled ahead: {first['kernels']} kernels in {first['seconds']:.1f} s ({first['from_cache']} from the "
          f"cache, {first['errors']} errors); again in {warm['seconds']:.1f} s, "
          f"{'all' if report['compile']['warm_for_every_strategy'] else 'NOT all'} from the cache: every strategy "
          "below starts from a warm compile cache", flush=True)
    runs = report["runs"] = []

    def done(run: dict) -> None:
        runs.append(run)
        report["rows"] = comparison_rows(runs)
        write(args.json, report)
        print(f"{run['strategy']}: searched {sum(s['seconds'] for s in run['searches']):.1f} s "
              f"(+{run['prepare_s']:.1f} s planning and session); {time.monotonic() - began:.0f} s so far", flush=True)

    done(run_strategy(spec, Exhaustive(), Budget(), args.device))
    done(run_strategy(spec, SuccessiveHalving(seed=args.seed), Budget(), args.device))
    seconds = random_budget_s(runs[-1])
    if time.monotonic() - began + seconds + runs[-1]["prepare_s"] + 5 <= args.max_seconds:
        done(run_strategy(spec, RandomSampling(seed=args.seed), Budget(seconds=seconds), args.device))
    else:
        report["random_skipped"] = f"{seconds:.0f} s more would pass --max-seconds {args.max_seconds:.0f}"
        print(f"random sampling skipped: {report['random_skipped']}")

    rows = report["rows"] = comparison_rows(runs)
    report["criterion_met"] = met = criterion_met(rows)
    report["wall_s"] = time.monotonic() - began
    write(args.json, report)
    print()
    print(comparison_table(rows, f"{spec.name}, {len(spec.kernels)} configurations "
                                 f"({first['cases']} valid cases), warm compile cache"))
    print(work_table(runs))
    print()
    print(f"compile {first['seconds']:.1f} s (not in any strategy's wall time); whole run {report['wall_s']:.0f} s")
    print(f"criterion (halving within 1% of the exhaustive best in at most 25% of its wall time): "
          f"{'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
