"""Prebuilt images against the GPU they are planned for: which architectures run a CUBIN, a fatbin's entry or a PTX,
what a CUBIN says of its shared memory and spills, and what a message says a misnamed image is. No GPU."""

from __future__ import annotations

import shutil
import struct
import subprocess
import textwrap

import pytest

from driver_gemm.cuda import compile as nvrtc_compile
from driver_gemm.cuda.cubin import read_cubin
from driver_gemm.cuda.fatbin import (FATBIN_MAGIC, FLAG_ARCH_SPECIFIC, FLAG_FAMILY_SPECIFIC, KIND_ELF, KIND_LTO_IR,
                                     KIND_PTX, entry_for_arch, read_fatbin)
from driver_gemm.cuda.prebuilt import load_binary
from driver_gemm.cuda.sass import shared_memory_instructions
from driver_gemm.errors import ImageError
from driver_gemm.planning import image_checks
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.archs import machine_code_runs_on, ptx_runs_on

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

SOURCE = r"""
extern "C" __device__ __noinline__ float helper_fn(float x) { return x * 3.f + 1.f; }

extern "C" __global__ void dyn_only(const float* A, const float* B, float* C, int M, int N, int K) {
  extern __shared__ float tile[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < M * N ? A[i] : 0.f;
  __syncthreads();
  if (i < M * N) C[i] = helper_fn(tile[(threadIdx.x + 1) % blockDim.x]) + B[0] * K;
}

extern "C" __global__ void static_tile(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < M * N ? A[i] : 0.f;
  __syncthreads();
  if (i < M * N) C[i] = tile[(threadIdx.x + 1) % blockDim.x] + B[0] * K;
}

extern "C" __global__ void __launch_bounds__(256, 8) spill_gemm(const float* __restrict__ A,
    const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  float acc[8][8];
  int row0 = (blockIdx.y * 16 + threadIdx.x / 16) * 8, col0 = (blockIdx.x * 16 + threadIdx.x % 16) * 8;
  for (int i = 0; i < 8; ++i) for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
  for (int k = 0; k < K; ++k) {
    float a[8], b[8];
    for (int i = 0; i < 8; ++i) a[i] = (row0 + i < M) ? A[(row0 + i) * K + k] : 0.f;
    for (int j = 0; j < 8; ++j) b[j] = (col0 + j < N) ? B[k * N + col0 + j] : 0.f;
    for (int i = 0; i < 8; ++i) for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
  }
  for (int i = 0; i < 8; ++i) for (int j = 0; j < 8; ++j)
    if (row0 + i < M && col0 + j < N) C[(row0 + i) * N + col0 + j] = acc[i][j];
}
"""
KERNELS = ("dyn_only", "static_tile", "spill_gemm")


def ptx(target: str, version: str = "8.0", name: str = "tiny") -> str:
    return textwrap.dedent(f"""\
        .version {version}
        .target {target}
        .address_size 64

        .visible .entry {name}(
            .param .u64 {name}_param_0,
            .param .u32 {name}_param_1
        )
        {{
            ret;
        }}
        """)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "kernels.cu"
    path.write_text(SOURCE)
    return path


@pytest.fixture(scope="module")
def images(source):
    """NVRTC CUBINs of the test kernels, by architecture."""
    return {arch: nvrtc_compile.compile_source(source, KERNELS, arch, use_cache=False).image
            for arch in ("sm_80", "sm_90", "sm_90a")}


def fatbin(*entries: tuple[int, int, int, bytes]) -> bytes:
    """A fatbin of uncompressed entries (kind, sm, flags, payload), laid out as nvcc writes one."""
    body = b""
    for kind, sm, flags, payload in entries:
        header = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 64, len(payload), 0, 0, 0, 1, sm, 0, 0, flags | 0x11, 0, 0)
        body += header + payload
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def write(tmp_path, name: str, data: bytes | str):
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


# ------------------------------------------------------------------------------------- which GPU runs what


