import pytest

from driver_gemm.cuda import cache
from driver_gemm.cuda.compile import compile_source, compile_text, normalise_arch, parse_ptxas_report
from driver_gemm.errors import CompileError
from driver_gemm.specfile import load_spec

from conftest import SPECS, TEST_KERNELS

ELF_MAGIC = b"\x7fELF"


def shipped_kernels():
    """Every configuration the shipped specs run, but the tuning sweeps' (hundreds; compiled by the tests below)."""
    seen = {}
    for path in sorted(set(SPECS.glob("*.yaml")) - set(SPECS.glob("sweep-*.yaml"))):
        for kernel in (k for k in load_spec(path).kernels if k.binary is None):   # prebuilt: nothing to compile
            seen.setdefault((kernel.source, kernel.instance, kernel.options), (path.name, kernel))
    return list(seen.values())


@pytest.mark.parametrize("spec_name, kernel", shipped_kernels(), ids=lambda v: getattr(v, "label", v))
def test_every_shipped_kernel_compiles_to_sm90_cubin(spec_name, kernel):
    cubin = compile_source(kernel.source, [kernel.instance], kernel.target("sm_90"), kernel.options)
    assert cubin.image.startswith(ELF_MAGIC)
    assert cubin.arch == kernel.target("sm_90") in ("sm_90", "sm_90a")
    resources = cubin.resources_of(kernel.instance)
    assert 0 < resources.registers <= 255
    assert not resources.spills, f"{kernel.label} spills: {resources}"
    # The kernels of one thread an element of C share nothing, so they have no barrier.
    unshared = kernel.name in ("v0", "v1") or kernel.name.startswith(("naive", "args-w4a16", "grouped-"))
    assert resources.barriers >= (0 if unshared else 1)


def test_template_instances_get_their_mangled_names():
    cubin = compile_source(SPECS.parent / "kernels" / "02_smem_tiles.cu",
                           ["sgemm_smem_tiles<16>", "sgemm_smem_tiles<32>"], use_cache=False)
    assert cubin.lowered_names == {"sgemm_smem_tiles<16>": "_Z16sgemm_smem_tilesILi16EEvPKfS1_Pfiii",
                                   "sgemm_smem_tiles<32>": "_Z16sgemm_smem_tilesILi32EEvPKfS1_Pfiii"}
    assert cubin.resources_of("sgemm_smem_tiles<16>").static_shared_bytes == 2 * 16 * 16 * 4
    assert cubin.resources_of("sgemm_smem_tiles<32>").static_shared_bytes == 2 * 32 * 32 * 4


