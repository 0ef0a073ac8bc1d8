"""Kernel files written for other harnesses, as their authors keep them: the C++ library headers device code uses,
includes named through function-like macros, programmatic-launch calls, enumerators as template arguments,
overloads, narrow scalar parameters (__half alpha, bool, uint8_t), optional pointers passed as nullptr, and the
element names each part of a spec shares. No GPU."""

from __future__ import annotations

import struct
import textwrap

import numpy as np
import pytest

from driver_gemm.argtypes import bfloat16_bits, float_value
from driver_gemm.cuda.compile import base_options, compile_source
from driver_gemm.cuda.compile_diagnostics import not_a_kernel, plain_declarations, template_parameter_names
from driver_gemm.cuda.launch import PackedArguments
from driver_gemm.cuda.nvcc import find_nvcc, first_errors, nvcc_hints
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import ArgumentError, CompileError, SpecError
from driver_gemm.planning.buffer_plans import BufferPlan
from driver_gemm.planning.build import offline_problems
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.session.bind import launch_values
from driver_gemm.specfile import Shape, load_spec

from conftest import TEST_KERNELS
from test_spec import write


def _project(tmp_path, files: dict[str, str]):
    (tmp_path / "pyproject.toml").touch()
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def _compile_error(path, instances) -> str:
    with pytest.raises(CompileError) as failure:
        compile_source(path, instances, arch="sm_90", use_cache=False)
    return str(failure.value)


# ----------------------------------------------------------------------------------- headers and includes

def test_the_cxx_library_headers_device_code_uses_compile_under_nvrtc_as_cccl_s(tmp_path):
    folder = _project(tmp_path, {"k.cu": """\
        #include <utility>
        #include <type_traits>
        #include <limits>
        #include <array>
        #include <tuple>
        template <typename T> __device__ T pass(T&& x) { return std::forward<T>(x); }
        __global__ void k(float* p) {
            static_assert(std::is_same_v<float, std::remove_cv_t<const float>>, "traits");
            std::array<int, 4> a{1, 2, 3, 4};
            auto t = std::make_tuple(1, 2.0f);
            std::swap(a[0], a[2]);
            p[0] = std::numeric_limits<float>::max() + std::move(a[1]) + std::get<1>(t) + pass(1.0f);
        }
        """})
    built = compile_source(folder / "k.cu", ["k"], arch="sm_90", use_cache=False)
    assert built.lowered_names == {"k": "_Z1kPf"}


def test_an_include_named_through_a_function_like_macro_is_read_from_its_define(tmp_path):
    folder = _project(tmp_path, {
        "lib/config.h": """\
            #pragma once
            #define STD_HEADER(name) <cuda/std/name>
            #define LOCAL_HEADER(name) <name.cuh>
            """,
        "lib/tile.cuh": "#pragma once\nconstexpr int TILE = 16;\n",
        "k.cu": """\
            #include "lib/config.h"
            #include STD_HEADER(cstdint)
            #include LOCAL_HEADER(lib/tile)
            __global__ void k(int32_t* p) { p[0] = TILE; }
            """})
    built = compile_source(folder / "k.cu", ["k"], arch="sm_90", use_cache=False)
    assert "k" in built.lowered_names
    # The header a macro names is held to the project as a written one is: here it is outside.
    outside = tmp_path.parent / f"{tmp_path.name}-outside.cuh"
    outside.write_text("constexpr int TILE = 8;\n")
    (folder / "lib" / "config.h").write_text(f"#define LOCAL_HEADER(name) <{outside}>\n"
                                             "#define STD_HEADER(name) <cuda/std/name>\n")
    assert "outside the kernel's project" in _compile_error(folder / "k.cu", ["k"])


def test_programmatic_launch_calls_undeclared_under_nvrtc_get_their_header_named(tmp_path):
    folder = _project(tmp_path, {"k.cu": "__global__ void k(int* p) { cudaGridDependencySynchronize(); p[0] = 1; }\n"})
    message = _compile_error(folder / "k.cu", ["k"])
    assert "hint: cudaGridDependencySynchronize is declared by <cuda_device_runtime_api.h>" in message
    assert "[--pre-include=cuda_device_runtime_api.h]" in message
    pre_included = ["--pre-include=cuda_device_runtime_api.h"]        # the file left as it is
    assert compile_source(folder / "k.cu", ["k"], arch="sm_90", extra_options=pre_included, use_cache=False)
    (folder / "k.cu").write_text("#include <cuda_device_runtime_api.h>\n" + (folder / "k.cu").read_text())
    assert compile_source(folder / "k.cu", ["k"], arch="sm_90", use_cache=False).lowered_names


# ----------------------------------------------------------------------------------- naming the kernel

KERNELS_HEADER = """\
    #pragma once
    namespace lib {
    enum class Kind { Normal, Grouped };
    template <Kind KIND, int T> __global__ void gemm(const float* A, float* C) { C[0] = A[0] + T; }
    }
    __global__ void plain(const float* A, float* C, int n) { C[0] = A[0] * n; }
    """


