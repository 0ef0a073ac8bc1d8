"""Every architecture: hand-computed occupancy per table, limits from any device, and unknown names refused."""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from driver_gemm.cuda.device import DeviceProperties
from driver_gemm.cuda.occupancy import FP32_LANES_PER_SM
from driver_gemm.cuda.occupancy import (
    ARCHES, arch_limits, limits_from_device, nearest_known_arch, occupancy, parse_arch,
)
from driver_gemm.errors import ConfigError

KB = 1024


# Each row: arch, threads, registers per thread, static and dynamic shared bytes -> blocks per SM, limiters,
# carve-out (KB). The working is the occupancy calculator's: registers per warp = 32 x regs rounded up to 256,
# a quarter of the 65536 registers (16384) per sub-partition; shared memory per block = static + dynamic + the
# reserve (0 before 8.x, 1 KB from 8.x) rounded up to the unit (256 B before 8.x, 128 B from 8.x).
HAND_COMPUTED = [
    # sm_70: 64 regs -> 2048 per warp; 16384 / 2048 = 8 warps per quarter = 32 warps = 4 blocks of 8 (warps allow 8)
    ("sm_70", 256, 64, 0, 0, 4, ("registers",), 0),
    # sm_70: 20000 B -> 20224 (79 x 256); 98304 // 20224 = 4; 4 x 20224 B = 79 KB -> the 96 KB carve-out
    ("sm_70", 128, 32, 20000, 0, 4, ("shared memory",), 96),
    # sm_72: 32 regs -> 1024 per warp, 16 per quarter = 64 warps = 2 blocks of 32, and 64 warps / 32 = 2
    ("sm_72", 1024, 32, 0, 0, 2, ("warps", "registers"), 0),
    # sm_75: 32 warps per SM: 4 blocks of 8; registers (2048 per warp) allow 32 warps too; smallest carve-out 32 KB
    ("sm_75", 256, 64, 0, 0, 4, ("warps", "registers"), 32),
    # sm_75: one-warp blocks stop at 16 per SM (32 warps would allow 32)
    ("sm_75", 32, 16, 0, 0, 16, ("blocks",), 32),
    # sm_75: 1024 threads x 64 regs = 65536 registers: exactly one block, which is also all 32 warps
    ("sm_75", 1024, 64, 0, 0, 1, ("warps", "registers"), 32),
    # sm_80: 4 blocks by registers as on sm_70; 4 x 1 KB reserve -> the 8 KB carve-out
    ("sm_80", 256, 64, 0, 0, 4, ("registers",), 8),
    # sm_80: 48 KB + 1 KB = 50176 B; 167936 // 50176 = 3; 3 x 49 KB = 147 KB -> 164 KB carve-out
    ("sm_80", 128, 32, 0, 48 * KB, 3, ("shared memory",), 164),
    # sm_80: 255 regs -> 8160 -> 8192 per warp; 2 warps per quarter = 8 warps = one block of 8
    ("sm_80", 256, 255, 0, 0, 1, ("registers",), 8),
    # sm_86: registers allow 4 blocks of 8 warps (32 warps), warps 48 / 8 = 6
    ("sm_86", 256, 64, 0, 0, 4, ("registers",), 8),
    # sm_86: 48 warps / 4 = 12 blocks (registers allow 16); 12 x 1 KB -> 16 KB carve-out
    ("sm_86", 128, 32, 0, 0, 12, ("warps",), 16),
    # sm_86: 48 warps / 2 = 24, but 16 blocks per SM at most
    ("sm_86", 64, 32, 0, 0, 16, ("blocks",), 16),
    # sm_87: 64 KB + 1 KB = 66560 B; 167936 // 66560 = 2; 130 KB -> 132 KB carve-out
    ("sm_87", 128, 32, 0, 64 * KB, 2, ("shared memory",), 132),
    # sm_87: 48 warps / 8 = 6 blocks (registers allow 8)
    ("sm_87", 256, 32, 0, 0, 6, ("warps",), 8),
    # sm_89: 40 regs -> 1280 per warp; 12 per quarter = 48 warps = 4 blocks of 12, and 48 / 12 = 4
    ("sm_89", 384, 40, 0, 0, 4, ("warps", "registers"), 8),
    # sm_90: 168 regs -> 5376 per warp; 3 per quarter = 12 warps = one block of 12
    ("sm_90", 384, 168, 0, 0, 1, ("registers",), 8),
    # sm_100: 128 regs -> 4096; 4 per quarter = 16 warps = 2 blocks of 8; 100 KB + 1 KB = 103424 B,
    # 233472 // 103424 = 2 as well; 202 KB -> the 228 KB carve-out
    ("sm_100", 256, 128, 0, 100 * KB, 2, ("registers", "shared memory"), 228),
    # sm_100: 1024 x 64 regs: registers allow 32 warps = 1 block (warps would allow 2)
    ("sm_100", 1024, 64, 0, 0, 1, ("registers",), 8),
    # sm_103: 40 regs -> 48 warps = 12 blocks of 4; 16 KB + 1 KB = 17408 B: 13 would fit; 12 x 17 KB -> 228
    ("sm_103", 128, 40, 16 * KB, 0, 12, ("registers",), 228),
    # sm_120: registers allow 4 blocks of 8 warps (32 of the 48)
    ("sm_120", 256, 64, 0, 0, 4, ("registers",), 8),
    # sm_120: 48 warps / 2 = 24 = the block limit; 24 x 1 KB -> 32 KB carve-out
    ("sm_120", 64, 32, 0, 0, 24, ("warps", "blocks"), 32),
    # sm_120: 99 KB + 1 KB = 100 KB: exactly one block fills the SM
    ("sm_120", 128, 32, 0, 99 * KB, 1, ("shared memory",), 100),
    # sm_121: registers allow 64 warps = 4 blocks of 16, warps 48 / 16 = 3
    ("sm_121", 512, 32, 0, 0, 3, ("warps",), 8),
]


