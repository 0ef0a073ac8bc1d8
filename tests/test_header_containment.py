"""Local headers obey the rules kernel sources do: inside the kernel's project (or an -I folder) unless the
user allows outside files, regular files only (a FIFO never hangs a compile), and at most MAX_SOURCE_BYTES;
a refusal names the including file:line and the header."""

import contextlib
import os
import signal

import pytest

from driver_gemm.cuda.compile import compile_source
from driver_gemm.errors import CompileError
from driver_gemm.specfile.limits import MAX_SOURCE_BYTES

KERNEL = "__global__ void k(int* c) { c[0] = VALUE; }\n"


@contextlib.contextmanager
def deadline(seconds: int = 30):
    """Fail instead of hanging: a blocked open() or read() is interrupted by the alarm."""
    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "evil.h").write_text("#define VALUE 7\n")
    return root


def kernel(folder, include: str):
    path = folder / "k.cu"
    path.write_text(f"// a kernel\n#include {include}\n{KERNEL}")
    return path


def test_an_absolute_include_outside_the_project_is_refused_without_leave_and_compiles_with_it(project):
    outside = project.parent / "outside" / "evil.h"
    path = kernel(project, f'"{outside}"')
    with pytest.raises(CompileError) as info:
        compile_source(path, ["k"], use_cache=False)
    message = str(info.value)
    assert f"{path}:2: header {outside} is {outside}, outside the kernel's project" in message
    assert "--allow-outside-sources" in message and "#define VALUE 7" not in message
    assert compile_source(path, ["k"], use_cache=False, allow_outside_headers=True).lowered_names["k"]


def test_etc_passwd_as_a_header_is_refused_before_the_compiler_reads_it(project):
    with pytest.raises(CompileError, match=r"k\.cu:2: header /etc/passwd is /etc/passwd, outside") as info:
        compile_source(kernel(project, '"/etc/passwd"'), ["k"], use_cache=False)
    assert "root:" not in str(info.value)


def test_an_include_through_a_symlinked_folder_pointing_outside_is_refused(project):
    (project / "lib").symlink_to(project.parent / "outside", target_is_directory=True)
    path = kernel(project, '"lib/evil.h"')
    with pytest.raises(CompileError, match=r"k\.cu:2: header lib/evil\.h is .*outside[/\\]evil\.h, outside"):
        compile_source(path, ["k"], use_cache=False)


def test_a_nested_include_leaving_the_project_names_the_including_header(project):
    (project / "inner.h").write_text('#pragma once\n#include "../outside/evil.h"\n')
    with pytest.raises(CompileError, match=r"inner\.h:2: header \.\./outside/evil\.h is .*, outside"):
        compile_source(kernel(project, '"inner.h"'), ["k"], use_cache=False)


def test_headers_inside_the_project_and_in_an_include_folder_compile(project):
    (project / "include").mkdir()
    (project / "include" / "value.h").write_text("#define VALUE 3\n")
    (project / "src").mkdir()
    path = kernel(project / "src", "<value.h>")
    assert compile_source(path, ["k"], extra_options=[f"-I{project / 'include'}"], use_cache=False).image


def test_a_fifo_header_is_refused_at_once(project):
    os.mkfifo(project / "pipe.h")
    with deadline(), pytest.raises(CompileError, match=r"k\.cu:2: header .*pipe\.h is not a regular file \(a FIFO\)"):
        compile_source(kernel(project, '"pipe.h"'), ["k"], use_cache=False)


def test_a_header_linked_to_a_device_is_refused(project):
    (project / "zero.h").symlink_to("/dev/zero")
    with deadline(), pytest.raises(CompileError, match=r"header .* is outside|not a regular file \(a character device\)"):
        compile_source(kernel(project, '"zero.h"'), ["k"], use_cache=False, allow_outside_headers=True)


def test_an_oversized_header_is_refused_with_its_size(project):
    with open(project / "huge.h", "wb") as huge:
        huge.truncate(MAX_SOURCE_BYTES + 1)
    with pytest.raises(CompileError, match=rf"k\.cu:2: header .*huge\.h is {MAX_SOURCE_BYTES + 1:,} bytes, more than "
                                           rf"the limit of {MAX_SOURCE_BYTES:,} \(MAX_SOURCE_BYTES\)"):
        compile_source(kernel(project, '"huge.h"'), ["k"], use_cache=False)


def test_a_fifo_kernel_source_is_refused_at_once(project):
    from driver_gemm.cuda.compile import read_source
    os.mkfifo(project / "k.cu")
    with deadline(), pytest.raises(CompileError, match=r"kernel source .*k\.cu is not a regular file \(a FIFO\)"):
        read_source(project / "k.cu")


def test_an_absolute_include_in_text_compiled_without_a_folder_is_refused():
    from driver_gemm.cuda.compile import compile_text
    with pytest.raises(CompileError, match=r"kernel\.cu:1: header /etc/passwd is /etc/passwd, outside"):
        compile_text('#include "/etc/passwd"\n' + KERNEL, "kernel.cu", ["k"], use_cache=False)



def test_the_command_lines_allow_outside_sources_lets_a_spec_include_an_outside_header(project, tmp_path, capsys):
    from driver_gemm.cli import EXIT_OK, main

    outside = tmp_path / "outside" / "evil.h"
    (project / "k.cu").write_text(f'#include "{outside}"\n'
                                  "extern \"C\" __global__ void sgemm(const float* A, const float* B, float* C,"
                                  " int M, int N, int K) { if (threadIdx.x == 0) C[0] = VALUE; }\n")
    spec = project / "s.yaml"
    spec.write_text("shapes: [[64, 64, 64]]\nkernels:\n  - name: k\n    source: k.cu\n    function: sgemm\n"
                    "    block: [32]\n    grid: [1]\n")
    main(["plan", str(spec)])
    refused = capsys.readouterr()
    assert "outside the kernel's project" in refused.out + refused.err
    assert main(["plan", str(spec), "--allow-outside-sources"]) == EXIT_OK, capsys.readouterr()
    allowed = capsys.readouterr()
    assert "1 ok" in allowed.out and "outside" not in allowed.out + allowed.err