def test_an_enumerator_without_its_namespace_gets_a_hint_to_qualify_it(tmp_path):
    folder = _project(tmp_path, {"kernels.cuh": KERNELS_HEADER, "k.cu": '#include "kernels.cuh"\n'})
    assert "write enumerators and types with their whole namespace" in \
        _compile_error(folder / "k.cu", ["lib::gemm<Kind::Normal, 16>"])
    assert compile_source(folder / "k.cu", ["lib::gemm<lib::Kind::Normal, 16>"], arch="sm_90",
                          use_cache=False).lowered_names


def test_an_overload_of_other_parameter_types_is_shown_the_declaration(tmp_path):
    folder = _project(tmp_path, {"kernels.cuh": KERNELS_HEADER, "k.cu": '#include "kernels.cuh"\n'})
    message = _compile_error(folder / "k.cu", ["plain(float*, float*, int)"])
    assert "no declaration of plain takes (float*, float*, int): an overload is named by its parameter types " \
           "exactly as declared, const included; the source declares plain(const float* A, float* C, int n)" in message
    assert "static_cast appears" not in message


def test_a_misspelt_function_lists_the_kernels_its_headers_define(tmp_path):
    folder = _project(tmp_path, {"kernels.cuh": KERNELS_HEADER, "k.cu": '#include "kernels.cuh"\n'})
    message = _compile_error(folder / "k.cu", ["plian"])
    assert "no function named plian appears in the source or its headers" in message
    assert "the kernels the file defines (gemm, plain)" in message


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
@pytest.mark.parametrize("function, params, said", [
    # cuda-samples' matrixMul_nvrtc: the template is __device__, its kernels extern "C" wrappers of it.
    ("matrixMulCUDA", "    params: {BLOCK_SIZE: 32}\n", "matrixMulCUDA is a __device__ function"),
    ("'matrixMulCUDA<16>'", "", "matrixMulCUDA is a __device__ function"),
    ("scaled", "", "scaled is a __device__ function"),
    ("shifted", "", "shifted is a __host__ __device__ function"),
])
def test_a_device_function_named_by_a_spec_is_said_to_be_no_kernel(tmp_path, compiler, function, params, said):
    if compiler == "nvcc" and find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    folder = _project(tmp_path, {"k.cu": (TEST_KERNELS / "device_helpers.cu").read_text()})
    (folder / "spec.yaml").write_text(
        f"shapes: [[256, 256, 256]]\nkernels:\n  - name: mm\n    source: k.cu\n    function: {function}\n{params}"
        + ("    compiler: nvcc\n" if compiler == "nvcc" else "") + "    block: [16, 16]\n    grid: [16, 16]\n")
    (error,) = offline_problems(load_spec(folder / "spec.yaml"))[1].values()
    assert f"{said}, not a kernel (__global__)" in str(error), str(error)
    # NVRTC's build lists the kernels, nvcc's image lookup its own (in the order of the image).
    assert "matrixMulCUDA_block16" in str(error) and "matrixMulCUDA_block32" in str(error)
    assert "against the template's parameters" not in str(error)


def test_a_spec_may_pre_include_the_toolkit_header_nvcc_includes_but_no_file_outside_its_project(tmp_path):
    text = MINIMAL_PRE.replace("OPTION", "--pre-include=cuda_device_runtime_api.h")
    assert load_spec(write(tmp_path, text)).kernels[0].options == ("--pre-include=cuda_device_runtime_api.h",)
    for outside in ("/usr/include/stdio.h", "../../elsewhere.h"):
        with pytest.raises(SpecError, match="names files to read; it needs the user's leave"):
            load_spec(write(tmp_path, MINIMAL_PRE.replace("OPTION", f"--pre-include={outside}")))


def test_a_fragment_gets_its_runners_prelude_pre_included_from_the_project_without_leave(tmp_path):
    # A .cuh of kernels that relies on its runner's typedefs: the spec pre-includes the project's own header by
    # its path relative to the spec, passed on absolute; a header outside the project still needs leave.
    from driver_gemm.planning.spec_plan import plan_spec

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "prelude.h").write_text("typedef float real;\n")
    (tmp_path / "frag.cuh").write_text("__global__ void k(const real* A, const real* B, real* C, int M, int N, "
                                       "int K) { C[0] = A[0] + B[0]; }\n")
    entry = ("shapes: [[64, 64, 64]]\nkernels:\n  - {name: k, source: frag.cuh, function: k, block: [64], "
             "grid: [1], options: ['--pre-include=OPTION']}\n")
    (tmp_path / "spec.yaml").write_text(entry.replace("OPTION", "include/prelude.h"))
    kernel = load_spec(tmp_path / "spec.yaml").kernels[0]
    assert kernel.options == (f"--pre-include={(tmp_path / 'include' / 'prelude.h').resolve()}",)
    planned = plan_spec(tmp_path / "spec.yaml", "sm_90")
    assert planned.ok and planned.compile_errors == [], planned.compile_errors
    (tmp_path.parent / "outside.h").write_text("typedef float real;\n")
    for written in ("../outside.h", str(tmp_path / "include" / "prelude.h")):   # outside, or absolute: leave
        (tmp_path / "spec.yaml").write_text(entry.replace("OPTION", written))
        with pytest.raises(SpecError, match="names files to read; it needs the user's leave"):
            load_spec(tmp_path / "spec.yaml")
    for written, words in (("include", "is a folder; a pre-include names a header"),
                           ("include/missing.h", "no file")):
        (tmp_path / "spec.yaml").write_text(entry.replace("OPTION", written))
        with pytest.raises(SpecError, match=words):
            load_spec(tmp_path / "spec.yaml")


