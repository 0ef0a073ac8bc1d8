"""check_kernel refuses, before any compile or GPU work, the fields a rig's tensors cannot honour (a batch over
one-matrix tensors, a sweep, scalars beside alpha=, a speed gate with no vendor row) and a reference that is not
the expected C; a stream given as NumPy's bool is refused as Python's is."""

from __future__ import annotations

import numpy as np
import pytest

import driver_gemm as dg
from driver_gemm.cuda.interop import stream_handle

from conftest import ROOT

M, N, K = 64, 48, 32


class _Operand:
    """A GPU array as the array interface describes one (no memory behind it: nothing is launched)."""

    def __init__(self, shape, address, typestr="<f4"):
        self.__cuda_array_interface__ = {"version": 3, "shape": shape, "typestr": typestr, "data": (address, False),
                                         "strides": None}


def _check(**changes):
    arguments = dict(source=ROOT / "kernels" / "02_smem_tiles.cu", function="sgemm_smem_tiles<16>",
                     a=_Operand((M, K), 0x7F0000000000), b=_Operand((K, N), 0x7F0001000000),
                     c=_Operand((M, N), 0x7F0002000000), grid=["ceil(N / 16)", "ceil(M / 16)"], block=[16, 16])
    arguments.update(changes)
    return dg.check_kernel(**arguments)


@pytest.mark.parametrize("changes, words", [
    # each tensor holds one matrix: a batch would read and write past them
    ({"batch": 8}, ["check_kernel: batch= is not taken", "A 64 x 32, B 32 x 48, C 64 x 48", "batch:"]),
    ({"batch": {"count": 8, "stride": {"a": M * K}}}, ["check_kernel: batch= is not taken"]),
    # a list sweeps in a spec; check_kernel returns one result
    ({"function": "sgemm_smem_tiles", "params": {"TILE": [16, 32]}},
     ["check_kernel: params: TILE is [16, 32], a sweep", "checks one configuration"]),
    ({"values": {"S": [8, 16]}}, ["check_kernel: values: S is [8, 16], a sweep"]),
    ({"values": [{"S": 8}, {"S": 16}]}, ["check_kernel: values= is a list of configurations"]),
    # a kernel's own scalars would win over alpha=
    ({"alpha": 2.0, "scalars": {"alpha": 3.0}}, ["check_kernel: scalars= is not taken", "alpha=, beta="]),
    # a gate needs the vendor row check_kernel does not run
    ({"min_pct": 90}, ["check_kernel: min_pct= is not taken", "vendor row"]),
])
def test_fields_the_rigs_tensors_cannot_honour_are_refused_before_anything_runs(changes, words):
    with pytest.raises(dg.ArgumentError) as info:
        _check(**changes)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("reference, words", [
    ("expected.npy", "check_kernel: reference: builtins.str is no device array"),
    (np.full((M, N), "a", dtype=object), "check_kernel: reference: holds object"),
    (np.ones((M, N), complex), "check_kernel: reference: holds complex128"),
    (np.zeros((M, N), "datetime64[s]"), "check_kernel: reference: holds datetime64"),
    (np.ones((M, N), bool), "check_kernel: reference: holds bool"),
    (np.ma.masked_all((M, N)), "check_kernel: reference: a masked array"),
    (np.ones((N, M)), "check_kernel: reference: has shape (48, 64): it must be the expected C, M x N = 64 x 48"),
    (np.ones((1, M, N)), "check_kernel: reference: has shape (1, 64, 48)"),
    (_Operand((N, M), 0x7F0003000000), "check_kernel: reference: has shape (48, 64)"),
])
def test_a_wrong_reference_is_refused_before_the_compile(reference, words, monkeypatch):
    from driver_gemm.runners import on_tensors

    def no_gpu_work(*args, **kwargs):
        raise AssertionError("check_kernel went on to the GPU with a wrong reference")

    monkeypatch.setattr(on_tensors, "read_properties", no_gpu_work)
    with pytest.raises(dg.ArgumentError) as info:
        _check(reference=reference)
    assert words in str(info.value)
    assert info.value.field == "reference"


class _ReachedTheGpu(Exception):
    pass


def test_a_right_host_reference_goes_on_to_the_gpu(monkeypatch):
    from driver_gemm.runners import on_tensors

    def reached(*args, **kwargs):
        raise _ReachedTheGpu

    monkeypatch.setattr(on_tensors, "read_properties", reached)
    with pytest.raises(_ReachedTheGpu):
        _check(reference=np.arange(M * N, dtype=np.float32).reshape(M, N))


@pytest.mark.parametrize("flag", [np.True_, np.False_, True])
def test_a_bool_of_numpy_is_no_stream_handle(flag):
    with pytest.raises(dg.ArgumentError, match="a stream is a stream object or its handle"):
        stream_handle(flag)
    with pytest.raises(dg.ArgumentError, match="Placement: stream"):
        dg.Placement(stream=flag)