def test_the_compatibility_rules_are_cudas():
    assert machine_code_runs_on("sm_80", "sm_86") and machine_code_runs_on("sm_80", "sm_89")
    assert machine_code_runs_on("sm_100", "sm_103") and machine_code_runs_on("sm_120", "sm_121")
    assert machine_code_runs_on("sm_100f", "sm_103") and machine_code_runs_on("sm_90a", "sm_90")
    assert machine_code_runs_on("sm_90", "sm_90a")
    assert not machine_code_runs_on("sm_86", "sm_80") and not machine_code_runs_on("sm_80", "sm_90")
    assert not machine_code_runs_on("sm_100a", "sm_103") and not machine_code_runs_on("sm_100f", "sm_110")
    assert ptx_runs_on("sm_80", "sm_90") and ptx_runs_on("sm_90", "sm_120") and not ptx_runs_on("sm_100", "sm_90")
    assert ptx_runs_on("sm_90a", "sm_90") and not ptx_runs_on("sm_90a", "sm_100")


def test_a_cubin_is_planned_for_later_minors_of_its_major_and_refused_elsewhere_with_the_rule(tmp_path, images):
    path = write(tmp_path, "k80.cubin", images["sm_80"])
    for target in ("sm_80", "sm_86", "sm_89"):
        built = load_binary(path, ["static_tile"], target)
        assert built.resources_of("static_tile").static_shared_bytes == 1024
    with pytest.raises(ImageError, match=r"k80.cubin: the CUBIN is for sm_80, which does not run on sm_90: .*later "
                                         r"minors of the same major"):
        load_binary(path, ["static_tile"], "sm_90")
    specific = write(tmp_path, "k90a.cubin", images["sm_90a"])
    assert load_binary(specific, ["static_tile"], "sm_90").arch == "sm_90"     # the same H100
    with pytest.raises(ImageError, match=r"sm_90a, which does not run on sm_100.*sm_XYa one only on X\.Y"):
        load_binary(specific, ["static_tile"], "sm_100")


def test_a_fatbin_gives_the_entry_the_driver_loads(tmp_path, images):
    ampere = fatbin((KIND_ELF, 80, 0, images["sm_80"]), (KIND_PTX, 80, 0, ptx("sm_80", name="static_tile").encode()))
    assert entry_for_arch(ampere, "sm_89").arch == "sm_80"
    path = write(tmp_path, "ampere.fatbin", ampere)
    built = load_binary(path, ["static_tile"], "sm_89")
    assert built.image_format == "fatbin" and built.resources_of("static_tile").static_shared_bytes == 1024
    # On Hopper no CUBIN runs: the driver JIT-compiles the compute_80 PTX, and it is planned as a .ptx file is.
    on_hopper = load_binary(path, ["static_tile"], "sm_90")
    assert on_hopper.image_format == "ptx" and not on_hopper.resources_known
    assert on_hopper.image.startswith(b".version") and len(on_hopper.param_slots("static_tile")) == 2
    ptx_only = load_binary(write(tmp_path, "ptx_only.fatbin", fatbin((KIND_PTX, 90, 0, ptx("sm_90").encode()))),
                           ["tiny"], "sm_90")
    assert ptx_only.image_format == "ptx"
    newest = fatbin((KIND_ELF, 80, 0, images["sm_80"]), (KIND_ELF, 86, 0, images["sm_80"]))
    assert [entry_for_arch(newest, arch).sm for arch in ("sm_80", "sm_86", "sm_89")] == [80, 86, 86]


def test_a_fatbin_of_arch_or_family_specific_code(tmp_path, images):
    hopper = fatbin((KIND_ELF, 90, FLAG_ARCH_SPECIFIC, images["sm_90a"]))
    assert load_binary(write(tmp_path, "h.fatbin", hopper), ["static_tile"], "sm_90").image_format == "fatbin"
    family = fatbin((KIND_ELF, 100, FLAG_FAMILY_SPECIFIC, images["sm_90"]))
    assert [entry.arch for entry in read_fatbin(family)] == ["sm_100f"]
    assert entry_for_arch(family, "sm_103").arch == "sm_100f"
    with pytest.raises(ImageError, match=r"no CUBIN for sm_100 \(the fatbin holds sm_90a\).*sm_90a is arch-specific"):
        entry_for_arch(hopper, "sm_100", "h.fatbin")


def test_an_lto_ir_fatbin_is_said_to_be_one(tmp_path):
    path = write(tmp_path, "lto.fatbin", fatbin((KIND_LTO_IR, 90, 0, b"BC\xc0\xde" + bytes(60))))
    with pytest.raises(ImageError, match=r"lto.fatbin: no CUBIN for sm_90 \(the fatbin holds lto_90\): lto_90 is "
                                         r"LTO-IR .*nvJitLink"):
        load_binary(path, ["tiny"], "sm_90")


