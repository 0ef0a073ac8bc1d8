import dataclasses

import pytest

from driver_gemm.cuda.resources import KernelResources
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile.model import Shape
from driver_gemm.errors import SpecError
from driver_gemm.specfile import load_spec

from conftest import SPECS
from test_spec import MINIMAL, write

SM90 = arch_limits("sm_90")


def kernel_from(tmp_path, replace=(), extra=""):
    text = MINIMAL
    for old, new in replace:
        assert old in text
        text = text.replace(old, new)
    return load_spec(write(tmp_path, text + extra)).kernels[0]


def problems(plan):
    return [str(p) for p in plan.problems]


def test_seed_v4_plan(tmp_path):
    kernel = kernel_from(tmp_path, extra="    tile: [BM, BN]\n")
    resources = KernelResources(registers=48, barriers=1, static_shared_bytes=8192)
    plan = plan_case(kernel, Shape(1001, 513, 777), SM90, resources)
    assert plan.valid and plan.config.grid == (9, 16, 1) and plan.config.block == (16, 16, 1)
    assert plan.occupancy.blocks_per_sm == 5 and plan.waves == pytest.approx(144 / (5 * 132))
    assert plan.argument_values == {"A": "A", "B": "B", "C": "C", "M": 1001, "N": 513, "K": 777}


def test_too_many_threads(tmp_path):
    kernel = kernel_from(tmp_path, [("block: [BN / TN, BM / TM]", "block: [BN, BM]")])
    plan = plan_case(kernel, Shape(64, 64, 64), SM90)
    message, = problems(plan)
    assert "4096 threads per block (64 x 64) exceed the limit of 1024" in message
    assert message.endswith("(hint: make the block smaller or give each thread more of the tile)")
    assert "spec.yaml:8: kernels[v4].block" in message


def test_block_and_grid_extents(tmp_path):
    kernel = kernel_from(tmp_path, [("block: [BN / TN, BM / TM]", "block: [1, 1, 128]"),
                                    ("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [1, M]")])
    plan = plan_case(kernel, Shape(70000, 1, 1), SM90)
    found = problems(plan)
    assert any("block z extent 128 ('128' with no names) must be 1 to 64" in p for p in found)
    assert any("grid y extent 70000 ('M' with M=70000) must be 1 to 65535" in p and "put the largest" in p
               for p in found)


def test_too_much_shared_memory(tmp_path):
    kernel = kernel_from(tmp_path, extra="    shared_bytes: BM * 4096\n")
    plan = plan_case(kernel, Shape(64, 64, 64), SM90)
    message, = problems(plan)
    assert "262144 bytes of dynamic shared memory exceed the 232448 a block may have on sm_90" in message
    assert "kernels[v4].shared_bytes" in message


def test_static_plus_dynamic_shared_memory(tmp_path):
    kernel = kernel_from(tmp_path, extra="    shared_bytes: 200 * 1024\n")
    plan = plan_case(kernel, Shape(64, 64, 64), SM90, KernelResources(registers=32, static_shared_bytes=40000))
    assert any("40000 static + 204800 dynamic = 244800 bytes" in p for p in problems(plan))


def test_large_dynamic_shared_memory_is_noted_not_refused(tmp_path):
    kernel = kernel_from(tmp_path, extra="    shared_bytes: 100 * 1024\n")
    plan = plan_case(kernel, Shape(64, 64, 64), SM90, KernelResources(registers=32))
    assert plan.valid and "opt-in (cuFuncSetAttribute) is applied automatically" in plan.notes[0]


def test_registers_that_make_the_block_unlaunchable(tmp_path):
    kernel = kernel_from(tmp_path, [("block: [BN / TN, BM / TM]", "block: [32, 32]")])
    plan = plan_case(kernel, Shape(64, 64, 64), SM90, KernelResources(registers=128))
    message, = problems(plan)
    assert "128 registers per thread x 1024 threads need 131072 registers" in message
    assert "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in message and "__launch_bounds__" in message