def test_ptxas_report_parsing():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90'
ptxas info    : Function properties for _Z3fooPf
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 16384 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'bar' for 'sm_90'
ptxas info    : Function properties for bar
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, 360 bytes cmem[0]
"""
    report = parse_ptxas_report(log)
    foo, bar = report["_Z3fooPf"], report["bar"]
    assert (foo.registers, foo.barriers, foo.static_shared_bytes, foo.constant_bytes) == (255, 1, 16384, 368)
    assert (foo.stack_bytes, foo.spill_store_bytes, foo.spill_load_bytes) == (24, 8, 12) and foo.spills
    assert (bar.registers, bar.barriers, bar.static_shared_bytes, bar.spills) == (12, 0, 0, False)


def test_compile_error_shows_file_line_and_source():
    path = TEST_KERNELS / "broken_syntax.cu"
    with pytest.raises(CompileError) as info:
        compile_source(path, ["broken"], use_cache=False)
    message = str(info.value)
    lines = path.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if "undeclared_accumulator" in line)
    assert f"{path}:{number}: error:" in message
    assert "undeclared_accumulator" in message and "identifier" in message
    assert f"{number:5d} | {lines[number - 1]}" in message
    assert "--gpu-architecture=sm_90" in message
    assert info.value.log


def test_unknown_instance_is_a_compile_error():
    with pytest.raises(CompileError):
        compile_text('extern "C" __global__ void f() {}', "f.cu", ["g<3>"], use_cache=False)


def test_a_misspelt_function_is_named_beside_the_kernels_the_file_defines():
    source = ("template <int T> __global__ void gemm_tiles(float* c) { c[0] = T; }\n"
              'extern "C" __global__ void __launch_bounds__(64) gemm_plain(float* c) { c[0] = 1; }\n')
    with pytest.raises(CompileError) as info:
        compile_text(source, "k.cu", ["gemm_tile<16>"], use_cache=False)
    assert ("no function named gemm_tile appears in the source or its headers: check the spec's function: against "
            "the kernels the file defines (gemm_tiles, gemm_plain)") in str(info.value)
    with pytest.raises(CompileError) as info:      # a name that is there, with arguments of the wrong kind
        compile_text(source, "k.cu", ["gemm_tiles<float>"], use_cache=False)
    assert "check the spec's function and params against the template's parameters" in str(info.value)


KERNELS_OF_DEVICE_HELPERS = "the kernels the file defines (matrixMulCUDA_block16, matrixMulCUDA_block32)"


@pytest.mark.parametrize("instance, said", [
    # cuda-samples' matrixMul_nvrtc: function: matrixMulCUDA with params {BLOCK_SIZE: 32}, or the template-id.
    ("matrixMulCUDA<32>", "matrixMulCUDA is a __device__ function, not a kernel (__global__)"),
    ("matrixMulCUDA<16>", "matrixMulCUDA is a __device__ function, not a kernel (__global__)"),
    ("matrixMulCUDA<16>(float*, float*, float*, int, int)",
     "matrixMulCUDA is a __device__ function, not a kernel (__global__)"),
    ("scaled", "scaled is a __device__ function, not a kernel (__global__)"),
    ("scaled<2>", "scaled is a __device__ function, not a kernel (__global__)"),     # params given to it
    ("shifted", "shifted is a __host__ __device__ function, not a kernel (__global__)"),
    # Host code kept from NVRTC by #ifndef __CUDACC_RTC__: NVRTC finds no such name.
    ("blocks_for", "blocks_for is a host function (written without __device__ or __global__), not a kernel"),
])
def test_a_device_function_named_as_the_kernel_is_said_to_be_one_beside_the_kernels(instance, said):
    with pytest.raises(CompileError) as info:
        compile_source(TEST_KERNELS / "device_helpers.cu", [instance], use_cache=False)
    message = str(info.value)
    assert said in message and KERNELS_OF_DEVICE_HELPERS in message
    # Not NVRTC's word about templates and overloads, which the function's params are not the matter with.
    assert "against the template's parameters" not in message and "no declaration of" not in message


def test_the_kernels_the_device_functions_file_defines_build():
    kernels = ["matrixMulCUDA_block16", "matrixMulCUDA_block32"]
    assert sorted(compile_source(TEST_KERNELS / "device_helpers.cu", kernels, use_cache=False).lowered_names) == \
        kernels


def test_a_function_declared_as_a_kernel_too_is_not_said_to_be_a_device_one():
    # An overload that is __global__ makes the name a kernel's: the failure is about the instance, not the space.
    source = ("__device__ float f(float x) { return x; }\n"
              "template <int T> __global__ void f(float* c) { c[0] = f(float(T)); }\n")
    with pytest.raises(CompileError) as info:
        compile_text(source, "k.cu", ["f<float>"], use_cache=False)
    assert "not a kernel" not in str(info.value)
    assert "check the spec's function and params against the template's parameters" in str(info.value)

@pytest.mark.parametrize("given, arch", [("sm_90", "sm_90"), ("90", "sm_90"), (86, "sm_86"), ("sm90a", "sm_90a"),
                                         ("compute_80", "sm_80")])
def test_arch_names(given, arch):
    assert normalise_arch(given) == arch


def test_bad_arch_name():
    with pytest.raises(CompileError, match="not a GPU architecture"):
        normalise_arch("hopper")


SOURCE = 'extern "C" __global__ void f(float* x) { x[threadIdx.x] += 1.0f; }\n'


def test_cache_hit_miss_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path))
    first = compile_text(SOURCE, "f.cu", ["f"])
    assert not first.from_cache
    entries = list(tmp_path.rglob("*.cubin"))
    assert len(entries) == 1
    second = compile_text(SOURCE, "f.cu", ["f"])
    assert second.from_cache and second.image == first.image and second.resources == first.resources
    # Anything that changes the binary changes the key: source, options, arch.
    assert not compile_text(SOURCE + "\n", "f.cu", ["f"]).from_cache
    assert not compile_text(SOURCE, "f.cu", ["f"], extra_options=["-DX=1"]).from_cache
    assert not compile_text(SOURCE, "f.cu", ["f"], arch="sm_80").from_cache
    assert len(list(tmp_path.rglob("*.cubin"))) == 4
    assert not list(tmp_path.rglob(".*.tmp")), "temporary files left behind"


def test_cache_key_covers_included_headers(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "scale.cuh").write_text("#define SCALE 2.0f\n")
    source = tmp_path / "k.cu"
    source.write_text('#include "scale.cuh"\nextern "C" __global__ void k(float* x) { x[0] *= SCALE; }\n')
    assert not compile_source(source, ["k"]).from_cache
    assert compile_source(source, ["k"]).from_cache
    (tmp_path / "scale.cuh").write_text("#define SCALE 3.0f\n")
    assert not compile_source(source, ["k"]).from_cache


def test_cache_key_covers_a_pre_included_header_and_what_it_includes(tmp_path, monkeypatch):
    # A pre-included header is read before the source though no #include names it: its edits, and those of the
    # headers it includes, are a new key, or the cache would hand back the kernel built with the old typedef.
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "types.h").write_text("typedef float real;\n")
    (tmp_path / "prelude.h").write_text('#include "types.h"\n')
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(real* x) { x[0] = 1; }\n")
    options = [f"--pre-include={tmp_path / 'prelude.h'}"]
    first = compile_source(source, ["k"], extra_options=options, project=tmp_path)
    assert not first.from_cache and first.symbol("k") == "_Z1kPf"
    assert compile_source(source, ["k"], extra_options=options, project=tmp_path).from_cache
    (tmp_path / "types.h").write_text("typedef double real;\n")
    again = compile_source(source, ["k"], extra_options=options, project=tmp_path)
    assert not again.from_cache and again.symbol("k") == "_Z1kPd"


def test_corrupt_cache_entry_is_ignored_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path))
    good = compile_text(SOURCE, "f.cu", ["f"])
    entry, = tmp_path.rglob("*.cubin")
    blob = bytearray(entry.read_bytes())
    blob[-10] ^= 0xFF
    entry.write_bytes(bytes(blob))
    again = compile_text(SOURCE, "f.cu", ["f"])
    assert not again.from_cache and again.image == good.image
    assert compile_text(SOURCE, "f.cu", ["f"]).from_cache
    entry.write_bytes(b"garbage")
    assert not compile_text(SOURCE, "f.cu", ["f"]).from_cache


def test_cache_can_be_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    assert not cache.enabled()
    compile_text(SOURCE, "f.cu", ["f"])
    assert not compile_text(SOURCE, "f.cu", ["f"]).from_cache
    assert not list(tmp_path.rglob("*.cubin"))


def test_cache_is_relocatable(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "one"))
    compile_text(SOURCE, "f.cu", ["f"])
    (tmp_path / "one").rename(tmp_path / "two")
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "two"))
    assert compile_text(SOURCE, "f.cu", ["f"]).from_cache


def test_same_source_in_two_checkouts_shares_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "f.cu").write_text(SOURCE)
    assert not compile_source(tmp_path / "a" / "f.cu", ["f"]).from_cache
    assert compile_source(tmp_path / "b" / "f.cu", ["f"]).from_cache


def test_wrong_template_arguments_are_named_without_a_bogus_source_line():
    with pytest.raises(CompileError) as info:
        compile_source(SPECS.parent / "kernels" / "02_smem_tiles.cu", ["sgemm_smem_tiles<16, 2>"], use_cache=False)
    message = str(info.value)
    assert "02_smem_tiles.cu: error:" in message and "sgemm_smem_tiles" in message
    assert "check the spec's function and params" in message
    assert " | " not in message   # no quoted source line: NVRTC's line number means nothing here


def test_one_bad_instance_does_not_take_its_siblings_down(tmp_path):
    from driver_gemm.planning.build import compile_spec

    from test_spec import MINIMAL, write

    spec = load_spec(write(tmp_path, MINIMAL.replace("TM: 4, TN: 4", "TM: 4, TN: [4, 0]")))
    compiled = compile_spec(spec, "sm_90")
    good, bad = (compiled[k.label] for k in spec.kernels)
    assert not isinstance(good, CompileError) and good.image.startswith(ELF_MAGIC)
    assert isinstance(bad, CompileError)


def test_a_kernel_that_names_its_arch_is_compiled_for_it(tmp_path):
    from driver_gemm.planning.build import compile_spec

    spec = load_spec(SPECS / "tf32.yaml").select(shapes=["64x64x64"])
    compiled = compile_spec(spec, "sm_90")
    assert {k.name: compiled[k.label].arch for k in spec.kernels} == {
        "v8": "sm_90", "v9": "sm_90", "v9_big": "sm_90", "v10": "sm_90a"}
    # without the key it would be built for the device's sm_90, which has no wgmma
    v10 = spec.kernels[-1]
    with pytest.raises(CompileError) as info:
        compile_source(v10.source, [v10.instance], "sm_90", use_cache=False)
    assert "wgmma" in str(info.value) and "sm_90" in str(info.value)


def test_a_sweep_compiles_on_several_threads_with_the_same_result(tmp_path, monkeypatch):
    from driver_gemm.planning.build import compile_spec

    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    spec = load_spec(SPECS / "sweep-v4.yaml")                 # 32 instances of one source
    serial = compile_spec(spec, "sm_90", jobs=1)
    parallel = compile_spec(spec, "sm_90", jobs=3)
    assert len({id(c) for c in serial.values()}) == 1         # one program ...
    assert len({id(c) for c in parallel.values()}) == 3       # ... or three, each with a third of the instances
    for kernel in spec.kernels:
        resources = serial[kernel.label].resources_of(kernel.instance)
        assert parallel[kernel.label].resources_of(kernel.instance) == resources
        assert not resources.spills, f"{kernel.label} spills: {resources}"


V4 = "sgemm_coarsen_2d<64, 64, 16, 4, 4>"


def test_a_compile_whose_log_comes_back_empty_is_done_again(monkeypatch):
    """NVRTC in several threads sometimes returns an empty log: the second compile's report is used."""
    from driver_gemm.cuda import compile as compiling

    real, calls = compiling._program_log, []

    def first_empty(program):
        calls.append(program)
        return "" if len(calls) == 1 else real(program)

    monkeypatch.setattr(compiling, "_program_log", first_empty)
    monkeypatch.setattr(compiling, "_compile_bounded", compiling.compile_program)   # NVRTC here, where it is patched
    built = compile_source(SPECS.parent / "kernels" / "04_coarsen_2d.cu", [V4], "sm_90", use_cache=False)
    assert len(calls) == 2 and "ptxas info" in built.log and "driver-gemm:" not in built.log
    assert built.resources_of(V4).registers > 0


