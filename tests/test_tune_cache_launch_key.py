"""The tuning cache's key holds every launch setting that changes the kernel being measured: a prebuilt image by its
bytes, the compiler (and nvcc's version), the cluster and its scheduling, PDL, a cooperative launch, tensor maps and
the headers an ``-I`` folder gives; and it leaves out the kernel's name, which the record of a hit takes from the
case being measured."""

from __future__ import annotations

import shutil

import pytest

from driver_gemm.specfile import Shape, load_spec
from driver_gemm.tune import tune_cache
from driver_gemm.tune.tune_cache import tuning_key

from conftest import ROOT
from test_spec import write

ENVIRONMENT = {"device": {"name": "NVIDIA H200", "sm_count": 132}, "driver_version": "13.0", "nvrtc_version": "13.0"}
SHAPE = Shape(1024, 1024, 1024)
CUBIN = ROOT / "kernels" / "prebuilt" / "v4_coarsen_2d_64x64x16_4x4_sm90.cubin"

V4 = """\
shapes: [[1024, 1024, 1024]]
kernels:
  - name: v4
    {code}
    function: sgemm_coarsen_2d
    params: {{BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}}
    block: [BN / TN, BM / TM]
    grid: [ceil(N / BN), ceil(M / BM)]
{extra}"""
SOURCE = "source: ../kernels/04_coarsen_2d.cu"


def key_of(tmp_path, extra: str = "", code: str = SOURCE, name: str = "spec.yaml") -> str:
    spec = load_spec(write(tmp_path, V4.format(code=code, extra=extra), name))
    return tuning_key(spec, spec.kernels[0], SHAPE, ENVIRONMENT, "sm_90")


def test_a_prebuilt_image_is_keyed_by_its_bytes(tmp_path):
    image = tmp_path / "prebuilt" / CUBIN.name
    image.parent.mkdir()
    shutil.copyfile(CUBIN, image)
    assert any(byte >= 0x80 for byte in image.read_bytes())      # no text: a decode of it would fail
    first = key_of(tmp_path, code=f"binary: ../prebuilt/{CUBIN.name}")
    assert key_of(tmp_path, code=f"binary: ../prebuilt/{CUBIN.name}") == first
    image.write_bytes(image.read_bytes() + b"\0")                # another image under the same name
    assert key_of(tmp_path, code=f"binary: ../prebuilt/{CUBIN.name}") != first


LAUNCHES = {
    "a cluster": "    cluster: [2, 1, 1]\n",
    "a cluster of one block": "    cluster: [1, 1, 1]\n",
    "a non-portable cluster": "    cluster: [2, 1, 1]\n    cluster_non_portable: true\n",
    "a cluster scheduled otherwise": "    cluster: [2, 1, 1]\n    cluster_scheduling: spread\n",
    "PDL": "    pdl: true\n",
    "a cooperative launch": "    cooperative: true\n",
}


def test_each_launch_attribute_has_a_key_of_its_own(tmp_path):
    keys = {"a plain launch": key_of(tmp_path)}
    for what, extra in LAUNCHES.items():
        keys[what] = key_of(tmp_path, extra)
    assert len(set(keys.values())) == len(keys), keys


def test_the_compiler_and_nvcc_s_version_are_in_the_key(tmp_path, monkeypatch):
    monkeypatch.setattr(tune_cache, "nvcc_version", lambda: (12, 8))
    nvrtc = key_of(tmp_path)
    nvcc = key_of(tmp_path, "    compiler: nvcc\n")
    monkeypatch.setattr(tune_cache, "nvcc_version", lambda: (13, 0))
    assert len({nvrtc, nvcc, key_of(tmp_path, "    compiler: nvcc\n")}) == 3


def test_a_kernel_renamed_keeps_its_key(tmp_path):
    renamed = V4.replace("name: v4", "name: v4coarse")
    spec = load_spec(write(tmp_path, renamed.format(code=SOURCE, extra="")))
    assert tuning_key(spec, spec.kernels[0], SHAPE, ENVIRONMENT, "sm_90") == key_of(tmp_path)


def test_a_header_of_an_include_folder_is_in_the_key(tmp_path):
    kernels = tmp_path / "kernels"
    write(tmp_path, V4.format(code=SOURCE, extra=""))      # lays out the project
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "tile_sizes.h").write_text("#define EXTRA 1\n")
    source = kernels / "04_with_include.cu"
    source.write_text('#include "tile_sizes.h"\n' + (kernels / "04_coarsen_2d.cu").read_text())
    code = "source: ../kernels/04_with_include.cu\n    options: [-I../inc]"
    first = key_of(tmp_path, code=code)
    (tmp_path / "inc" / "tile_sizes.h").write_text("#define EXTRA 2\n")
    assert key_of(tmp_path, code=code) != first


TMA = """\
shapes: [[1024, 512, 1024]]
kernels:
  - name: v11
    source: ../kernels/11_tf32_tma_ws.cu
    function: sgemm_tf32_tma_ws
    precision: tf32
    arch: sm_90a
    params: {{BM: 128, CWG: 2, STAGES: 4, GROUP: 8}}
    block: [128 * (CWG + 1)]
    grid: [ceil(N / (64 * CWG)), ceil(M / BM)]
    shared_bytes: STAGES * (BM + 64 * CWG) * 128 + 16 * STAGES + 1024
    signature:
      - {{name: map_a, type: tensormap, tensor: A, box: [BM, 32], swizzle: 128B{a}}}
      - {{name: map_b, type: tensormap, tensor: B, box: [32, 32], swizzle: 128B}}
      - C
      - M
      - N
      - K
"""


@pytest.mark.parametrize("description", [", l2_promotion: 128B", ", oob_fill: nan"])
def test_a_tensor_map_described_otherwise_has_another_key(tmp_path, description):
    def key(a: str) -> str:
        spec = load_spec(write(tmp_path, TMA.format(a=a)))
        return tuning_key(spec, spec.kernels[0], Shape(1024, 512, 1024), ENVIRONMENT, "sm_90")

    assert key("") == key("") != key(description)
