"""The typed kernels of kernels/types/: every instance builds for sm_90 without spills; on a GPU they match
the float64 reference within their type's tolerance in every layout, padded and batched, and the
deliberately wrong bf16 kernel does not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from driver_gemm.cuda.compile import compile_source
from driver_gemm.gemm import dtypes, operands
from driver_gemm.gemm.dtypes import parse_types
from driver_gemm.gemm.operands import gemm_operands, parse_layout, typed_template_arguments

from conftest import ROOT, TEST_KERNELS

TYPES = ROOT / "kernels" / "types"
ELF_MAGIC = b"\x7fELF"
TYPE_CASES = [{"a": "fp16"}, {"a": "bf16"}, {"a": "e4m3", "c": "bf16"}, {"a": "e4m3", "c": "fp32"},
              {"a": "e5m2", "b": "e4m3", "c": "fp16"}, {"a": "fp32"}]
LAYOUTS = ("NN", "NT", "TN", "TT")


def naive_instance(types, code: str) -> str:
    return f"gemm_naive_typed<{', '.join(typed_template_arguments(types, parse_layout(code)))}>"


def smem_instance(types, code: str, tile: int) -> str:
    return f"gemm_smem_typed<{', '.join(typed_template_arguments(types, parse_layout(code)))}, {tile}>"


def type_id(node) -> str:
    return parse_types(node).label


def test_template_arguments_follow_types_and_layout():
    types = parse_types({"a": "bf16"})
    assert typed_template_arguments(types, parse_layout("TN")) == (
        "dg::bfloat16_t", "dg::bfloat16_t", "dg::bfloat16_t", "float", "dg::Col", "dg::Row")
    assert typed_template_arguments(parse_types({"a": "e4m3", "c": "fp16"}), parse_layout("NT"))[:3] == (
        "dg::e4m3_t", "dg::e4m3_t", "dg::half_t")
    with pytest.raises(ValueError, match="row-major"):
        typed_template_arguments(types, parse_layout("NN", {"c": "col"}))
    with pytest.raises(ValueError, match="fp16"):
        typed_template_arguments(parse_types({"a": "fp16", "accumulate": "fp16"}), parse_layout("NN"))


@pytest.mark.parametrize("node", TYPE_CASES, ids=type_id)
def test_every_typed_instance_compiles_for_sm90_without_spills(node):
    types = parse_types(node)
    naive = [naive_instance(types, code) for code in LAYOUTS]
    smem = [smem_instance(types, code, tile) for code in LAYOUTS for tile in (16, 32)]
    for source, instances in ((TYPES / "naive_typed.cu", naive), (TYPES / "smem_typed.cu", smem)):
        cubin = compile_source(source, instances, "sm_90")
        assert cubin.image.startswith(ELF_MAGIC)
        for instance in instances:
            resources = cubin.resources_of(instance)
            assert 0 < resources.registers <= 64, (instance, resources)
            assert not resources.spills and resources.stack_bytes == 0, (instance, resources)
        for instance in (smem if instances is smem else []):
            tile = int(instance.rsplit(",", 1)[1].rstrip(">"))
            assert cubin.resources_of(instance).static_shared_bytes == 2 * tile * (tile + 1) * 4
            assert cubin.resources_of(instance).barriers == 1


def test_fp8_conversions_are_the_hardware_instructions():
    """The fp8 widening must be cvt (sm_89+), not a software fallback: its PTX is in the CUBIN's symbols' code."""
    from cuda.bindings import nvrtc

    from driver_gemm.cuda.check import check

    source = (TYPES / "element_types.cuh").read_text() + (
        "\n__global__ void widen(const dg::e4m3_t* a, const dg::e5m2_t* b, float* out)"
        " { out[0] = dg::to_float(a[0]) + dg::to_float(b[0]); }\n")
    program = check(nvrtc.nvrtcCreateProgram(source.encode(), b"widen.cu", 0, [], []), "nvrtcCreateProgram")
    try:
        options = [b"--gpu-architecture=compute_90", b"-std=c++17"]
        status, = nvrtc.nvrtcCompileProgram(program, len(options), options)
        assert status == nvrtc.nvrtcResult.NVRTC_SUCCESS
        size = check(nvrtc.nvrtcGetPTXSize(program), "nvrtcGetPTXSize")
        ptx = b" " * size
        check(nvrtc.nvrtcGetPTX(program, ptx), "nvrtcGetPTX")
    finally:
        check(nvrtc.nvrtcDestroyProgram(program), "nvrtcDestroyProgram")
    text = ptx.decode()
    assert "cvt.rn.f16x2.e4m3x2" in text and "cvt.rn.f16x2.e5m2x2" in text and "cvt.f32.f16" in text


def test_wrong_bf16_kernel_builds_like_the_correct_one():
    cubin = compile_source(TEST_KERNELS / "bf16_skips_k_tail.cu", ["bf16_gemm_skips_k_tail<16>"], "sm_90")
    resources = cubin.resources_of("bf16_gemm_skips_k_tail<16>")
    assert not resources.spills and resources.static_shared_bytes == 2 * 16 * 17 * 4


# ------------------------------------------------------------------------------------------------ GPU

SHAPES = [(129, 132, 68), (67, 1, 131), (1, 1, 1), (100, 70, 777)]


def run_typed(device, stream, source, instance, problem, types, inputs, alpha, beta, block, tile=None):
    from driver_gemm.cuda.module import load_kernel

    kernel = load_kernel(device, source, instance)
    buffers = {}
    for key, values, element in (("a", inputs.a, types.a), ("b", inputs.b, types.b)):
        raw = operands.input_bytes(getattr(problem, key), values, element)
        buffers[key] = device.upload(np.frombuffer(raw, np.uint8), stream)
    start = operands.output_bytes(problem.c, types.c, inputs.c0 if beta else None)
    buffers["c"] = device.upload(np.frombuffer(start, np.uint8), stream)
    scalars = problem.kernel_scalars()
    step_x, step_y = (tile, tile) if tile else block
    grid = (math.ceil(problem.N / step_x), math.ceil(problem.M / step_y), problem.batch)
    kernel.launch(grid, block, [
        ("ptr", buffers["a"]), ("ptr", buffers["b"]), ("ptr", buffers["c"]),
        ("int32", problem.M), ("int32", problem.N), ("int32", problem.K),
        ("int32", scalars["lda"]), ("int32", scalars["ldb"]), ("int32", scalars["ldc"]),
        ("int64", scalars["strideA"]), ("int64", scalars["strideB"]), ("int64", scalars["strideC"]),
        ("float32", alpha), ("float32", beta)], stream)
    raw = buffers["c"].download((len(start),), np.uint8, stream).tobytes()
    return operands.read_output(problem.c, raw, types.c)


def check_output(output, expected, types, K):
    from driver_gemm.measure.verify import compare

    assert output.padding_written == 0
    assert not output.unwritten(types.c).any()
    return compare(output.values.reshape(-1, expected.shape[-1]), expected.reshape(-1, expected.shape[-1]),
                   rel_tolerance=dtypes.error_bound(types, K))


@pytest.mark.gpu
@pytest.mark.parametrize("node", TYPE_CASES[:5], ids=type_id)
@pytest.mark.parametrize("code", LAYOUTS)
def test_typed_kernels_match_the_reference_padded_and_batched(driver_gemm_device, node, code):
    device = driver_gemm_device
    stream = device.stream()
    types = parse_types(node)
    for M, N, K in SHAPES:
        problem = gemm_operands(M, N, K, orders=parse_layout(code), batch=3,
                                ld={"a": (K if code[0] == "N" else M) + 3, "b": (N if code[1] == "N" else K) + 5,
                                    "c": N + 2},
                                strides={"b": 0})
        inputs = operands.make_typed_inputs(problem, types, seed=M * N + K, with_c=True)
        expected = operands.reference(inputs.a, inputs.b, 1.5, -0.5, inputs.c0)
        for source, instance, block, tile in (
                (TYPES / "naive_typed.cu", naive_instance(types, code), (16, 8), None),
                (TYPES / "smem_typed.cu", smem_instance(types, code, 16), (16, 16), 16)):
            output = run_typed(device, stream, source, instance, problem, types, inputs, 1.5, -0.5, block, tile)
            verdict = check_output(output, expected, types, K)
            assert verdict.status == "PASS", (instance, (M, N, K), verdict.as_dict())


@pytest.mark.gpu
def test_wrong_bf16_kernel_fails_only_when_k_has_a_partial_tile(driver_gemm_device):
    device = driver_gemm_device
    stream = device.stream()
    types = parse_types({"a": "bf16"})
    for K, should_pass in ((768, True), (777, False)):
        problem = gemm_operands(129, 132, K, batch=2)
        inputs = operands.make_typed_inputs(problem, types, seed=K)
        output = run_typed(device, stream, TEST_KERNELS / "bf16_skips_k_tail.cu", "bf16_gemm_skips_k_tail<16>",
                           problem, types, inputs, 1.0, 0.0, (16, 16), 16)
        verdict = check_output(output, operands.reference(inputs.a, inputs.b), types, K)
        assert (verdict.status == "PASS") == should_pass, verdict.as_dict()


def shipped_typed_kernels():
    import yaml

    document = yaml.safe_load((ROOT / "specs" / "types.yaml").read_text())
    return document["kernels"]


@pytest.mark.parametrize("entry", shipped_typed_kernels(), ids=lambda entry: entry["name"])
def test_shipped_typed_kernels_agree_with_their_types_and_compile(entry):
    types = parse_types(entry["types"])
    orders = parse_layout(entry.get("layout"), entry.get("layouts"))
    params = entry["params"]
    assert tuple(str(params[key]) for key in ("TA", "TB", "TC", "ACC", "LA", "LB")) == \
        typed_template_arguments(types, orders)
    instance = f"{entry['function']}<{', '.join(str(value) for value in params.values())}>"
    source = (ROOT / "specs" / entry["source"]).resolve()
    resources = compile_source(source, [instance], "sm_90").resources_of(instance)
    assert resources.registers > 0 and not resources.spills