def test_without_any_ptxas_report_the_resources_come_from_the_cubin(monkeypatch):
    from driver_gemm.cuda import compile as compiling

    reported = compile_source(SPECS.parent / "kernels" / "04_coarsen_2d.cu", [V4], "sm_90", use_cache=False)
    monkeypatch.setattr(compiling, "_program_log", lambda program: "")
    monkeypatch.setattr(compiling, "_compile_bounded", compiling.compile_program)   # NVRTC here, where it is patched
    built = compile_source(SPECS.parent / "kernels" / "04_coarsen_2d.cu", [V4], "sm_90", use_cache=False)
    from_image, from_ptxas = built.resources_of(V4), reported.resources_of(V4)
    assert (from_image.registers, from_image.static_shared_bytes, from_image.barriers) == \
        (from_ptxas.registers, from_ptxas.static_shared_bytes, from_ptxas.barriers) and from_image.registers > 0
    assert "missing from NVRTC's log" in built.log and "read from the CUBIN" in built.log


def test_a_launcher_compiled_as_device_code_is_told_apart_from_a_header_library(tmp_path):
    # -default-device turns a file's unannotated host launcher into a device function whose <<<...>>> NVRTC cannot
    # build: the hint says why and the two ways out.
    (tmp_path / "k.cu").write_text("__global__ void k(float* c) { c[0] = 1.0f; }\n"
                                   "void launch(float* c) { k<<<1, 1>>>(c); }\n")
    with pytest.raises(CompileError) as info:
        compile_source(tmp_path / "k.cu", ["k"], extra_options=("-default-device",), use_cache=False)
    assert "device-side kernel launch could not be processed" in str(info.value)
    assert "a <<<...>>> launch compiled as device code" in str(info.value)
    assert "-default-device helps header libraries, not launchers" in str(info.value)


