"""A file saved while its kernel compiles never leaves a cache entry whose key is the old text's: the compiler
(NVRTC through its include path, nvcc for the source and its headers) reads the files from disk again, so a
build is stored only when the files still hold the texts its key was made from."""

import logging

import pytest

from driver_gemm.cuda import compile as nvrtc_compile, nvcc
from driver_gemm.cuda.compile import compile_source
from driver_gemm.cuda.nvcc import compile_with_nvcc, find_nvcc

KERNEL = '#include "val.cuh"\n__global__ void k(int* c) { c[0] = VAL; }\n'


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "val.cuh").write_text("#define VAL 1\n")
    (root / "k.cu").write_text(KERNEL)
    return root


def edited_mid_compile(monkeypatch, module, path, text):
    """`module`'s compile step, with `path` rewritten to `text` just before the compiler reads it (the first time
    only)."""
    real = module._compile
    edits = [text]

    def compile_after_an_edit(*args, **kwargs):
        if edits:
            path.write_text(edits.pop())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "_compile", compile_after_an_edit)


def test_a_header_edited_while_nvrtc_compiles_leaves_no_entry_under_the_old_texts_key(project, monkeypatch, caplog):
    header = project / "val.cuh"
    edited_mid_compile(monkeypatch, nvrtc_compile, header, "#define VAL 2\n")
    with caplog.at_level(logging.WARNING, logger="driver_gemm"):
        compile_source(project / "k.cu", ["k"], project=project)
    assert "val.cuh changed on disk while it compiled" in caplog.text
    header.write_text("#define VAL 1\n")   # the text the first compile's key was made from
    assert not compile_source(project / "k.cu", ["k"], project=project).from_cache


def test_a_compile_that_no_file_changed_under_is_cached(project):
    assert not compile_source(project / "k.cu", ["k"], project=project).from_cache
    assert compile_source(project / "k.cu", ["k"], project=project).from_cache


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("edited", ["val.cuh", "k.cu"])
def test_a_file_edited_while_nvcc_compiles_leaves_no_entry_under_the_old_texts_key(project, monkeypatch, caplog,
                                                                                  edited):
    path = project / edited
    original = path.read_text()
    edited_mid_compile(monkeypatch, nvcc, path, original.replace("VAL", "VAL + 1", 1) if edited == "k.cu"
                       else "#define VAL 2\n")
    with caplog.at_level(logging.WARNING, logger="driver_gemm"):
        compile_with_nvcc(project / "k.cu", ["k"], project=project)
    assert f"{edited} changed on disk while it compiled" in caplog.text
    path.write_text(original)
    assert not compile_with_nvcc(project / "k.cu", ["k"], project=project).from_cache
