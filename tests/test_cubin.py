"""Reading parameters and resources from compiled images (NVRTC CUBINs, nvcc CUBINs, fatbins, PTX), no GPU."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys

import pytest

from conftest import TEST_KERNELS
from driver_gemm.cuda import compile as nvrtc_compile
from driver_gemm.cuda.cubin import read_cubin
from driver_gemm.cuda.fatbin import cubin_bytes, cubin_for_arch, ptx_entries, ptx_param_slots, read_fatbin
from driver_gemm.errors import ImageError

SOURCE = TEST_KERNELS / "signatures.cu"
INSTANCES = ("gemm_tiles<32>", "gemm_tiles<64>", "float_k")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@pytest.fixture(scope="module")
def nvrtc_cubin(tmp_path_factory):
    return nvrtc_compile.compile_source(SOURCE, INSTANCES, "sm_90", use_cache=False)


@pytest.fixture(scope="module")
def image(nvrtc_cubin):
    return read_cubin(nvrtc_cubin.image, "signatures.cu")


def _nvcc(tmp_path, *arguments) -> bytes:
    output = tmp_path / "out.bin"
    subprocess.run(["nvcc", *arguments, "-o", str(output), str(SOURCE)], check=True, capture_output=True)
    return output.read_bytes()


def test_lists_every_kernel_by_symbol(image, nvrtc_cubin):
    expected = {"gemm_plain", "padded", "with_tensor_map", "clustered", "uses_local",
                *(nvrtc_cubin.symbol(instance) for instance in INSTANCES)}
    assert set(image.kernels) == expected
    assert image.arch == "sm_90"


def test_seed_signature_layout(image):
    kernel = image.kernel("gemm_plain")
    assert [tuple(p) for p in kernel.params] == [(0, 0, 8), (1, 8, 8), (2, 16, 8), (3, 24, 4), (4, 28, 4), (5, 32, 4)]
    assert kernel.param_bytes == 36


def test_eight_byte_parameters_are_aligned_after_small_ones(image):
    kernel = image.kernel("padded")
    assert [(p.offset, p.size) for p in kernel.params] == [(0, 4), (8, 8), (16, 1), (24, 8), (32, 8)]
    assert kernel.max_threads == (128, 1, 1)


def test_tensor_map_by_value_is_128_bytes_and_aligned(image):
    tensor_map, out, n = image.kernel("with_tensor_map").params
    assert tensor_map.size == 128
    assert out.offset == tensor_map.offset + 128 and out.size == 8
    assert n.offset == out.offset + 8 and n.size == 4


def test_cluster_dims_are_read(image):
    assert image.kernel("clustered").cluster_dims == (2, 1, 1)
    assert image.kernel("gemm_plain").cluster_dims is None


def test_resources_equal_the_ptxas_report(image, nvrtc_cubin):
    for symbol, reported in nvrtc_cubin.resources.items():
        read = image.kernel(symbol).resources
        assert (read.registers, read.barriers, read.static_shared_bytes, read.stack_bytes) == \
            (reported.registers, reported.barriers, reported.static_shared_bytes, reported.stack_bytes), symbol
    assert image.kernel("gemm_plain").static_shared_bytes == 1024
    assert image.kernel("uses_local").local_bytes == 1024


def test_arch_specific_target_is_named(tmp_path):
    cubin = nvrtc_compile.compile_source(SOURCE, INSTANCES, "sm_90a", use_cache=False)
    assert read_cubin(cubin.image).arch == "sm_90a"


def test_unknown_kernel_lists_the_kernels(image):
    with pytest.raises(ImageError, match="no kernel named 'nope'.*gemm_plain"):
        image.kernel("nope")


@needs_nvcc
def test_nvcc_cubin_reads_like_nvrtc(tmp_path, image):
    prebuilt = read_cubin(_nvcc(tmp_path, "-cubin", "-arch=sm_90"), "signatures.cubin")
    assert prebuilt.arch == "sm_90"
    for name in ("gemm_plain", "padded", "clustered", "uses_local"):
        assert prebuilt.kernel(name).params == image.kernel(name).params
        assert prebuilt.kernel(name).static_shared_bytes == image.kernel(name).static_shared_bytes


@needs_nvcc
def test_fatbin_gives_the_cubin_of_each_arch(tmp_path):
    # LZ4 ("speed") compresses the PTX entry and leaves the CUBINs as they are: both paths are read.
    data = _nvcc(tmp_path, "-fatbin", "-compress-mode=speed", "-gencode", "arch=compute_90,code=sm_90",
                 "-gencode", "arch=compute_90a,code=sm_90a", "-gencode", "arch=compute_90,code=compute_90")
    entries = read_fatbin(data)
    assert sorted((entry.arch, entry.compression) for entry in entries) == [
        ("compute_90", "lz4"), ("sm_90", None), ("sm_90a", None)]
    for arch in ("sm_90", "sm_90a"):
        picked = read_cubin(cubin_for_arch(data, arch, "k.fatbin"))
        assert picked.arch == arch
        assert len(picked.kernel("gemm_plain").params) == 6
        assert cubin_bytes(data, arch) == cubin_for_arch(data, arch)
    with pytest.raises(ImageError, match=r"no CUBIN for sm_80 \(the fatbin holds .*sm_90a"):
        cubin_for_arch(data, "sm_80", "k.fatbin")
    ptx = next(entry for entry in read_fatbin(data) if entry.kind == "ptx").data().decode()
    assert ptx_entries(ptx)["padded"][1].type == ".f64"


@needs_nvcc
def test_ptx_signature_matches_the_cubin(tmp_path, image):
    entries = ptx_entries(_nvcc(tmp_path, "-ptx", "-arch=sm_90").decode())
    for name in ("gemm_plain", "padded", "clustered"):
        assert ptx_param_slots(entries[name]) == image.kernel(name).params
    tensor_map = entries["with_tensor_map"][0]
    assert (tensor_map.size, tensor_map.align % 64) == (128, 0)


def test_ptx_struct_and_scalar_declarations():
    ptx = """
    .visible .entry k(
        .param .align 64 .b8 k_param_0[128],   // a tensor map
        .param .u32 k_param_1,
        .param .f64 k_param_2
    )
    { ret; }
    """
    params = ptx_entries(ptx)["k"]
    assert [(p.type, p.size, p.align) for p in params] == [(".b8", 128, 64), (".u32", 4, 4), (".f64", 8, 8)]
    assert [tuple(s) for s in ptx_param_slots(params)] == [(0, 0, 128), (1, 128, 4), (2, 136, 8)]


@pytest.mark.parametrize("data", [b"", b"garbage", b"\x7fELF" + b"\x00" * 10, b"\x7fELF\x02\x01" + bytes(100),
                                  bytes(range(256)) * 4])
def test_garbage_is_a_clear_error(data):
    with pytest.raises(ImageError, match="CUBIN"):
        read_cubin(data, "bad.cubin")


def test_every_truncation_is_a_clear_error_or_a_partial_reading(nvrtc_cubin):
    data = nvrtc_cubin.image
    for length in range(0, len(data), max(1, len(data) // 300)):
        try:
            read_cubin(data[:length], "cut.cubin")
        except ImageError as error:
            assert "cut.cubin" in str(error)


def test_corrupted_bytes_never_raise_anything_but_image_error(nvrtc_cubin):
    data = bytearray(nvrtc_cubin.image)
    for position in range(16, len(data), 97):
        damaged = bytearray(data)
        damaged[position] ^= 0xFF
        try:
            read_cubin(bytes(damaged))
        except ImageError:
            pass


def test_garbage_fatbin_is_a_clear_error():
    with pytest.raises(ImageError, match="not a fatbin"):
        read_fatbin(b"\x00" * 64, "x.fatbin")
    header = bytes.fromhex("50ed55ba01001000") + (1 << 20).to_bytes(8, "little")
    with pytest.raises(ImageError, match="truncated fatbin"):
        read_fatbin(header + bytes(64), "x.fatbin")


def _synthetic_fatbin(kind: int, sm: int, flags: int, payload: bytes, uncompressed: int) -> bytes:
    entry = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 0x40, len(payload), len(payload), 0, 0, 8, sm, 0, 0,
                        flags, 0, uncompressed)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entry) + len(payload)) + entry + payload


def test_zstd_entry_without_the_module_says_how_to_rebuild(monkeypatch):
    data = _synthetic_fatbin(2, 90, 0x8011, b"\x28\xb5\x2f\xfd" + bytes(12), 4096)
    (entry,) = read_fatbin(data, "z.fatbin")
    assert (entry.arch, entry.compression) == ("sm_90", "zstd")
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(ImageError, match=r"Zstandard-compressed.*driver-gemm\[fatbin\].*rebuild"):
        cubin_for_arch(data, "sm_90", "z.fatbin")


PREBUILT = TEST_KERNELS.parents[1] / "kernels" / "prebuilt"


@pytest.fixture(params=["lz4 module", "python"])
def lz4_decoder(request, monkeypatch):
    """The `lz4` module's decoder, or (with the module hidden) the Python one."""
    if request.param == "lz4 module":
        pytest.importorskip("lz4.block")
    else:
        monkeypatch.setitem(sys.modules, "lz4", None)
    return request.param


