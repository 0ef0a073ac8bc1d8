"""Inputs that reach past the project or past what the readers expect: include directives spelt to slip past a
scan (digraphs, spliced lines, '..' out of the toolkit's folders), compiler options that run programs, write files
or retarget the build, YAML tags on values that are not of their kind, merge keys, paths the system cannot stat,
C++ keywords as kernel names, and text that NVRTC cannot be given. Each is refused at its file, line or field,
never read, run or written. No GPU."""

from __future__ import annotations

import os

import pytest

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.cuda.compile import compile_source, compile_text
from driver_gemm.errors import CompileError, SpecError, WrongArgumentType
from driver_gemm.specfile import load_spec, parse_spec
from driver_gemm.specfile.model import template_argument

from test_header_containment import project  # noqa: F401  (the fixture: a project, and evil.h outside it)
from test_spec import MINIMAL, write

KERNEL = "__global__ void k(int* p) { p[0] = VALUE; }\n"


@pytest.mark.parametrize("directive", [
    '%:include "{evil}"',                     # the digraph of #
    '#inc\\\nlude "{evil}"',                  # a backslash-newline splice inside the word
    '#include \\\n"{evil}"',                  # ... and before the name
    '??=include "{evil}"',                    # the trigraph of #
    '#include_next "{evil}"',
    '#/**/include "{evil}"',                  # a comment between # and the word
    '/* a comment */ #include "{evil}"',      # ... and before the #
    '#\finclude "{evil}"',                   # a form feed
    '\v#include "{evil}"',                   # a vertical tab
    '#define HEADER "{evil}"\n#include HEADER\n#undef HEADER\n#define HEADER "k.cu"',   # redefined after use
])
def test_every_spelling_of_an_include_is_held_to_the_project(project, directive):
    evil = project.parent / "outside" / "evil.h"
    path = project / "k.cu"
    path.write_text(directive.format(evil=evil) + "\n" + KERNEL)
    with pytest.raises(CompileError, match="outside the kernel's project") as failure:
        compile_source(path, ["k"], use_cache=False)
    assert "VALUE 7" not in str(failure.value)


def test_a_macro_include_defined_in_a_header_its_headers_include_is_read_from_there(project):
    (project / "a.h").write_text('#include "b.h"\n')
    (project / "b.h").write_text('#define VALUE_HEADER "value.h"\n')
    (project / "value.h").write_text("#define VALUE 5\n")
    path = project / "k.cu"
    path.write_text('#include "a.h"\n#include VALUE_HEADER\n' + KERNEL)
    assert compile_source(path, ["k"], use_cache=False).lowered_names == {"k": "_Z1kPi"}
    (project / "b.h").write_text(f'#define VALUE_HEADER "{project.parent / "outside" / "evil.h"}"\n')
    with pytest.raises(CompileError, match="outside the kernel's project"):
        compile_source(path, ["k"], use_cache=False)


@pytest.mark.parametrize("name", ["<cuda/../../../../../../../../etc/hostname>",
                                  '"cuda/../../../../../../../../etc/hostname"'])
def test_a_header_climbing_out_of_the_toolkit_s_folders_is_refused(project, name):
    path = project / "k.cu"
    path.write_text(f"#include {name}\n" + KERNEL)
    with pytest.raises(CompileError, match="climbs out of the folders it is looked for in with '..'"):
        compile_source(path, ["k"], use_cache=False)


def test_a_header_inside_the_project_may_still_be_named_with_dots(project):
    (project / "lib").mkdir()
    (project / "lib" / "value.h").write_text("#define VALUE 3\n")
    (project / "src").mkdir()
    path = project / "src" / "k.cu"
    path.write_text('#include "../lib/value.h"\n' + KERNEL)
    assert compile_source(path, ["k"], use_cache=False).lowered_names == {"k": "_Z1kPi"}


def test_a_header_holding_a_nul_is_refused_at_its_line(project):
    (project / "value.h").write_bytes(b"#define VALUE 3\n// \x00 the rest would not be read\n")
    path = project / "k.cu"
    path.write_text('#include "value.h"\n' + KERNEL)
    with pytest.raises(CompileError, match=r"value\.h:2:4: a NUL character"):
        compile_source(path, ["k"], use_cache=False)