def test_including_the_driver_header_gets_a_hint_of_its_own():
    from driver_gemm.cuda.compile_diagnostics import compile_hints
    host = ("/usr/local/cuda/include/cuda.h(5149): error: A function without execution space annotations "
            "(__host__/__device__/__global__) is considered a host function, and host functions are not allowed in "
            "JIT mode.")
    hint, = compile_hints(host)
    assert hint.startswith("<cuda.h> is the driver API's host header") and "CUtensorMap_st" in hint
    assert "options: [-I ...]" in hint
    hint, = compile_hints(host.replace("cuda.h(5149)", "k.cu(3)"))
    assert hint.startswith("NVRTC compiles device code only, and this file has host code")


WGMMA_KERNEL = ('__global__ void k(float* c) { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); '
                'asm volatile("setmaxnreg.inc.sync.aligned.u32 232;"); c[0] = 1; }\n')


def test_an_sm_90a_instruction_built_for_sm_90_is_told_to_take_the_a_target(tmp_path):
    (tmp_path / "k.cu").write_text(WGMMA_KERNEL)
    with pytest.raises(CompileError) as info:
        compile_source(tmp_path / "k.cu", ["k"], "sm_90", use_cache=False)
    assert "hint: 'wgmma.fence', 'setmaxnreg.inc' are only on the architecture-specific target: give the kernel " \
           "arch: sm_90a" in str(info.value)
    compile_source(tmp_path / "k.cu", ["k"], "sm_90a", use_cache=False)     # as the hint says