# One kernel entry of the repository's v4, the spec's fields after it.
COARSEN_ENTRY = """\
    kernels:
      - name: k
        source: ../kernels/04_coarsen_2d.cu
        function: sgemm_coarsen_2d
        params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}
        block: [16, 16]
        grid: [ceil(N / BN), ceil(M / BM)]
"""

MINIMAL_PRE = "    shapes: [[64, 64, 64]]\n" + COARSEN_ENTRY + "        options: [OPTION]\n"


def test_a_template_parameter_named_like_a_shape_is_told_that_names_are_free(tmp_path):
    spec = write(tmp_path, """\
        shapes: [[64, 64, 64]]
        kernels:
          - name: k
            source: ../kernels/04_coarsen_2d.cu
            function: sgemm_coarsen_2d
            params: {K: 64}
            block: [16, 16]
            grid: [4, 4]
        """)
    with pytest.raises(SpecError) as failure:
        load_spec(spec)
    assert failure.value.field.endswith("params.K")
    assert "call it K_ (or any other name) even where the template says K" in str(failure.value)


# ----------------------------------------------------------------------------------- nvcc's diagnostics

NVCC_LOG = """\
k.cu(3): warning #177-D: variable "unused" was declared but never referenced
      int unused;
          ^

k.cu(7): error: namespace "std" has no member "vector"
      std::vector<int> v;
           ^

k.cu(8): error: type name is not allowed
      auto x = int;
               ^

2 errors detected in the compilation of "k.cu".
"""


def test_nvcc_failures_show_their_first_errors_with_the_quoted_lines_not_the_log_s_tail():
    shown = first_errors(NVCC_LOG)
    assert shown[0] == 'k.cu(7): error: namespace "std" has no member "vector"'
    assert shown[1].strip() == "std::vector<int> v;"
    assert not any("warning" in line for line in shown)
    assert first_errors(NVCC_LOG, most=1)[-1] == "... (1 more errors in the full log)"
    assert first_errors("ld: cannot find -lfoo\ncollect2: error\n") == ["ld: cannot find -lfoo", "collect2: error"]


def test_nvcc_hints_say_a_missing_host_library_header_comes_from_the_file_s_runner():
    hint, = nvcc_hints("matmul.cu:4:10: fatal error: cublas_v2.h: No such file or directory\n")
    assert hint.startswith("cublas_v2.h was not found") and "a host library's header" in hint


def test_nvcc_hints_name_the_installed_wheel_that_holds_a_missing_host_library_header(tmp_path, monkeypatch):
    import sys

    (tmp_path / "nvidia" / "cu13" / "include").mkdir(parents=True)
    (tmp_path / "nvidia" / "cu13" / "include" / "curand.h").write_text("")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    hint, = nvcc_hints("matmul.cu:4:10: fatal error: curand.h: No such file or directory\n")
    folder = (tmp_path / "nvidia" / "cu13" / "include").resolve()
    assert f"an installed wheel has it: options: [-I {folder}], with --allow-outside-sources" in hint
    hint, = nvcc_hints("matmul.cu:4:10: fatal error: cusparse.h: No such file or directory\n")
    assert "install them" in hint and "installed wheel" not in hint


@pytest.mark.parametrize("options, standard", [((), "-std=c++17"), (("-std=c++20",), None),
                                               (("--std=c++20",), None), (("-std", "c++20"), None)])
def test_a_kernel_s_own_cxx_standard_replaces_the_default(options, standard):
    chosen = [option for option in base_options(options) if "std" in option]
    assert chosen == ([standard] if standard else [])


# ----------------------------------------------------------------------------------- narrow scalars

@pytest.mark.parametrize("ctype, value, raw", [
    ("float16", 1.5, struct.pack("<e", 1.5)),
    ("float16", 0.1, struct.pack("<e", 0.1)),
    ("bfloat16", 1.0, b"\x80\x3f"),
    ("bfloat16", -2.0, b"\x00\xc0"),
    ("int8", -5, b"\xfb"), ("uint8", 200, b"\xc8"), ("int16", -2, b"\xfe\xff"), ("uint16", 65535, b"\xff\xff"),
    ("bool", 1, b"\x01"),
])
def test_narrow_scalars_are_packed_as_the_kernel_reads_them(ctype, value, raw):
    packed = PackedArguments([ctype, "int32"], [value, 7])
    assert packed.value_bytes(0) == raw
    assert packed.offsets[1] == 4     # the int32 after it at its own alignment