def test_lz4_entry_is_decoded_and_bad_lz4_is_a_clear_error(lz4_decoder):
    # 4 literals "abcd", a match of 8 bytes at distance 4 (an overlapping copy), then the 5 literals that end
    # every LZ4 block.
    block = bytes([0x44]) + b"abcd" + bytes([4, 0]) + bytes([0x50]) + b"!!!!!"
    (entry,) = read_fatbin(_synthetic_fatbin(1, 90, 0x2011, block, 17))
    assert entry.data() == b"abcdabcdabcd!!!!!"
    (broken,) = read_fatbin(_synthetic_fatbin(1, 90, 0x2011, bytes([0x44]) + b"abcd" + bytes([9, 0]), 13))
    with pytest.raises(ImageError, match="corrupt LZ4"):
        broken.data("p.fatbin")


def test_both_lz4_decoders_give_the_same_bytes_on_a_compressed_cubin(monkeypatch):
    lz4_block = pytest.importorskip("lz4.block")
    cubin = (PREBUILT / "v8_tuned_128x256x16_sm90.cubin").read_bytes()
    compressed = lz4_block.compress(cubin, store_size=False)
    (entry,) = read_fatbin(_synthetic_fatbin(2, 90, 0x2011, compressed, len(cubin)))
    assert entry.compression == "lz4" and len(compressed) < len(cubin)
    assert entry.data() == cubin
    monkeypatch.setitem(sys.modules, "lz4", None)
    assert entry.data() == cubin


