"""Nsight Compute on one of a spec's cases and on the vendor's kernel at the same shape, side by side.

usage: python3 scripts/ncu_vs_vendor.py SPEC -k KERNEL -s SHAPE --ours REGEX --vendor REGEX --out DIR
       python3 scripts/ncu_vs_vendor.py --report DIR

On a GPU machine with ncu. It profiles two launches, each alone with the caches flushed before it and the clocks
left as they are (``--clock-control none``): the case's own kernel, in ``driver-gemm run SPEC -k KERNEL -s SHAPE
--no-baseline --no-timing`` (the first launch whose name matches --ours, e.g. the kernel's function), and the
vendor's, in the same run with its vendor row (the first launch whose name matches --vendor: the vendor's timed
kernel, which scripts/kernel_durations.py names). For each it keeps ncu's raw page and its SASS source page (warp
stall samples per instruction) in DIR, then writes DIR/report.txt: duration and clock; the busiest SM's active
cycles and tensor-pipe cycles (equal tensor cycles on the busiest SM mean equal work on the critical path, so a
difference in active cycles is time spent waiting); grid, cluster, registers, shared memory, L2 and DRAM bytes; the
stall reasons over all samples, and the instructions where most samples fell. --report rewrites the report from
DIR's files (a side without its source page reports no stall samples).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from driver_gemm.measure.profile import ncu_csv_table, ncu_number

SECTIONS = ("SpeedOfLight", "LaunchStats", "WarpStateStats", "SourceCounters")
METRICS = ("gpu__time_duration.sum", "sm__cycles_active.max", "sm__cycles_active.avg",
           "sm__pipe_tensor_cycles_active.max", "lts__t_bytes.sum", "dram__bytes_read.sum", "smsp__inst_executed.sum")
# Row label, metric, and the factor from ncu's base unit to the label's.
ROWS = (("duration (ns)", "gpu__time_duration.sum", 1),
        ("SM clock (MHz)", "gpc__cycles_elapsed.avg.per_second", 1e-6),
        ("busiest SM: active cycles", "sm__cycles_active.max", 1),
        ("busiest SM: tensor-pipe cycles", "sm__pipe_tensor_cycles_active.max", 1),
        ("mean SM: active cycles", "sm__cycles_active.avg", 1),
        ("blocks", "launch__grid_size", 1),
        ("blocks a cluster", "launch__cluster_size", 1),
        ("registers a thread", "launch__registers_per_thread", 1),
        ("shared memory a block (bytes)", "launch__shared_mem_per_block_allocated", 1),
        ("L2 bytes", "lts__t_bytes.sum", 1),
        ("DRAM bytes read", "dram__bytes_read.sum", 1),
        ("warp instructions", "smsp__inst_executed.sum", 1))
SIDES = ("ours", "vendor")
SAMPLES = "Warp Stall Sampling (All Samples)"


def profile_command(target: list[str], kernel_regex: str, report: Path, ncu: str = "ncu") -> list[str]:
    """ncu around `target`: the first launch whose name matches `kernel_regex`, caches flushed, clocks untouched."""
    sections = [part for name in SECTIONS for part in ("--section", name)]
    return [ncu, "--clock-control", "none", "--cache-control", "all", *sections, "--metrics", ",".join(METRICS),
            "--kernel-name", f"regex:{kernel_regex}", "--launch-count", "1", "-f", "-o", str(report), *target]


def run_commands(spec: str, kernel: str, shape: str) -> dict[str, list[str]]:
    """The runs ncu wraps: the case alone (ours), and the case with its vendor row (the vendor's)."""
    base = [sys.executable, "-m", "driver_gemm", "run", spec, "-k", kernel, "-s", shape, "--in-process", "-q"]
    return {"ours": [*base, "--no-baseline", "--no-timing"], "vendor": base}


def read_raw(text: str) -> dict[str, str]:
    """ncu's ``--page raw --csv`` of one launch: its columns by name (the first launch's values, after the units)."""
    rows = ncu_csv_table(text)
    return dict(zip(rows[0], rows[2])) if len(rows) >= 3 else {}


def number(text: str | None) -> float | None:
    return ncu_number(text or "")


def shown(text: str | None, factor: float = 1) -> str:
    """A raw cell as the report prints it, times `factor`: whole numbers with thousands separators, others to one
    decimal."""
    value = number(text)
    if value is None:
        return text or "-"
    value *= factor
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def read_source(text: str) -> list[dict]:
    """ncu's ``--page source --csv --print-source sass``: one dict per instruction, with its stall samples."""
    rows = ncu_csv_table(text, "Address")
    return [dict(zip(rows[0], row)) for row in rows[1:]]


def stall_samples(row: dict) -> dict[str, float]:
    """One instruction's samples by stall reason (all samples, not only those where no warp issued)."""
    return {name.removeprefix("stall_"): number(value) or 0.0 for name, value in row.items()
            if name.startswith("stall_") and "Not Issued" not in name}


def stall_shares(instructions: list[dict]) -> list[tuple[str, float]]:
    """Each stall reason's share of all samples (percent), largest first."""
    totals: dict[str, float] = {}
    for row in instructions:
        for reason, value in stall_samples(row).items():
            totals[reason] = totals.get(reason, 0.0) + value
    every = sum(totals.values())
    return sorted(((reason, 100.0 * value / every) for reason, value in totals.items() if value > 0),
                  key=lambda item: -item[1]) if every else []


def top_instructions(instructions: list[dict], count: int = 6) -> list[tuple[float, str, str, str]]:
    """The `count` instructions where most samples fell: (share in percent, times executed, SASS, main reason)."""
    every = sum(number(row.get(SAMPLES)) or 0.0 for row in instructions)
    ranked = sorted(instructions, key=lambda row: -(number(row.get(SAMPLES)) or 0.0))[:count]
    found = []
    for row in ranked:
        reasons = stall_samples(row)
        main = max(reasons, key=reasons.get) if reasons else "-"
        share = 100.0 * (number(row.get(SAMPLES)) or 0.0) / every if every else 0.0
        found.append((share, row.get("Instructions Executed", ""), " ".join((row.get("Source") or "").split()), main))
    return found


def report(folder: Path) -> str:
    """The side-by-side text of the two profiles in `folder`."""
    raw = {side: read_raw((folder / f"{side}-raw.csv").read_text()) for side in SIDES}
    source = {side: read_source(page.read_text()) if (page := folder / f"{side}-source.csv").exists() else []
              for side in SIDES}
    width = max(len(label) for label, _, _ in ROWS)
    lines = [f"ours:   {raw['ours'].get('Kernel Name', '?')}", f"vendor: {raw['vendor'].get('Kernel Name', '?')}", "",
             f"{'':{width}}  {'ours':>14}  {'vendor':>14}"]
    for label, metric, factor in ROWS:
        cells = [shown(raw[side].get(metric), factor) for side in SIDES]
        lines.append(f"{label:{width}}  {cells[0]:>14}  {cells[1]:>14}")
    for side in SIDES:
        shares = ", ".join(f"{reason} {share:.0f}%" for reason, share in stall_shares(source[side])[:6])
        lines += ["", f"{side}: warp stall samples by reason: {shares or 'none recorded'}",
                  f"{side}: the instructions where most samples fell (share, times executed, main reason):"]
        lines += [f"  {share:5.1f}%  {executed:>8}  {sass[:72]:72}  {main}"
                  for share, executed, sass, main in top_instructions(source[side])]
    return "\n".join(lines) + "\n"


def run_tool(command: list[str], what: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    """`command` run to its end, or a SystemExit that says what did not run and why."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise SystemExit(f"{what}: cannot run {command[0]} (Nsight Compute's ncu: put it on the PATH or give --ncu)")
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{what}: ncu did not finish in {timeout:.0f} s (--timeout)")


def capture(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for side, target in run_commands(args.spec, args.kernel, args.shape).items():
        rep = out / side
        regex = args.ours if side == "ours" else args.vendor
        done = run_tool(profile_command(target, regex, rep, args.ncu), f"profiling the {side} side", args.timeout)
        (out / f"{side}.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0 or not rep.with_suffix(".ncu-rep").exists():
            raise SystemExit(f"ncu on the {side} side exited with {done.returncode} and wrote no report (no launch "
                             f"matched {regex!r}?): see {out / (side + '.log')}")
        for page, extra in (("raw", ["--print-units", "base"]), ("source", ["--print-source", "sass"])):
            exported = run_tool([args.ncu, "--import", str(rep.with_suffix(".ncu-rep")), "--page", page, "--csv",
                                 *extra], f"reading the {side} side's {page} page")
            if exported.returncode != 0:
                raise SystemExit(f"ncu could not print the {side} side's {page} page: {exported.stderr.strip()}")
            (out / f"{side}-{page}.csv").write_text(exported.stdout)
        rep.with_suffix(".ncu-rep").unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?")
    parser.add_argument("-k", "--kernel", help="the spec's kernel (a dispatch table's name picks the shape's form)")
    parser.add_argument("-s", "--shape", help="MxNxK")
    parser.add_argument("--ours", help="regular expression of our kernel's name (its function's, for one)")
    parser.add_argument("--vendor", help="regular expression of the vendor kernel's name")
    parser.add_argument("--out", help="folder for ncu's pages and the report")
    parser.add_argument("--report", metavar="DIR", help="only write the report again from DIR's pages")
    parser.add_argument("--ncu", default="ncu")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for each ncu run")
    args = parser.parse_args(argv)
    if args.report:
        folder = Path(args.report)
        missing = [name for name in (f"{side}-raw.csv" for side in SIDES) if not (folder / name).is_file()]
        if missing:
            parser.error(f"--report {folder}: no {' or '.join(missing)} there (the pages a profiling run keeps)")
    else:
        if not (args.spec and args.kernel and args.shape and args.ours and args.vendor and args.out):
            parser.error("SPEC, -k, -s, --ours, --vendor and --out are needed to profile (or --report DIR)")
        capture(args)
        folder = Path(args.out)
    text = report(folder)
    (folder / "report.txt").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
