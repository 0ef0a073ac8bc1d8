"""Where a large case's host seconds go: each host step of a kernel case timed alone, on one GPU or on several.

    python scripts/host_steps.py [--sizes 8192,16384] [--devices 0] [--repeats 3] [--json FILE]

For each square size S (an S x S x S case), one process per GPU in
`--devices` (all at once, as a run on several GPUs has them) times, as the
median of `--repeats`:

- drawing A and B from a seed (`make_inputs`, on its threads);
- page-locking A and B (cuMemHostRegister) and unlocking them;
- uploading A and B from pageable memory, and from the same arrays once
  page-locked;
- poisoning C and reading it back into a new pageable array, into a reused
  one, and into page-locked memory;
- the float64 reference from a float32 product (`scaled_product`);
- the check (`compare`) with 1, 8 and 16 threads.

Comparing a one-GPU line with the same line of a two-GPU run shows what the
second GPU's worker costs the first one on the host.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from pathlib import Path
import sys

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _median_s(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 4)


def profile(ordinal: int, sizes: list[int], repeats: int) -> dict:
    """The host steps' seconds at each size on GPU `ordinal` (run in a process of its own)."""
    from driver_gemm.cuda.device import Device
    from driver_gemm.measure import verify
    from driver_gemm.measure.inputs import make_inputs
    from driver_gemm.measure.reference import scaled_product
    from driver_gemm.specfile.model import Shape

    out: dict = {"gpu": ordinal, "sizes": {}}
    with Device(ordinal) as device:
        stream = device.stream()
        for size in sizes:
            shape = Shape(size, size, size)
            steps: dict[str, float] = {}
            inputs = None

            def draw():
                nonlocal inputs
                inputs = None
                inputs = make_inputs(shape, 7)
            steps["draw A and B"] = _median_s(draw, repeats)
            a, b, c = (device.alloc(size * size * 4) for _ in range(3))
            steps["upload A and B (pageable)"] = _median_s(
                lambda: (a.upload(inputs.A, stream), b.upload(inputs.B, stream)), repeats)
            steps["page-lock A and B, and unlock them"] = _median_s(
                lambda: [device.page_lock(array).close() for array in (inputs.A, inputs.B)], repeats)
            locks = [device.page_lock(array) for array in (inputs.A, inputs.B)]
            steps["upload A and B (page-locked)"] = _median_s(
                lambda: (a.upload(inputs.A, stream), b.upload(inputs.B, stream)), repeats)
            for lock in locks:
                lock.close()
            c.fill_u32(verify.POISON_WORD, stream)
            steps["read C into a new array"] = _median_s(lambda: c.download((size, size), np.float32, stream),
                                                         repeats)
            reused = np.empty((size, size), np.float32)
            reused.fill(0)

            steps["read C into a reused array"] = _median_s(lambda: c.download_into(reused, stream), repeats)
            with device.page_lock(reused):
                steps["read C into page-locked memory"] = _median_s(lambda: c.download_into(reused, stream),
                                                                    repeats)
            product = inputs.A[:, :size] + inputs.B          # float32 values of a product's size
            expected = None

            def reference():
                nonlocal expected
                expected = None
                expected = scaled_product(product, inputs, 1.0, 0.0)
            steps["float64 reference from a float32 product"] = _median_s(reference, repeats)
            output = (expected * (1 + 1e-7)).astype(np.float32)
            for threads in (1, 8, 16):
                verify.CHECK_THREADS = threads
                steps[f"check, {threads} threads"] = _median_s(
                    lambda: verify.compare(output, expected, rel_tolerance=1e-5), repeats)
            for buffer in (a, b, c):
                buffer.close()
            out["sizes"][size] = steps
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8192,16384")
    parser.add_argument("--devices", default="0", help="GPUs to profile on at once (comma-separated)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    devices = [int(device) for device in args.devices.split(",")]
    context = multiprocessing.get_context("spawn")
    with context.Pool(len(devices)) as pool:
        reports = pool.starmap(profile, [(device, sizes, args.repeats) for device in devices])
    for report in reports:
        print(f"GPU {report['gpu']} (of {len(devices)} at once)")
        for size, steps in report["sizes"].items():
            print(f"  {size}^3")
            for step, seconds in steps.items():
                print(f"    {step:45s} {seconds:8.3f} s")
    if args.json:
        args.json.write_text(json.dumps({"devices": devices, "reports": reports}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
