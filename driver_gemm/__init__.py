"""driver-gemm: compile, launch, check and time CUDA GEMM kernels from Python, with no C++ harness.

The names below are the public API; everything else is private and may change::

    import driver_gemm as dg
    run = dg.run_spec(dg.load_spec("specs/seed.yaml"))
    assert run.ok, [c.message for c in run.cases if not c.ok]

Driving a kernel yourself (`Device`, `load_kernel`), and the pytest plugin: docs/embedding.md.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

from .version import __version__

if TYPE_CHECKING:
    # What a type checker reads in place of `__getattr__`, which it cannot follow: the names of `_PUBLIC` from the
    # same modules (tests/test_api_typing.py holds the two equal), each re-exported (``X as X``), so that a user's
    # checker sees the real signatures and refuses a name the package lacks. Never imported at run time.
    from . import errors as errors
    from .cuda.compile import Cubin as Cubin, compile_source as compile_source, compile_text as compile_text
    from .cuda.device import (
        Device as Device, DeviceBuffer as DeviceBuffer, DeviceProperties as DeviceProperties, Event as Event,
        Stream as Stream, device_count as device_count, read_properties as read_properties)
    from .cuda.launch import (
        LaunchConfig as LaunchConfig, PackedArguments as PackedArguments, PreparedLaunch as PreparedLaunch)
    from .cuda.module import Kernel as Kernel, Module as Module, load_kernel as load_kernel
    from .cuda.occupancy import arch_limits as arch_limits, occupancy as occupancy
    from .cuda.resources import KernelResources as KernelResources
    from .errors import (
        ArgumentError as ArgumentError, CompileError as CompileError, ConfigError as ConfigError,
        CudaError as CudaError, DriverGemmError as DriverGemmError, NoGpuError as NoGpuError, SpecError as SpecError,
        ToolMissingError as ToolMissingError, UsageError as UsageError)
    from .measure.baseline import CublasSgemm as CublasSgemm
    from .measure.stats import TimingSummary as TimingSummary
    from .planning.case_plan import CasePlan as CasePlan, plan_case as plan_case
    from .planning.cases import Case as Case, cases_of as cases_of
    from .planning.spec_plan import (
        PlanTarget as PlanTarget, SpecPlan as SpecPlan, plan_spec as plan_spec, plan_target as plan_target)
    from .report.comparison import Comparison as Comparison, compare_runs as compare_runs
    from .results.read import ResultsFile as ResultsFile, load_results as load_results, read_results as read_results
    from .results.records import CaseResult as CaseResult, RunResult as RunResult
    from .results.settings import RunSettings as RunSettings
    from .runners.on_tensors import check_kernel as check_kernel
    from .runners.one_gpu import run_spec as run_spec
    from .session.options import Placement as Placement, RunOptions as RunOptions
    from .specfile import load_spec as load_spec, spec_from_dict as spec_from_dict
    from .specfile.model import (
        KernelSpec as KernelSpec, MeasureSettings as MeasureSettings, Shape as Shape, Spec as Spec,
        VerifySettings as VerifySettings)
    from .specfile.shipped import ShippedSpec as ShippedSpec, shipped_specs as shipped_specs
    from .tune.search import tune_spec as tune_spec
    from .tune.strategies import Budget as Budget, SearchResult as SearchResult
    from .tune.winners import Pick as Pick, pick_winners as pick_winners, winners_spec as winners_spec

# Where each public name lives. They are imported on first use (PEP 562), not here: a GPU worker process, or a
# command that only reads a spec, then pays for the modules it uses and not for all of them (NVRTC, nvmath-python
# and the report layer are slow to import, and that time comes before the first case can start).
_PUBLIC = {
    "CublasSgemm": ".measure.baseline",
    "Comparison": ".report.comparison", "compare_runs": ".report.comparison",
    "Cubin": ".cuda.compile", "compile_source": ".cuda.compile", "compile_text": ".cuda.compile",
    "Device": ".cuda.device", "DeviceBuffer": ".cuda.device", "DeviceProperties": ".cuda.device",
    "Event": ".cuda.device", "Stream": ".cuda.device", "device_count": ".cuda.device",
    "read_properties": ".cuda.device",
    "KernelResources": ".cuda.resources",
    "ArgumentError": ".errors", "CompileError": ".errors", "ConfigError": ".errors", "CudaError": ".errors",
    "DriverGemmError": ".errors", "NoGpuError": ".errors", "SpecError": ".errors", "ToolMissingError": ".errors",
    "UsageError": ".errors",
    "LaunchConfig": ".cuda.launch", "PackedArguments": ".cuda.launch", "PreparedLaunch": ".cuda.launch",
    "Kernel": ".cuda.module", "Module": ".cuda.module", "load_kernel": ".cuda.module",
    "arch_limits": ".cuda.occupancy", "occupancy": ".cuda.occupancy",
    "CasePlan": ".planning.case_plan", "plan_case": ".planning.case_plan",
    "CaseResult": ".results.records", "RunResult": ".results.records", "load_results": ".results.read",
    "Case": ".planning.cases", "cases_of": ".planning.cases",
    "run_spec": ".runners.one_gpu",
    "check_kernel": ".runners.on_tensors",
    "Placement": ".session.options", "RunOptions": ".session.options", "RunSettings": ".results.settings",
    "KernelSpec": ".specfile.model", "MeasureSettings": ".specfile.model", "Shape": ".specfile.model",
    "Spec": ".specfile.model", "VerifySettings": ".specfile.model",
    "load_spec": ".specfile", "spec_from_dict": ".specfile",
    "TimingSummary": ".measure.stats",
}
# What the commands do, one call each: plan (`driver-gemm plan`), tune, read and compare results, the shipped specs.
_COMMANDS_API = {
    "PlanTarget": ".planning.spec_plan", "SpecPlan": ".planning.spec_plan", "plan_spec": ".planning.spec_plan",
    "plan_target": ".planning.spec_plan",
    "ShippedSpec": ".specfile.shipped", "shipped_specs": ".specfile.shipped",
    "ResultsFile": ".results.read", "read_results": ".results.read",
    "Budget": ".tune.strategies", "SearchResult": ".tune.strategies", "tune_spec": ".tune.search",
    "Pick": ".tune.winners", "pick_winners": ".tune.winners", "winners_spec": ".tune.winners",
}
_PUBLIC.update(_COMMANDS_API)
# Modules of the package reachable as attributes right after `import driver_gemm` (``dg.errors.SpecError``), as the
# docs write them: a submodule is otherwise an attribute only once something has imported it.
_SUBMODULES = ("errors",)
# What a library call reports goes to the `driver_gemm.<module>` loggers; the caller configures them, never this package.
logging.getLogger(__name__).addHandler(logging.NullHandler())


if not TYPE_CHECKING:
    # Hidden from type checkers: a module's `__getattr__` makes any attribute of it valid to them (typed as what it
    # returns), the misspelt ones too; they read the imports above instead.
    def __getattr__(name: str):
        """A public name, imported from its module the first time it is asked for (then kept here)."""
        if name in _SUBMODULES:
            return importlib.import_module(f".{name}", __name__)
        module = _PUBLIC.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC) | set(_SUBMODULES))


__all__ = [
    "ArgumentError", "Case", "CasePlan", "CaseResult", "Comparison", "CompileError", "ConfigError", "Cubin",
    "CublasSgemm", "CudaError", "Device", "DeviceBuffer", "DeviceProperties", "DriverGemmError", "Event",
    "Kernel", "KernelResources", "KernelSpec", "LaunchConfig", "MeasureSettings", "Module", "NoGpuError",
    "PackedArguments", "Placement", "PreparedLaunch", "RunOptions", "RunResult", "RunSettings", "Shape", "Spec",
    "SpecError", "Stream", "TimingSummary", "ToolMissingError", "UsageError", "VerifySettings", "__version__",
    "arch_limits", "cases_of", "check_kernel", "compare_runs", "compile_source", "compile_text", "device_count",
    "load_kernel", "load_results", "load_spec", "occupancy", "plan_case", "read_properties", "run_spec", "spec_from_dict",
]
__all__ += sorted(_COMMANDS_API)
