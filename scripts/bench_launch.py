"""Benchmark: host cost per launch of driver-gemm's launch path, against the bindings' own cuLaunchKernel.

usage: python3 scripts/bench_launch.py [--launches N] [--json FILE]   (on a GPU machine)

An empty kernel is launched N times back to back on one stream; the host
time per launch is the wall time of the loop over N (the queue never fills
at these rates), and the GPU-timeline time per launch is the event time
around the whole loop over N.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import time


from driver_gemm.cuda.compile import compile_text
from driver_gemm.cuda.device import Device
from driver_gemm.cuda.check import check
from driver_gemm.cuda.launch import LaunchConfig, PackedArguments, PreparedLaunch
from driver_gemm.cuda.module import Module

SOURCE = 'extern "C" __global__ void empty(float* out, int n) { if (n < 0) out[0] = 0.0f; }\n'


def timed(device, stream, body, launches):
    start, end = device.event(), device.event()
    body(100)                     # warm-up
    stream.synchronize()
    start.record(stream)
    began = time.perf_counter()
    body(launches)
    host = time.perf_counter() - began
    end.record(stream)
    end.synchronize()
    gpu_ms = end.elapsed_ms_since(start)
    start.close(), end.close()
    return host / launches * 1e6, gpu_ms * 1e3 / launches


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=20_000, help="launches per loop (default 20000)")
    parser.add_argument("--json", help="write the timings here as JSON")
    args = parser.parse_args()

    with Device(0) as device:
        stream = device.stream()
        cubin = compile_text(SOURCE, "empty.cu", ["empty"], device.properties.arch)
        kernel = Module(device, cubin).kernel("empty")
        out = device.alloc(4)
        packed = PackedArguments(["ptr", "int32"], [out, 1])
        config = LaunchConfig.of([1], [32])
        prepared = PreparedLaunch(kernel, config, packed, stream)
        driver = device.driver

        def ours(n):
            launch = prepared.launch
            for _ in range(n):
                launch()

        def bindings_packed(n):
            f, s, params = kernel.handle, stream.handle, packed.pointers
            for _ in range(n):
                check(driver.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params.ctypes.data, 0), "cuLaunchKernel")

        def bindings_tuple(n):
            f, s = kernel.handle, stream.handle
            values = ((out.address, 1), (ctypes.c_void_p, ctypes.c_int))
            for _ in range(n):
                check(driver.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, values, 0), "cuLaunchKernel")

        rows = {}
        for name, body in (("driver-gemm PreparedLaunch", ours),
                           ("cuda.bindings cuLaunchKernel, pre-packed", bindings_packed),
                           ("cuda.bindings cuLaunchKernel, (values, types)", bindings_tuple)):
            host_us, gpu_us = timed(device, stream, body, args.launches)
            rows[name] = {"host_us_per_launch": host_us, "gpu_timeline_us_per_launch": gpu_us}
        print(f"{'way':48s} {'host us/launch':>15s} {'GPU timeline us/launch':>23s}")
        for name, row in rows.items():
            print(f"{name:48s} {row['host_us_per_launch']:15.2f} {row['gpu_timeline_us_per_launch']:23.2f}")
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"launches": args.launches, "device": device.properties.name, "results": rows}, handle,
                          indent=1)


if __name__ == "__main__":
    main()
