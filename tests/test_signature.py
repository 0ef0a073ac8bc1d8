"""A spec's signature checked against the kernel's real parameters: counts, sizes and demangled types."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import TEST_KERNELS
from driver_gemm.cuda import compile as nvrtc_compile
from driver_gemm.cuda.cubin import ParamSlot, read_cubin
from driver_gemm.cuda.mangling import demangle, find_symbol
from driver_gemm.cuda.signature_check import check_kernel_signature, check_signature, param_slots_from_function
from driver_gemm.errors import ImageError, SpecError
from driver_gemm.specfile.model import Argument, KernelSpec

SOURCE = TEST_KERNELS / "signatures.cu"
INSTANCES = ("gemm_tiles<32>", "gemm_tiles<64>", "float_k")


def signature(*entries: str) -> tuple[Argument, ...]:
    """``signature("A:ptr", "M:int32")``."""
    return tuple(Argument(*entry.split(":")) for entry in entries)


SEED = signature("A:ptr", "B:ptr", "C:ptr", "M:int32", "N:int32", "K:int32")


@pytest.fixture(scope="module")
def compiled():
    cubin = nvrtc_compile.compile_source(SOURCE, INSTANCES, "sm_90", use_cache=False)
    return cubin, read_cubin(cubin.image, "signatures.cu")


# --------------------------------------------------------------------------------------- demangling

@pytest.mark.parametrize("symbol, name, types", [
    ("_Z16sgemm_smem_tilesILi32EEvPKfS1_Pfiii", "sgemm_smem_tiles<32>",
     ["const float*", "const float*", "float*", "int", "int", "int"]),
    ("_Z2gkIdEv14CUtensorMap_stPT_6__halfPKS1_S2_", "gk<double>",
     ["CUtensorMap_st", "double*", "__half", "const double*", "double*"]),
    ("_ZN2ns4kernIfLi64ELb1EEEvPKT_PS1_NS_4WrapIS1_Li2EEEdjx", "ns::kern<float, 64, true>",
     ["const float*", "float*", "ns::Wrap<float, 2>", "double", "unsigned int", "long long"]),
    ("_Z4litsILj64ELc97ELln3EEvPf", "lits<64u, (char)97, -3l>", ["float*"]),
    ("_Z4overPfPKfatby", "over", ["float*", "const float*", "signed char", "unsigned short", "bool",
                                  "unsigned long long"]),
    ("_Z1kv", "k", []),
    # T<n>_ counts in decimal (a substitution's S<n>_ in base 36): T9_ and T10_ are the 11th and 12th.
    ("_Z3k12IfdcijlmxystbEvPKT_T9_T10_",
     "k12<float, double, char, int, unsigned int, long, unsigned long, long long, unsigned long long, short, "
     "unsigned short, bool>", ["const float*", "unsigned short", "bool"]),
])
def test_demangles_names_and_parameter_types(symbol, name, types):
    result = demangle(symbol)
    assert result.name == name
    assert [p.text for p in result.params] == types


def test_demangled_kinds_and_sizes():
    params = demangle("_Z2gkIdEv14CUtensorMap_stPT_6__halfPKS1_S2_").params
    assert [(p.kind, p.size) for p in params] == [("struct", 128), ("pointer", 8), ("struct", 2), ("pointer", 8),
                                                  ("pointer", 8)]
    assert [(p.kind, p.size) for p in demangle("_Z1fidDhy").params] == [("int", 4), ("float", 8), ("float", 2),
                                                                       ("int", 8)]


@pytest.mark.parametrize("symbol", ["gemm_plain", "_Z", "_Z3fooIJifEEvDpT_", "_Z99x", "_ZN3fooE", "_Z1fS5_",
                                    "_Z1fILZ1gvEEvv", "_Z" + "P" * 50])
def test_what_is_not_understood_gives_none(symbol):
    assert demangle(symbol) is None


def test_find_symbol_by_mangled_template_id_or_unique_base_name():
    symbols = ["gemm_plain", "_Z10gemm_tilesILi32EEvPKfS1_Pfiii", "_Z10gemm_tilesILi64EEvPKfS1_Pfiii",
               "_Z7float_kPKfS0_Pfiif"]
    assert find_symbol("gemm_plain", symbols) == "gemm_plain"
    assert find_symbol("_Z7float_kPKfS0_Pfiif", symbols) == "_Z7float_kPKfS0_Pfiif"
    assert find_symbol("gemm_tiles< 64 >", symbols) == "_Z10gemm_tilesILi64EEvPKfS1_Pfiii"
    assert find_symbol("float_k", symbols) == "_Z7float_kPKfS0_Pfiif"
    with pytest.raises(ImageError, match="ambiguous.*gemm_tiles<32>.*gemm_tiles<64>"):
        find_symbol("gemm_tiles", symbols, "k.cubin")
    with pytest.raises(ImageError, match="no kernel matches function 'sgemm'.*gemm_plain"):
        find_symbol("sgemm", symbols, "k.cubin")
    # matrixMulDrv's fatbin: one extern "C" kernel per block size, which params cannot name
    with pytest.raises(ImageError, match="the image's gemm_plain is extern \"C\", with no template arguments"):
        find_symbol("gemm_plain<32>", symbols, "k.fatbin")


# --------------------------------------------------------------------------------------- the check

def test_matching_signature_has_no_problems(compiled):
    cubin, image = compiled
    for symbol in ("gemm_plain", cubin.symbol("gemm_tiles<32>")):
        kernel = image.kernel(symbol)
        types = demangle(symbol).params if demangle(symbol) else None
        assert check_signature(kernel.params, types, SEED) == []


def test_missing_parameter_is_a_count_mismatch(compiled):
    _, image = compiled
    problems = check_signature(image.kernel("gemm_plain").params, None, SEED[:5])
    assert len(problems) == 1
    assert "the kernel takes 6 parameters" in problems[0] and "the signature names 5: A, B, C, M, N" in problems[0]


def test_extra_parameter_is_a_count_mismatch(compiled):
    _, image = compiled
    problems = check_signature(image.kernel("gemm_plain").params, None, SEED + signature("alpha:float32"))
    assert "the kernel takes 6 parameters" in problems[0] and "names 7" in problems[0]


def test_wrong_sizes_are_named_by_position(compiled):
    _, image = compiled
    wrong = signature("A:ptr", "B:int32", "C:ptr", "M:int64", "N:int32", "K:int32")
    problems = check_signature(image.kernel("gemm_plain").params, None, wrong)
    assert problems == ["parameter 2 (B, int32): the kernel's parameter is 8 bytes, int32 is 4",
                        "parameter 4 (M, int64): the kernel's parameter is 4 bytes, int64 is 8"]


def test_double_against_float32_is_a_size_mismatch(compiled):
    _, image = compiled
    wrong = signature("n:int32", "alpha:float32", "c:int32", "big:int64", "out:ptr")
    problems = check_signature(image.kernel("padded").params, None, wrong)
    assert [p.split(":")[0] for p in problems] == ["parameter 2 (alpha, float32)", "parameter 3 (c, int32)"]


@pytest.mark.parametrize("symbol, written", [
    ("_Z1k6__half", "float16"), ("_Z1kK13__nv_bfloat16", "bfloat16"), ("_Z1km", "uint64"), ("_Z1kh", "uint8"),
    ("_Z1kb", "bool"), ("_Z1kd", "float64"), ("_Z1kDF16b", "bfloat16"), ("_Z1kPf", None), ("_Z1k6float4", None),
])
def test_a_size_mismatch_names_the_signature_type_for_the_kernels_own(symbol, written):
    # A kernel's __half alpha described as float32: the message says what to write, from the parameter's C type.
    parameter, = demangle(symbol).params
    described = "x:int32" if parameter.size != 4 else "x:int64"
    problem, = check_signature([ParamSlot(0, 0, parameter.size)], [parameter], signature(described))
    assert problem.endswith(f" (write type: {written})") == (written is not None), problem


def test_a_one_byte_parameter_is_one_byte():
    # bool and char parameters: "is 1 byte", not "1 bytes", in the size mismatch and in the count mismatch.
    for symbol, kind in (("_Z1kb", "(bool)"), ("_Z1kh", "(unsigned char)")):
        parameter, = demangle(symbol).params
        problem, = check_signature([ParamSlot(0, 0, 1)], [parameter], signature("x:int32"))
        assert f"the kernel's parameter {kind} is 1 byte, int32 is 4" in problem, problem
    counted = check_signature([ParamSlot(0, 0, 1), ParamSlot(1, 4, 4)], None, signature("x:bool"))
    assert counted == ["the kernel takes 2 parameters (1 byte, 4 bytes), the signature names 1: x"]


def test_same_size_wrong_type_is_caught_from_the_mangled_name(compiled):
    cubin, image = compiled
    symbol = cubin.symbol("float_k")
    assert check_signature(image.kernel(symbol).params, None, SEED) == []     # sizes alone cannot tell
    problems = check_signature(image.kernel(symbol).params, demangle(symbol).params, SEED)
    assert problems == ["parameter 6 (K, int32): the kernel's parameter is float (float), the signature says int"]
    pointer_as_int = signature("A:ptr", "B:uint64", "C:ptr", "M:int32", "N:int32", "K:float32")
    problems = check_signature(image.kernel(symbol).params, demangle(symbol).params, pointer_as_int)
    assert problems == ["parameter 2 (B, uint64): the kernel's parameter is const float* (pointer), "
                        "the signature says int"]


def _kernel_spec(signature_arguments) -> KernelSpec:
    return KernelSpec(name="v1", source=SOURCE, function="gemm_plain", params={}, block=(), grid=(),
                      shared_bytes=None, signature=signature_arguments, where="specs/demo.yaml:4",
                      field_path="kernels[0]", field_lines={"signature": 11})


def test_spec_error_points_at_the_signature_line(compiled):
    _, image = compiled
    check_kernel_signature(_kernel_spec(SEED), image.kernel("gemm_plain"))
    with pytest.raises(SpecError) as caught:
        check_kernel_signature(_kernel_spec(SEED[:5]), image.kernel("gemm_plain"))
    assert caught.value.where == "specs/demo.yaml:11"
    assert caught.value.field == "kernels[0].signature"
    assert "the kernel takes 6 parameters" in str(caught.value)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_prebuilt_cubin_is_checked_the_same_way(tmp_path):
    output = tmp_path / "signatures.cubin"
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-o", str(output), str(SOURCE)], check=True)
    image = read_cubin(output.read_bytes(), str(output))
    symbol = find_symbol("gemm_tiles<64>", image.kernels, str(output))
    kernel = image.kernel(symbol)
    assert check_signature(kernel.params, demangle(symbol).params, SEED) == []
    assert "names 5" in check_signature(kernel.params, demangle(symbol).params, SEED[:5])[0]
    float_k = image.kernel(find_symbol("float_k", image.kernels))
    assert "parameter 6 (K, int32)" in check_signature(float_k.params, demangle(float_k.name).params, SEED)[0]


# --------------------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
def test_driver_parameter_layout_equals_the_offline_reading(compiled):
    from cuda.bindings import driver

    from driver_gemm.cuda.check import check

    cubin, image = compiled
    check(driver.cuInit(0), "cuInit")
    device = check(driver.cuDeviceGet(0), "cuDeviceGet")
    context = check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    try:
        check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
        module = check(driver.cuModuleLoadData(cubin.image), "cuModuleLoadData")
        try:
            for symbol, kernel in image.kernels.items():
                function = check(driver.cuModuleGetFunction(module, symbol.encode()), "cuModuleGetFunction")
                assert param_slots_from_function(function, len(kernel.params)) == kernel.params, symbol
                registers = check(driver.cuFuncGetAttribute(
                    driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, function), "cuFuncGetAttribute")
                shared = check(driver.cuFuncGetAttribute(
                    driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function), "cuFuncGetAttribute")
                local = check(driver.cuFuncGetAttribute(
                    driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function), "cuFuncGetAttribute")
                assert (registers, shared, local) == (kernel.registers, kernel.static_shared_bytes,
                                                      kernel.local_bytes), symbol
        finally:
            check(driver.cuModuleUnload(module), "cuModuleUnload")
    finally:
        check(driver.cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease")


def test_param_slots_are_tuples():
    assert ParamSlot(0, 8, 4) == (0, 8, 4)


# gemm_smem_typed<dg::half_t, dg::half_t, float, ...> of kernels/types/smem_typed.cu: fp16 A and B, an fp32 C.
TYPED_SYMBOL = "_Z15gemm_smem_typedIN2dg6half_tES1_ffNS0_3RowES2_Li16EEvPKT_PKT0_PT1_iiiiiixxxff"
TYPED = signature("A:ptr", "B:ptr", "C:ptr", "M:int32", "N:int32", "K:int32", "lda:int32", "ldb:int32", "ldc:int32",
                  "strideA:int64", "strideB:int64", "strideC:int64", "alpha:float32", "beta:float32")
TYPED_SLOTS = [(i, 0, size) for i, size in enumerate([8, 8, 8, 4, 4, 4, 4, 4, 4, 8, 8, 8, 4, 4])]


@pytest.mark.parametrize("types, wrong", [
    ({"A": "fp16", "B": "fp16", "C": "fp32"}, []),
    ({"A": "bf16", "B": "bf16", "C": "fp32"}, ["A", "B"]),      # the template's types against the spec's
    ({"A": "fp16", "B": "fp16", "C": "bf16"}, ["C"]),           # float* written where bf16 is read back
    ({"A": "e4m3", "B": "fp16", "C": "tf32"}, ["A"]),           # tf32 is held in float
])
def test_a_matrix_pointer_of_another_floating_type_than_the_specs_is_named(types, wrong):
    problems = check_signature(TYPED_SLOTS, demangle(TYPED_SYMBOL).params, TYPED, types)
    assert [problem.split(" (")[1].split(",")[0] for problem in problems] == wrong
    assert all(f"types: makes {name} {types[name]}" in problem for name, problem in zip(wrong, problems))


def test_raw_byte_and_word_pointers_say_nothing_about_the_element_type():
    # uint16_t* for bf16 and void* for anything: a kernel that reads raw bits is not judged.
    symbol = "_Z1kPKtPKvPfiii"
    assert [p.text for p in demangle(symbol).params][:2] == ["const unsigned short*", "const void*"]
    slots = [(i, 0, size) for i, size in enumerate([8, 8, 8, 4, 4, 4])]
    assert check_signature(slots, demangle(symbol).params, SEED, {"A": "bf16", "B": "e4m3", "C": "fp32"}) == []


def test_unsigned_bytes_described_as_int8_are_named_and_signed_or_fp8_bytes_are_not():
    slots = [(i, 0, size) for i, size in enumerate([8, 8, 8, 4, 4, 4])]
    unsigned = "_Z1kPKhS0_Piiii"      # k(const unsigned char*, const unsigned char*, int*, int, int, int)
    assert [p.text for p in demangle(unsigned).params][:2] == ["const unsigned char*", "const unsigned char*"]
    problems = check_signature(slots, demangle(unsigned).params, SEED, {"A": "int8", "B": "int8", "C": "int32"})
    assert [problem.split(" (")[1].split(",")[0] for problem in problems] == ["A", "B"]
    assert "unsigned, and types: makes A int8, which is signed" in problems[0]
    assert check_signature(slots, demangle(unsigned).params, SEED, {"A": "e4m3", "B": "e4m3", "C": "fp32"}) == []
    signed = "_Z1kPKaS0_Piiii"        # k(const signed char*, ...)
    assert check_signature(slots, demangle(signed).params, SEED, {"A": "int8", "B": "int8", "C": "int32"}) == []


def test_a_tensor_map_by_pointer_described_as_the_matrix_is_named():
    symbol = "_Z1kPK14CUtensorMap_stPKfPfiii"
    assert demangle(symbol).params[0].text == "const CUtensorMap_st*"
    slots = [(i, 0, size) for i, size in enumerate([8, 8, 8, 4, 4, 4])]
    problem, = check_signature(slots, demangle(symbol).params, SEED, {"A": "fp32", "B": "fp32", "C": "fp32"})
    assert problem.startswith("parameter 1 (A, ptr): the kernel's parameter is const CUtensorMap_st*, a tensor map "
                              "by pointer") and "pass: pointer" in problem


@pytest.mark.parametrize("symbol, base", [
    ("_Z16sgemm_smem_tilesILi32EEvPKfS1_Pfiii", "sgemm_smem_tiles"),
    ("_ZN2ns4kernIfLi64ELb1EEEvPKT_PS1_NS_4WrapIS1_Li2EEEdjx", "kern"),
    ("_ZN7cutlass13device_kernelINS_4gemm6kernelEEEvNT_6ParamsE", "device_kernel"),
    ("_ZL5localPf", "local"),
    ("_Z1kv", "k"),
    ("gemm", None),
    ("_Zjunk", None),
])
def test_the_base_name_of_a_mangled_symbol_names_its_kernel_by_default(symbol, base):
    from driver_gemm.kernel_names import mangled_base_name
    assert mangled_base_name(symbol) == base


def test_double_operands_are_told_no_type_of_types_reads_them():
    # dmmaTensorCoreGemm's kernels take double*: described as fp32 (or anything), the check says no typed operand
    # is fp64, rather than to give types: what the kernel reads.
    slots = [(i, 0, size) for i, size in enumerate([8, 8, 8, 4, 4, 4])]
    doubles = "_Z1kPKdS0_Pdiii"      # k(const double*, const double*, double*, int, int, int)
    assert [p.text for p in demangle(doubles).params][:3] == ["const double*", "const double*", "double*"]
    problems = check_signature(slots, demangle(doubles).params, SEED, {"A": "fp32", "B": "fp32", "C": "fp32"})
    assert [problem.split(" (")[1].split(",")[0] for problem in problems] == ["A", "B", "C"]
    assert "typed operands (fp32, tf32, fp16, bf16, e4m3, e5m2, int8, uint8) include no double" in problems[0]
    assert "give types: what it reads" not in problems[0]


def test_unsigned_and_signed_bytes_each_point_to_the_other_type():
    slots = [(i, 0, size) for i, size in enumerate([8, 8, 8, 4, 4, 4])]
    unsigned = "_Z1kPKhS0_Piiii"      # k(const unsigned char*, const unsigned char*, int*, int, int, int)
    assert check_signature(slots, demangle(unsigned).params, SEED, {"A": "uint8", "B": "uint8", "C": "int32"}) == []
    told = check_signature(slots, demangle(unsigned).params, SEED, {"A": "int8", "B": "int8", "C": "int32"})
    assert "(give types: {a: uint8} for unsigned 8-bit inputs)" in told[0]
    signed = "_Z1kPKaS0_Piiii"        # k(const signed char*, ...)
    told = check_signature(slots, demangle(signed).params, SEED, {"A": "uint8", "B": "int8", "C": "int32"})
    assert len(told) == 1 and "signed, and types: makes A uint8" in told[0] and "{a: int8}" in told[0]


SIX_SLOTS = [(i, 0, size) for i, size in enumerate([8, 8, 8, 4, 4, 4])]
READS_A_B_WRITES_C = "_Z1kPKfS0_Pfiii"      # k(const float* A, const float* B, float* C, int M, int N, int K)


def test_c_passed_only_to_const_pointers_is_named_with_the_parameter_the_kernel_writes():
    assert [p.text for p in demangle(READS_A_B_WRITES_C).params][:3] == ["const float*", "const float*", "float*"]
    assert check_signature(SIX_SLOTS, demangle(READS_A_B_WRITES_C).params, SEED) == []
    c_first = signature("C:ptr", "A:ptr", "B:ptr", "M:int32", "N:int32", "K:int32")
    (problem,) = check_signature(SIX_SLOTS, demangle(READS_A_B_WRITES_C).params, c_first)
    assert problem == ("C, the output, is passed only to parameters that point to const, which the kernel does not "
                       "write through (parameter 1 (C) is const float*); the kernel writes through parameter 3 "
                       "(float*): check the signature's order")


def test_c_read_through_const_and_written_through_its_alias_or_a_map_passes():
    # k(const float* A, const float* B, const float* C, float* D, ...): D = alpha A B + beta C written over C.
    symbol = "_Z1kPKfS0_S0_Pfiii"
    slots = [(i, 0, size) for i, size in enumerate([8, 8, 8, 8, 4, 4, 4])]
    with_d = (*signature("A:ptr", "B:ptr", "C:ptr"), Argument("D", "ptr", alias="C"),
              *signature("M:int32", "N:int32", "K:int32"))
    assert check_signature(slots, demangle(symbol).params, with_d) == []
    # Only const pointers, C among them: the kernel writes nothing through its parameters.
    only_c = (*signature("A:ptr", "B:ptr", "C:ptr"), Argument("D", "ptr", alias="A"),
              *signature("M:int32", "N:int32", "K:int32"))
    assert len(check_signature(slots, demangle(symbol).params, only_c)) == 1
    # float* const is a const pointer to what may be written.
    assert check_signature(SIX_SLOTS, demangle("_Z1kPKfS0_KPfiii").params, SEED) == []


def test_float2_and_float4_pointers_hold_any_element_type_as_int4_does():
    # k(const float4* A, const __half2* B, __half2* C, int, int, int), a kernel loading eight halves at a time.
    symbol = "_Z8vec_gemmILi16EEvPK6float4PK7__half2PS3_iii"
    assert demangle(symbol).params[0].text == "const float4*"
    assert check_signature(SIX_SLOTS, demangle(symbol).params, SEED, {"A": "fp16", "B": "fp16", "C": "fp16"}) == []
    # A float* read as fp16 is still named.
    problems = check_signature(SIX_SLOTS, demangle(READS_A_B_WRITES_C).params, SEED,
                               {"A": "fp16", "B": "fp16", "C": "fp32"})
    assert [problem.split(" (")[1].split(",")[0] for problem in problems] == ["A", "B"]
