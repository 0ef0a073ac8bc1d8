"""Kernel sources that leave the spec's project, or are not kernel sources at all."""

import os

import pytest

from driver_gemm.spec import load_spec

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
            field="kernels[v4].source", message="a kernel source ends in")


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
    from driver_gemm.spec import spec_from_dict

    import yaml

    data = yaml.safe_load(MINIMAL.replace(KERNEL, str(tmp_path / "kernels" / "04_coarsen_2d.cu")))
    write(tmp_path, MINIMAL)
    assert spec_from_dict(data).kernels[0].name == "v4"
    with pytest.raises(SpecError, match="absolute source path"):
        spec_from_dict(data, allow_outside_sources=False)
