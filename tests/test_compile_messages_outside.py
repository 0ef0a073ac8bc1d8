"""What a spec's author is told when a kernel written for another harness is named wrongly: params passed by
position under names of the spec's own, template arguments of the wrong number or kind, a misspelt function under
nvcc, CUB's umbrella header under NVRTC, a sizeof type without its namespace, ptxas's limits. No GPU."""

from __future__ import annotations

import textwrap

import pytest

from driver_gemm.cuda.nvcc import find_nvcc
from driver_gemm.planning.build import offline_problems
from driver_gemm.specfile import load_spec

WARPTILE = {"k.cu": """\
    template <const int BM, const int BN, const int BK, const int NUM_THREADS>
    __global__ void __launch_bounds__(NUM_THREADS) tile(int M, int N, int K, const float* A, const float* B, float* C)
    { C[0] = BM * 1000 + BN + BK; }
    """}


def _project(tmp_path, files: dict[str, str]):
    (tmp_path / "pyproject.toml").touch()
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def _spec(folder, params: str, more: str = "", function: str = "tile"):
    (folder / "spec.yaml").write_text(textwrap.dedent(f"""\
        shapes: [[256, 256, 64]]
        kernels:
          - name: k
            source: k.cu
            function: {function}
            params: {params}
            signature: [M, N, K, A, B, C]
            block: [64]
            grid: [4, 4]
        """) + more)
    return load_spec(folder / "spec.yaml")


def _plans(spec):
    from driver_gemm.planning.spec_plan import plan_spec
    return plan_spec(spec, "sm_90")


# ----------------------------------------------------------------------------------- params by position

def test_params_mixing_the_templates_names_with_crossed_ones_of_the_specs_own_are_refused_at_params(tmp_path):
    spec = _spec(_project(tmp_path, WARPTILE), "{TILE_N: 64, TILE_M: 128, BK: 16, NUM_THREADS: 64}")
    planned = _plans(spec)
    assert not planned.ok and planned.compile_errors == []
    problem, = {str(problem) for plan in planned.plans for problem in plan.problems}
    assert ("spec.yaml:6: kernels[k].params: params mix names of the spec's own with the "
                              "template's (BK, NUM_THREADS), and params are passed by position (template <BM, BN, "
                              "BK, NUM_THREADS>): TILE_N -> BM, TILE_M -> BN, so TILE_N and TILE_M reach parameters "
                              "of other dimensions than their names say") in problem, problem
    assert "params: {BM: ..., BN: ..., BK: 16, NUM_THREADS: 64}" in problem


@pytest.mark.parametrize("params", ["{BM: 128, TILE_N: 64, BK: 16, NUM_THREADS: 64}",   # a spelling of its own
                                    "{X: 128, BN: 64, BK: 16, NUM_THREADS: 64}"])      # no dimension said
def test_params_of_the_specs_own_names_beside_the_templates_that_cross_nothing_plan_without_a_note(tmp_path,
                                                                                                   params):
    planned = _plans(_spec(_project(tmp_path, WARPTILE), params))
    assert planned.ok, [str(problem) for plan in planned.plans for problem in plan.problems]
    assert not any("by position" in note for plan in planned.plans for note in plan.notes)


def test_params_none_of_whose_names_is_the_templates_are_noted_as_passed_by_position(tmp_path):
    planned = _plans(_spec(_project(tmp_path, WARPTILE), "{TILE_N: 64, TILE_M: 128, TK: 16, THREADS: 64}"))
    assert planned.ok
    notes = {note for plan in planned.plans for note in plan.notes}
    assert "params are passed to tile by position, not by name: TILE_N -> BM, TILE_M -> BN, TK -> BK, THREADS -> " \
           "NUM_THREADS" in notes, notes


def test_params_that_spell_the_templates_names_shorter_are_not_noted(tmp_path):
    planned = _plans(_spec(_project(tmp_path, WARPTILE), "{B_M: 64, B_N: 128, B_K: 16, NT: 64}"))
    assert planned.ok and not any("by position" in note for plan in planned.plans for note in plan.notes)


