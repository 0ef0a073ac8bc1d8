"""Where and when a run happened: GPU, driver, NVRTC and package versions, host, and UTC timestamps."""

from __future__ import annotations

import datetime as _dt
import platform
from importlib import metadata

import numpy as np

from ..version import __version__
from ..cuda.compile import nvrtc_version, nvrtc_warning


def _package_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment(props=None) -> dict:
    """Where a run happened: GPU (from `props`, a `DeviceProperties`), driver, NVRTC and package versions, host."""
    out = {
        "driver_gemm": __version__,
        "nvrtc_version": ".".join(map(str, nvrtc_version())),
        "cuda_bindings": _package_version("cuda-bindings"),
        "nvmath_python": _package_version("nvmath-python"),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
    }
    warning = nvrtc_warning()
    if warning:
        out["nvrtc_warning"] = warning
    if props is not None:
        out["device"] = props.as_dict()
        out["driver_version"] = props.driver_version
    return out


def now() -> str:
    """The current time in UTC, to the second, as ISO 8601: when a run started or finished."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