def test_bfloat16_rounds_to_nearest_even_and_a_16_bit_float_refuses_what_it_cannot_hold():
    assert bfloat16_bits(1.0 + 2 ** -8) == 0x3F80          # a tie rounds to the even 1.0
    assert bfloat16_bits(1.0 + 3 * 2 ** -8) == 0x3F82      # a tie rounds up to the even neighbour
    assert float_value("bfloat16", 0.1) == struct.unpack("<f", struct.pack("<I", 0x3DCD << 16))[0]
    assert float_value("float16", 0.1) == float(np.float16(0.1))
    with pytest.raises(ArgumentError, match="beyond the range of float16"):
        PackedArguments(["float16"], [70000.0], ["alpha"])
    with pytest.raises(ArgumentError, match="does not fit int8"):
        PackedArguments(["int8"], [128], ["flag"])


HALF_SPEC = "    shapes: [[64, 64, 64]]\n    scalars: {alpha: 0.1, beta: 0.0}\n" + COARSEN_ENTRY + """\
        signature:
          - {name: M, type: int16, value: M}
          - {name: transposed, type: bool, value: false}
          - {name: alpha, type: float16, value: alpha}
          - A
          - B
          - {name: bias, type: ptr, value: null}
          - C
    """


def test_a_half_alpha_reaches_the_reference_as_the_kernel_reads_it_and_a_null_pointer_as_nullptr(tmp_path):
    spec = load_spec(write(tmp_path, HALF_SPEC))
    kernel = spec.kernels[0]
    bias = next(argument for argument in kernel.signature if argument.name == "bias")
    assert bias.null and bias.ctype == "ptr"
    plan = plan_case(kernel, Shape(64, 64, 64), arch_limits("sm_90"), scalars=dict(spec.scalars))
    assert plan.valid, plan.problems
    assert plan.argument_values["alpha"] == float(np.float16(0.1)) != 0.1
    types, values = launch_values(kernel, plan.argument_values, {"A": 0xA000, "B": 0xB000, "C": 0xC000},
                                  lambda argument, position: None)
    assert types == ["int16", "bool", "float16", "ptr", "ptr", "ptr", "ptr"]
    assert values == [64, 0, plan.argument_values["alpha"], 0xA000, 0xB000, 0, 0xC000]
    assert PackedArguments(types, values).value_bytes(5) == bytes(8)


def test_an_output_d_beside_c_is_given_c_s_address_as_cublaslt_s_in_place_product(tmp_path):
    with_d = HALF_SPEC.replace("          - C\n", "          - C\n          - {name: D, type: ptr, value: C}\n")
    spec = load_spec(write(tmp_path, with_d))
    kernel = spec.kernels[0]
    plan = plan_case(kernel, Shape(64, 64, 64), arch_limits("sm_90"), scalars=dict(spec.scalars))
    assert plan.valid, plan.problems
    types, values = launch_values(kernel, plan.argument_values, {"A": 0xA000, "B": 0xB000, "C": 0xC000},
                                  lambda argument, position: None)
    assert values[-2:] == [0xC000, 0xC000]