# ----------------------------------------------------------------------------------- template arguments

@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
@pytest.mark.parametrize("params, said", [
    ("{BM: 64, BN: 64, BK: 16}", "tile has 4 template parameters, params give 3: NUM_THREADS missing (template "
                                 "<const int BM, const int BN, const int BK, const int NUM_THREADS>)"),
    ("{BM: 64, BN: 64, BK: 16, NUM_THREADS: 64, EXTRA: 1}",
     "tile has 4 template parameters, params give 5: EXTRA is not a parameter of tile"),
    ("{BM: float, BN: 64, BK: 16, NUM_THREADS: 64}",
     "BM of tile's template takes a value (const int BM), params give it the type float"),
])
def test_template_arguments_of_the_wrong_number_or_kind_are_said_at_params(tmp_path, compiler, params, said):
    if compiler == "nvcc" and find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    folder = _project(tmp_path, WARPTILE)
    text = (folder / "k.cu").read_text()
    spec = _spec(folder, params)
    if compiler == "nvcc":
        (folder / "spec.yaml").write_text((folder / "spec.yaml").read_text().replace(
            "    function: tile\n", "    function: tile\n    compiler: nvcc\n"))
        spec = load_spec(folder / "spec.yaml")
    assert (folder / "k.cu").read_text() == text
    (error,) = offline_problems(spec)[1].values()
    assert f"kernels[k].params: {said}" in str(error), str(error)


def test_the_overload_hint_is_left_out_where_one_template_has_the_name(tmp_path):
    from driver_gemm.cuda.compile import CompileError, compile_source
    folder = _project(tmp_path, WARPTILE)
    with pytest.raises(CompileError) as failure:
        compile_source(folder / "k.cu", ["tile<1, 2>"], use_cache=False)
    message = str(failure.value)
    assert "check the spec's function and params against the template's parameters" in message
    assert "tile is declared template <const int BM, const int BN, const int BK, const int NUM_THREADS>" in message
    assert "overloads" not in message


# ----------------------------------------------------------------------------------- nvcc: a misspelt function

@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_a_misspelt_function_under_nvcc_gets_nvrtcs_advice_and_no_temporary_path(tmp_path):
    folder = _project(tmp_path, WARPTILE)
    spec = _spec(folder, "{BM: 64, BN: 64, BK: 16, NUM_THREADS: 64}", function="tlie")
    (folder / "spec.yaml").write_text((folder / "spec.yaml").read_text().replace(
        "    function: tlie\n", "    function: tlie\n    compiler: nvcc\n"))
    (error,) = offline_problems(load_spec(folder / "spec.yaml"))[1].values()
    message = str(error)
    assert "no function named tlie appears in the source or its headers: check the spec's function: against the " \
           "kernels the file defines (tile)" in message, message
    assert "driver-gemm's instantiation of tlie<64, 64, 16, 64>: error: identifier \"tlie\" is undefined" in message
    assert "instances.cu" not in message and "driver-gemm-nvcc-" not in message
    assert "driver_gemm_instance_" not in message and "driver-gemm-nvcc-" not in error.log


def test_nvcc_errors_repeated_at_one_place_are_said_once_with_their_count(tmp_path):
    from driver_gemm.cuda.nvcc import first_errors, named_wrapper_lines
    wrapper = tmp_path / "instances.cu"
    log = (f'{wrapper}(2): error: identifier "k" is undefined\n'
           '    __attribute__((device)) void* driver_gemm_instance_0 = (void*)&k<1, 2>;\n' + "".join(
               f"{wrapper}(2): error: expected an identifier\n    driver_gemm_instance_0 = (void*)&k<1, 2>;\n"
               f"{' ' * (20 + column)}^\n\n" for column in range(3)) + f'3 errors detected in the compilation of '
           f'"{wrapper}".\n')
    assert first_errors(named_wrapper_lines(log, wrapper, ["k<1, 2>"], source=tmp_path / "k.cu")) == [
        "driver-gemm's instantiation of k<1, 2>: error: identifier \"k\" is undefined",
        "driver-gemm's instantiation of k<1, 2>: error: expected an identifier   (x3)"]