# ------------------------------------------------------------------------------------- PTX targets


def test_arch_specific_ptx_is_checked_for_its_own_target_on_the_same_gpu(tmp_path):
    built = load_binary(write(tmp_path, "hopper.ptx", ptx("sm_90a")), ["tiny"], "sm_90")
    assert built.image_format == "ptx" and "cannot be compiled" not in built.log
    fatbinned = fatbin((KIND_PTX, 90, FLAG_ARCH_SPECIFIC, ptx("sm_90a").encode()))
    assert load_binary(write(tmp_path, "hopper.fatbin", fatbinned), ["tiny"], "sm_90").image_format == "ptx"
    with pytest.raises(ImageError, match=r"hopper.ptx: the PTX's .target sm_90a is arch-specific code, which only a "
                                         r"GPU of compute capability 9.0 JIT-compiles, not sm_100"):
        load_binary(tmp_path / "hopper.ptx", ["tiny"], "sm_100")


def test_ptx_for_a_newer_gpu_is_refused_in_words(tmp_path):
    with pytest.raises(ImageError, match=r"blackwell.ptx: the PTX's .target sm_100 is newer than the target sm_90, "
                                         r"and a GPU JIT-compiles PTX only of its own or an older architecture"):
        load_binary(write(tmp_path, "blackwell.ptx", ptx("sm_100", "8.7")), ["tiny"], "sm_90")


def test_a_non_ascii_ptx_is_refused_at_its_line(tmp_path):
    text = ptx("sm_90").replace(".address_size 64", ".address_size 64\n.file 1 \"/home/j\u00fcrgen/k.py\"")
    with pytest.raises(ImageError, match=r"utf8.ptx:4: not PTX text: byte 0xC3 is not ASCII"):
        load_binary(write(tmp_path, "utf8.ptx", text), ["tiny"], "sm_90")


# ------------------------------------------------------------------------------------- what a file is


@pytest.mark.parametrize("content, name, said", [
    ("cubin", "k.ptx", "a CUBIN (an ELF image), not PTX text as its suffix says: name it .cubin"),
    ("cubin", "k.fatbin", "a CUBIN (an ELF image), not a fatbin"),
    ("fatbin", "k.cubin", "a fatbin (0xBA55ED50 header), not a CUBIN (an ELF image) as its suffix says: name it "
                          ".fatbin"),
    ("ptx", "k.cubin", "PTX text, not a CUBIN (an ELF image) as its suffix says: name it .ptx"),
])
def test_a_misnamed_image_is_said_to_be_what_it_is(tmp_path, images, content, name, said):
    data = {"cubin": images["sm_90"], "fatbin": fatbin((KIND_ELF, 90, 0, images["sm_90"])),
            "ptx": ptx("sm_90")}[content]
    with pytest.raises(ImageError) as refused:
        load_binary(write(tmp_path, name, data), ["tiny"], "sm_90")
    assert said in str(refused.value) and name in str(refused.value)


def test_a_device_function_named_as_the_kernel_is_said_to_be_one(tmp_path, images):
    path = write(tmp_path, "k.cubin", images["sm_90"])
    assert "helper_fn" in read_cubin(images["sm_90"]).device_functions
    with pytest.raises(ImageError, match=r"function 'helper_fn' is a device function .*not a kernel .*dyn_only"):
        load_binary(path, ["helper_fn"], "sm_90")
    with pytest.raises(ImageError, match="no kernel matches function 'nope'"):
        load_binary(path, ["nope"], "sm_90")


# ------------------------------------------------------------------------------------- resources of a CUBIN


def test_the_shared_window_of_sm90_is_left_out_without_a_reserved_section(images):
    """A -G build has no .nv.shared.reserved.0 section, but its kernels' sections begin with the window all the
    same: the section renamed, the static bytes are unchanged."""
    data = images["sm_90"]
    renamed = data.replace(b".nv.shared.reserved.0\x00", b".nv.shared.xeserved.0\x00")
    assert renamed != data
    assert read_cubin(renamed).kernel("static_tile").static_shared_bytes == 1024
    assert read_cubin(data).kernel("static_tile").static_shared_bytes == 1024