@pytest.mark.parametrize("old, new, needle", [
    ("{name: bias, type: ptr, value: null}", "{name: bias, type: ptr, value: 3}", "a null pointer (value: null)"),
    ("          - A\n", "          - {name: A, type: ptr, value: null}\n", "a null pointer (value: null)"),
    ("{name: bias, type: ptr, value: null}", "{name: bias, type: ptr, value: D}", "another pointer to a matrix"),
    ("{name: M, type: int16, value: M}", "{name: M, type: int16, value: 40000}", "40000 does not fit int16"),
    ("{name: alpha, type: float16, value: alpha}", "{name: alpha, type: float16, value: 1.0e+6}",
     "beyond the range of float16"),
])
def test_narrow_scalars_and_null_pointers_are_refused_at_their_field(tmp_path, old, new, needle):
    with pytest.raises(SpecError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        load_spec(write(tmp_path, HALF_SPEC.replace(old, new)))


# ----------------------------------------------------------------------------------- one name per type

def test_buffers_and_tensor_maps_take_the_element_names_types_uses(tmp_path):
    spec = write(tmp_path, HALF_SPEC.replace("{name: bias, type: ptr, value: null}",
                                             "{name: bias, type: buffer, element: fp16, size: N, fill: 0.5}"))
    bias = next(argument for argument in load_spec(spec).kernels[0].signature if argument.name == "bias")
    assert bias.buffer.element == "float16"
    assert BufferPlan("bias", "float16", 2, "values", (0.5,)).initial_bytes().view("<f2").tolist() == [0.5, 0.5]
    assert BufferPlan("bias", "bfloat16", 3, "iota").initial_bytes().view("<u2").tolist() == [0, 0x3F80, 0x4000]
    maps = write(tmp_path, HALF_SPEC.replace("          - A\n", "          - {name: map_a, type: tensormap, tensor: A, "
                                             "box: [64, 64], element: float32}\n"), "maps.yaml")
    map_a = next(argument for argument in load_spec(maps).kernels[0].signature if argument.name == "map_a")
    assert map_a.tensor_map.element == "fp32"


def test_a_sweep_whose_one_instance_does_not_build_names_that_instance(tmp_path):
    from driver_gemm.planning.spec_plan import plan_spec
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text(
        "template <int T> __global__ void k(const float* A, const float* B, float* C, int M, int N, int K)\n"
        "{ static_assert(T != 3, \"T must not be 3\"); if (T > 0) C[0] = A[0] * B[0]; }\n")
    spec = write(tmp_path, """\
        shapes: [[64, 32, 16]]
        kernels:
          - name: k
            source: ../kernels/k.cu
            function: k
            params: {T: [1, 2, 3]}
            signature: [A, B, C, M, N, K]
            block: [16, 16]
            grid: [ceil(N / 16), ceil(M / 16)]
        """)
    planned = plan_spec(spec, arch="sm_90")
    error, = planned.compile_errors
    assert str(error).splitlines()[0].endswith("kernels[k].source did not build for k[T=3]:")
    assert "T must not be 3" in str(error)
    assert sorted(plan.kernel.label for plan in planned.plans) == ["k[T=1]", "k[T=2]"]


GLOBALS_KERNEL = """\
#ifdef __CUDACC_RTC__
struct alignas(64) CUtensorMap_st { unsigned long long opaque[16]; };
typedef CUtensorMap_st CUtensorMap;
#else
#include <cuda.h>
#endif
// A library's kernel parameters: pointers, sizes and tensor maps in one struct, passed by value.
struct Globals { const float* a; CUtensorMap map_a; CUtensorMap map_b; float* c; int M, N, K; };
__global__ void k(const __grid_constant__ Globals g)
{
    if (threadIdx.x == 0 && g.M > 0) g.c[0] = g.a[0] + (float)g.map_a.opaque[0] + (float)g.map_b.opaque[1];
}
"""

GLOBALS_SPEC = """\
    shapes: [[256, 256, 256]]
    kernels:
      - name: k
        source: ../kernels/globals.cu
        function: k
        arch: sm_90a
        block: [128]
        grid: [1]
        signature:
          - name: g
            type: struct
            fields:
              - A
              - {name: map_a, type: tensormap, tensor: A, box: [64, 32]}
              - {name: map_b, type: tensormap, tensor: B, box: [32, 64]}
              - C
              - M
              - N
              - K
    """


def test_tensor_maps_inside_a_struct_are_planned_checked_and_packed_in_their_place(tmp_path):
    from driver_gemm.planning.spec_plan import plan_spec
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "globals.cu").write_text(GLOBALS_KERNEL)
    spec = load_spec(write(tmp_path, GLOBALS_SPEC))
    kernel = spec.kernels[0]
    assert [(position, path) for position, path, _ in kernel.tensor_map_fields()] == [
        (0, "signature[0].fields[1]"), (0, "signature[0].fields[2]")]
    planned = plan_spec(spec, arch="sm_90a")
    plan, = planned.plans
    assert not planned.compile_errors and plan.valid, plan.problems    # 384 bytes, as the C compiler lays it out
    assert set(plan.tensor_maps) == {"map_a", "map_b"}
    encoded = {"map_a": bytes([1]) * 128, "map_b": bytes([2]) * 128}
    # The kernel declares its map alignas(64), as CUDA 12's <cuda.h> does: the parameter's 384 bytes in the image
    # place the maps at 64-byte steps (CUDA 13's 128 would make 512).
    types, values = launch_values(kernel, plan.argument_values, {"A": 0xA000, "B": 0xB000, "C": 0xC000},
                                  lambda argument, position: ("tensormap", encoded[argument.name]), [384])
    data = values[0]
    assert len(data) == 384 and types[0].alignment == 64
    assert data[0:8] == (0xA000).to_bytes(8, "little") and data[320:328] == (0xC000).to_bytes(8, "little")
    assert data[64:192] == encoded["map_a"] and data[192:320] == encoded["map_b"]
    assert data[328:340] == struct.pack("<iii", 256, 256, 256)
    wide = load_spec(write(tmp_path, GLOBALS_SPEC.replace("box: [64, 32]", "box: [512, 32]"), "wide.yaml"))
    problem, = plan_case(wide.kernels[0], Shape(256, 256, 256), arch_limits("sm_90")).problems
    assert problem.field == "kernels[k].signature[0].fields[1].box"
    line = next(number for number, text in enumerate(wide.path.read_text().splitlines(), 1) if "[512, 32]" in text)
    assert str(problem).startswith(f"{wide.path}:{line}: ")       # the field's own line, not its struct's
    with pytest.raises(SpecError, match="a tensor map inside a struct is held by value"):
        load_spec(write(tmp_path, GLOBALS_SPEC.replace("box: [64, 32]}", "box: [64, 32], pass: pointer}"),
                        "pointer.yaml"))


