"""check_kernel refuses a rig's reference= beside elementwise= or beside values it draws (a bias, block scales)
before the GPU is opened and the kernel compiled: on a machine with no driver the refusal, not the missing driver,
is what the rig is told. No GPU."""

from __future__ import annotations

import numpy as np
import pytest

import driver_gemm as dg
from driver_gemm.errors import ArgumentError

from conftest import ROOT

M, N, K = 64, 64, 32


class DeviceArray:
    """An fp32 matrix as a GPU array library describes it (never read: nothing is launched)."""

    def __init__(self, rows: int, cols: int, address: int):
        self.__cuda_array_interface__ = {"shape": (rows, cols), "typestr": "<f4", "data": (address, False),
                                         "version": 3, "strides": None}


OPERANDS = (DeviceArray(M, K, 0x7F0000000000), DeviceArray(K, N, 0x7F0000100000), DeviceArray(M, N, 0x7F0000200000))
BIAS = {"name": "bias", "type": "buffer", "element": "fp32", "size": "N", "bias": "N"}


@pytest.mark.parametrize("fields, needle", [
    ({"elementwise": ["relu"]}, "elementwise= says which functions"),
    ({"signature": ["A", "B", BIAS, "C", "M", "N", "K"]}, "cannot know the values check_kernel draws"),
])
def test_a_reference_beside_what_check_kernel_applies_is_refused_before_the_gpu(fields, needle):
    with pytest.raises(ArgumentError, match=needle) as raised:
        dg.check_kernel(ROOT / "kernels/02_smem_tiles.cu", "sgemm_smem_tiles<16>", *OPERANDS,
                        grid=["ceil(N / 16)", "ceil(M / 16)"], block=[16, 16], reference=np.zeros((M, N)), **fields)
    assert raised.value.field == "reference"