def test_grid_that_does_not_cover_c(tmp_path):
    kernel = kernel_from(tmp_path, [("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [ceil(N / BN), M // BM]")],
                         extra="    tile: [BM, BN]\n")
    plan = plan_case(kernel, Shape(1001, 513, 777), SM90)
    message, = problems(plan)
    assert "the grid covers 960 of M = 1001 rows (15 blocks x 64): rows 960-1000 would never be written" in message
    assert "grid y should be ceil(M / BM)" in message and "kernels[v4].grid[1]" in message


def test_grid_from_the_wrong_tile_width(tmp_path):
    # A block that really computes 32 columns, launched on a grid computed from BN = 64.
    kernel = kernel_from(tmp_path, extra="    tile: [BM, BN / 2]\n")
    plan = plan_case(kernel, Shape(1001, 513, 777), SM90)
    message, = problems(plan)
    assert "the grid covers 288 of N = 513 columns (9 blocks x 32)" in message


@pytest.mark.parametrize("tile, index, gives", [("[-BM, BN]", 0, "gives -64 rows"), ("[BM, 0]", 1, "gives 0 columns"),
                                                ("[1.0e300, BN]", 0, "gives 1000... (301 digits) rows")])
def test_a_tile_outside_the_range_of_a_matrix_is_named_not_blamed_on_the_grid(tmp_path, tile, index, gives):
    kernel = kernel_from(tmp_path, extra=f"    tile: {tile}\n")
    plan = plan_case(kernel, Shape(1001, 513, 777), SM90)
    message, = problems(plan)
    assert gives in message and f"kernels[v4].tile[{index}]" in message and "grid" not in message


def test_a_huge_extent_is_shown_by_its_first_digits_and_length(tmp_path):
    kernel = kernel_from(tmp_path, [("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [1.0e300, 1]")])
    message, = problems(plan_case(kernel, Shape(64, 64, 64), SM90))
    assert "grid x extent 1000... (301 digits)" in message and len(message) < 400


def test_require_constraints(tmp_path):
    kernel = kernel_from(tmp_path, [("block: [BN / TN, BM / TM]", "block: [16, 48]")],
                         extra="    require: ['blockDim_x * TN == BN', '(BM * BK) % threads == 0']\n")
    plan = plan_case(kernel, Shape(64, 64, 64), SM90)
    message, = problems(plan)
    assert "'(BM * BK) % threads == 0' does not hold with BK=16, BM=64, threads=768" in message
    assert "kernels[v4].require[1]" in message and "spec.yaml:10" in message


def test_argument_values_and_bad_arguments(tmp_path):
    kernel = kernel_from(tmp_path, extra="    signature: [A, B, C, M, N, K, {name: ld, type: int32, value: K / 2}]\n")
    assert plan_case(kernel, Shape(8, 8, 8), SM90).argument_values["ld"] == 4
    plan = plan_case(kernel, Shape(8, 8, 7), SM90)
    assert any("argument ld = 3.5 is not a whole number for int32" in p for p in problems(plan))


def test_every_shipped_seed_case_is_valid():
    spec = load_spec(__import__("conftest").SPECS / "seed.yaml")
    for kernel in spec.kernels:
        for shape in spec.shapes + (Shape(1, 1, 1), Shape(7, 5, 3)):
            assert plan_case(kernel, shape, SM90).valid, kernel.label


def test_limits_of_a_real_device_replace_the_table():
    from driver_gemm.cuda.device import DeviceProperties
    from driver_gemm.cuda.occupancy import limits_from_device

    props = DeviceProperties(ordinal=0, name="NVIDIA H200", uuid="GPU-x", compute_capability=(9, 0), sm_count=132,
                             clock_khz=1980000, memory_clock_khz=3201000, memory_bus_bits=6144,
                             total_memory_bytes=141 << 30, l2_bytes=60 << 20, warp_size=32, max_threads_per_block=1024,
                             max_block_dims=(1024, 1024, 64), max_grid_dims=(2**31 - 1, 65535, 65535),
                             max_shared_per_block=49152, max_shared_per_block_optin=232448, shared_per_sm=233472,
                             reserved_shared_per_block=1024, registers_per_block=65536, registers_per_sm=65536,
                             max_threads_per_sm=2048, max_blocks_per_sm=32, driver_version=13000)
    limits = limits_from_device(props)
    assert limits.typical_sm_count == 132 and limits.max_shared_per_block == 232448
    assert props.fp32_peak_gflops == pytest.approx(132 * 128 * 2 * 1.98)
    assert props.memory_bandwidth_gbs == pytest.approx(2 * 3.201e9 * 768 / 1e9)
    assert dataclasses.asdict(limits)["arch"] == "sm_90"