@pytest.mark.parametrize("call, error, needle", [
    (lambda: compile_text(KERNEL + "// \ud800\n", "k.cu", ["k"]), CompileError, "k.cu:2:4: a lone surrogate"),
    (lambda: compile_text(KERNEL, "k\ud800.cu", ["k"]), WrongArgumentType, "name 'k\\ud800.cu' holds"),
    (lambda: compile_text(KERNEL, "k.cu", ["k\x00x"]), WrongArgumentType, "instances[0] 'k\\x00x' holds"),
    (lambda: compile_text(KERNEL, "k.cu", ["k"], extra_options=["-DX=\x00"]), WrongArgumentType,
     "extra_options[0]"),
    (lambda: compile_text(KERNEL, "k.cu", ["k"], extra_options="-DX='a"), ValueError, "No closing quotation"),
    (lambda: compile_text(KERNEL, "k.cu", ["k"], extra_options=5), WrongArgumentType, "got int"),
    (lambda: compile_text(KERNEL, "k.cu", [1]), WrongArgumentType, "got 1 (int)"),
    (lambda: compile_text(KERNEL, "k.cu", ["k"], include_dir=5), WrongArgumentType, "include_dir"),
])
def test_text_nvrtc_cannot_be_given_is_refused_before_it_is_sent(call, error, needle):
    with pytest.raises(error) as failure:
        call()
    assert needle in str(failure.value)


# ----------------------------------------------------------------------------------- options

@pytest.mark.parametrize("option, needle", [
    ("-arch=sm_80", "sets what driver-gemm sets itself"),
    ("--gpu-architecture=compute_80", "sets what driver-gemm sets itself"),
    ("-gencode=arch=compute_80,code=sm_80", "sets what driver-gemm sets itself"),
    ("--dryrun", "sets what driver-gemm sets itself"),
    ("-o=/tmp/elsewhere.cubin", "sets what driver-gemm sets itself"),
    ("-ccbin=/bin/false", "runs a program or reads or writes files of its choosing"),
    ("-Xcompiler=-fplugin=/x.so", "runs a program or reads or writes files of its choosing"),
    ("--time=/tmp/times.csv", "runs a program or reads or writes files of its choosing"),
    ("--create-pch=/tmp/x.pch", "runs a program or reads or writes files of its choosing"),
    ("--options-file=/etc/passwd", "runs a program or reads or writes files of its choosing"),
    ("-DX=\x00", "holds a NUL character"),
])
def test_options_that_retarget_run_programs_or_write_files_are_refused_at_options(tmp_path, option, needle):
    text = MINIMAL + f"    options: [{option!r}]\n".replace("'", '"').replace("\x00", "\\0")
    with pytest.raises(SpecError) as failure:
        load_spec(write(tmp_path, text))
    assert needle in str(failure.value) and failure.value.field == "kernels[v4].options"


def test_an_option_that_needs_leave_is_taken_with_it(tmp_path):
    spec = write(tmp_path, MINIMAL + '    options: ["--time=times.csv"]\n')
    assert load_spec(spec, allow_outside_sources=True).kernels[0].options[-1] == "--time=times.csv"


# ----------------------------------------------------------------------------------- YAML

@pytest.mark.parametrize("value, needle", [
    ("!!bool maybe", "the value 'maybe' is tagged !!bool, but is not true or false"),
    ("!!bool ''", "is tagged !!bool"),
    ("!!int ''", "is tagged !!int, but is not a whole number"),
    ("!!int abc", "the value 'abc' is tagged !!int"),
    ("!!float '-'", "is tagged !!float, but is not a number"),
    ("!!seq {a: 1}", "tagged !!seq but is not a list"),
    ("!!map [1, 2]", "tagged !!map but is not a mapping"),
])
def test_a_tag_on_a_value_not_of_its_kind_is_refused_at_its_line(value, needle):
    with pytest.raises(SpecError) as failure:
        parse_spec(f"name: x\ndescription: {value}\nshapes: [[64, 64, 64]]\nkernels: []\n")
    assert needle in str(failure.value) and str(failure.value).startswith("<spec>:2:")