def test_a_header_anywhere_in_the_specs_project_is_inside_even_beside_the_sources_folder(tmp_path, capsys):
    """Without a project marker the spec's folder is the project its sources stay in; so do their headers."""
    from driver_gemm.cli import EXIT_OK, main

    (tmp_path / "src").mkdir()
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "value.h").write_text("#define VALUE 7\n")
    (tmp_path / "src" / "k.cu").write_text('#include "../include/value.h"\n'
                                           "extern \"C\" __global__ void sgemm(const float* A, const float* B, float* C,"
                                           " int M, int N, int K) { if (threadIdx.x == 0) C[0] = VALUE; }\n")
    spec = tmp_path / "s.yaml"
    spec.write_text("shapes: [[64, 64, 64]]\nkernels:\n  - name: k\n    source: src/k.cu\n    function: sgemm\n"
                    "    block: [32]\n    grid: [1]\n")
    assert main(["plan", str(spec)]) == EXIT_OK, capsys.readouterr()
    assert "1 ok" in capsys.readouterr().out


@pytest.mark.parametrize("spelling", ['"{outside}"', "<{outside}>"])
def test_an_include_named_through_a_macro_is_held_to_the_project_as_the_name_its_define_gives(project, spelling):
    # #define HEADER "..." then #include HEADER: the header is the one the #define names, checked as any other.
    outside = project.parent / "outside" / "evil.h"
    path = project / "k.cu"
    path.write_text(f"#define HEADER {spelling.format(outside=outside)}\n#include HEADER\n{KERNEL}")
    with pytest.raises(CompileError) as info:
        compile_source(path, ["k"], use_cache=False)
    assert f"{path}:2: header {outside} is {outside}, outside the kernel's project" in str(info.value)
    assert compile_source(path, ["k"], use_cache=False, allow_outside_headers=True).lowered_names["k"]


@pytest.mark.parametrize("definition", ["#define HEADER PASTE(evil, .h)", "", "#define HEADER OTHER"])
def test_an_include_through_a_macro_that_names_no_file_here_is_refused_without_leave(project, definition):
    # A name pasted together, defined on the command line (-DHEADER=...), or through another macro: no file to check.
    path = project / "k.cu"
    path.write_text(f"{definition}\n#include HEADER\n{KERNEL}")
    with pytest.raises(CompileError) as info:
        compile_source(path, ["k"], use_cache=False)
    assert f"{path}:2: #include HEADER names its header through a macro" in str(info.value)
    assert "--allow-outside-sources" in str(info.value)


def _finishes_within(seconds: float, work) -> bool:
    """Whether `work()` returns within `seconds` (run on a daemon thread, so a runaway one is left behind)."""
    import threading

    done = threading.Event()
    threading.Thread(target=lambda: (work(), done.set()), daemon=True).start()
    return done.wait(seconds)


def test_the_include_scan_reads_block_comments_as_the_regular_expression_did_in_one_pass():
    import random
    import re

    from driver_gemm.source_text import block_comments, includes_in

    pattern = re.compile(r"/\*.*?\*/", re.DOTALL)
    rng = random.Random(3)
    for _ in range(300):
        text = "".join(rng.choice(["/*", "*/", "/", "*", "x", "\n", "/*/"]) for _ in range(rng.randint(0, 40)))
        assert list(block_comments(text)) == [match.span() for match in pattern.finditer(text)], text
    # A valid source with thousands of unclosed /* in a line comment: scanned in one pass, where retrying each /*
    # against the rest of the text took minutes.
    text = '#include "a.h"\n// ' + "/* " * 400_000 + '\n#include "b.h"\n'
    found = []
    assert _finishes_within(30, lambda: found.extend(includes_in(text, "k.cu")))
    assert [(where, quoted) for where, quoted, *_ in found] == [("k.cu:1", "a.h"), ("k.cu:3", "b.h")]


def test_the_hint_for_a_misspelt_function_reads_a_large_source_in_one_pass():
    from driver_gemm.cuda.compile_diagnostics import source_instance_advice

    source = 'extern "C" __global__ void k(float* c) {}\n// ' + "__global__ x " * 200_000 + "\n"
    advice = []
    assert _finishes_within(30, lambda: advice.append(source_instance_advice(source, [], ["zz"])))
    assert "no function named zz appears in the source or its headers" in advice[0] and "(k)" in advice[0]


def test_a_header_that_is_a_loop_of_links_or_a_dangling_link_is_said_so(tmp_path):
    """NVRTC says only "cannot open source file": the hint tells a loop of symbolic links and a link to nothing from
    a header that is not there."""
    from driver_gemm.cuda import headers

    (tmp_path / "loop_a.cuh").symlink_to("loop_b.cuh")
    (tmp_path / "loop_b.cuh").symlink_to("loop_a.cuh")
    (tmp_path / "dangling.cuh").symlink_to("gone.cuh")
    hint = headers.missing_header_hint("loop_a.cuh", [tmp_path])
    assert hint.startswith(f"{tmp_path / 'loop_a.cuh'} is a loop of symbolic links")
    hint = headers.missing_header_hint("dangling.cuh", [tmp_path])
    assert hint.startswith(f"{tmp_path / 'dangling.cuh'} is a symbolic link to gone.cuh, which does not exist")
    assert "not beside the kernel source" in headers.missing_header_hint("absent.cuh", [tmp_path])