def test_an_arch_specific_kernel_runs_only_on_its_architecture(tmp_path):
    kernel = kernel_from(tmp_path, [("    function: sgemm_coarsen_2d", "    function: sgemm_coarsen_2d\n    arch: sm_90a")])
    assert kernel.arch == "sm_90a" and kernel.target("sm_100") == "sm_90a"
    assert plan_case(kernel, Shape(64, 64, 64), SM90).valid
    refused = plan_case(kernel, Shape(64, 64, 64), arch_limits("sm_89"))
    assert not refused.valid
    assert problems(refused) == [
        f"{kernel.where_field('arch')}: {kernel.field_path}.arch: built for sm_90a, whose arch-specific "
        "instructions run only on sm_90; this device is sm_89 (hint: leave out arch: to build for the device's own "
        "architecture, or plan for one that sm_90a runs on (plan --arch sm_90))"]
    plain = kernel_from(tmp_path)
    assert plain.arch is None and plain.target("sm_89") == "sm_89"


PERSISTENT_GRID = ("grid: [ceil(N / BN), ceil(M / BM)]", 'grid: ["min(sm_count, ceil(N / BN) * ceil(M / BM))"]')


def test_sm_count_is_the_targets_sm_count_in_launch_expressions(tmp_path):
    # A persistent grid: one block per SM, or one per tile when there are fewer tiles than SMs.
    kernel = kernel_from(tmp_path, [PERSISTENT_GRID])
    assert plan_case(kernel, Shape(4096, 4096, 64), SM90).config.grid == (132, 1, 1)
    assert plan_case(kernel, Shape(128, 192, 64), SM90).config.grid == (6, 1, 1)       # 3 x 2 tiles
    smaller = dataclasses.replace(SM90, typical_sm_count=114)
    assert plan_case(kernel, Shape(4096, 4096, 64), smaller).config.grid == (114, 1, 1)
    assert plan_case(kernel, Shape(4096, 4096, 64), arch_limits("sm_86")).config.grid == \
        (arch_limits("sm_86").typical_sm_count, 1, 1)


def test_sm_count_in_require_and_shared_bytes(tmp_path):
    kernel = kernel_from(tmp_path, [PERSISTENT_GRID],
                         extra="    shared_bytes: sm_count * 16\n    require: [sm_count >= 200]\n")
    plan = plan_case(kernel, Shape(64, 64, 64), SM90)
    assert plan.config.shared_bytes == 132 * 16
    message, = problems(plan)
    assert "sm_count >= 200" in message


def test_sm_count_cannot_be_a_param(tmp_path):
    with pytest.raises(SpecError, match="template parameter name 'sm_count' must be a C identifier other than"):
        kernel_from(tmp_path, [("params: {BM: 64,", "params: {sm_count: 1, BM: 64,")])


def test_operands_that_do_not_fit_their_leading_dimensions_are_the_plans_one_problem():
    # TT's leading dimensions with B row-major: ldb = K + 8 is too short for its rows. The launch and the
    # arguments read lda, batch and the strides, which were never computed: their plan stops at the cause.
    spec = load_spec(SPECS / "types.yaml").select(["smem_fp16_TT_batched"])
    kernel = dataclasses.replace(spec.kernels[0], operands=dataclasses.replace(
        spec.kernels[0].operands, orders={"a": "col", "b": "row", "c": "row"}))
    message, = problems(plan_case(kernel, Shape(129, 132, 68), SM90))
    assert "ldb = 76 is too small for B (68 x 132, row-major)" in message and "unknown name" not in message
