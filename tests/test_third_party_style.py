"""Kernels written the way outside GEMM collections write them, planned and run unchanged.

The kernels of `tests/kernels/thirdparty_style/` (our own, each reproducing one
habit of those collections) cover: host headers (<cstdio>, <cassert>, <vector>,
<cublas_v2.h>) and glibc's `uint` in a kernel file compiled by NVRTC, host code
in the kernel's file (nvcc, or a guard), a shared header in a sibling folder
found through a relative ``-I``, namespaces, bool/enum/defaulted template
parameters, overloads picked by their parameter types, size_t and int64_t
sizes, and cuBLAS's column-major convention with dynamic shared memory.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from driver_gemm.cli import EXIT_FAILED, EXIT_NO_GPU, EXIT_OK, EXIT_USAGE, main
from driver_gemm.cuda import headers
from driver_gemm.cuda import nvcc as nvcc_module
from driver_gemm.cuda.compile import compile_source, local_headers
from driver_gemm.cuda.compile_diagnostics import compile_hints
from driver_gemm.cuda.cubin import read_cubin
from driver_gemm.cuda.mangling import demangle, find_symbol, normalise_parameter_type
from driver_gemm.errors import CompileError, ImageError, SpecError, WrongArgumentValue
from driver_gemm.kernel_names import overload_expression, split_overload
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from conftest import TEST_KERNELS
from test_cli import NO_GPU

STYLE = TEST_KERNELS / "thirdparty_style"
SPEC = STYLE / "specs" / "thirdparty.yaml"
NVCC = shutil.which("nvcc") or nvcc_module.find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
needs_toolkit = pytest.mark.skipif(not headers.toolkit_include_dirs(), reason="no CUDA toolkit headers found")
NVCC_KERNELS = {"host-code-nvcc"}
REFUSED = {("ns-template[TILE=16,CHECKED=false]", "129x65x33"), ("wmma", "96x80x72"), ("wmma", "129x65x33")}


def spec_without_nvcc():
    """The spec, less its nvcc kernels where nvcc is missing."""
    import dataclasses

    spec = load_spec(SPEC)
    if NVCC is None:
        spec = dataclasses.replace(spec, kernels=tuple(k for k in spec.kernels if k.name not in NVCC_KERNELS))
    return spec


def write_spec(folder: Path, kernels: str, shapes: str = "[[64, 48, 40]]") -> Path:
    (folder / "pyproject.toml").write_text("")
    path = folder / "spec.yaml"
    path.write_text(f"shapes: {shapes}\nkernels:\n{kernels}")
    return path


# ----------------------------------------------------------------------------------- the whole spec, offline


@needs_toolkit
def test_every_kernel_of_the_outside_style_spec_plans_without_a_gpu():
    planned = plan_spec(spec_without_nvcc(), "sm_90")
    assert not planned.compile_errors, [str(e) for e in planned.compile_errors]
    by_kernel = {}
    for plan in planned.plans:
        by_kernel.setdefault(plan.kernel.label, []).append(plan)
    # every kernel planned on every shape, its signature checked against the compiled image
    assert all(len(plans) == 3 for plans in by_kernel.values()), by_kernel.keys()
    assert len(by_kernel) == len(load_spec(SPEC).kernels) - (0 if NVCC else len(NVCC_KERNELS))
    invalid = {(plan.kernel.label, plan.shape.label) for plan in planned.plans if not plan.valid}
    # the bool parameter reaches require: the unchecked instance is refused where M, N are not whole tiles;
    # WMMA needs whole 16 x 16 x 16 tiles
    assert invalid == REFUSED
    refused = next(plan for plan in planned.plans if not plan.valid)
    assert "CHECKED=false, M=129, N=65" in " ".join(str(p) for p in refused.problems)
    column_major = by_kernel["column-major[TILE=16]"][0]
    assert column_major.config.shared_bytes == 2 * 16 * 16 * 4


@needs_toolkit
def test_plan_command_on_the_spec_exits_1_only_for_the_refused_case(capsys):
    code = main(["plan", "--arch", "sm_90", str(SPEC)] + ([] if NVCC else ["-k", "host-headers"]))
    out = capsys.readouterr()
    if NVCC:
        cases = 3 * len(load_spec(SPEC).kernels)     # every kernel (a sweep expanded) on every shape
        assert code == EXIT_FAILED and f"{cases - 3} ok, 3 INVALID" in out.out, out.out + out.err
    else:
        assert code == EXIT_OK


@NO_GPU
@needs_toolkit
def test_run_checks_everything_then_stops_at_the_missing_gpu(capsys):
    kernels = [] if NVCC else [f"-k={k}" for k in ("host-headers", "column-major", "wmma")]
    assert main(["run", str(SPEC), "-s", "64x48x32"] + kernels) == EXIT_NO_GPU
    assert "no CUDA driver" in capsys.readouterr().err
    # a shape some case cannot take: those cases' errors at their lines first
    assert main(["run", str(SPEC), "-s", "96x80x72"] + kernels) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "kernels[wmma].require[2]: 'K % 16 == 0' does not hold with K=72" in err and "no GPU either" in err


def test_bool_template_parameters_are_cpp_literals_in_the_instance_and_the_label():
    kernel = next(k for k in load_spec(SPEC).kernels if k.name == "ns-template")
    assert kernel.instance == "tp::detail::gemm<16, true>"
    assert kernel.label == "ns-template[TILE=16,CHECKED=true]"
    enum = next(k for k in load_spec(SPEC).kernels if k.name == "ns-template-col-b")
    assert enum.instance == "tp::detail::gemm<16, true, tp::Order::Col>"


def test_a_template_parameter_that_is_no_value_is_refused_at_its_line(tmp_path):
    path = write_spec(tmp_path, "  - {name: x, source: k.cu, function: f, params: {T: [1.5]}, block: [1], grid: [1]}\n")
    (tmp_path / "k.cu").write_text("")
    with pytest.raises(SpecError, match="whole numbers, true/false, C\\+\\+ type names, template-ids or "
                                        "enumerators") as info:
        load_spec(path)
    assert info.value.where.endswith("spec.yaml:3")


# ----------------------------------------------------------------------------------- headers under NVRTC


def test_the_c_library_stand_ins_give_the_types_nvcc_gives_on_linux():
    source = ("#include <cstdint>\n#include <climits>\n#include <cstdio>\n#include <cassert>\n"
              "__global__ void k(int64_t a, uint64_t b, uint c, size_t d) { assert(a < INT64_MAX); "
              "printf(\"%d\", INT_MAX); }\n")
    folder = Path(__import__("tempfile").mkdtemp())
    (folder / "k.cu").write_text(source)
    cubin = compile_source(folder / "k.cu", ["k"], use_cache=False)
    # int64_t is long long (x) and uint64_t unsigned long long (y), as CCCL declares them under NVRTC;
    # uint is unsigned int (j), size_t unsigned long (m), as with nvcc and glibc
    assert cubin.symbol("k") == "_Z1kxyjm"


def test_a_tma_kernel_that_includes_the_driver_header_builds_unchanged_under_nvrtc(tmp_path):
    # As Hopper kernel files are written for nvcc: <cuda.h> for CUtensorMap and (through it) uint32_t, an enumerator
    # as a constant, <cudaTypedefs.h> for the runner's function pointer.
    (tmp_path / "k.cu").write_text(
        "#include <cuda.h>\n#include <cudaTypedefs.h>\n"
        "static_assert(sizeof(CUtensorMap) == 128 && alignof(CUtensorMap) == (CUDA_VERSION >= 13000 ? 128 : 64), "
        "\"the driver's map, aligned as the toolkit's header of its version aligns it\");\n"
        "static_assert(CU_TENSOR_MAP_SWIZZLE_128B == 3 && CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == 9, \"its values\");\n"
        "__global__ void k(const __grid_constant__ CUtensorMap map, float* c) {\n"
        "    uint32_t at = static_cast<uint32_t>(map.opaque[0]);\n    c[0] = at + CUDA_VERSION;\n}\n")
    cubin = compile_source(tmp_path / "k.cu", ["k"], use_cache=False)
    assert cubin.symbol("k") == "_Z1k14CUtensorMap_stPf"   # the type's name as nvcc's <cuda.h> gives it


def test_host_only_headers_are_empty_under_nvrtc_and_their_use_in_device_code_is_named(tmp_path):
    (tmp_path / "k.cu").write_text("#include <vector>\n__global__ void k(float* c) { std::vector<float> v; }\n")
    with pytest.raises(Exception) as info:
        compile_source(tmp_path / "k.cu", ["k"], use_cache=False)
    assert "k.cu:2: error" in str(info.value) and "vector" in str(info.value)


def test_a_benchmark_runners_system_headers_and_driver_prototypes_compile_beside_its_kernels(tmp_path):
    # What outside kernel files include for their own runner (POSIX, threads, timers, C's bool and complex), and a
    # library header's prototypes in the driver's types, which -default-device (a header library's way under
    # NVRTC) reads as device declarations: they declare nothing a kernel uses, and the kernels compile.
    includes = ["unistd.h", "sys/time.h", "sys/types.h", "sys/syscall.h", "time.h", "ctime", "pthread.h", "thread",
                "mutex", "set", "list", "deque", "queue", "complex", "complex.h", "getopt.h", "stdbool.h", "cuda.h"]
    (tmp_path / "k.cu").write_text("".join(f"#include <{name}>\n" for name in includes)
                                   + "CUresult launch_it(CUstream stream, CUfunction f, CUcontext c, CUdevice d);\n"
                                   + "static_assert(CUDA_SUCCESS == 0 && __bool_true_false_are_defined, \"\");\n"
                                   + "__global__ void k(float* c) { c[0] = true; }\n")
    assert compile_source(tmp_path / "k.cu", ["k"], extra_options=["-default-device"],
                          use_cache=False).symbol("k") == "_Z1kPf"


def test_a_header_nowhere_to_be_found_says_where_to_give_it(tmp_path):
    (tmp_path / "k.cu").write_text('#include <cute/tensor.hpp>\n__global__ void k() {}\n')
    with pytest.raises(Exception) as info:
        compile_source(tmp_path / "k.cu", ["k"], use_cache=False)
    text = str(info.value)
    assert "k.cu:1: error: cannot open source file \"cute/tensor.hpp\"" in text
    assert "hint: cute/tensor.hpp is not beside the kernel source" in text and "options: [-I FOLDER]" in text


def test_an_error_in_an_included_header_is_quoted_from_that_header(tmp_path):
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "util.h").write_text("#pragma once\nint broken = ;\n")
    (tmp_path / "k.cu").write_text('#include "common/util.h"\n__global__ void k() {}\n')
    with pytest.raises(Exception) as info:
        compile_source(tmp_path / "k.cu", ["k"], use_cache=False)
    assert "util.h:2: error" in str(info.value) and "int broken = ;" in str(info.value)


def test_toolkit_headers_without_a_toolkit_say_so(monkeypatch):
    monkeypatch.setattr(headers, "toolkit_include_dirs", lambda: ())
    hint = headers.missing_header_hint("cuda_fp16.h")
    assert "comes with the CUDA toolkit" in hint and "CUDA_HOME" in hint
    assert headers.missing_header_hint("cuda/pipeline").startswith("<cuda/pipeline> comes with the CUDA toolkit")


@needs_toolkit
def test_toolkit_headers_are_found_without_options(tmp_path):
    (tmp_path / "k.cu").write_text("#include <cuda_fp16.h>\n#include <mma.h>\n#include <cuda/pipeline>\n"
                                   "__global__ void k(__half* c) { c[0] = __float2half(1.0f); }\n")
    assert compile_source(tmp_path / "k.cu", ["k"], use_cache=False).symbol("k") == "_Z1kP6__half"


def test_host_code_in_the_kernel_file_fails_with_the_two_ways_out(tmp_path, capsys):
    path = write_spec(tmp_path, f"  - {{name: h, source: {STYLE / 'kernels' / 'with_host_code.cu'}, "
                                "function: sgemm_with_host_code, block: [16, 16], grid: [ceil(N / 16), ceil(M / 16)]}\n")
    assert main(["plan", "--arch", "sm_90", "--allow-outside-sources", str(path)]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert f"{path}:3: kernels[h].source did not build" in err
    assert "host functions are not allowed in JIT mode" in err
    assert "hint: NVRTC compiles device code only" in err and "compiler: nvcc" in err \
        and "#ifndef __CUDACC_RTC__" in err
    assert "Traceback" not in err


@NO_GPU
def test_run_without_a_gpu_reports_a_kernel_that_does_not_build_not_only_the_missing_gpu(tmp_path, capsys):
    path = write_spec(tmp_path, f"  - {{name: h, source: {STYLE / 'kernels' / 'with_host_code.cu'}, "
                                "function: sgemm_with_host_code, block: [16, 16], grid: [ceil(N / 16), ceil(M / 16)]}\n")
    assert main(["run", "--allow-outside-sources", str(path)]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert f"{path}:3: kernels[h].source did not build" in err and "hint: NVRTC compiles device code only" in err
    assert "1 kernel build(s) failed (the lines above; `driver-gemm plan` shows every case); this machine has no GPU either" in err
    assert "Traceback" not in err and not (tmp_path / "results").exists()


def test_compile_hints_name_each_missing_header_once():
    log = ('a.cu(1): catastrophic error: cannot open source file "x.h"\n'
           'b.h(3): catastrophic error: cannot open source file "x.h"\n')
    hints = compile_hints(log)
    assert len(hints) == 1 and hints[0].startswith("x.h is not beside")


# ----------------------------------------------------------------------------------- include folders


def test_a_relative_include_folder_is_the_specs_and_needs_no_leave_inside_the_project(tmp_path):
    (tmp_path / "lib" / "common").mkdir(parents=True)
    (tmp_path / "lib" / "kernels").mkdir()
    (tmp_path / "lib" / "common" / "tile.h").write_text("#define TILE 8\n")
    (tmp_path / "lib" / "kernels" / "k.cu").write_text(
        '#include "tile.h"\n__global__ void k(const float* A, const float* B, float* C, int M, int N, int K) '
        "{ C[0] = TILE; }\n")
    path = write_spec(tmp_path, "  - {name: k, source: lib/kernels/k.cu, function: k, options: [-Ilib/common], "
                                "block: [1], grid: [1]}\n")
    kernel = load_spec(path).kernels[0]
    assert kernel.options == (f"--include-path={tmp_path.resolve() / 'lib' / 'common'}",)
    planned = plan_spec(load_spec(path), "sm_90")
    assert not planned.compile_errors and planned.plans


@pytest.mark.parametrize("option, message", [
    ("-I../outside", "outside the spec's project"),
    ("-I/usr/include", "outside the spec's project"),
    ("-Ino/such/folder", "is not a folder"),
])
def test_include_folders_that_are_refused(tmp_path, capsys, option, message):
    (tmp_path / "project").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "project" / "k.cu").write_text("__global__ void k() {}\n")
    path = write_spec(tmp_path / "project", f"  - {{name: k, source: k.cu, function: k, options: ['{option}'], "
                                            "block: [1], grid: [1]}\n")
    with pytest.raises(SpecError, match=message) as info:
        load_spec(path)
    assert info.value.field == "kernels[k].options" and info.value.where.endswith("spec.yaml:3")
    assert main(["plan", "--arch", "sm_90", str(path)]) == EXIT_USAGE
    assert "Traceback" not in capsys.readouterr().err


def test_headers_in_include_folders_are_part_of_the_cache_key(tmp_path):
    (tmp_path / "inc" / "sub").mkdir(parents=True)
    (tmp_path / "inc" / "lib.h").write_text('#include "sub/deeper.h"\n')
    (tmp_path / "inc" / "sub" / "deeper.h").write_text("#define VALUE 1\n")
    source = '#include <lib.h>\n#include "missing.h"\n__global__ void k(int* c) { c[0] = VALUE; }\n'
    found = local_headers(source, [tmp_path / "src", tmp_path / "inc"])
    assert set(found) == {"lib.h", "sub/deeper.h"}
    (tmp_path / "k.cu").write_text(source.replace('#include "missing.h"\n', ""))
    first = compile_source(tmp_path / "k.cu", ["k"], extra_options=[f"-I{tmp_path / 'inc'}"])
    (tmp_path / "inc" / "sub" / "deeper.h").write_text("#define VALUE 2\n")
    second = compile_source(tmp_path / "k.cu", ["k"], extra_options=[f"-I{tmp_path / 'inc'}"])
    assert not second.from_cache and first.image != second.image
    third = compile_source(tmp_path / "k.cu", ["k"], extra_options=[f"-I{tmp_path / 'inc'}"])
    assert third.from_cache


# ----------------------------------------------------------------------------------- names, overloads, mangling


def test_split_overload_reads_both_spellings():
    assert split_overload("f(const float* A, int)") == ("f", ("const float* A", "int"))
    assert split_overload("ns::g<1, 2>(Pair<int, int>, float)") == ("ns::g<1, 2>", ("Pair<int, int>", "float"))
    assert split_overload(overload_expression("ns::g<1>", ["int", "float*"])) == ("ns::g<1>", ("int", "float*"))
    assert split_overload("g<1, 2>") == ("g<1, 2>", None)
    assert split_overload("g()") == ("g", ())


@pytest.mark.parametrize("written, demangled", [
    ("const float* __restrict__ A", "const float*"), ("float const *B", "const float*"), ("int M", "int"),
    ("size_t K", "unsigned long"), ("int64_t", "long"), ("int64_t", "long long"), ("uint64_t", "unsigned long long"),
    ("const half *__restrict__ A", "const __half*"),
    ("unsigned int", "unsigned int"), ("lib::Pair<int, int> p", "lib::Pair<int, int>"),
])
def test_parameter_types_compare_as_the_demangler_writes_them(written, demangled):
    assert normalise_parameter_type(written) == normalise_parameter_type(demangled)


def test_an_enum_template_argument_is_demangled():
    found = demangle("_ZN3lib6detail4gemmILi64ELb1ELNS0_5OrderE1EfEEviiiPKT2_S5_PS3_")
    assert found.name == "lib::detail::gemm<64, true, (lib::detail::Order)1, float>"
    assert [p.text for p in found.params] == ["int", "int", "int", "const float*", "const float*", "float*"]


def test_find_symbol_picks_an_overload_by_its_parameter_types():
    symbols = ["_Z4overPK6__halfS1_PS_iii", "_Z4overPKfS0_Pfiii"]
    assert find_symbol("over(const half* A, const half*, half*, int, int, int)", symbols) == symbols[0]
    assert find_symbol("over(float const*, const float*, float*, int, int, int)", symbols) == symbols[1]
    with pytest.raises(ImageError, match="ambiguous.*the parameter types"):
        find_symbol("over", symbols)
    with pytest.raises(ImageError, match="no kernel matches function 'over\\(double\\)'"):
        find_symbol("over(double)", symbols)


def test_find_symbol_takes_defaulted_arguments_and_enumerators_by_name():
    symbols = ["_ZN3lib6detail4gemmILi64ELb1ELNS0_5OrderE0EfEEviiiPKT2_S5_PS3_",
               "_ZN3lib6detail4gemmILi32ELb1ELNS0_5OrderE0EfEEviiiPKT2_S5_PS3_"]
    assert find_symbol("lib::detail::gemm<64, true>", symbols) == symbols[0]
    assert find_symbol("lib::detail::gemm<32, true, lib::detail::Order::Row, float>", symbols) == symbols[1]
    with pytest.raises(ImageError):
        find_symbol("lib::detail::gemm<64, false>", symbols)


def test_an_overloaded_name_without_parameter_types_says_how_to_pick_one(tmp_path, capsys):
    path = write_spec(tmp_path, f"  - {{name: o, source: {STYLE / 'kernels' / 'names.cu'}, function: gemm_overloaded, "
                                f"options: ['-I{STYLE / 'common'}'], block: [1], grid: [1]}}\n")
    assert main(["plan", "--arch", "sm_90", "--allow-outside-sources", str(path)]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "overloaded function" in err and "function: name(const float*, int)" in err


@pytest.mark.parametrize("function", ["f(1)", "f(int", "f(int)(int)", "f(int; x)"])
def test_malformed_parameter_lists_are_refused(tmp_path, function):
    (tmp_path / "k.cu").write_text("")
    path = write_spec(tmp_path, f"  - {{name: x, source: k.cu, function: '{function}', block: [1], grid: [1]}}\n")
    with pytest.raises(SpecError, match="not a C\\+\\+ function name"):
        load_spec(path)


def test_a_mismatched_signature_shows_the_kernels_own_parameters(tmp_path):
    path = write_spec(tmp_path, f"  - {{name: w, source: {STYLE / 'kernels' / 'names.cu'}, function: gemm_wide_sizes, "
                                f"options: ['-I{STYLE / 'common'}'], block: [1], grid: [1], "
                                "signature: [A, B, C, M, N, K, alpha]}\n")
    (tmp_path / "pyproject.toml").unlink()
    planned = plan_spec(load_spec(path, allow_outside_sources=True), "sm_90")
    problems = " ".join(str(p) for plan in planned.plans for p in plan.problems)
    assert "parameter 4 (M, int32): the kernel's parameter (unsigned long) is 8 bytes" in problems
    assert "it takes (const float*, const float*, float*, unsigned long, unsigned long, long long, float)" in problems
    assert "{name: M, type: uint64, value: M}" in problems


# ----------------------------------------------------------------------------------- nvcc and prebuilt images


@needs_nvcc
@needs_toolkit
def test_nvcc_and_a_prebuilt_cubin_find_the_same_kernels_as_nvrtc(tmp_path):
    names = STYLE / "kernels" / "names.cu"
    (tmp_path / "instances.cu").write_text(
        f'#include "{names}"\n'
        "template __global__ void tp::detail::gemm<16, true>(int, int, int, const float*, const float*, float*);\n"
        "template __global__ void tp::detail::gemm<16, true, tp::Order::Col>"
        "(int, int, int, const float*, const float*, float*);\n")
    cubin = tmp_path / "names.cubin"
    subprocess.run([str(NVCC), "-cubin", "-arch=sm_90", f"-I{STYLE / 'common'}", "-o", str(cubin),
                    str(tmp_path / "instances.cu")], check=True, capture_output=True, timeout=300)
    entries = {
        "tp::detail::gemm<16, true>": "[M, N, K, A, B, C]",
        "tp::detail::gemm<16, true, tp::Order::Col>": "[M, N, K, A, B, C]",
        "gemm_overloaded(const float*, const float*, float*, int, int, int)": "[A, B, C, M, N, K]",
        # the half overload's matrices are fp16: types: says so, as the signature check holds them to it
        "gemm_overloaded(const __half*, const __half*, __half*, int, int, int)": "[A, B, C, M, N, K], "
                                                                                 "types: {a: fp16, c: fp16}",
    }
    symbols = {}
    for how in ("source", "nvcc", "binary"):
        lines = []
        for index, (function, signature) in enumerate(entries.items()):
            code = {"source": f"source: {names}", "nvcc": f"source: {names}, compiler: nvcc",
                    "binary": f"binary: {cubin}"}[how]
            options = "" if how == "binary" else f", options: ['-I{STYLE / 'common'}']"
            if how == "binary":
                if "gemm_overloaded" in function:
                    continue     # the explicit instantiations above hold the templates only
                # an image cannot say what a defaulted argument or an enumerator was: named as demangled
                function = f"tp::detail::gemm<16, true, (tp::Order){index}, float>"
            lines.append(f"  - {{name: k{index}, {code}{options}, function: '{function}', "
                         f"signature: {signature}, block: [16, 16], grid: [ceil(N / 16), ceil(M / 16)]}}\n")
        folder = tmp_path / how
        folder.mkdir()
        spec = load_spec(write_spec(folder, "".join(lines)), allow_outside_sources=True)
        planned = plan_spec(spec, "sm_90")
        assert not planned.compile_errors, [str(e) for e in planned.compile_errors]
        assert all(plan.valid for plan in planned.plans), [p.problems for p in planned.plans]
        symbols[how] = {kernel.name: planned.compiled[kernel.label].symbol(kernel.instance) for kernel in spec.kernels}
    assert symbols["source"] == symbols["nvcc"]
    with pytest.raises(ImageError, match="is ambiguous") as info:
        find_symbol("tp::detail::gemm<16, true>", read_cubin(cubin.read_bytes()).kernels)
    assert "(tp::detail::gemm<16, true, (tp::Order)0, float>)" in str(info.value)
    assert "(tp::detail::gemm<16, true, (tp::Order)1, float>)" in str(info.value)
    assert symbols["binary"] == {name: symbol for name, symbol in symbols["source"].items() if name in ("k0", "k1")}


# ----------------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu
def test_the_outside_style_kernels_compute_the_right_product_on_the_gpu(driver_gemm_run):
    """Every kernel of the spec launched and checked against the float64 reference (about 20 s on the H200)."""
    import dataclasses
    from driver_gemm.session.state import RunOptions

    spec = dataclasses.replace(spec_without_nvcc(), baseline=False)
    run = driver_gemm_run(spec, options=RunOptions(time=False))
    statuses = {(c.kernel, c.shape.label): c.status for c in run.cases}
    assert {key: statuses.pop(key) for key in REFUSED} == dict.fromkeys(REFUSED, Status.INVALID)
    wrong = {key: status for key, status in statuses.items() if status != Status.PASS}
    assert not wrong, [(c.kernel, c.shape.label, c.message) for c in run.cases if c.status not in
                       (Status.PASS, Status.INVALID)]


# ----------------------------------------------------------------------------------- structs by value


def test_a_struct_is_laid_out_and_packed_as_the_c_abi_lays_it_out():
    from driver_gemm.argtypes import struct_type
    from driver_gemm.cuda.launch import PackedArguments, pack_struct
    import struct as pystruct

    kind, offsets = struct_type(["int32", "int32", "int32", "ptr", "ptr", "ptr", "float32"])
    assert offsets == (0, 4, 8, 16, 24, 32, 40) and kind.size == 48 and kind.alignment == 8
    data = pack_struct(["int32", "ptr", "float32"], [7, 0x1234, 1.5], ["M", "A", "alpha"])
    assert data == pystruct.pack("<i4xQf4x", 7, 0x1234, 1.5)
    packed = PackedArguments([struct_type(["int32", "ptr", "float32"])[0], "int32"], [data, 3], ["args", "K"])
    assert packed.offsets == [0, 24] and packed.value_bytes(0) == data


def test_a_struct_argument_is_planned_with_its_fields_values():
    kernel = next(k for k in load_spec(SPEC).kernels if k.name == "struct-args")
    args, = kernel.signature
    assert args.ctype == "struct" and [f.name for f in args.fields] == ["M", "N", "K", "A", "B", "C", "alpha"]
    assert [path for path, _ in kernel.leaf_arguments()][-1] == "signature[0].fields[6]"
    planned = plan_spec(load_spec(SPEC).select(kernels=["struct-args"]), "sm_90")
    plan = planned.plans[0]
    assert plan.valid and plan.argument_values["M"] == 96 and plan.argument_values["alpha"] == 1.5


@pytest.mark.parametrize("entry, message, field", [
    ("{name: args, type: struct}", "lists its fields in order", "signature[0].fields"),
    ("{name: args, type: struct, fields: []}", "lists its fields in order", "signature[0].fields"),
    ("{name: args, type: struct, fields: [A, B, C, M, N, K, {name: m, type: tensormap, tensor: A, box: [8, 8], "
     "pass: pointer}]}", "held by value", "signature[0].fields[6].pass"),
    ("{name: args, type: struct, fields: [A, B, C, M, N, K, X]}", "unknown argument 'X'", "signature[0].fields[6]"),
    ("{name: args, type: struct, fields: [A, B, C, M, N, K, M]}", "names M more than once", "signature"),
    ("{name: args, type: struct, fields: [A, B, M, N, K]}", "must take C exactly once", "signature"),
])
def test_malformed_struct_arguments_are_refused_at_their_field(tmp_path, entry, message, field):
    (tmp_path / "k.cu").write_text("")
    path = write_spec(tmp_path, f"  - {{name: s, source: k.cu, function: f, block: [1], grid: [1], "
                                f"signature: [{entry}]}}\n")
    with pytest.raises(SpecError, match=message) as info:
        load_spec(path)
    assert info.value.field == f"kernels[s].{field}", info.value.field


def test_a_struct_of_the_wrong_size_is_named_with_its_fields(tmp_path):
    source = STYLE / "kernels" / "struct_args.cu"
    path = write_spec(tmp_path, f"  - {{name: s, source: {source}, function: sgemm_struct_args, block: [1], "
                                "grid: [1], signature: [{name: args, type: struct, fields: [M, N, K, A, B, C]}]}\n")
    planned = plan_spec(load_spec(path, allow_outside_sources=True), "sm_90")
    problems = " ".join(str(p) for p in planned.plans[0].problems)
    assert "parameter 1 (args, struct): the kernel's parameter (GemmArgs) is 48 bytes" in problems
    assert ("(M: int32 @0 (4), N: int32 @4 (4), K: int32 @8 (4), A: ptr @16 (8), B: ptr @24 (8), C: ptr @32 (8)) "
            "make 40") in problems


def test_one_loaded_image_serves_every_program_that_built_it(monkeypatch):
    """Plain (non-template) kernels of one source, compiled a program per instance, give byte-identical images
    whose names each cover one instance; a session loads the image once, so a kernel is looked up by the
    names of the build that asked for it, not of the build that was loaded first."""
    import types

    from driver_gemm.cuda import module as module_mod
    from driver_gemm.planning.build import compile_spec

    spec = spec_without_nvcc()
    kernels = {k.label: k for k in spec.kernels}
    built = compile_spec(spec, "sm_90", jobs=16)
    first, second = built["overload-fp32"], built["wide-sizes"]
    assert first.image == second.image and first.lowered_names != second.lowered_names
    instance = kernels["wide-sizes"].instance
    # a KeyError, which the lookups that then try another build catch, and a WrongArgumentValue naming the instances
    with pytest.raises(KeyError) as missed:
        first.symbol(instance)
    assert isinstance(missed.value, WrongArgumentValue) and str(missed.value).startswith("Cubin: no instance")
    loaded = object.__new__(module_mod.Module)        # as if loaded from `first`, no GPU needed
    loaded.cubin, loaded.handle, loaded._kernels = first, "module", {}
    loaded._device = types.SimpleNamespace(driver=types.SimpleNamespace(
        cuModuleGetFunction=lambda module, symbol: (0, symbol)))
    monkeypatch.setattr(module_mod, "check", lambda result, call: result[1])
    monkeypatch.setattr(module_mod, "Kernel", lambda module, handle, name, resources: (handle, name, resources))
    handle, name, resources = loaded.kernel(instance, second)
    assert handle == second.symbol(instance).encode() and name == instance
    assert resources == second.resources_of(instance)


def fake_toolkit(root: Path, complete: bool) -> Path:
    include = root / "include"
    (include / "cccl" / "cuda").mkdir(parents=True)
    (include / "cuda_fp16.h").write_text("// fp16\n")
    (include / "mma.h").write_text('#include "crt/mma.h"\n')
    if complete:
        (include / "crt").mkdir()
        (include / "crt" / "host_defines.h").write_text("// defines\n")
    return include


def test_a_runtime_wheels_headers_give_way_to_a_complete_toolkits(tmp_path, monkeypatch):
    """A CUDA runtime wheel's include folder has <mma.h> but not the crt/ it includes: a toolkit's folder
    that has crt/ is searched instead, with its CCCL; the stand-ins come before either."""
    from cuda import pathfinder

    wheel = fake_toolkit(tmp_path / "wheel", complete=False)
    toolkit = fake_toolkit(tmp_path / "toolkit", complete=True)
    found = {"cudart": str(wheel), "cccl": str(toolkit / "cccl")}
    monkeypatch.setattr(pathfinder, "find_nvidia_header_directory", lambda library: found.get(library))
    assert headers.toolkit_include_dirs.__wrapped__() == (toolkit.resolve(), (toolkit / "cccl").resolve())
    monkeypatch.setattr(headers, "toolkit_include_dirs", lambda: (toolkit, toolkit / "cccl"))
    assert headers.search_options() == (f"--include-path={headers.STAND_INS}", f"--include-path={toolkit}",
                                        f"--include-path={toolkit / 'cccl'}")


def test_without_a_complete_toolkit_the_wheels_headers_are_used(tmp_path, monkeypatch):
    from cuda import pathfinder

    wheel = fake_toolkit(tmp_path / "wheel", complete=False)
    monkeypatch.setattr(pathfinder, "find_nvidia_header_directory",
                        lambda library: str(wheel) if library == "cudart" else None)
    for name in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(headers, "TOOLKIT_ROOTS", ())
    assert headers.toolkit_include_dirs.__wrapped__() == (wheel.resolve(),)


MAP_IN_STRUCT = ("#include <cuda.h>\nstruct Params { int M, N, K; CUtensorMap map_a; const float* B; float* C; };\n"
                 "__global__ void k(const __grid_constant__ Params p) { if (p.M < 0) p.C[0] = p.map_a.opaque[0]; }\n")
MAP_FIELDS = "[M, N, K, {name: map_a, type: tensormap, tensor: A, box: [8, 8]}, B, C]"


def test_a_tensor_map_in_a_struct_is_laid_out_as_the_toolkit_header_of_its_version_aligns_it(tmp_path):
    # CUDA 13's <cuda.h> (and the NVRTC stand-in from 13) aligns CUtensorMap to 128 bytes, CUDA 12's to 64: the
    # map lies at 128, the struct is 384 bytes, and the launch packs the map there.
    from driver_gemm.session.bind import launch_values

    (tmp_path / "k.cu").write_text(MAP_IN_STRUCT)
    path = write_spec(tmp_path, "  - {name: s, source: k.cu, function: k, block: [1], grid: [1], "
                                f"signature: [{{name: p, type: struct, fields: {MAP_FIELDS}}}]}}\n")
    spec = load_spec(path)
    planned = plan_spec(spec, "sm_90")
    assert planned.plans[0].valid, planned.plans[0].problems
    argument = spec.kernels[0].signature[0]
    assert argument.layout_for(384).size == 384 and argument.layout_for(256).size == 256
    _, values = launch_values(spec.kernels[0], {"M": 1, "N": 2, "K": 3}, {"B": 0xB0, "C": 0xC0},
                              lambda leaf, position: ("tensormap", b"\x07" * 128), [384])
    data = values[0]
    assert len(data) == 384 and data[128:256] == b"\x07" * 128 and data[12:128] == bytes(116)
    _, values = launch_values(spec.kernels[0], {"M": 1, "N": 2, "K": 3}, {"B": 0xB0, "C": 0xC0},
                              lambda leaf, position: ("tensormap", b"\x07" * 128), [256])   # a CUDA 12 build
    assert len(values[0]) == 256 and values[0][64:192] == b"\x07" * 128


def test_a_struct_with_a_map_of_neither_size_names_both_alignments(tmp_path):
    (tmp_path / "k.cu").write_text(MAP_IN_STRUCT.replace("float* C;", "float* C; int extra[40];"))
    path = write_spec(tmp_path, "  - {name: s, source: k.cu, function: k, block: [1], grid: [1], "
                                f"signature: [{{name: p, type: struct, fields: {MAP_FIELDS}}}]}}\n")
    problems = " ".join(str(p) for p in plan_spec(load_spec(path), "sm_90").plans[0].problems)
    assert "the kernel's parameter (Params) is 512 bytes" in problems
    assert "map_a: tensormap @128 (128)" in problems
    assert "make 384 with a CUtensorMap aligned to 128 bytes as CUDA 13's <cuda.h> declares it (64 under CUDA " \
           "12's makes 256)" in problems


CONFIG_KERNEL = ("template <int BM, int BN> struct config { static constexpr int bm = BM, bn = BN; };\n"
                 "template <class cfg>\n__global__ void k(const float* A, const float* B, float* C, int M, int N, "
                 "int K) { if (M < 0) C[0] = cfg::bm + cfg::bn; }\n")


def test_params_named_inside_the_functions_template_id_are_put_in_their_place_and_swept(tmp_path):
    # ThunderKittens' lcf::kernel<matmul_template<2, 4, 8>>: the numbers to sweep are a class template's arguments.
    (tmp_path / "k.cu").write_text(CONFIG_KERNEL)
    path = write_spec(tmp_path, "  - {name: k, source: k.cu, function: 'k<config<BM, BN>>', params: {BM: [16, 32], "
                                "BN: 16}, block: [BN, BM], grid: [ceil(N / BN), ceil(M / BM)]}\n")
    spec = load_spec(path)
    assert [k.instance for k in spec.kernels] == ["k<config<16, 16>>", "k<config<32, 16>>"]
    assert [k.label for k in spec.kernels] == ["k[BM=16,BN=16]", "k[BM=32,BN=16]"]
    planned = plan_spec(spec, "sm_90")
    assert all(plan.valid for plan in planned.plans), [plan.problems for plan in planned.plans]
    assert [plan.config.block for plan in planned.plans] == [(16, 16, 1), (16, 32, 1)]


def test_a_class_template_id_is_a_template_argument_in_params(tmp_path):
    (tmp_path / "k.cu").write_text(CONFIG_KERNEL)
    path = write_spec(tmp_path, "  - {name: k, source: k.cu, function: k, params: {cfg: ['config<16, 16>', "
                                "'config<32, 8>']}, block: [16, 16], grid: [ceil(N / 16), ceil(M / 16)]}\n")
    spec = load_spec(path)
    assert [k.instance for k in spec.kernels] == ["k<config<16, 16>>", "k<config<32, 8>>"]
    assert [k.label for k in spec.kernels] == ["k[cfg=config<16,16>]", "k[cfg=config<32,8>]"]   # told apart
    assert all(plan.valid for plan in plan_spec(spec, "sm_90").plans)


@pytest.mark.parametrize("function, params, message", [
    ("'k<config<BM, 16>>'", "{BM: 16, BN: 16}", "names some params but not BN"),
    ("'k<config<16, 16>>'", "{BM: 16}", "already a template-id"),
])
def test_a_template_id_function_must_name_every_param_it_is_given(tmp_path, function, params, message):
    (tmp_path / "k.cu").write_text(CONFIG_KERNEL)
    path = write_spec(tmp_path, f"  - {{name: k, source: k.cu, function: {function}, params: {params}, "
                                "block: [16], grid: [1]}\n")
    with pytest.raises(SpecError, match=message) as info:
        load_spec(path)
    assert info.value.field == "kernels[k].params"


LAUNCHED_TEMPLATE = ("template <int TILE>\n__global__ void k(const float* A, const float* B, float* C, int M, int N, "
                     "int K) { if (M < 0) C[0] = TILE; }\n")
LAUNCHED_SYMBOL = "_Z1kILi128EEvPKfS1_Pfiii"


def test_a_mangled_name_picks_the_instance_the_source_itself_instantiates_under_nvrtc(tmp_path):
    (tmp_path / "k.cu").write_text(LAUNCHED_TEMPLATE + "template __global__ void k<128>(const float*, const float*, "
                                                       "float*, int, int, int);\n")
    cubin = compile_source(tmp_path / "k.cu", [LAUNCHED_SYMBOL], "sm_90", use_cache=False)
    assert cubin.symbol(LAUNCHED_SYMBOL) == LAUNCHED_SYMBOL
    (tmp_path / "none.cu").write_text(LAUNCHED_TEMPLATE)
    with pytest.raises(CompileError, match=f"NVRTC's build has no kernel {LAUNCHED_SYMBOL}: the source instantiates "
                                           "no kernel"):
        compile_source(tmp_path / "none.cu", [LAUNCHED_SYMBOL], "sm_90", use_cache=False)


@needs_nvcc
def test_a_mangled_name_picks_the_instance_the_files_launcher_makes_under_nvcc(tmp_path):
    # CuTe's tutorials instantiate their kernels only through their host launchers.
    (tmp_path / "k.cu").write_text(LAUNCHED_TEMPLATE + "void launch(float* C) { k<128><<<1, 128>>>(C, C, C, 1, 1, 1); }\n")
    path = write_spec(tmp_path, f"  - {{name: k, source: k.cu, function: {LAUNCHED_SYMBOL}, compiler: nvcc, "
                                "block: [128], grid: [1]}\n")
    planned = plan_spec(load_spec(path), "sm_90")
    assert not planned.compile_errors and all(plan.valid for plan in planned.plans), planned.compile_errors
    other = write_spec(tmp_path, "  - {name: k, source: k.cu, function: _Z1kILi64EEvPKfS1_Pfiii, compiler: nvcc, "
                                 "block: [128], grid: [1]}\n")
    error, = plan_spec(load_spec(other), "sm_90").compile_errors
    assert f"the file instantiates only {LAUNCHED_SYMBOL}" in str(error)
