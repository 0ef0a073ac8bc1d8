"""compile_source and compile_text take their instances and options as any iterable, a generator included (read
once), and refuse an option that sets the target architecture, which is their `arch` argument."""

from __future__ import annotations

import pytest

import driver_gemm as dg
from driver_gemm.errors import WrongArgumentValue

from conftest import ROOT

SOURCE = ROOT / "kernels" / "02_smem_tiles.cu"
INSTANCE = "sgemm_smem_tiles<32>"


def test_a_generator_of_instances_compiles_each_of_them():
    cubin = dg.compile_source(SOURCE, (name for name in [INSTANCE]), "sm_90", use_cache=False)
    assert list(cubin.lowered_names) == [INSTANCE]
    cubin = dg.compile_source(SOURCE, iter([INSTANCE]), "sm_90", use_cache=False)
    assert list(cubin.lowered_names) == [INSTANCE]


def test_a_generator_of_options_passes_every_option_on():
    cubin = dg.compile_source(SOURCE, [INSTANCE], "sm_90", (option for option in ["-DTHE_OPTION=1"]),
                              use_cache=False)
    assert "-DTHE_OPTION=1" in cubin.options


@pytest.mark.parametrize("options", [["-arch=sm_80"], ["--gpu-architecture=sm_86"], ["-arch", "sm_80"],
                                     ["--gpu-architecture", "compute_80"], ["-code=sm_80"], "-DX=1 -arch=sm_80"])
@pytest.mark.parametrize("function", ["compile_source", "compile_text"])
def test_an_option_that_sets_the_target_is_refused_naming_arch(options, function):
    with pytest.raises(WrongArgumentValue) as info:
        if function == "compile_source":
            dg.compile_source(SOURCE, [INSTANCE], "sm_90", options, use_cache=False)
        else:
            dg.compile_text(SOURCE.read_text(), "k.cu", [INSTANCE], "sm_90", options, use_cache=False)
    message = str(info.value)
    assert message.startswith(f"{function}: extra_options[")
    assert "sets the target architecture, which is the arch= argument" in message