def test_zstd_entry_is_decoded_with_the_module():
    zstandard = pytest.importorskip("zstandard")
    cubin = (PREBUILT / "v4_coarsen_2d_64x64x16_4x4_sm90.cubin").read_bytes()
    data = _synthetic_fatbin(2, 90, 0x8011, zstandard.ZstdCompressor().compress(cubin), len(cubin))
    assert cubin_for_arch(data, "sm_90", "z.fatbin") == cubin


def test_cubin_bytes_passes_a_cubin_through_and_rejects_text(nvrtc_cubin):
    assert cubin_bytes(nvrtc_cubin.image, "sm_90") == nvrtc_cubin.image
    with pytest.raises(ImageError, match="neither a CUBIN"):
        cubin_bytes(b".version 9.0\n.target sm_90\n", "sm_90", "k.ptx")


def test_a_relocatable_cubin_is_refused_with_how_to_link_it(tmp_path):
    # -rdc=true builds a relocatable object (ELF type ET_REL), with a .nv_debug.shared section of no file bytes.
    source = ("extern __device__ float scale;\n__global__ void k(float* c) { __shared__ float s[2048]; "
              "s[threadIdx.x] = c[threadIdx.x] * scale; __syncthreads(); c[threadIdx.x] = s[2047 - threadIdx.x]; }\n")
    with pytest.raises(ImageError, match="a relocatable CUBIN .built with -rdc=true or -dc., whose device code is not "
                                         "linked yet"):
        read_cubin(nvrtc_compile.compile_text(source, "k.cu", ["k"], "sm_90", extra_options=["-rdc=true"],
                                              use_cache=False).image, "k.cu")
