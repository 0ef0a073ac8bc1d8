"""The kernel's real signature checked in plan and run, prebuilt binaries, nvcc builds, and instruction mixes."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import pytest

from driver_gemm.cli import EXIT_FAILED, EXIT_USAGE, main
from driver_gemm.cuda import nvcc as nvcc_module
from driver_gemm.cuda import sass
from driver_gemm.cuda.compile import compile_source, nvrtc_warning
from driver_gemm.errors import SpecError, ToolMissingError
from driver_gemm.planning.build import check_offline, compile_spec
from driver_gemm.planning.spec_plan import instruction_mixes, plan_spec
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from conftest import ROOT, SPECS
from test_cli import NO_GPU
from test_spec import MINIMAL, write

V4 = "sgemm_coarsen_2d<64, 64, 16, 4, 4>"
V4_CUBIN = "../kernels/prebuilt/v4_coarsen_2d_64x64x16_4x4_sm90.cubin"
NVCC = shutil.which("nvcc") or nvcc_module.find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
needs_disassembler = pytest.mark.skipif(sass.find_disassembler() is None, reason="no cuobjdump or nvdisasm")

SIGNATURES = {
    "missing": ("signature: [A, B, C, M, N]", "takes 6 parameters", "names 5"),
    "extra": ("signature: [A, B, C, M, N, K, alpha]", "takes 6 parameters", "names 7"),
    "wrong size": ("signature: [A, B, C, M, N, {name: K, type: int64, value: K}]",
                   "parameter 6 (K, int64)", "is 4 bytes, int64 is 8"),
    "wrong type": ("signature: [A, B, C, M, N, {name: K, type: float32, value: K}]",
                   "parameter 6 (K, float32)", "the signature says float"),
}


def prebuilt_spec(signature_line: str = "") -> str:
    text = MINIMAL.replace("source: ../kernels/04_coarsen_2d.cu", f"binary: {V4_CUBIN}")
    return text + (f"    {signature_line}\n" if signature_line else "")


def signature_line_of(path) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if "signature:" in line)


# ------------------------------------------------------------------------------------- signature check

@pytest.mark.parametrize("binary", [False, True], ids=["nvrtc", "prebuilt"])
@pytest.mark.parametrize("mistake", sorted(SIGNATURES))
def test_plan_finds_signature_mistakes_at_the_signature_line(tmp_path, binary, mistake):
    line, *expected = SIGNATURES[mistake]
    text = prebuilt_spec(line) if binary else MINIMAL + f"    {line}\n"
    path = write(tmp_path, text)
    planned = plan_spec(load_spec(path), arch="sm_90")
    assert planned.invalid_count == 1 and not planned.ok
    problem = planned.plans[0].problems[-1]
    assert isinstance(problem, SpecError)
    assert problem.where == f"{path}:{signature_line_of(path)}"
    assert problem.field == "kernels[v4].signature"
    for words in expected:
        assert words in problem.message
    assert "_Z16sgemm_coarsen_2dILi64ELi64ELi16ELi4ELi4EEvPKfS1_Pfiii" in problem.message


def test_a_matching_signature_passes_and_check_offline_reports_a_wrong_one(tmp_path):
    good = write(tmp_path, MINIMAL, "good.yaml")
    assert plan_spec(load_spec(good), arch="sm_90").ok
    assert check_offline(load_spec(good)) == []
    bad = write(tmp_path, MINIMAL + "    signature: [A, B, C, M, N]\n", "bad.yaml")
    refused = check_offline(load_spec(bad))
    assert len(refused) == 1 and "names 5" in str(refused[0].problems[0])
    assert check_offline(load_spec(bad), compile=False) == []   # only the image knows the parameters


@NO_GPU
def test_run_without_a_gpu_reports_the_signature_mistake_as_a_spec_error(tmp_path, capsys):
    bad = write(tmp_path, MINIMAL + "    signature: [A, B, C, M, N]\n")
    assert main(["run", str(bad), "--json", str(tmp_path / "out.json")]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert f"{bad}:{signature_line_of(bad)}: kernels[v4].signature" in err and "names 5" in err
    assert "Traceback" not in err


# ------------------------------------------------------------------------------------- prebuilt binaries

def test_plan_of_a_prebuilt_cubin_reads_resources_and_parameters_from_the_image(tmp_path):
    spec = load_spec(write(tmp_path, prebuilt_spec()))
    kernel = spec.kernels[0]
    assert kernel.binary is not None and kernel.binary.suffix == ".cubin" and kernel.source == kernel.binary
    planned = plan_spec(spec, arch="sm_90")
    assert planned.ok, [str(p) for plan in planned.plans for p in plan.problems]
    resources = planned.plans[0].resources
    assert resources.registers > 0 and resources.static_shared_bytes == 2 * 64 * 16 * 4
    built = planned.compiled[kernel.label]
    assert built.origin == "prebuilt" and built.image == (tmp_path / "kernels" / "prebuilt" /
                                                          "v4_coarsen_2d_64x64x16_4x4_sm90.cubin").read_bytes()
    assert [slot.offset for slot in built.param_slots(kernel.instance)] == [0, 8, 16, 24, 28, 32]
    # The shipped prebuilt CUBIN is the nvcc build of the NVRTC instance: same shared memory and parameters.
    nvrtc = compile_source(ROOT / "kernels" / "04_coarsen_2d.cu", [V4], "sm_90")
    assert nvrtc.resources_of(V4).static_shared_bytes == resources.static_shared_bytes
    assert nvrtc.param_slots(V4) == built.param_slots(kernel.instance)


def test_prebuilt_function_may_be_mangled_or_a_template_id(tmp_path):
    mangled = "_Z16sgemm_coarsen_2dILi64ELi64ELi16ELi4ELi4EEvPKfS1_Pfiii"
    for function in (mangled, V4):
        text = prebuilt_spec().replace("function: sgemm_coarsen_2d", f"function: {function}")
        text = text.replace("params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}", "")
        text = text.replace("block: [BN / TN, BM / TM]", "block: [16, 16]").replace(
            "grid: [ceil(N / BN), ceil(M / BM)]", "grid: [ceil(N / 64), ceil(M / 64)]")
        planned = plan_spec(load_spec(write(tmp_path, text, f"{len(function)}.yaml")), arch="sm_90")
        assert planned.ok and planned.compiled[planned.spec.kernels[0].label].symbol(function) == mangled


def test_prebuilt_function_that_is_not_in_the_image_is_a_compile_error_listing_the_kernels(tmp_path):
    text = prebuilt_spec().replace("function: sgemm_coarsen_2d", "function: sgemm_other")
    planned = plan_spec(load_spec(write(tmp_path, text)), arch="sm_90")
    assert len(planned.compile_errors) == 1
    assert "no kernel matches function" in str(planned.compile_errors[0])
    assert "sgemm_coarsen_2d<64, 64, 16, 4, 4>" in str(planned.compile_errors[0])


@pytest.mark.parametrize("change, words", [
    (lambda t: t.replace("function:", "source: ../kernels/04_coarsen_2d.cu\n    function:"), "not both"),
    (lambda t: t.replace(".cubin", ".bin"), "ends in .cubin, .fatbin, .ptx"),
    (lambda t: t.replace("v4_coarsen", "v5_coarsen"), "does not exist"),
    (lambda t: t + "    options: [-use_fast_math]\n", "options does not apply"),
    (lambda t: t + "    compiler: nvcc\n", "compiler does not apply"),
    (lambda t: t.replace(V4_CUBIN, "../../outside.cubin"), "leaves the spec's project"),
])
def test_binary_field_mistakes_are_spec_errors_at_their_line(tmp_path, change, words):
    (tmp_path.parent / "outside.cubin").write_bytes(b"\x7fELF")
    path = write(tmp_path, change(prebuilt_spec()))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert words in str(caught.value) and str(path) in str(caught.value)


def test_a_binary_entry_merged_from_a_compiled_one_leaves_out_what_it_sets_to_null(tmp_path):
    # matrixMulDrv's entries: the NVRTC build and the authors' fatbin share everything but how the code is built.
    text = MINIMAL.replace("  - name: v4\n", "  - &common\n    name: v4\n").replace(
        "function:", "options: [-use_fast_math]\n    compiler: nvrtc\n    function:")
    text += (f"  - <<: *common\n    name: v4-prebuilt\n    source: null\n    compiler: null\n    options: null\n"
             f"    binary: {V4_CUBIN}\n")
    kernels = load_spec(write(tmp_path, text)).kernels
    assert [(kernel.name, kernel.binary is not None, kernel.options) for kernel in kernels][1] == (
        "v4-prebuilt", True, ())
    with pytest.raises(SpecError, match="not both"):      # a merged source left in is still refused
        load_spec(write(tmp_path, text.replace("    source: null\n", ""), "kept.yaml"))


def test_a_cubin_suffix_on_something_else_is_an_image_error_for_its_cases(tmp_path):
    path = write(tmp_path, prebuilt_spec())
    (tmp_path / "kernels" / "prebuilt" / "v4_coarsen_2d_64x64x16_4x4_sm90.cubin").write_bytes(b"not an ELF image")
    compiled = compile_spec(load_spec(path), "sm_90")
    assert "not a CUBIN" in str(next(iter(compiled.values())))


@needs_nvcc
@pytest.mark.parametrize("kind", ["fatbin", "ptx"])
def test_plan_of_a_prebuilt_fatbin_or_ptx(tmp_path, kind):
    write(tmp_path, MINIMAL)
    wrapper = tmp_path / "kernels" / "instance.cu"
    wrapper.write_text(nvcc_module.wrapper_source(ROOT / "kernels" / "04_coarsen_2d.cu", [V4]))
    output = tmp_path / "kernels" / f"v4.{kind}"
    flags = ["-fatbin", "-compress-mode=speed"] if kind == "fatbin" else ["-ptx"]
    subprocess.run([str(NVCC), *flags, "-arch=sm_90", "-std=c++17", "-o", str(output), str(wrapper)], check=True,
                   cwd=wrapper.parent, capture_output=True)
    text = prebuilt_spec("signature: [A, B, C, M, N]").replace(V4_CUBIN, f"../kernels/v4.{kind}")
    planned = plan_spec(load_spec(write(tmp_path, text)), arch="sm_90")
    plan = planned.plans[0]
    assert [str(p) for p in plan.problems if "names 5" in str(p)], "the signature is checked from the image"
    if kind == "fatbin":
        assert plan.resources.static_shared_bytes == 8192 and plan.resources.registers > 0
    else:
        assert plan.resources is None and any("known only once the driver has compiled it" in n for n in plan.notes)


# ------------------------------------------------------------------------------------- nvcc

@needs_nvcc
def test_nvcc_builds_the_instance_with_the_same_parameters_as_nvrtc(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    path = write(tmp_path, MINIMAL + "    compiler: nvcc\n")
    spec = load_spec(path)
    assert spec.kernels[0].compiler == "nvcc"
    planned = plan_spec(spec, arch="sm_90")
    assert planned.ok
    built = planned.compiled[spec.kernels[0].label]
    assert built.origin == "nvcc" and not built.from_cache and "-O3" in built.options
    assert built.symbol(V4) == "_Z16sgemm_coarsen_2dILi64ELi64ELi16ELi4ELi4EEvPKfS1_Pfiii"
    assert built.resources_of(V4).registers > 0 and built.resources_of(V4).static_shared_bytes == 8192
    nvrtc = compile_source(ROOT / "kernels" / "04_coarsen_2d.cu", [V4], "sm_90", use_cache=False)
    assert built.param_slots(V4) == nvrtc.param_slots(V4)
    again = plan_spec(load_spec(path), arch="sm_90").compiled[spec.kernels[0].label]
    assert again.from_cache and again.origin == "nvcc" and again.image == built.image
    wrong = plan_spec(load_spec(write(tmp_path, MINIMAL + "    compiler: nvcc\n    signature: [A, B, C, M]\n",
                                      "wrong.yaml")), arch="sm_90")
    assert wrong.invalid_count == 1 and "names 4" in str(wrong.plans[0].problems[-1])


@needs_nvcc
def test_an_nvcc_compile_error_quotes_nvcc(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    path = write(tmp_path, MINIMAL.replace("sgemm_coarsen_2d", "sgemm_missing") + "    compiler: nvcc\n")
    planned = plan_spec(load_spec(path), arch="sm_90")
    assert len(planned.compile_errors) == 1 and "nvcc failed" in str(planned.compile_errors[0])


def test_nvcc_missing_is_a_tool_missing_error(tmp_path, monkeypatch):
    monkeypatch.setattr(nvcc_module, "find_nvcc", lambda: None)
    spec = load_spec(write(tmp_path, MINIMAL + "    compiler: nvcc\n"))
    with pytest.raises(ToolMissingError, match="compiler: nvcc needs nvcc"):
        compile_spec(spec, "sm_90")


def test_unknown_compiler_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="compiler is nvrtc or nvcc"):
        load_spec(write(tmp_path, MINIMAL + "    compiler: clang\n"))


def test_wrapper_keeps_a_device_pointer_to_every_instance():
    overload = "static_cast<void(*)(const float*, int)>(f)"
    text = nvcc_module.wrapper_source(ROOT / "kernels" / "04_coarsen_2d.cu", [V4, "plain_kernel", overload])
    assert text.splitlines() == ['#include "04_coarsen_2d.cu"',
                                 f"__device__ void* driver_gemm_instance_0 = (void*)&{V4};",
                                 "__device__ void* driver_gemm_instance_1 = (void*)&plain_kernel;",
                                 f"__device__ void* driver_gemm_instance_2 = (void*){overload};"]


# ------------------------------------------------------------------------------------- NVRTC version

def test_nvrtc_older_than_13_1_is_warned_about():
    assert "64-bit pointers" in nvrtc_warning((13, 0)) and "13.1" in nvrtc_warning((12, 9))
    assert nvrtc_warning((13, 1)) is None and nvrtc_warning((14, 0)) is None


# ------------------------------------------------------------------------------------- instruction mix

SAMPLE = """
	code for sm_90
		Function : _Z6kernelPf
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   LDS.128 R4, [R2] ;
        /*0020*/              @!P0 LDS.64 R8, [R2+0x10] ;
        /*0030*/                   LDS.U8 R9, [R3] ;
        /*0040*/                   LDG.E.128 R12, desc[UR4][R6.64] ;
        /*0050*/                   FFMA R1, R2, R3, R1 ;
        /*0060*/                   FFMA.FTZ R1, R2, R3, R1 ;
        /*0070*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0080*/                   HGMMA.64x128x8.F32.TF32 gdesc[UR4], R24, gsb0 ;
        /*0090*/              @P1  STG.E desc[UR4][R2.64], R5 ;
        /*00a0*/                   EXIT ;
        /*00b0*/                   NOP;
		Function : _Z5otherv
        /*0000*/                   HMMA.1688.F32.TF32 R4, R8, R12, R4 ;