# ----------------------------------------------------------------------------------- NVRTC: CUB's umbrella header

CUB_KERNEL = {"k.cu": """\
    #include <cub/cub.cuh>
    __global__ void k(float* C) { C[0] = 1.0f; }
    """}


def test_cubs_umbrella_header_under_nvrtc_is_said_to_pull_in_host_code_and_the_whole_log_is_logged(tmp_path,
                                                                                                    caplog):
    import logging

    from driver_gemm.cuda.compile import CompileError, compile_source
    folder = _project(tmp_path, CUB_KERNEL)
    with caplog.at_level(logging.DEBUG, logger="driver_gemm"), pytest.raises(CompileError) as failure:
        compile_source(folder / "k.cu", ["k"], use_cache=False)
    message = str(failure.value)
    assert "the host code it met is the CUDA toolkit's: CUB's and Thrust's device-wide algorithms" in message
    assert f"{folder / 'k.cu'}:1 includes <cub/cub.cuh>, which pulls them in: include only the block and warp " \
           "headers the kernel uses (<cub/block/block_reduce.cuh>" in message, message
    assert "this file has host code" not in message and "the file has host code" not in message
    assert "iterator is not beside" not in message
    if "more errors" in message:
        assert "... (more errors: -vv prints the compiler's whole log)" in message
    assert any("NVRTC's whole log" in record.getMessage() and failure.value.log in record.getMessage()
               for record in caplog.records)


def test_a_missing_header_is_said_with_the_file_that_includes_it():
    from driver_gemm.cuda.compile_diagnostics import compile_hints
    log = '/opt/lib/detail/algo.h(68): catastrophic error: cannot open source file "iterator"\n  #include <iterator>\n'
    hint, = compile_hints(log)
    assert hint.startswith("iterator is not beside the kernel source")
    assert hint.endswith("(/opt/lib/detail/algo.h:68 includes iterator)")
    hint, = compile_hints(log.replace("/opt/lib/detail/algo.h", "k.cu"))   # the kernel's own: its error shows it
    assert "includes iterator" not in hint


def test_host_code_of_the_file_s_own_is_said_where_it_is():
    from driver_gemm.cuda.compile_diagnostics import compile_hints
    log = "k.cu(12): error: A function explicitly marked as a __host__ function is not allowed in JIT mode\n"
    hint, = compile_hints(log)
    assert hint.startswith("NVRTC compiles device code only, and this file has host code (main, a launcher, "
                           "cudaMalloc; NVRTC met it at k.cu:12)")


# ----------------------------------------------------------------------------------- sizeof without its namespace

NAMESPACED_SMEM = {"k.cu": """\
    namespace M8 {
    template <int BM> struct SMem { float a[BM * 64]; };
    template <int BM>
    __global__ void k(int M, int N, int K, const float* A, const float* B, float* C) { C[0] = BM; }
    }
    """}


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_a_sizeof_type_written_without_its_namespace_is_asked_after_with_it(tmp_path, compiler):
    if compiler == "nvcc" and find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    folder = _project(tmp_path, NAMESPACED_SMEM)
    more = "    shared_bytes: sizeof(SMem<BM>)\n" + ("    compiler: nvcc\n" if compiler == "nvcc" else "")
    planned = _plans(_spec(folder, "{BM: 64}", more, function="M8::k"))
    problem, = {str(problem) for plan in planned.plans for problem in plan.problems}
    assert "kernels[k].shared_bytes: sizeof(SMem<64>): the kernel's compiler cannot size it: " in problem
    assert "did you mean M8::SMem? (the source defines SMem in namespace M8, not outside it)" in problem, problem
    # Written with its namespace, the same type is sized.
    planned = _plans(_spec(folder, "{BM: 64}", more.replace("SMem<", "M8::SMem<"), function="M8::k"))
    assert planned.ok and planned.plans[0].config.shared_bytes == 64 * 64 * 4


