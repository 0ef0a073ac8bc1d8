"""driver-gemm: compile, launch, check and time CUDA GEMM kernels from Python, with no C++ harness.

The names below are the public API; everything else is private and may change.

Run a spec::

    import driver_gemm as dg
    run = dg.run_spec(dg.load_spec("specs/seed.yaml"))
    assert run.ok, [c.message for c in run.cases if not c.ok]
    run.write_json("seed.json")

Or drive a kernel yourself::

    with dg.Device(0) as device:
        stream = device.stream()
        kernel = dg.load_kernel(device, "kernels/02_smem_tiles.cu", "sgemm_smem_tiles<32>")
        A, B = device.upload(a, stream), device.upload(b, stream)
        C = device.alloc(4 * M * N)
        kernel.launch((ceil(N / 32), ceil(M / 32)), (32, 32),
                      [("ptr", A), ("ptr", B), ("ptr", C), ("int32", M), ("int32", N), ("int32", K)], stream)
        c = C.download((M, N), numpy.float32, stream)
"""

from .version import __version__
from .measure.baseline import CublasSgemm
from .report.compare import Comparison, compare_runs
from .cuda.compile import Cubin, compile_source, compile_text
from .cuda.device import Device, DeviceBuffer, DeviceProperties, Event, Stream, device_count, read_properties
from .cuda.resources import KernelResources
from .errors import (ArgumentError, CompileError, ConfigError, CudaError, DriverGemmError, NoGpuError, SpecError,
                     ToolMissingError, UsageError)
from .cuda.launch import LaunchConfig, PackedArguments, PreparedLaunch
from .cuda.module import Kernel, Module, load_kernel
from .cuda.occupancy import arch_limits, occupancy
from .pipeline.plan import CasePlan, plan_case
from .results.records import CaseResult, RunResult, load_results
from .pipeline.cases import Case, cases_of
from .pipeline.runner import run_spec
from .pipeline.session import RunOptions
from .spec.model import KernelSpec, MeasureSettings, Shape, Spec, VerifySettings
from .spec import load_spec, spec_from_dict
from .measure.stats import TimingSummary

__all__ = [
    "ArgumentError", "Case", "CasePlan", "CaseResult", "Comparison", "CompileError", "ConfigError", "Cubin",
    "CublasSgemm", "CudaError", "Device", "DeviceBuffer", "DeviceProperties", "DriverGemmError", "Event",
    "Kernel", "KernelResources", "KernelSpec", "LaunchConfig", "MeasureSettings", "Module", "NoGpuError",
    "PackedArguments", "PreparedLaunch", "RunOptions", "RunResult", "Shape", "Spec", "SpecError", "Stream",
    "TimingSummary", "ToolMissingError", "UsageError", "VerifySettings", "__version__", "arch_limits",
    "cases_of", "compare_runs", "compile_source", "compile_text", "device_count", "load_kernel", "load_results",
    "load_spec", "occupancy", "plan_case", "read_properties", "run_spec", "spec_from_dict",
]