def test_16_bit_floats_round_as_c_does_and_an_iota_past_their_exact_whole_numbers_is_refused(tmp_path):
    assert float_value("float16", 65519.0) == 65504.0           # rounds down to the largest finite value
    with pytest.raises(ValueError, match="beyond the range of float16"):
        float_value("float16", 65520.0)                          # rounds to infinity
    spec = load_spec(write(tmp_path, HALF_SPEC.replace("{name: bias, type: ptr, value: null}",
                                                       "{name: bias, type: buffer, element: fp16, size: N * 64, "
                                                       "fill: iota}")))
    problem, = plan_case(spec.kernels[0], Shape(64, 64, 64), arch_limits("sm_90"), scalars=dict(spec.scalars)).problems
    assert "iota up to 4,095 does not fit float16 (its whole numbers are exact up to 2,048)" in str(problem)


# ---------------------------------------------------------------------------- params of a plain function

PLAIN_KERNEL = """\
    // the launcher picks the block's side at run time
    __global__ void naive(float* C, const float* A, const float* B, int M, int N, int K) { C[0] = A[0] * B[0]; }
    """
TEMPLATE_KERNELS = """\
    template <int S>
    __global__ void __launch_bounds__(256) tiled(float* C, const float* A, const float* B, int M, int N, int K)
    { C[0] = A[0] * S; }
    extern "C" {
    __global__ void flat(float* C) { C[0] = 1.0f; }
    }
    """


def naive_entry(named: str, extra: str = "") -> str:
    """A spec entry of PLAIN_KERNEL's naive, S named by `named` (params: or values:), block S x S."""
    return (f"  - name: naive\n    source: k.cu\n    function: naive\n{extra}    {named}\n"
            "    signature: [C, A, B, M, N, K]\n    block: [S, S]\n    grid: [ceil(N / S), ceil(M / S)]\n"
            "    tile: [S, S]\n")


def write_naive_spec(folder, named: str, extra: str = "", more: str = ""):
    (folder / "spec.yaml").write_text("shapes: [[1001, 513, 777]]\nkernels:\n" + naive_entry(named, extra) + more)
    return folder / "spec.yaml"


def test_the_declarations_tell_a_template_from_a_plain_function():
    texts = [textwrap.dedent(PLAIN_KERNEL), textwrap.dedent(TEMPLATE_KERNELS)]
    assert plain_declarations("naive", texts) == [
        "naive(float* C, const float* A, const float* B, int M, int N, int K)"]
    assert plain_declarations("flat", texts) == ["flat(float* C)"]
    assert plain_declarations("tiled", texts) == []          # template <int S> on the line before
    assert plain_declarations("absent", texts) == []         # nothing written out: nothing known


def test_a_global_in_a_comment_declares_no_kernel():
    # A comment that speaks of the file's __global__ wrappers before a __device__ helper's declaration.
    texts = ['// the extern "C" __global__ wrappers below call\n__device__ void helper(float* c) { c[0] = 1; }\n'
             '/* __global__ too */ template <int S> __device__ void tiled(float* c) { c[0] = S; }\n']
    assert plain_declarations("helper", texts) == []
    assert template_parameter_names("tiled", texts) == []
    assert not_a_kernel(["helper", "tiled<8>"], texts) == ("helper is a __device__ function, not a kernel "
                                                          "(__global__); tiled is a __device__ function, not a "
                                                          "kernel (__global__)")


def test_only_declarations_say_what_a_function_is_not_its_calls():
    texts = [textwrap.dedent("""\
        #define KERNEL(name) __global__ void name(float* c)
        __device__ float twice(float x);
        KERNEL(made) { c[0] = twice(1.0f); }
        namespace lib {
        template <typename T> struct S {
          public:
            __device__ static T get(int i) { return T(i); }
        };
        void run(int n);
        }
        void lib::run(int n) { float y = made(nullptr); return made(nullptr); }
        __global__ void k(float* c) { lib::S<float>::get(0); if (twice(c[0])) { c[1] = 0; } }
        """)]
    assert not_a_kernel(["made"], texts) is None       # a macro makes it: only calls are written out
    assert not_a_kernel(["k"], texts) is None
    assert not_a_kernel(["lib::S<float>::get"], texts) == "get is a __device__ function, not a kernel (__global__)"
    assert not_a_kernel(["lib::run"], texts) == ("run is a host function (written without __device__ or "
                                                 "__global__), not a kernel (__global__)")
    assert not_a_kernel(["twice"], texts) == "twice is a __device__ function, not a kernel (__global__)"


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
@pytest.mark.parametrize("in_header", [False, True])
def test_params_given_to_a_plain_function_are_refused_saying_it_is_no_template(tmp_path, compiler, in_header):
    # llm.c's matmul_forward_kernel1 takes any square block its launcher picks: params cannot carry that value.
    if compiler == "nvcc" and find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    files = {"kernels.cuh": PLAIN_KERNEL, "k.cu": '#include "kernels.cuh"\n'} if in_header else {"k.cu": PLAIN_KERNEL}
    folder = _project(tmp_path, files)
    path = write_naive_spec(folder, "params: {S: [8, 16]}", "    compiler: nvcc\n" if compiler == "nvcc" else "")
    line = next(number for number, text in enumerate(path.read_text().splitlines(), 1) if "params:" in text)
    errors = [str(error) for error in offline_problems(load_spec(folder / "spec.yaml"))[1].values()]
    assert len(errors) == 2
    for error in errors:
        assert f"spec.yaml:{line}: kernels[naive].params: naive is no template (the source declares naive(float* C, " \
               "const float* A, const float* B, int M, int N, int K), with no template <...>)" in error, error
        assert "goes under values: instead (values: {S: ...})" in error
        assert "NVRTC_ERROR" not in error and "instances.cu" not in error


