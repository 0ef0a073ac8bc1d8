"""The same kernels built by NVRTC (the version loaded) and by nvcc, instruction mix side by side.

usage: python3 scripts/nvcc_vs_nvrtc.py [--run] [--kernels v4,v8|all] [--shape MxNxK] [--arch SM] [--json FILE]

Both builds of each chosen kernel configuration (by default v4 and v6 of
specs/seed.yaml and specs/fast.yaml, v8 of specs/fast.yaml and v10 of
specs/tf32.yaml; ``--kernels all`` for every kernel of those specs) are made
for the kernel's target (sm_90, or its own arch) and their registers and
instruction mix printed one above the other (CPU only). NVRTC 13.0 addresses
shared memory with 64-bit pointers where nvcc uses 32-bit ones; from NVRTC
13.1 the two should match.

With --run (on a GPU) both builds are timed through the pipeline at --shape
(4096x4096x4096): one spec holding each kernel twice, as given and with
``compiler: nvcc``, then a table: kernel, NVRTC ms, nvcc ms, nvcc / NVRTC,
registers and whether the instruction mix is the same. With the default four
kernels that takes well under two minutes on an H200 (builds included). nvcc
is looked for in $CUDA_HOME/bin, $CUDA_PATH/bin, PATH and /usr/local/cuda/bin;
without it the script says so and exits with status 2. --json writes the
comparison (and the run) to a file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = (("seed.yaml", None), ("fast.yaml", None), ("tf32.yaml", {"v10"}))
DEFAULT_KERNELS = ("v4", "v6", "v8", "v10")
STARTED = time.perf_counter()
SHOWN = ("FFMA", "HMMA", "HGMMA", "LDS", "LDS.64", "LDS.128", "LDG", "LDG.128", "LDGSTS", "STG", "BAR", "total")


def say(*parts) -> None:
    print(f"[{time.perf_counter() - STARTED:6.1f} s]", *parts, flush=True)


def kernels_to_compare(names=None):
    """The kernels of `SPECS` (those named in `names`, when given), once each (by label and instance), in spec
    order."""
    from driver_gemm.specfile import load_spec

    seen, kernels = set(), []
    for name, only in SPECS:
        for kernel in load_spec(ROOT / "specs" / name).kernels:
            key = (kernel.label, kernel.instance, kernel.source)
            wanted = (only is None or kernel.name in only) and (names is None or kernel.name in names)
            if wanted and key not in seen:
                seen.add(key)
                kernels.append(kernel)
    return kernels


def build_both(kernels, arch: str):
    """Per kernel label: (NVRTC build, nvcc build), each a `Cubin` or the error it raised."""
    from driver_gemm.errors import DriverGemmError
    from driver_gemm.planning.build import build_kernels

    out = {}
    for kernel in kernels:
        say(f"building {kernel.label} with NVRTC and with nvcc ...")
        pair = []
        for variant in (kernel, dataclasses.replace(kernel, compiler="nvcc")):
            try:
                pair.append(build_kernels([variant], variant.target(arch)))
            except DriverGemmError as exc:
                pair.append(exc)
        out[kernel.label] = tuple(pair)
    return out


def mix_of(built, instance: str) -> dict | str:
    from driver_gemm.cuda.fatbin import cubin_bytes
    from driver_gemm.cuda.sass import instruction_mix

    if isinstance(built, Exception):
        return f"error: {str(built).splitlines()[0][:100]}"
    mix = instruction_mix(cubin_bytes(built.image, built.arch)).get(built.symbol(instance))
    row = mix.as_dict() if mix else {}
    row["registers"] = built.resources_of(instance).registers
    return row


def print_side_by_side(rows: dict, nvrtc: str, nvcc: str) -> None:
    columns = ("registers", *SHOWN)
    width = max(len(label) for label in rows) + 8
    print(f"{'kernel / compiler':<{width}}" + "".join(f"{c:>9}" for c in columns))
    for label, (left, right) in rows.items():
        for tag, row in ((nvrtc, left), (nvcc, right)):
            name = f"{label} {tag}"
            if isinstance(row, str):
                print(f"{name:<{width}}{row}")
            else:
                print(f"{name:<{width}}" + "".join(f"{row.get(c, 0):>9}" for c in columns))
        if not isinstance(left, str) and not isinstance(right, str):
            same = all(left.get(c) == right.get(c) for c in columns)
            print(f"{'':<{width}}{'same mix' if same else 'differs'}")


def nvcc_label(kernel) -> str:
    return dataclasses.replace(kernel, name=f"{kernel.name}_nvcc", compiler="nvcc").label


def run_both(kernels, shape):
    """Both builds of every kernel timed at `shape` through the pipeline (needs a GPU)."""
    from driver_gemm.runners.one_gpu import run_spec
    from driver_gemm.specfile.model import MeasureSettings, Spec

    doubled = []
    for kernel in kernels:
        doubled.append(kernel)
        doubled.append(dataclasses.replace(kernel, name=f"{kernel.name}_nvcc", compiler="nvcc"))
    spec = Spec(path=None, name="nvcc-vs-nvrtc", description="each kernel built by NVRTC and by nvcc",
                kernels=tuple(doubled), shapes=(shape,), measure=MeasureSettings(timeout_s=3.0))
    return run_spec(spec, on_result=lambda case: say(
        f"ran {case.kernel}: {case.status}" + (f", median {case.timing.median_ms:.3f} ms" if case.timing else "")))


def print_run_table(kernels, rows: dict, result, nvrtc: str, nvcc: str) -> None:
    timed = {case.kernel: case for case in result.cases}

    def median(label):
        case = timed.get(label)
        return case.timing.median_ms if case is not None and case.timing is not None else None

    width = max(len(kernel.label) for kernel in kernels) + 2
    print(f"=== {nvrtc} vs {nvcc} at {result.cases[0].shape.label if result.cases else '?'}: medians, cold L2",
          flush=True)
    print(f"{'kernel':<{width}}{'NVRTC ms':>10}{'nvcc ms':>10}{'nvcc/NVRTC':>12}{'regs NVRTC':>12}"
          f"{'regs nvcc':>11}  mix", flush=True)
    for kernel in kernels:
        left, right = median(kernel.label), median(nvcc_label(kernel))
        mix_left, mix_right = rows[kernel.label]
        regs = [m.get("registers", "-") if isinstance(m, dict) else "-" for m in (mix_left, mix_right)]
        same = (isinstance(mix_left, dict) and isinstance(mix_right, dict) and
                all(mix_left.get(c) == mix_right.get(c) for c in ("registers", *SHOWN)))
        fmt = lambda value: f"{value:10.3f}" if value is not None else f"{'-':>10}"  # noqa: E731
        ratio = f"{right / left:12.3f}" if left and right else f"{'-':>12}"
        statuses = {timed[label].status for label in (kernel.label, nvcc_label(kernel)) if label in timed}
        note = "" if statuses <= {"PASS"} else f"  ({', '.join(sorted(statuses))})"
        print(f"{kernel.label:<{width}}{fmt(left)}{fmt(right)}{ratio}{regs[0]:>12}{regs[1]:>11}  "
              f"{'same' if same else 'differs'}{note}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90", help="target of kernels without an arch of their own (default sm_90)")
    parser.add_argument("--run", action="store_true", help="also time both builds (needs a GPU)")
    parser.add_argument("--kernels", default=",".join(DEFAULT_KERNELS),
                        help="kernel names, comma-separated, or 'all' (default %(default)s)")
    parser.add_argument("--shape", default="4096x4096x4096", help="MxNxK timed with --run")
    parser.add_argument("--json", type=Path, help="write the comparison (and the run) here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from driver_gemm.cuda.compile import nvrtc_version, nvrtc_warning
    from driver_gemm.cuda.nvcc import find_nvcc, nvcc_version
    from driver_gemm.specfile.model import Shape

    nvrtc = "NVRTC {}.{}".format(*nvrtc_version())
    found = find_nvcc()
    if found is None:
        say(f"{nvrtc} loaded, but nvcc is NOT installed here (looked in $CUDA_HOME/bin, $CUDA_PATH/bin, PATH "
            "and /usr/local/cuda/bin): nothing to compare; set CUDA_HOME to the toolkit to use")
        return 2
    nvcc = "nvcc {}.{}".format(*nvcc_version(found))
    say(f"{nvrtc} against {nvcc} ({found}), target {args.arch}")
    if nvrtc_warning():
        say(f"note: {nvrtc_warning()}")
    names = None if args.kernels == "all" else set(args.kernels.split(","))
    kernels = kernels_to_compare(names)
    if not kernels:
        say(f"no kernel named {args.kernels} in {', '.join(name for name, _ in SPECS)}")
        return 2
    built = build_both(kernels, args.arch)
    rows = {kernel.label: tuple(mix_of(b, kernel.instance) for b in built[kernel.label]) for kernel in kernels}
    print_side_by_side(rows, nvrtc, nvcc)
    report = {"nvrtc": nvrtc, "nvcc": nvcc, "nvcc_path": str(found), "arch": args.arch,
              "kernels": {label: {"nvrtc": left, "nvcc": right} for label, (left, right) in rows.items()}}
    if args.run:
        M, N, K = (int(x) for x in args.shape.split("x"))
        say(f"timing both builds at {args.shape} ...")
        result = run_both(kernels, Shape(M, N, K))
        report["run"] = result.as_dict()
        print_run_table(kernels, rows, result, nvrtc, nvcc)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
        say(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