def test_a_merge_key_s_values_are_overridden_by_the_mapping_s_own_and_only_its_own_may_not_repeat(tmp_path):
    merged = MINIMAL.replace("    block: [BN / TN, BM / TM]\n",
                             "    <<: [{block: [1, 1], shared_bytes: 0}, {block: [2, 2]}]\n"
                             "    block: [BN / TN, BM / TM]\n")
    kernel = load_spec(write(tmp_path, merged)).kernels[0]
    assert [extent.source for extent in kernel.block] == ["BN / TN", "BM / TM"]
    with pytest.raises(SpecError, match="duplicate key 'block'"):
        load_spec(write(tmp_path, merged + "    block: [4, 4]\n"))


# ----------------------------------------------------------------------------------- paths

def test_a_source_that_is_a_symbolic_link_loop_is_refused_at_source(tmp_path):
    spec = write(tmp_path, MINIMAL.replace("../kernels/04_coarsen_2d.cu", "../kernels/loop.cu"))
    os.symlink("loop.cu", tmp_path / "kernels" / "loop.cu")
    with pytest.raises(SpecError) as failure:
        load_spec(spec)
    assert "is a symbolic link loop" in str(failure.value) and failure.value.field == "kernels[v4].source"


def test_a_source_that_links_to_a_device_is_named_as_a_link_to_it(tmp_path):
    # Its own name ends in .cu; where it leads (a device, with the user's leave to read outside) does not.
    spec = write(tmp_path, MINIMAL.replace("../kernels/04_coarsen_2d.cu", "../kernels/zero.cu"))
    os.symlink("/dev/zero", tmp_path / "kernels" / "zero.cu")
    with pytest.raises(SpecError) as failure:
        load_spec(spec, allow_outside_sources=True)
    assert "kernel source ../kernels/zero.cu is a link to /dev/zero, which does not end in .cu, .cuh, .cpp, .h, " \
           ".hpp, and is not a regular file" in str(failure.value) and failure.value.field == "kernels[v4].source"


def test_a_spec_path_the_system_cannot_stat_is_a_usage_error(tmp_path, capsys):
    assert main(["plan", str(tmp_path / ("a" * 300 + ".yaml"))]) == EXIT_USAGE
    assert "cannot read spec: File name too long" in capsys.readouterr().err
    os.symlink("dangling.yaml", tmp_path / "link.yaml")
    assert main(["plan", str(tmp_path / "link.yaml")]) == EXIT_USAGE
    assert "a symbolic link to nothing" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- names and values

@pytest.mark.parametrize("function", ["while", "class", "lib::new", "main"])
def test_a_keyword_or_main_is_no_kernel_name(tmp_path, function):
    with pytest.raises(SpecError, match="is not a C\\+\\+ function name"):
        load_spec(write(tmp_path, MINIMAL.replace("function: sgemm_coarsen_2d", f"function: {function}")))


def test_the_most_negative_64_bit_parameter_is_written_as_a_signed_expression():
    assert template_argument(-2**63) == "(-9223372036854775807LL - 1)"
    assert template_argument(-2**63 + 1) == "-9223372036854775807"


def test_beta_by_pointer_with_a_value_is_told_where_its_value_comes_from(tmp_path):
    spec = MINIMAL + "    signature: [M, N, K, alpha, A, B, {name: beta, type: ptr, value: null}, C]\n"
    with pytest.raises(SpecError, match="beta by pointer is the spec's scalars.beta in a device buffer") as failure:
        load_spec(write(tmp_path, spec))
    assert failure.value.field == "kernels[v4].signature[6].value"


@pytest.mark.parametrize("options, needle", [
    ('["-I", "../kernels", "-DX=1"]', None),                       # a path option and its value as two entries
    ('["-isystem", "/usr/include"]', "names files to read; it needs the user's leave"),
    ('["-L/usr/lib"]', "runs a program or reads or writes files of its choosing"),
])
def test_path_options_given_as_two_entries_are_read_as_one(tmp_path, options, needle):
    text = write(tmp_path, MINIMAL + f"    options: {options}\n")
    if needle is None:
        assert load_spec(text).kernels[0].options[0].startswith("--include-path=")
        return
    with pytest.raises(SpecError, match=needle):
        load_spec(text)
