"""shared_bytes: sizeof(SMem<BM, BN>): a kernel's own types sized by its own compiler, per configuration.

Hand-written Hopper kernels size their dynamic shared memory as a struct of stages and barriers; its padding is
the compiler's to decide. Without a GPU: the spec's form, the sizes read back from the compiled image (NVRTC and
nvcc alike), each configuration's own size in the plan, and each mistake said at shared_bytes.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from driver_gemm.cuda.type_sizes import type_sizes
from driver_gemm.errors import CompileError, SpecError
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec

SMEM_KERNEL = """\
#include <cstdint>
template <int BM, int BN> struct alignas(128) SMem {
    float a[BM * 64]; float b[BN * 64]; uint64_t full[4], empty[4];
    static_assert(BM <= 128, "at most 128 rows");
};
template <int BM, int BN>
__global__ void k(const float* A, const float* B, float* C, int M, int N, int K) {
    extern __shared__ __align__(128) char raw[];
    SMem<BM, BN>& s = *reinterpret_cast<SMem<BM, BN>*>(raw);
    if (M < 0) C[0] = s.a[0] + s.b[BN] + s.full[1];
}
"""


def smem_size(bm: int, bn: int) -> int:
    """sizeof(SMem<BM, BN>) as the C++ rules lay it out: the floats and barriers, padded to 128 bytes."""
    return -(-(4 * 64 * (bm + bn) + 64) // 128) * 128


def write(tmp_path, shared_bytes: str, params: str = "{BM: [64, 128], BN: 128}", extra: str = "") -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "k.cu").write_text(SMEM_KERNEL)
    path = tmp_path / "spec.yaml"
    path.write_text(f"shapes: [[256, 256, 256]]\nkernels:\n  - name: k\n    source: k.cu\n    function: k\n"
                    f"    params: {params}\n    block: [128]\n    grid: [ceil(N / BN), ceil(M / BM)]\n"
                    f"    shared_bytes: {shared_bytes}\n{extra}")
    return path


def test_the_compiler_sizes_the_sources_types(tmp_path):
    (tmp_path / "k.cu").write_text(SMEM_KERNEL)
    sizes = type_sizes(tmp_path / "k.cu", ["SMem<64, 128>", "SMem<128, 128>", "float4"], "sm_90")
    assert sizes == {"SMem<64, 128>": smem_size(64, 128), "SMem<128, 128>": smem_size(128, 128), "float4": 16}
    with pytest.raises(CompileError, match='Smem is not a template|identifier "Smem" is undefined'):
        type_sizes(tmp_path / "k.cu", ["Smem<64, 128>"], "sm_90")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_sizes_them_alike_beside_host_code(tmp_path):
    (tmp_path / "k.cu").write_text(SMEM_KERNEL + "int main() { return 0; }\n")   # host code: NVRTC cannot build it
    assert type_sizes(tmp_path / "k.cu", ["SMem<64, 128>"], "sm_90", compiler="nvcc") == {
        "SMem<64, 128>": smem_size(64, 128)}


def test_each_configuration_gets_its_own_size_in_the_plan(tmp_path):
    spec = load_spec(write(tmp_path, "sizeof(SMem<BM, BN>) + 1024"))
    kernel = spec.kernels[0]
    assert kernel.shared_bytes.source == "sizeof(SMem<BM, BN>) + 1024"      # shown as written
    assert dict(kernel.sizeofs) == {"__sizeof0": "SMem<BM, BN>"}
    planned = plan_spec(spec, "sm_90")
    assert all(plan.valid for plan in planned.plans), [plan.problems for plan in planned.plans]
    assert [plan.config.shared_bytes for plan in planned.plans] == [smem_size(64, 128) + 1024,
                                                                    smem_size(128, 128) + 1024]


def test_an_array_type_sizes_what_the_sources_macros_and_the_params_make(tmp_path):
    # cuda-samples' tensor-core GEMMs size shared memory with macros (SHMEM_SZ = MAX(...) of CHUNK_K, SKEW_HALF):
    # sizeof(char[SHMEM_SZ]) is that value as the kernel's compiler works it out, and an array type takes params.
    macros = "#define CHUNK_K 8\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n" \
             "#define SHMEM_SZ MAX(2 * 128 * (CHUNK_K * 16 + 16) * 2, 64 * 1024)\n"
    path = write(tmp_path, "sizeof(char[SHMEM_SZ])", params="{BM: 64, BN: 128}")
    (tmp_path / "k.cu").write_text(macros + SMEM_KERNEL)
    (plan,) = plan_spec(load_spec(path), "sm_90").plans
    assert plan.valid and plan.config.shared_bytes == 2 * 128 * (8 * 16 + 16) * 2, plan.problems
    path = write(tmp_path, "2 * sizeof(float[BM][CHUNK_K * 16 + 4])", params="{BM: [64, 128], BN: 128}")
    (tmp_path / "k.cu").write_text(macros + SMEM_KERNEL)
    assert [plan.config.shared_bytes for plan in plan_spec(load_spec(path), "sm_90").plans] == [
        2 * 4 * bm * (8 * 16 + 4) for bm in (64, 128)]


def test_a_type_that_does_not_compile_for_one_configuration_invalidates_that_one_alone(tmp_path):
    planned = plan_spec(load_spec(write(tmp_path, "sizeof(SMem<BM, BN>)", "{BM: [64, 256], BN: 128}")), "sm_90")
    good, bad = planned.plans
    assert good.valid and good.config.shared_bytes == smem_size(64, 128)
    problem, = bad.problems
    assert problem.field == "kernels[k].shared_bytes"
    assert "sizeof(SMem<256, 128>): the kernel's compiler cannot size it" in str(problem)
    assert "at most 128 rows" in str(problem)


def test_a_source_that_does_not_build_is_reported_as_its_compile_error_not_as_a_sizeof(tmp_path):
    # The sizing compile meets the source's own error first: the plan names the source's file and line, as it does
    # for the same source with shared_bytes a number, instead of refusing the case at shared_bytes.
    path = write(tmp_path, "sizeof(SMem<BM, BN>)", "{BM: 64, BN: 128}",
                 extra="  - name: numbered\n    source: k.cu\n    function: k\n    params: {BM: 64, BN: 128}\n"
                       "    block: [128]\n    grid: [ceil(N / BN), ceil(M / BM)]\n    shared_bytes: 1024\n")
    (tmp_path / "k.cu").write_text(SMEM_KERNEL + "__device__ int broken() { return undefined_name; }\n")
    planned = plan_spec(load_spec(path), "sm_90")
    assert planned.plans == []
    error, = planned.compile_errors
    assert "kernels[k].source (and numbered) did not build" in str(error)
    assert 'k.cu:12: error: identifier "undefined_name" is undefined' in str(error)
    assert "cannot size it" not in str(error)


def test_block_and_grid_read_the_sources_constants_through_sizeof(tmp_path):
    # An outside kernel's block side and tile are macros of its source: sizeof(char[NAME]) reads them where the spec
    # would otherwise repeat them, and a sizeof left out of these fields is refused by name.
    path = write(tmp_path, "sizeof(SMem<BM, BN>)", "{BM: 64, BN: 128}")
    (tmp_path / "k.cu").write_text("#define THREADS 192\nconstexpr int TILE_COLUMNS = 128;\n" + SMEM_KERNEL)
    path.write_text(path.read_text().replace("block: [128]", "block: ['sizeof(char[THREADS])']").replace(
        "grid: [ceil(N / BN), ceil(M / BM)]", "grid: ['ceil(N / sizeof(char[TILE_COLUMNS]))', ceil(M / BM)]"))
    kernel = load_spec(path).kernels[0]
    assert [extent.source for extent in kernel.block] == ["sizeof(char[THREADS])"]
    assert kernel.sizeof_fields == ("block[0]", "grid[0]", "shared_bytes")
    (plan,) = plan_spec(load_spec(path), "sm_90").plans
    assert plan.valid, plan.problems
    assert (plan.config.block, plan.config.grid, plan.config.shared_bytes) == ((192, 1, 1), (2, 4, 1),
                                                                               smem_size(64, 128))
    path.write_text(path.read_text().replace("THREADS", "THREDS"))
    (plan,) = plan_spec(load_spec(path), "sm_90").plans
    assert plan.problems[0].field == "kernels[k].block[0]"
    assert 'identifier "THREDS" is undefined' in str(plan.problems[0])
    # sizeof of a value (a macro for 192) is an int's size in C++: refused, as sizeof takes a type
    path.write_text(path.read_text().replace("sizeof(char[THREDS])", "sizeof(THREDS)").replace("THREDS", "THREADS"))
    (plan,) = plan_spec(load_spec(path), "sm_90").plans
    assert plan.problems[0].field == "kernels[k].block[0]" and "expected a type" in str(plan.problems[0])
    # tile and require read the source's constants too; elsewhere (an argument's value) sizeof is refused.
    path.write_text(path.read_text().replace("sizeof(THREADS)", "sizeof(char[THREADS])")
                    + "    tile: ['sizeof(char[64])', 'sizeof(char[TILE_COLUMNS])']\n"
                    "    require: ['M % sizeof(char[64]) == 0']\n")
    (plan,) = plan_spec(load_spec(path), "sm_90").plans
    assert plan.valid, plan.problems
    assert plan.tile == (64, 128)
    path.write_text(path.read_text().replace("M % sizeof(char[64]) == 0", "M % sizeof(char[96]) == 0"))
    (plan,) = plan_spec(load_spec(path), "sm_90").plans
    assert [problem.field for problem in plan.problems] == ["kernels[k].require[0]"]
    path.write_text(path.read_text().replace("    function: k\n", "    function: k\n    signature: [A, B, C, M, N, "
                                             "K, {name: s, type: int32, value: 'sizeof(char[4])'}]\n"))
    with pytest.raises(SpecError, match=r"sizeof\(TYPE\) is read in a kernel's block, grid, shared_bytes, tile and "
                                        r"require alone"):
        load_spec(path)


def test_a_type_that_cannot_be_sized_is_named_alone_at_the_field_that_reads_it(tmp_path):
    # block sizes a macro that exists and shared_bytes one that does not (local to the source's host code): the
    # problem is at shared_bytes, naming that type alone.
    path = write(tmp_path, "'sizeof(char[SHMEM_SZ])'")
    (tmp_path / "k.cu").write_text("#define THREADS 192\n" + SMEM_KERNEL)
    path.write_text(path.read_text().replace("block: [128]", "block: ['sizeof(char[THREADS])']"))
    plans = plan_spec(load_spec(path), "sm_90").plans
    assert {plan.problems[0].field for plan in plans} == {"kernels[k].shared_bytes"}
    message = str(plans[0].problems[0])
    assert 'sizeof(char[SHMEM_SZ]): the kernel\'s compiler cannot size it: identifier "SHMEM_SZ" is undefined' \
        in message and "THREADS" not in message


@pytest.mark.parametrize("shared_bytes, message", [
    ("'sizeof(SMem<BM, BN> + 1024'", "sizeof takes one C++ type, as sizeof(SMem<BM, BN>) or sizeof(char[SMEM])"),
    ("'sizeof() + 1'", "sizeof takes one C++ type"),
    ("'sizeof(SMem<BM, BN>>)'", "sizeof takes one C++ type"),
    ("'sizeof(SMem<BM, TILE>)'", None),   # an unknown name inside the type is the compiler's to judge
])
def test_a_malformed_sizeof_is_refused_at_shared_bytes(tmp_path, shared_bytes, message):
    path = write(tmp_path, shared_bytes)
    if message is None:
        plan, _ = plan_spec(load_spec(path), "sm_90").plans
        assert not plan.valid and 'identifier "TILE" is undefined' in str(plan.problems[0])
        return
    with pytest.raises(SpecError, match=re.escape(message)) as info:
        load_spec(path)
    assert info.value.field == "kernels[k].shared_bytes"


def test_a_prebuilt_binary_cannot_size_a_type(tmp_path):
    path = write(tmp_path, "sizeof(SMem<BM, BN>)")
    path.write_text(path.read_text().replace("source: k.cu", "binary: k.cubin"))
    (tmp_path / "k.cubin").write_bytes(b"")
    with pytest.raises(SpecError, match="sizeof needs the kernel's source") as info:
        load_spec(path)
    assert info.value.field == "kernels[k].shared_bytes"


def test_a_source_changed_between_two_plans_is_sized_again(tmp_path):
    path = write(tmp_path, "sizeof(SMem<BM, BN>)", "{BM: 64, BN: 128}")
    first, = plan_spec(load_spec(path), "sm_90").plans
    (tmp_path / "k.cu").write_text(SMEM_KERNEL.replace("uint64_t full[4]", "uint64_t full[40]"))
    second, = plan_spec(load_spec(path), "sm_90").plans
    assert first.config.shared_bytes == smem_size(64, 128)
    assert second.config.shared_bytes == -(-(4 * 64 * (64 + 128) + 8 * 44) // 128) * 128


def test_a_compiler_that_is_not_installed_makes_the_cases_invalid_not_the_plan_fail(tmp_path, monkeypatch):
    from driver_gemm.errors import ToolMissingError
    from driver_gemm.planning import sizeof_values

    def no_nvcc(*arguments, **options):
        raise ToolMissingError("nvcc is not installed")

    monkeypatch.setattr(sizeof_values, "type_sizes", no_nvcc)
    plans = plan_spec(load_spec(write(tmp_path, "sizeof(SMem<BM, BN>)")), "sm_90").plans
    assert [plan.valid for plan in plans] == [False, False]
    assert "nvcc is not installed" in str(plans[0].problems[0])
