"""What a kernel's output is checked against: alpha * A @ B + beta * C0 in float64.

Computed on the CPU with NumPy, or, for shapes whose float64 product would take
the CPU too long (above ``verify.cpu_reference_max_gflop``), from cuBLAS's
float32 product on the same inputs, which the verdict then names.
"""

from __future__ import annotations

import numpy as np

from ..gemm import dtypes
from ..specfile.model import Shape, VerifySettings
from .inputs import Inputs

CPU_REFERENCE = "numpy-float64"
CUBLAS_REFERENCE = "cublas"


def cpu_reference(inputs: Inputs, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
    """alpha * A @ B + beta * C0 in float64 on the CPU."""
    product = inputs.A.astype(np.float64) @ inputs.B.astype(np.float64)
    if alpha != 1.0:
        product *= alpha
    if beta != 0.0 and inputs.C0 is not None:
        product += beta * inputs.C0.astype(np.float64)
    return product


def uses_cpu_reference(settings: VerifySettings, shape: Shape, have_cublas: bool) -> bool:
    """Whether `shape` is checked against the CPU's float64 product (else against cuBLAS's)."""
    if settings.reference == "cpu" or not have_cublas:
        return True
    if settings.reference == "cublas":
        return False
    return shape.flops <= settings.cpu_reference_max_gflop * 1e9


def scaled_product(product: np.ndarray, inputs: Inputs, alpha: float, beta: float) -> np.ndarray:
    """alpha * `product` + beta * C0 in float64, from a float32 product computed elsewhere (cuBLAS)."""
    expected = product.astype(np.float64)
    if alpha != 1.0:
        expected *= alpha
    if beta and inputs.C0 is not None:
        expected += beta * inputs.C0.astype(np.float64)
    return expected


# The relative Frobenius error an untyped fp32 kernel is allowed where the spec sets none: 1e-5, or fp32's own
# bound for a K so long that the accumulation's rounding alone may reach that (K above about a thousand).
UNTYPED_TOLERANCE = 1e-5
FP32_TYPES = dtypes.parse_types({"a": "fp32"})


def tolerance(settings: VerifySettings, precision: str, K: int) -> float:
    """The relative Frobenius tolerance for an untyped kernel of `precision` with inner size `K`: TF32, whose
    inputs are rounded, gets ``verify.tf32_tolerance``; fp32 the spec's ``verify.tolerance``, else
    `UNTYPED_TOLERANCE` or fp32's own bound for this K (`dtypes.error_bound`), whichever is larger."""
    if precision == "tf32":
        return settings.tf32_rel_tolerance
    if settings.rel_tolerance is not None:
        return settings.rel_tolerance
    return max(UNTYPED_TOLERANCE, dtypes.error_bound(FP32_TYPES, K))

