"""``driver-gemm info``: each GPU's limits (what bounds a launch's configuration and occupancy), and which of
NVRTC's architectures ``plan --arch`` has tables for, said without a driver too."""

from __future__ import annotations

import pytest

from driver_gemm.cli import EXIT_NO_GPU, EXIT_OK, main
from driver_gemm.cuda import compile as nvrtc_compile, device
from driver_gemm.cuda.device import DeviceProperties
from driver_gemm.cuda.occupancy import known_arches

KB = 1024
NO_DRIVER = __import__("conftest")._gpu_missing_reason() is not None


def _h200(cc=(9, 0), name="NVIDIA H200") -> DeviceProperties:
    return DeviceProperties(
        ordinal=0, name=name, uuid="GPU-0", compute_capability=cc, sm_count=132, clock_khz=1_980_000,
        memory_clock_khz=2_619_000, memory_bus_bits=6144, total_memory_bytes=141 << 30, l2_bytes=60 << 20,
        warp_size=32, max_threads_per_block=1024, max_block_dims=(1024, 1024, 64),
        max_grid_dims=(2**31 - 1, 65535, 65535), max_shared_per_block=48 * KB, max_shared_per_block_optin=227 * KB,
        shared_per_sm=228 * KB, reserved_shared_per_block=KB, registers_per_block=65536, registers_per_sm=65536,
        max_threads_per_sm=2048, max_blocks_per_sm=32, driver_version=13000)


@pytest.fixture
def one_gpu(monkeypatch):
    def use(props: DeviceProperties):
        monkeypatch.setattr(device, "device_count", lambda: 1)
        monkeypatch.setattr(device, "read_properties", lambda ordinal: props)
    return use


def test_each_gpu_is_shown_with_the_limits_a_launch_configuration_meets(one_gpu, capsys):
    one_gpu(_h200())
    assert main(["info"]) == EXIT_OK
    out = capsys.readouterr().out
    gpu_line = next(line for line in out.splitlines() if line.startswith("GPU 0: NVIDIA H200"))
    limits = out.splitlines()[out.splitlines().index(gpu_line) + 1]
    for said in ("2,048 threads", "64 warps", "32 blocks", "registers 65,536 an SM", "65,536 a block",
                 "255 a thread", "228 KiB an SM", "48 KiB a block", "227 KiB with the opt-in", "1 KiB reserved",
                 "clusters of up to 8 blocks", "driver + sm_90 table"):
        assert said in limits, (said, limits)


def test_a_gpu_with_no_table_says_what_was_borrowed(one_gpu, capsys):
    one_gpu(_h200(cc=(11, 0), name="a newer GPU"))
    assert main(["info"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "sm_110" in out and "has no table" in out, out


def test_the_nvrtc_line_names_the_architectures_plan_has_no_table_for(monkeypatch, one_gpu, capsys):
    monkeypatch.setattr(nvrtc_compile, "supported_archs", lambda: (80, 88, 90, 110))
    one_gpu(_h200())
    main(["info"])
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("NVRTC") and "sm_80, sm_88, sm_90, sm_110" in line
    assert "plan --arch has a table for each but sm_88, sm_110" in line, line
    assert set(known_arches()) >= {"sm_80", "sm_90"} and not {"sm_88", "sm_110"} & set(known_arches())


@pytest.mark.skipif(not NO_DRIVER, reason="checks the behaviour on a machine with no CUDA driver")
def test_without_a_driver_info_still_says_which_architectures_plan_can_take(capsys):
    assert main(["info"]) == EXIT_NO_GPU
    out, err = capsys.readouterr()
    untabled = [f"sm_{arch}" for arch in nvrtc_compile.supported_archs() if f"sm_{arch}" not in known_arches()]
    assert out.startswith("NVRTC") and "no CUDA driver" in err
    assert ("plan --arch has a table for each" in out) and all(name in out.split("but")[-1] for name in untabled)