def test_a_template_given_the_wrong_params_keeps_the_compilers_own_message(tmp_path):
    folder = _project(tmp_path, {"k.cu": TEMPLATE_KERNELS})
    (folder / "spec.yaml").write_text(textwrap.dedent("""\
        shapes: [[1001, 513, 777]]
        kernels:
          - name: tiled
            source: k.cu
            function: tiled
            params: {S: 8, T: 2}
            signature: [C, A, B, M, N, K]
            block: [16, 16]
            grid: [ceil(N / 16), ceil(M / 16)]
        """))
    (error,) = offline_problems(load_spec(folder / "spec.yaml"))[1].values()
    assert "no template" not in str(error) and "check the spec's function and params" in str(error)


def test_values_sweep_what_only_the_launch_reads_and_stay_out_of_the_instance(tmp_path):
    # llm.c's matmul_forward_kernel1 (and matrixMulDrv's kernels) take the block side their launcher picks.
    folder = _project(tmp_path, {"k.cu": PLAIN_KERNEL + TEMPLATE_KERNELS})
    write_naive_spec(folder, "values: {S: [8, 16]}", more=(
        "  - name: tiled\n    source: k.cu\n    function: tiled\n    params: {S: 4}\n    values: {W: [8, 16]}\n"
        "    signature: [C, A, B, M, N, K]\n    block: [W, W]\n    grid: [ceil(N / W), ceil(M / W)]\n"
        "    tile: [W, W]\n"))
    spec = load_spec(folder / "spec.yaml")
    assert [(kernel.label, kernel.instance) for kernel in spec.kernels] == [
        ("naive[S=8]", "naive"), ("naive[S=16]", "naive"),
        ("tiled[S=4,W=8]", "tiled<4>"), ("tiled[S=4,W=16]", "tiled<4>")]
    plans, failed = offline_problems(spec)
    assert plans == [] and failed == {}


ORDERED_TEMPLATES = {"k.cu": """\
    #include "tile.cuh"
    template <int S>
    __global__ void own(float* C, const float* A, const float* B, int M, int N, int K) { C[0] = A[0] * S; }
    """, "tile.cuh": """\
    #pragma once
    template <int BM, int BN, int BK = 8>
    __global__ void tile(float* C, const float* A, const float* B, int M, int N, int K) { C[0] = A[0] * BM * BN; }
    template <int BN, int BM>
    __global__ void either(float* C, const float* A, const float* B, int M, int N, int K) { C[0] = BM; }
    template <int BM, int BN>
    __global__ void either(float* C, const float* A, int M) { C[0] = BN; }
    """}


def _order_spec(folder, function: str, params: str):
    (folder / "spec.yaml").write_text(textwrap.dedent(f"""\
        shapes: [[64, 64, 64]]
        kernels:
          - name: k
            source: k.cu
            function: {function}
            params: {params}
            signature: [C, A, B, M, N, K]
            block: [16, 16]
            grid: [ceil(N / 16), ceil(M / 16)]
        """))
    return load_spec(folder / "spec.yaml")


@pytest.mark.parametrize("function, params, moved, in_order", [
    ("tile", "{BN: 32, BM: 8}", "BN would be passed as BM; BM would be passed as BN",
     "give them in the template's order, from its first: params: {BM: 8, BN: 32}"),
    # One left out before the last named: BK lands in BN's place, and BN is what is missing.
    ("tile", "{BM: 8, BK: 16}", "BK would be passed as BN",
     "give them in the template's order, from its first: params: {BM: 8, BN: ..., BK: 16}"),
    ("tile", "[{BN: 32, BM: 8}, {BN: 64, BM: 8}]", "BN would be passed as BM",
     "give them in the template's order, from its first: params: {BM: 8, BN: 32}"),
    # A name of the template's in another one's place, beside one of the spec's own.
    ("tile", "{BN: 8, X: 32}", "BN would be passed as BM",
     "params are passed by position from the template's first (BM, BN, BK): give each in its place"),
])
def test_params_carrying_the_templates_names_in_another_order_are_refused_at_params(tmp_path, function, params,
                                                                                   moved, in_order):
    plans, failed = offline_problems(_order_spec(_project(tmp_path, ORDERED_TEMPLATES), function, params))
    assert failed == {} and plans
    problems = [str(problem) for plan in plans for problem in plan.problems]
    assert all(f"spec.yaml:6: kernels[k].params: params name the template's parameters in another order than "
               f"{function} declares them" in problem for problem in problems), problems
    assert moved in problems[0] and in_order in problems[0]


