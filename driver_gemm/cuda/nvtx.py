"""NVTX ranges around each case and its phases, so a run reads clearly in Nsight Systems.

Uses the `nvtx` package when it is installed (``pip install driver-gemm[nvtx]``);
without it every range is free.
"""

from __future__ import annotations

import contextlib

try:
    # nvtx: optional
    import nvtx as _nvtx
except ImportError:   # optional: ranges cost nothing without it
    _nvtx = None

DOMAIN = "driver-gemm"


def enabled() -> bool:
    return _nvtx is not None


def annotate(message: str, color: str = "green"):
    """A context manager marking `message` on the timeline (a no-op without the nvtx package)."""
    if _nvtx is None:
        return contextlib.nullcontext()
    return _nvtx.annotate(message, color=color, domain=DOMAIN)
