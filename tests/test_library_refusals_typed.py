"""Refusals of the library's functions are DriverGemmErrors naming the function and the argument, and settings built
by hand are held to the spec reader's bounds."""

from __future__ import annotations

import numpy as np
import pytest

import driver_gemm as dg
from driver_gemm.cuda.launch import PackedArguments
from driver_gemm.cuda.occupancy import arch_limits, occupancy
from driver_gemm.errors import DriverGemmError, WrongArgumentType, WrongArgumentValue

from conftest import ROOT

SOURCE = ROOT / "kernels" / "02_smem_tiles.cu"


@pytest.mark.parametrize("call, error, words", [
    (lambda: occupancy(arch_limits("sm_90"), -1, 32), WrongArgumentValue, "occupancy: threads_per_block is at least 0"),
    (lambda: dg.compile_source(SOURCE, [["k"]], "sm_90"), WrongArgumentType, "compile_source: instances are"),
    (lambda: dg.compile_source(SOURCE, ["k"], None), WrongArgumentType, "compile_source: arch is a GPU architecture"),
    (lambda: dg.compile_source(SOURCE, np.array(3), "sm_90"), WrongArgumentType, "compile_source: instances are"),
    (lambda: dg.compile_text("x", "k.cu", ["k"], "sm_90", np.array(3)), WrongArgumentType,
     "compile_text: extra_options: compiler options are a list"),
    (lambda: PackedArguments(3, [1]), WrongArgumentType, "PackedArguments: ctypes_ is a list"),
    (lambda: PackedArguments([["int32"]], [1]), WrongArgumentType, "PackedArguments: ctypes_ are C type names"),
    (lambda: dg.load_spec(ROOT / "specs" / "seed.yaml").select(np.array(3)), WrongArgumentType,
     "Spec.select: kernels: a kernel's name or a list of names"),
    (lambda: dg.MeasureSettings(max_noise=2**70), WrongArgumentValue,
     "MeasureSettings.max_noise: 1180591620717411303424 does not fit a 64-bit integer"),
])
def test_refusals_are_driver_gemm_errors_naming_the_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, DriverGemmError)
    assert words in str(info.value)


def test_numpy_floats_in_settings_become_plain_floats():
    settings = dg.MeasureSettings(max_noise=np.float64(0.01))
    assert type(settings.max_noise) is float


def test_winners_spec_refuses_a_compressed_name_as_a_driver_gemm_error(tmp_path):
    with pytest.raises(WrongArgumentValue, match="winners_spec: .*a .gz name is for a compressed file"):
        dg.winners_spec(dg.load_spec(ROOT / "specs" / "seed.yaml"), [], tmp_path / "winners.yaml.gz")