@pytest.mark.parametrize("arch, threads, regs, static, dynamic, blocks, limited_by, carveout", HAND_COMPUTED)
def test_hand_computed_occupancy_per_architecture(arch, threads, regs, static, dynamic, blocks, limited_by,
                                                  carveout):
    limits = arch_limits(arch)
    result = occupancy(limits, threads, regs, static, dynamic)
    assert (result.blocks_per_sm, result.limited_by, result.shared_carveout_kb) == (blocks, limited_by, carveout)
    assert result.occupancy == pytest.approx(blocks * -(-threads // 32) / limits.max_warps_per_sm)


def test_every_architecture_asked_for_has_a_table_and_hand_computed_cases():
    wanted = {"sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100", "sm_103",
              "sm_120", "sm_121"}
    assert wanted <= set(ARCHES)
    assert {row[0] for row in HAND_COMPUTED} == set(ARCHES)


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_tables_are_consistent(arch):
    limits = ARCHES[arch]
    assert limits.arch == arch and limits.max_warps_per_sm * limits.warp_size == limits.max_threads_per_sm
    assert limits.shared_carveouts_kb[-1] * KB == limits.shared_per_sm
    assert list(limits.shared_carveouts_kb) == sorted(limits.shared_carveouts_kb)
    assert limits.max_shared_per_block + limits.reserved_shared_per_block <= limits.shared_per_sm
    assert limits.default_shared_per_block == 48 * KB <= limits.max_shared_per_block
    assert limits.typical_sm_count > 0 and limits.typical_part
    # The FP32 peak (% of FP32 peak in every table) needs the lanes per SM, here and in the device's table.
    assert limits.fp32_lanes_per_sm in (64, 128)
    assert FP32_LANES_PER_SM.get(parse_arch(arch)) == limits.fp32_lanes_per_sm


def test_the_same_register_file_allows_more_blocks_where_it_has_more_warps():
    # 128 threads x 32 regs: registers allow 16 blocks everywhere; warps cap sm_75 (32 warps) at 8,
    # sm_86 (48) at 12, sm_90 (64) at 16.
    blocks = {arch: occupancy(arch_limits(arch), 128, 32).blocks_per_sm for arch in ("sm_75", "sm_86", "sm_90")}
    assert blocks == {"sm_75": 8, "sm_86": 12, "sm_90": 16}


def test_a_block_whose_warps_cannot_share_the_sub_partitions_is_refused_with_the_hardware_count():
    # 800 threads = 25 warps x 2560 registers = 64000 fits 65536, but the hardware counts 28 warps: 71680.
    result = occupancy(arch_limits("sm_89"), 800, 80)
    assert result.blocks_per_sm == 0
    assert "71680 registers per block" in result.reason and "25 warps allocated as 28" in result.reason


@pytest.mark.parametrize("name", ["sm_999", "sm_50", "sm_110"])
def test_an_architecture_without_a_table_is_a_config_error_naming_the_known_ones(name):
    with pytest.raises(ConfigError) as caught:
        arch_limits(name)
    error = caught.value
    assert error.field == "--arch" and f"no architecture table for {name}" in str(error)
    assert "sm_70" in str(error) and "sm_121" in str(error)
    assert not isinstance(error, KeyError)


@pytest.mark.parametrize("name", ["bogus", "", "sm_", "sm_9x", "gfx90a"])
def test_a_name_that_is_no_architecture_is_a_config_error(name):
    with pytest.raises(ConfigError, match="not a GPU architecture") as caught:
        arch_limits(name)
    assert caught.value.field == "--arch" and "sm_90" in str(caught.value)


@pytest.mark.parametrize("name, expected", [
    ("sm_90", (9, 0)), ("sm_90a", (9, 0)), ("sm_100f", (10, 0)), ("sm_121", (12, 1)), ("compute_75", (7, 5)),
    ("SM_86", (8, 6)), ("89", (8, 9)),
])
def test_parse_arch(name, expected):
    assert parse_arch(name) == expected


def test_suffixed_names_use_their_base_table():
    assert arch_limits("sm_90a") is ARCHES["sm_90"] and arch_limits("sm_100f") is ARCHES["sm_100"]
    assert arch_limits("sm_103a") is ARCHES["sm_103"] and arch_limits("sm_120a") is ARCHES["sm_120"]


@pytest.mark.parametrize("cc, expected", [
    ((9, 0), "sm_90"), ((10, 1), "sm_100"), ((10, 7), "sm_103"), ((12, 2), "sm_121"), ((8, 8), "sm_87"),
    ((11, 0), None), ((13, 0), None), ((6, 1), None),
])
def test_nearest_known_arch(cc, expected):
    assert nearest_known_arch(cc) == expected


def device(cc, *, threads=2048, blocks=32, shared_per_sm=228 * KB, optin=227 * KB, reserved=KB, sms=132,
           name="GPU") -> DeviceProperties:
    """What `read_properties` would return for a GPU with these figures."""
    return DeviceProperties(
        ordinal=0, name=name, uuid="GPU-0", compute_capability=cc, sm_count=sms, clock_khz=1_900_000,
        memory_clock_khz=2_000_000, memory_bus_bits=4096, total_memory_bytes=80 << 30, l2_bytes=50 << 20,
        warp_size=32, max_threads_per_block=1024, max_block_dims=(1024, 1024, 64),
        max_grid_dims=(2**31 - 1, 65535, 65535), max_shared_per_block=48 * KB, max_shared_per_block_optin=optin,
        shared_per_sm=shared_per_sm, reserved_shared_per_block=reserved, registers_per_block=65536,
        registers_per_sm=65536, max_threads_per_sm=threads, max_blocks_per_sm=blocks, driver_version=13000)


# What the driver reports on parts of each kind (its figures equal the Programming Guide's).
DEVICES = {
    "V100": device((7, 0), shared_per_sm=96 * KB, optin=96 * KB, reserved=0, sms=80),
    "T4": device((7, 5), threads=1024, blocks=16, shared_per_sm=64 * KB, optin=64 * KB, reserved=0, sms=40),
    "A100": device((8, 0), shared_per_sm=164 * KB, optin=163 * KB, sms=108),
    "RTX 4090": device((8, 9), threads=1536, blocks=24, shared_per_sm=100 * KB, optin=99 * KB, sms=128),
    "H200": device((9, 0), sms=132),
    "B200": device((10, 0), sms=148),
    "RTX 5090": device((12, 0), threads=1536, blocks=24, shared_per_sm=100 * KB, optin=99 * KB, sms=170),
}


@pytest.mark.parametrize("part", sorted(DEVICES))
def test_limits_from_a_known_device_equal_its_table_but_for_the_part(part):
    props = DEVICES[part]
    limits = limits_from_device(props)
    table = ARCHES[props.arch]
    assert limits.source == f"driver + {props.arch} table" and limits.notes == ()
    assert dataclasses.replace(limits, typical_sm_count=table.typical_sm_count, typical_part=table.typical_part,
                               source=table.source) == table
    assert limits.typical_sm_count == props.sm_count and limits.typical_part == props.name


def test_the_driver_figures_win_over_the_table():
    # A cut-down part: fewer blocks and less shared memory than its architecture's table says.
    props = device((9, 0), blocks=16, shared_per_sm=132 * KB, optin=131 * KB, name="smaller Hopper")
    limits = limits_from_device(props)
    assert limits.max_blocks_per_sm == 16 and limits.shared_per_sm == 132 * KB
    assert limits.max_shared_per_block == 131 * KB and limits.shared_carveouts_kb == (0, 8, 16, 32, 64, 100, 132)
    assert occupancy(limits, 32, 16).blocks_per_sm == 16


def test_an_unknown_minor_borrows_the_nearest_older_table_of_its_major_and_says_so():
    limits = limits_from_device(device((10, 7), sms=160, name="future Blackwell"))
    assert limits.arch == "sm_107" and limits.source == "driver + sm_103 table"
    assert len(limits.notes) == 1 and "sm_103" in limits.notes[0] and "sm_107 has no table" in limits.notes[0]
    assert limits.fp32_lanes_per_sm == 128 and limits.register_unit == 256 and limits.shared_unit == 128
    assert occupancy(limits, 256, 64).blocks_per_sm == 4


def test_an_unknown_major_gets_conservative_defaults_and_says_so():
    limits = limits_from_device(device((11, 0), threads=1536, blocks=24, name="Thor"))
    assert limits.source == "driver + defaults" and "sm_110 has no table" in limits.notes[0]
    assert limits.max_warps_per_sm == 48 and limits.max_blocks_per_sm == 24
    assert limits.shared_unit == 256 and limits.register_unit == 256 and limits.sub_partitions == 4
    assert limits.shared_carveouts_kb == (228,)
    # FP32 lanes come from the one lanes table, as DeviceProperties takes them: one peak for one GPU
    assert limits.fp32_lanes_per_sm == 128 and "FP32 peak is unknown" not in limits.notes[0]
    # 256 threads x 64 regs: 4 blocks by registers; 20000 B -> 20224 per block with the 256-byte unit
    assert occupancy(limits, 256, 64).blocks_per_sm == 4
    # 20000 B + the 1 KB reserve the driver reports = 21024 B -> 21248 (83 x 256)
    assert occupancy(limits, 128, 32, 20000).shared_per_block == 21248


def test_an_architecture_in_no_table_has_an_unknown_fp32_peak_and_says_so():
    limits = limits_from_device(device((13, 0), threads=1536, blocks=24, name="future"))
    assert limits.fp32_lanes_per_sm == 0 and "FP32 peak is unknown" in limits.notes[0]


def test_every_device_plans_the_seed_spec():
    from driver_gemm.planning.case_plan import plan_case
    from driver_gemm.specfile import load_spec

    spec = load_spec(Path(__file__).resolve().parent.parent / "specs" / "seed.yaml")
    for props in [*DEVICES.values(), device((10, 7)), device((11, 0), threads=1536, blocks=24),
                  device((13, 0), threads=1536, blocks=24)]:
        limits = limits_from_device(props)
        for kernel in spec.kernels:
            for shape in spec.shapes:
                plan = plan_case(kernel, shape, limits)
                assert plan.valid, (props.arch, kernel.label, [str(p) for p in plan.problems])


# --- agreement with the CUDA occupancy calculator itself, where a CUDA toolkit's header is on this machine ----

_HARNESS = r"""
#include <cuda_occupancy.h>
extern "C" int blocks_per_sm(int major, int minor, int threads_per_sm, int regs_per_sm,
                             long shared_per_block, long shared_per_sm, long optin, long reserved,
                             int block, int regs, long static_shared, long dynamic_shared) {
    cudaOccDeviceProp props;
    props.computeMajor = major; props.computeMinor = minor; props.maxThreadsPerBlock = 1024;
    props.maxThreadsPerMultiprocessor = threads_per_sm; props.regsPerBlock = 65536;
    props.regsPerMultiprocessor = regs_per_sm; props.warpSize = 32; props.sharedMemPerBlock = shared_per_block;
    props.sharedMemPerMultiprocessor = shared_per_sm; props.numSms = 1; props.sharedMemPerBlockOptin = optin;
    props.reservedSharedMemPerBlock = reserved;
    cudaOccFuncAttributes attributes;
    attributes.maxThreadsPerBlock = 1024; attributes.numRegs = regs; attributes.sharedSizeBytes = static_shared;
    attributes.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN; attributes.maxDynamicSharedSizeBytes = optin - static_shared;
    attributes.numBlockBarriers = 1;
    cudaOccDeviceState state;
    cudaOccResult result;
    if (cudaOccMaxActiveBlocksPerMultiprocessor(&result, &props, &attributes, &state, block, dynamic_shared)
        != CUDA_OCC_SUCCESS) return -1;
    return result.activeBlocksPerMultiprocessor;
}
"""


def _occupancy_header() -> Path | None:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda",
             *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    for root in filter(None, roots):
        header = Path(root) / "include" / "cuda_occupancy.h"
        if header.is_file():
            return header
    return None


@pytest.fixture(scope="module")
def calculator(tmp_path_factory):
    header, compiler = _occupancy_header(), shutil.which("g++")
    if header is None or compiler is None:
        pytest.skip("needs a CUDA toolkit's cuda_occupancy.h and g++ to compare with the occupancy calculator")
    folder = tmp_path_factory.mktemp("occupancy-calculator")
    (folder / "harness.cpp").write_text(_HARNESS)
    library = folder / "harness.so"
    subprocess.run([compiler, "-O1", "-shared", "-fPIC", f"-I{header.parent}", "-o", str(library),
                    str(folder / "harness.cpp")], check=True, capture_output=True)
    function = ctypes.CDLL(str(library)).blocks_per_sm
    function.argtypes = [ctypes.c_int] * 4 + [ctypes.c_long] * 4 + [ctypes.c_int] * 2 + [ctypes.c_long] * 2
    function.restype = ctypes.c_int
    return function


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_agrees_with_the_cuda_occupancy_calculator(calculator, arch):
    limits = ARCHES[arch]
    major, minor = parse_arch(arch)
    checked = 0
    for threads in (32, 64, 96, 128, 160, 192, 256, 384, 512, 640, 768, 1024):
        for regs in (16, 24, 32, 40, 48, 64, 72, 96, 128, 168, 200, 255):
            # 10879 = 85 x 128 - 1: 10880 bytes in 128-byte units, 11008 in 256-byte units
            for static, dynamic in ((0, 0), (4000, 0), (0, 10879), (0, 20000), (1000, 30000), (8 * KB, 40 * KB),
                                    (0, 64 * KB), (0, limits.max_shared_per_block)):
                if static + dynamic > limits.max_shared_per_block:
                    continue
                expected = calculator(major, minor, limits.max_threads_per_sm,
                                      limits.registers_per_sm, limits.default_shared_per_block,
                                      limits.shared_per_sm, limits.max_shared_per_block,
                                      limits.reserved_shared_per_block, threads, regs, static, dynamic)
                assert expected >= 0, (arch, "the calculator does not know this architecture")
                ours = occupancy(limits, threads, regs, static, dynamic).blocks_per_sm
                assert ours == expected, (arch, threads, regs, static, dynamic)
                checked += 1
    assert checked > 500


# --- on a GPU: the driver's own occupancy answer for a loaded kernel ----------------------------------------

PROBE = r"""
template <int LIVE>
__global__ void occupancy_probe(float* out, const float* in, int n) {
    __shared__ float tile[1000];
    extern __shared__ float dynamic_tile[];
    float live[LIVE];
#pragma unroll
    for (int j = 0; j < LIVE; ++j) live[j] = in[(threadIdx.x + 33 * j) % n];
    tile[threadIdx.x % 1000] = live[0];
    dynamic_tile[threadIdx.x % 32] = live[LIVE - 1];
    __syncthreads();
    float sum = tile[(threadIdx.x + 1) % 1000] + dynamic_tile[(threadIdx.x + 1) % 32];
#pragma unroll
    for (int j = 0; j < LIVE; ++j) sum = sum * live[j] + live[(7 * j + 3) % LIVE];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
"""
# Never launched, only asked about. On sm_90 NVRTC gives these instances 26, 56, 128 and 254 registers.
PROBE_INSTANCES = ("occupancy_probe<8>", "occupancy_probe<40>", "occupancy_probe<100>", "occupancy_probe<180>")


@pytest.mark.gpu
def test_limits_from_this_device_agree_with_its_driver():
    from driver_gemm.cuda.device import Device
    from driver_gemm.cuda.module import load_kernel

    with Device(0) as gpu:
        limits = limits_from_device(gpu.properties)
        assert limits.source.startswith("driver")
        if gpu.properties.arch in ARCHES:      # the table of a known architecture is what its driver reports
            table = ARCHES[gpu.properties.arch]
            for name in ("max_threads_per_sm", "max_warps_per_sm", "max_blocks_per_sm", "registers_per_sm",
                         "registers_per_block", "shared_per_sm", "max_shared_per_block",
                         "reserved_shared_per_block"):
                assert getattr(limits, name) == getattr(table, name), name
        for instance in PROBE_INSTANCES:
            kernel = load_kernel(gpu, PROBE, instance)
            static = kernel.attributes.static_shared_bytes
            largest_dynamic = limits.max_shared_per_block - static
            kernel.allow_dynamic_shared(largest_dynamic)
            for threads in range(32, 1025, 32):
                for dynamic in (0, 10879, 40000, largest_dynamic):
                    ours = occupancy(limits, threads, kernel.attributes.registers, static, dynamic).blocks_per_sm
                    theirs = kernel.max_active_blocks_per_sm(threads, dynamic)
                    assert ours == theirs, (gpu.properties.arch, instance, threads, kernel.attributes.registers, dynamic)