def test_nvccs_unnamed_template_instance_gets_the_hint_nvrtcs_has():
    from driver_gemm.cuda.compile_diagnostics import compile_hints
    log = ('/tmp/driver-gemm-nvcc-x/instances.cu(2): error: cannot determine which instance of function template "k" '
           'is intended\n    __attribute__((device)) void* driver_gemm_instance_0 = (void*)&k;\n')
    hint, = compile_hints(log)
    assert hint.startswith("the spec names a function template without all its template arguments")
    assert compile_hints(log.replace("instances.cu(2)", "k.cu(2)")) == []   # NVRTC's own advice covers its log


def test_a_source_saved_with_bare_carriage_returns_compiles_line_by_line(tmp_path):
    # NVRTC ends lines at LF only: read as one line, the first // comment would swallow the kernel.
    (tmp_path / "k.cu").write_bytes(b"// a kernel\r__global__ void k(float* c) {\r    c[0] = 1;\r}\r")
    assert compile_source(tmp_path / "k.cu", ["k"], "sm_90", use_cache=False).symbol("k") == "_Z1kPf"
    (tmp_path / "bad.cu").write_bytes(b"// a kernel\r__global__ void k(float* c) {\r    c[0] = undefined;\r}\r")
    with pytest.raises(CompileError, match=r"bad\.cu:3: error: identifier \"undefined\" is undefined"):
        compile_source(tmp_path / "bad.cu", ["k"], "sm_90", use_cache=False)


def test_an_include_that_names_a_folder_is_told_it_is_a_folder(tmp_path):
    (tmp_path / "parts.cuh").mkdir()
    (tmp_path / "k.cu").write_text('#include "parts.cuh"\n__global__ void k(float* c) { c[0] = 1; }\n')
    with pytest.raises(CompileError) as info:
        compile_source(tmp_path / "k.cu", ["k"], "sm_90", use_cache=False)
    assert f"hint: parts.cuh is a folder in {tmp_path}, not a file" in str(info.value)
    assert "is not beside the kernel source" not in str(info.value)


@pytest.mark.parametrize("value, enabled", [("1", False), ("on", False), ("0", True), ("", True), ("off", True)])
def test_the_cache_switch_takes_on_and_off_words(monkeypatch, tmp_path, value, enabled):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", value)
    assert cache.enabled() is enabled


@pytest.mark.parametrize("value", ["2", "enable", "y"])
def test_a_cache_switch_of_any_other_value_is_refused_naming_the_variable(monkeypatch, value):
    from driver_gemm.errors import UsageError
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", value)
    with pytest.raises(UsageError, match="is 1, true, yes or on to turn the disk caches off") as info:
        cache.enabled()
    assert info.value.field == "DRIVER_GEMM_NO_CACHE"


GNU_ASM_KERNEL = ('__device__ inline unsigned lane() { unsigned r; __asm__ __volatile__("mov.u32 %0, %%laneid;" : '
                  '"=r"(r)); return r; }\n__global__ void k(unsigned* c) { c[0] = lane(); }\n')


def test_gnu_inline_assembly_is_told_the_options_that_build_it(tmp_path):
    # NVRTC takes asm, not GNU's __asm__ (which nvcc takes): the bare error says only that __asm__ is undefined.
    (tmp_path / "k.cu").write_text(GNU_ASM_KERNEL)
    with pytest.raises(CompileError) as info:
        compile_source(tmp_path / "k.cu", ["k"], use_cache=False)
    assert 'identifier "__asm__" is undefined' in str(info.value)
    hint = "options: [-D__asm__=asm, -D__volatile__=volatile]"
    assert hint in str(info.value)
    options = tuple(hint.split("[", 1)[1].rstrip("]").split(", "))
    compile_source(tmp_path / "k.cu", ["k"], extra_options=options, use_cache=False)     # as the hint says