@needs_nvcc
def test_a_debug_build_shows_the_static_shared_memory_of_an_optimised_one(tmp_path, source):
    figures = []
    for flag in ("-O3", "-G"):
        output = tmp_path / f"k{flag}.cubin"
        subprocess.run(["nvcc", "-cubin", "-arch=sm_90", flag, "-o", str(output), str(source)], check=True,
                       capture_output=True)
        figures.append(read_cubin(output.read_bytes()).kernel("static_tile").static_shared_bytes)
    assert figures == [1024, 1024]


def test_a_prebuilt_cubins_spills_are_unknown_where_it_has_a_stack_frame(tmp_path, images):
    image = read_cubin(images["sm_90"])
    spiller = image.kernel("spill_gemm")
    assert spiller.local_bytes > 0 and spiller.spill_instructions, "the kernel spills under its launch bounds"
    path = write(tmp_path, "k.cubin", images["sm_90"])
    built = load_binary(path, ["spill_gemm", "static_tile"], "sm_90")
    spills = built.resources_of("spill_gemm")
    assert (spills.spill_store_bytes, spills.spill_load_bytes, spills.spills_known) == (None, None, False)
    assert built.resources_of("static_tile").spill_store_bytes == 0     # no stack frame to spill to


# ------------------------------------------------------------------------------------- planning a CUBIN


def project(tmp_path, images, function: str, extra: str = "") -> object:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "k").mkdir(exist_ok=True)
    (tmp_path / "k" / "k.cubin").write_bytes(images["sm_90"])
    (tmp_path / "specs").mkdir(exist_ok=True)
    spec = tmp_path / "specs" / "k.yaml"
    spec.write_text(textwrap.dedent(f"""\
        shapes:
          - [256, 256, 16]
        kernels:
          - name: k
            binary: ../k/k.cubin
            function: {function}
            block: [256]
            grid: [ceil(M * N / 256)]
        """) + extra)
    return plan_spec(load_spec(spec), arch="sm_90")


FAKE_SASS = """
        Function : dyn_only
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   STS [R3], R0 ;
        /*0020*/                   LDS R5, [R4] ;
        Function : static_tile
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        Function : spill_gemm
        /*0000*/                   LDG.E R1, desc[UR4][R2.64] ;
"""


def test_shared_memory_instructions_are_read_per_function():
    assert shared_memory_instructions(FAKE_SASS) == {"dyn_only": ("STS", "LDS"), "static_tile": (),
                                                     "spill_gemm": ()}


def test_a_cubin_whose_machine_code_uses_shared_memory_it_does_not_declare_needs_shared_bytes(
        tmp_path, images, monkeypatch):
    monkeypatch.setattr(image_checks, "find_disassembler", lambda: ("cuobjdump", "cuobjdump"))
    monkeypatch.setattr(image_checks, "disassemble", lambda cubin: FAKE_SASS)
    image_checks._sass_reading.cache_clear()
    plan = project(tmp_path, images, "dyn_only").plans[0]
    assert not plan.valid
    said = " ".join(str(problem) for problem in plan.problems)
    assert "machine code uses shared memory (STS, LDS)" in said and "shared_bytes" in said
    given = project(tmp_path, images, "dyn_only", "    shared_bytes: 1024\n").plans[0]
    assert given.valid
    image_checks._sass_reading.cache_clear()


def test_without_a_disassembler_the_dynamic_shared_memory_of_a_cubin_is_noted_unchecked(
        tmp_path, images, monkeypatch):
    monkeypatch.setattr(image_checks, "find_disassembler", lambda: None)
    plan = project(tmp_path, images, "dyn_only").plans[0]
    assert plan.valid and any(note.startswith("dynamic shared memory not checked") for note in plan.notes)
    static = project(tmp_path, images, "static_tile").plans[0]
    assert not any(note.startswith("dynamic shared memory not checked") for note in static.notes)


def test_a_prebuilt_cubins_unknown_spills_are_noted(tmp_path, images, monkeypatch):
    monkeypatch.setattr(image_checks, "find_disassembler", lambda: None)
    plan = project(tmp_path, images, "spill_gemm").plans[0]
    assert plan.resources.spill_store_bytes is None
    assert any(note.startswith("spills: the image marks") and "stack frame" in note for note in plan.notes)