KINDS_TEMPLATE = {"k.cu": """\
    template <int TILE, bool CHECKED>
    __global__ void tb(float* C, const float* A, const float* B, int M, int N, int K) { if (CHECKED) C[0] = TILE; }
    """}


@pytest.mark.parametrize("params, refused", [("{CHECKED: true, TILE: 16}", True), ("{TILE: 16, CHECKED: true}", False)])
def test_params_of_two_kinds_in_another_order_are_refused_at_params_not_as_a_compile_failure(tmp_path, params,
                                                                                             refused):
    # A bool and an int swapped make no instance at all (tb<true, 16>): the compile would fail with "cannot determine
    # which instance", saying nothing of the order. The order is read before compiling, and the kernel not compiled.
    from driver_gemm.planning.spec_plan import plan_spec

    spec = _order_spec(_project(tmp_path, KINDS_TEMPLATE), "tb", params)
    plans, failed = offline_problems(spec)
    assert failed == {}
    planned = plan_spec(spec, "sm_90")
    assert planned.compile_errors == [] and planned.ok == (not refused)
    if refused:
        for problems in ([str(problem) for plan in plans for problem in plan.problems],
                         [str(problem) for plan in planned.plans for problem in plan.problems]):
            problem, = problems
            assert "spec.yaml:6: kernels[k].params: params name the template's parameters in " \
                   "another order than tb declares them (template <TILE, CHECKED>)" in problem, problem
            assert "give them in the template's order, from its first: params: {TILE: 16, CHECKED: true}" in problem
    else:
        assert plans == []


@pytest.mark.parametrize("function, params", [
    ("tile", "{BM: 8, BN: 32}"),            # the template's order
    ("tile", "{BM: 8, BN: 32, BK: 16}"),
    ("tile", "{X: 8, Y: 32}"),              # names of the spec's own, in the template's order by position
    ("tile", "{X: 8, BN: 32}"),             # one of the spec's own, the template's name in its own place
    ("own", "{S: 4}"),
    # Another overload declares them in this order: which one is meant is not read from the source.
    ("'either(float*, const float*, const float*, int, int, int)'", "{BM: 8, BN: 32}"),
])
def test_params_in_the_templates_order_or_of_the_specs_own_names_pass(tmp_path, function, params):
    plans, failed = offline_problems(_order_spec(_project(tmp_path, ORDERED_TEMPLATES), function, params))
    assert (plans, failed) == ([], {})


@pytest.mark.parametrize("values, needle", [
    ("[8, 16]", "a list under values is one of configurations, each a mapping"),
    ("8", "values is a mapping of names to whole numbers"),
    ("{S: float}", "values are whole numbers the launch reads"),
    ("{S: 1.5}", "values are whole numbers the launch reads"),
    ("{BM: 8}", "BM is a param already"),
    ("{M: 8}", "a value's name is a C identifier other than"),
    ("{S: []}", "an empty list sweeps nothing"),
])
def test_malformed_values_are_refused_at_their_field(tmp_path, values, needle):
    folder = _project(tmp_path, {"k.cu": TEMPLATE_KERNELS})
    (folder / "spec.yaml").write_text(textwrap.dedent(f"""\
        shapes: [[1001, 513, 777]]
        kernels:
          - name: tiled
            source: k.cu
            function: tiled
            params: {{BM: 4}}
            values: {values}
            signature: [C, A, B, M, N, K]
            block: [16, 16]
            grid: [ceil(N / 16), ceil(M / 16)]
        """))
    with pytest.raises(SpecError) as caught:
        load_spec(folder / "spec.yaml")
    assert needle in str(caught.value) and "spec.yaml:7" in str(caught.value), str(caught.value)


def test_a_plain_function_with_values_that_does_not_compile_keeps_the_compilers_message(tmp_path):
    # values are no template arguments: a real error in the kernel is not taken for params given to a plain one.
    folder = _project(tmp_path, {"k.cu": PLAIN_KERNEL.replace("C[0] = A[0] * B[0];", "C[0] = undeclared;")})
    write_naive_spec(folder, "values: {S: [8, 16]}")
    errors = [str(error) for error in offline_problems(load_spec(folder / "spec.yaml"))[1].values()]
    assert errors and all('identifier "undeclared" is undefined' in error and "no template" not in error
                          for error in errors)
