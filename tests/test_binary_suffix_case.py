"""A prebuilt binary's suffix is read in any case of letters (``.CUBIN``, ``.Fatbin``, ``.PTX``), as the loader reads
it; a source's suffix is read as written."""

from __future__ import annotations

import shutil

import pytest

from driver_gemm.cuda.prebuilt import binary_format
from driver_gemm.specfile import load_spec

from malformed import MINIMAL, refused, write

CUBIN = "kernels/prebuilt/v4_coarsen_2d_64x64x16_4x4_sm90.cubin"


def _with_binary(tmp_path, name: str) -> str:
    write(tmp_path, "")     # the project, with its kernels/
    shutil.copy(tmp_path / CUBIN, tmp_path / "kernels" / name)
    return MINIMAL.replace("    source: ", f"    binary: ../kernels/{name}\n    # was: ")


@pytest.mark.parametrize("name", ["v4.CUBIN", "v4.Fatbin", "v4.PTX"])
def test_a_binary_suffix_in_capitals_loads_as_the_loader_reads_it(tmp_path, name):
    spec = load_spec(write(tmp_path, _with_binary(tmp_path, name)))
    binary = spec.kernels[0].binary
    assert binary is not None and binary.name == name
    assert binary_format(binary) == name.split(".")[1].lower()


def test_a_binary_of_another_suffix_is_still_refused(tmp_path, monkeypatch, capsys):
    refused(tmp_path, _with_binary(tmp_path, "v4.bin"), monkeypatch, capsys, field="kernels[v4].binary",
            message="a kernel binary ends in .cubin, .fatbin, .ptx")


def test_a_source_suffix_is_read_as_written(tmp_path, monkeypatch, capsys):
    write(tmp_path, "")
    shutil.copy(tmp_path / "kernels/04_coarsen_2d.cu", tmp_path / "kernels/v4.CU")
    text = MINIMAL.replace("    source: ", "    source: ../kernels/v4.CU\n    # was: ")
    refused(tmp_path, text, monkeypatch, capsys, field="kernels[v4].source", message="a kernel source ends in")