def test_only_a_type_defined_inside_a_namespace_alone_is_asked_after():
    from driver_gemm.cuda.type_sizes import _scopes_defining
    text = textwrap.dedent("""\
        // namespace X { struct S {}; }
        namespace a { namespace b { template <int N> struct S { int x[N]; }; } struct T; }
        struct S2 {};
        namespace c::d { using S = int; }
        """)
    assert _scopes_defining("S", [text]) == ["a::b", "c::d"]
    assert _scopes_defining("S2", [text]) == [""]
    assert _scopes_defining("T", [text]) == []      # declared, not defined


# ----------------------------------------------------------------------------------- ptxas's limits

def test_ptxas_refusing_static_shared_memory_or_a_newer_instruction_gets_a_hint():
    from driver_gemm.cuda.compile_diagnostics import compile_hints
    hint, = compile_hints("ptxas error   : Entry function '_Z1kv' uses too much shared data (0x18000 bytes, "
                          "0xc000 max)\nptxas fatal   : Ptx assembly aborted due to errors\n")
    assert "static shared memory (__shared__ arrays of a fixed size) is 98,304 bytes, more than the 49,152 bytes " \
           "(48 KB) a block may have statically: a larger tile needs dynamic shared memory, an extern __shared__ " \
           "array whose size the spec gives in shared_bytes:" in hint
    hint, = compile_hints("ptxas application ptx input, line 703; error   : Feature '.m16n8k16' requires .target "
                          "sm_80 or higher\n" * 3 + "ptxas application ptx input, line 9; error   : Feature "
                          "'cp.async' requires .target sm_80 or higher\n")
    assert hint == ("'.m16n8k16', 'cp.async' need sm_80 or newer, and this build is for an older architecture: "
                    "plan for sm_80 (or newer), or give the kernel arch: sm_80")


def test_static_shared_memory_past_48_kb_is_hinted_at_in_a_real_compile(tmp_path):
    from driver_gemm.cuda.compile import CompileError, compile_source
    folder = _project(tmp_path, {"k.cu": """\
        __global__ void k(float* C) { __shared__ float big[24576]; big[threadIdx.x] = 1; C[0] = big[5]; }
        """})
    with pytest.raises(CompileError, match=r"is 98,304 bytes, more than the 49,152 bytes \(48 KB\)"):
        compile_source(folder / "k.cu", ["k"], use_cache=False)


# ----------------------------------------------------------------------------------- one compile per instance

def test_configurations_differing_only_in_values_build_their_instance_once(tmp_path, monkeypatch):
    import driver_gemm.planning.build as build
    built = []

    def counted(path, instances, *arguments, **options):
        built.append(tuple(instances))
        return compile_source(path, instances, *arguments, **options)

    from driver_gemm.cuda.compile import compile_source
    monkeypatch.setattr(build, "compile_source", counted)
    spec = _spec(_project(tmp_path, WARPTILE), "{BM: 64, BN: 64, BK: 16, NUM_THREADS: 64}",
                 "    values: {V: [1, 2, 3, 4]}\n")
    compiled = build.compile_spec(spec, "sm_90", jobs=4)
    assert built == [("tile<64, 64, 16, 64>",)]
    assert len(compiled) == 4 and len({id(cubin) for cubin in compiled.values()}) == 1


def test_a_compile_of_no_kernel_is_not_logged_as_one(tmp_path, caplog):
    import logging

    from driver_gemm.cuda.type_sizes import type_sizes
    folder = _project(tmp_path, NAMESPACED_SMEM)
    with caplog.at_level(logging.INFO, logger="driver_gemm"):
        assert type_sizes(folder / "k.cu", ["M8::SMem<2>"], "sm_90") == {"M8::SMem<2>": 512}
    said = [record.getMessage() for record in caplog.records]
    assert not any("0 kernel(s)" in text for text in said), said
    assert any("without a kernel (the types a sizeof reads" in text for text in said) or said == [], said