"""


def test_instruction_mix_is_counted_per_function_by_width():
    mixes = sass.parse_disassembly(SAMPLE)
    mix = mixes["_Z6kernelPf"]
    assert (mix["LDS.128"], mix["LDS.64"], mix["LDS"], mix["LDG.128"], mix["LDG"]) == (1, 1, 1, 1, 0)
    assert (mix["FFMA"], mix["BAR"], mix["HGMMA"], mix["STG"], mix["HMMA"]) == (2, 1, 1, 1, 0)
    assert mix["total"] == 11   # every instruction but the padding NOP
    assert mixes["_Z5otherv"].as_dict()["HMMA"] == 1 and mixes["_Z5otherv"]["total"] == 1


@needs_disassembler
def test_instruction_mix_of_a_compiled_kernel_and_plan_sass(capsys):
    cubin = compile_source(ROOT / "kernels" / "04_coarsen_2d.cu", [V4], "sm_90")
    mix = sass.instruction_mix(cubin.image)[cubin.symbol(V4)]
    # v4: each thread computes 4x4 outputs per k step, BK=16 unrolled: 256 FFMA; tiles read as float4.
    assert mix["FFMA"] == 4 * 4 * 16 and mix["LDS.128"] > 0 and mix["BAR"] >= 2
    seed = plan_spec(load_spec(SPECS / "seed.yaml"), arch="sm_90")
    mixes = instruction_mixes(seed)
    assert mixes["v4[BM=64,BN=64,BK=16,TM=4,TN=4]"]["FFMA"] == 256
    assert main(["plan", "--sass", "--arch", "sm_90", "-k", "v4"]) == 0
    out = capsys.readouterr().out
    assert "LDS.128" in out and "HGMMA" in out


def test_missing_disassembler_is_a_tool_missing_error(monkeypatch):
    monkeypatch.setattr(sass, "find_disassembler", lambda: None)
    with pytest.raises(ToolMissingError, match="cuobjdump or nvdisasm"):
        sass.instruction_mix(b"\x7fELF")


# ------------------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
def test_prebuilt_cubin_runs_like_the_nvrtc_build_and_the_driver_agrees_on_parameters():
    from gpu_specs import quick
    from driver_gemm.runners.one_gpu import run_spec

    spec = load_spec(SPECS / "prebuilt.yaml")
    spec = quick(dataclasses.replace(spec, shapes=spec.shapes[:2], baseline=False))
    result = run_spec(spec)
    assert {case.status for case in result.cases} == {Status.PASS}, [c.message for c in result.cases]
    for case in result.cases:
        assert case.attributes.param_info == "agrees", case.attributes
    prebuilt = {c.shape.label: c for c in result.cases if c.kernel.startswith("v4_prebuilt")}
    nvrtc = {c.shape.label: c for c in result.cases if c.kernel.startswith("v4[")}
    for shape, case in prebuilt.items():
        assert case.resources.static_shared_bytes == nvrtc[shape].resources.static_shared_bytes
        assert case.attributes.registers == case.resources.registers
