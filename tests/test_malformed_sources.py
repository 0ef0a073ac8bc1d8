"""Kernel sources that leave the spec's project, or are not kernel sources at all."""

import os

import pytest

from driver_gemm.specfile import load_spec

from malformed import MINIMAL, refused, write

KERNEL = "../kernels/04_coarsen_2d.cu"


@pytest.mark.parametrize("source, message", [
    ("/etc/passwd", "absolute source path"),
    ("/work/does/not/matter.cu", "absolute source path"),
    ("../../../../../../../../etc/passwd", "leaves the spec's project"),
    ("../../outside.cu", "leaves the spec's project"),
    ("../kernels/../../x.cu", "leaves the spec's project"),
    ("../kernels", "a kernel source ends in"),
    ("../pyproject.toml", "a kernel source ends in"),
    ("../kernels/nope.cu", "does not exist"),
    ("''", "non-empty string"),
    ("[a.cu]", "non-empty string"),
])
def test_sources_outside_or_not_kernels(tmp_path, monkeypatch, capsys, source, message):
    error = refused(tmp_path, MINIMAL.replace(KERNEL, source), monkeypatch, capsys, field="kernels[v4].source")
    assert message in error.message


def test_a_symlink_that_leaves_the_project(tmp_path, monkeypatch, capsys):
    outside = tmp_path.parent / f"{tmp_path.name}-outside.cu"
    outside.write_text("secret\n")
    write(tmp_path, MINIMAL)
    os.symlink(outside, tmp_path / "kernels" / "link.cu")
    error = refused(tmp_path, MINIMAL.replace(KERNEL, "../kernels/link.cu"), monkeypatch, capsys,
                    field="kernels[v4].source")
    assert "leaves the spec's project" in error.message


def test_a_symlink_named_cu_to_a_file_that_is_not(tmp_path, monkeypatch, capsys):
    write(tmp_path, MINIMAL)
    (tmp_path / "notes.txt").write_text("not a kernel\n")
    os.symlink(tmp_path / "notes.txt", tmp_path / "kernels" / "notes.cu")
    refused(tmp_path, MINIMAL.replace(KERNEL, "../kernels/notes.cu"), monkeypatch, capsys,
            field="kernels[v4].source", message="kernel source ../kernels/notes.cu is a link to")


@pytest.mark.parametrize("option", ["-I/etc", "--include-path=/", "--pre-include=/etc/passwd", "-include /etc/x.h"])
def test_options_that_read_files(tmp_path, monkeypatch, capsys, option):
    refused(tmp_path, MINIMAL + f"    options: ['{option}']\n", monkeypatch, capsys, field="kernels[v4].options")


def test_leave_to_go_outside_is_the_users(tmp_path):
    absolute = MINIMAL.replace(KERNEL, str(tmp_path / "kernels" / "04_coarsen_2d.cu"))
    path = write(tmp_path, absolute)
    assert load_spec(path, allow_outside_sources=True).kernels[0].source.name == "04_coarsen_2d.cu"
    (tmp_path / "pyproject.toml").unlink()      # no project: the spec's own folder is the tree
    path = write(tmp_path, MINIMAL)
    (tmp_path / "pyproject.toml").unlink()
    with pytest.raises(Exception, match="leaves the spec's project"):
        load_spec(path)
    assert load_spec(path, allow_outside_sources=True).kernels[0].function == "sgemm_coarsen_2d"


def test_spec_from_dict_allows_absolute_sources_by_default(tmp_path):
    from driver_gemm.errors import SpecError
    from driver_gemm.specfile import spec_from_dict

    import yaml

    data = yaml.safe_load(MINIMAL.replace(KERNEL, str(tmp_path / "kernels" / "04_coarsen_2d.cu")))
    write(tmp_path, MINIMAL)
    assert spec_from_dict(data).kernels[0].name == "v4"
    with pytest.raises(SpecError, match="absolute source path"):
        spec_from_dict(data, allow_outside_sources=False)


@pytest.mark.parametrize("data, message", [
    (b"// caf\xe9\n__global__ void k() {}\n", "is not UTF-8 text: byte 0xe9 at offset 6 (line 1)"),
    (bytes(range(256)) * 8, "is not UTF-8 text: byte 0x80 at offset 128"),
    ("// ok\n".encode("utf-16"), "is not UTF-8 text: byte 0xff at offset 0"),
    (b"__global__ void k() {}\n\0\n", "holds a NUL byte (line 2)"),
])
def test_sources_that_are_not_text(tmp_path, monkeypatch, capsys, data, message):
    write(tmp_path, MINIMAL)
    (tmp_path / "kernels" / "bad.cu").write_bytes(data)
    refused(tmp_path, MINIMAL.replace(KERNEL, "../kernels/bad.cu"), monkeypatch, capsys, field="kernels[v4].source",
            message=message)


@pytest.mark.parametrize("key, name, limit", [("source", "big.cu", "MAX_SOURCE_BYTES"),
                                              ("binary", "big.cubin", "MAX_BINARY_BYTES")])
def test_oversized_sources_and_binaries_are_refused_unread(tmp_path, monkeypatch, capsys, key, name, limit):
    from driver_gemm.specfile import kernels

    write(tmp_path, MINIMAL)
    with open(tmp_path / "kernels" / name, "wb") as handle:       # sparse: large on paper, nothing on disk
        handle.truncate(getattr(kernels, limit) + 1)
    text = MINIMAL.replace(f"source: {KERNEL}", f"{key}: ../kernels/{name}")
    refused(tmp_path, text, monkeypatch, capsys, field=f"kernels[v4].{key}", message=limit)


def test_a_header_that_is_not_text_is_a_compile_error_naming_it(tmp_path, monkeypatch, capsys):
    from driver_gemm.cli import EXIT_FAILED, main

    write(tmp_path, MINIMAL)
    kernels = tmp_path / "kernels"
    (kernels / "latin.cuh").write_bytes(b"// caf\xe9\n")
    (kernels / "with_header.cu").write_text('#include "latin.cuh"\n' + (kernels / "04_coarsen_2d.cu").read_text())
    spec = write(tmp_path, MINIMAL.replace(KERNEL, "../kernels/with_header.cu"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    assert main(["plan", str(spec), "--arch", "sm_90"]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    assert f"header {kernels / 'latin.cuh'} is not UTF-8 text (byte 0xe9 at offset 6)" in err


def test_a_source_saved_with_a_byte_order_mark_compiles(tmp_path, monkeypatch, capsys):
    """Editors on Windows write one; NVRTC reads it as a stray token, so it is left out of what NVRTC is given."""
    from driver_gemm.cli import EXIT_OK, main

    write(tmp_path, MINIMAL)
    kernels = tmp_path / "kernels"
    (kernels / "bom.cu").write_bytes(b"\xef\xbb\xbf" + (kernels / "04_coarsen_2d.cu").read_bytes())
    spec = write(tmp_path, MINIMAL.replace(KERNEL, "../kernels/bom.cu"))
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    assert main(["plan", str(spec), "--arch", "sm_90"]) == EXIT_OK
    assert "did not compile" not in capsys.readouterr().err
