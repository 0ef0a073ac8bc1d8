"""Evidence: the same kernels built by NVRTC (the version loaded) and by nvcc, instruction mix side by side.

For every kernel configuration of specs/seed.yaml and specs/fast.yaml, and
v10 of specs/tf32.yaml, both builds are made for the kernel's target (sm_90,
or its own arch) and their registers and instruction mix printed one above
the other (CPU only). NVRTC 13.0 addresses shared memory with 64-bit
pointers where nvcc uses 32-bit ones; from NVRTC 13.1 the two should match.

With --run (on a GPU) both builds are timed through the pipeline at
4096x4096x4096: one spec holding each kernel twice, as given and with
``compiler: nvcc``. --json writes the comparison (and the run) to a file.

    python scripts/nvcc_vs_nvrtc.py [--run] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = (("seed.yaml", None), ("fast.yaml", None), ("tf32.yaml", {"v10"}))
SHOWN = ("FFMA", "HMMA", "HGMMA", "LDS", "LDS.64", "LDS.128", "LDG", "LDG.128", "LDGSTS", "STG", "BAR", "total")


def kernels_to_compare():
    """The kernels of `SPECS`, once each (by label and instance), in spec order."""
    from driver_gemm.spec import load_spec

    seen, kernels = set(), []
    for name, only in SPECS:
        for kernel in load_spec(ROOT / "specs" / name).kernels:
            key = (kernel.label, kernel.instance, kernel.source)
            if (only is None or kernel.name in only) and key not in seen:
                seen.add(key)
                kernels.append(kernel)
    return kernels


def build_both(kernels, arch: str):
    """Per kernel label: (NVRTC build, nvcc build), each a `Cubin` or the error it raised."""
    from driver_gemm.errors import DriverGemmError
    from driver_gemm.pipeline.build import build_kernels

    out = {}
    for kernel in kernels:
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


def run_both(kernels):
    """Both builds of every kernel timed at 4096^3 through the pipeline (needs a GPU)."""
    from driver_gemm.pipeline.runner import run_spec
    from driver_gemm.spec.model import Shape, Spec

    doubled = []
    for kernel in kernels:
        doubled.append(kernel)
        doubled.append(dataclasses.replace(kernel, name=f"{kernel.name}_nvcc", compiler="nvcc"))
    spec = Spec(path=None, name="nvcc-vs-nvrtc", description="each kernel built by NVRTC and by nvcc",
                kernels=tuple(doubled), shapes=(Shape(4096, 4096, 4096),))
    return run_spec(spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--run", action="store_true", help="also time both builds at 4096^3 (needs a GPU)")
    parser.add_argument("--json", type=Path, help="write the comparison (and the run) here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from driver_gemm.cuda.compile import nvrtc_version, nvrtc_warning
    from driver_gemm.cuda.nvcc import nvcc_version

    nvrtc = "NVRTC {}.{}".format(*nvrtc_version())
    nvcc = "nvcc {}.{}".format(*nvcc_version())
    print(f"{nvrtc} against {nvcc}, target {args.arch}")
    if nvrtc_warning():
        print(f"note: {nvrtc_warning()}")
    kernels = kernels_to_compare()
    built = build_both(kernels, args.arch)
    rows = {kernel.label: tuple(mix_of(b, kernel.instance) for b in built[kernel.label]) for kernel in kernels}
    print_side_by_side(rows, nvrtc, nvcc)
    report = {"nvrtc": nvrtc, "nvcc": nvcc, "arch": args.arch,
              "kernels": {label: {"nvrtc": left, "nvcc": right} for label, (left, right) in rows.items()}}
    if args.run:
        result = run_both(kernels)
        report["run"] = result.as_dict()
        for case in result.cases:
            print(f"{case.kernel:<60} {case.status:<8} {case.timing.median_ms if case.timing else float('nan'):8.3f} ms")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
        print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
