"""A prebuilt PTX is compiled by nvJitLink (a dependency) at plan time: a misspelt instruction or an unknown target
is refused with the PTX's line; without nvJitLink ptxas does the check, and without either the plan says the PTX is
unchecked. No test needs ptxas on PATH: where one is used, it is a stand-in script."""

from __future__ import annotations

import time

import pytest

from driver_gemm.cli import EXIT_FAILED, EXIT_OK, main
from driver_gemm.cuda import nvjitlink_child, ptx_check
from driver_gemm.errors import ImageError

from test_spec import MINIMAL, write


PTX = """\
.version 8.0
.target sm_90
.address_size 64

.visible .entry copy_one(.param .u64 A, .param .u64 B, .param .u64 C, .param .u32 M, .param .u32 N, .param .u32 K)
{
  .reg .b64 %rd<4>;
  .reg .f32 %f<2>;
  ld.param.u64 %rd1, [A];
  ld.param.u64 %rd2, [C];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  ld.global.f32 %f1, [%rd1];
  st.global.f32 [%rd2], %f1;
  ret;
}
"""

SPEC = MINIMAL.replace("source: ../kernels/04_coarsen_2d.cu", "binary: ../kernels/copy.ptx") \
    .replace("function: sgemm_coarsen_2d", "function: copy_one").replace(
        "    params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}\n", "").replace("block: [BN / TN, BM / TM]", "block: [1]") \
    .replace("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [1]") + "    signature: [A, B, C, M, N, K]\n"


# The wheel is a dependency, so CI has it; a machine set up without dependencies (the GPU machine's image) may not.
needs_nvjitlink = pytest.mark.skipif(ptx_check.nvjitlink_check(PTX, "sm_90") is None,
                                     reason="nvJitLink's library is not found (the nvidia-nvjitlink wheel)")


def plan_of(tmp_path, ptx, capsys):
    spec = write(tmp_path, SPEC)
    (tmp_path / "kernels" / "copy.ptx").write_text(ptx)
    code = main(["plan", "--arch", "sm_90", str(spec)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@needs_nvjitlink
def test_good_ptx_plans_ok(tmp_path, capsys):
    code, text = plan_of(tmp_path, PTX, capsys)
    assert code == EXIT_OK, text
    assert "not checked" not in text


@needs_nvjitlink
@pytest.mark.parametrize("change, line, expected", [
    (("ld.global.f32 %f1", "ld.glbal.f33 %f1"), 13, "Unknown modifier '.glbal'"),
    ((".target sm_90", ".target sm_999"), 2, "Unsupported .target 'sm_999'"),
])
def test_bad_ptx_is_refused_at_plan_with_its_line(tmp_path, capsys, monkeypatch, change, line, expected):
    monkeypatch.setattr(ptx_check, "find_ptxas", lambda: pytest.fail("ptxas asked although nvJitLink is here"))
    code, text = plan_of(tmp_path, PTX.replace(*change), capsys)
    assert code == EXIT_FAILED
    ptx = tmp_path / "kernels" / "copy.ptx"
    assert f"{ptx}:{line}: {expected} (nvJitLink 13." in text and "refuses this PTX)" in text
    assert f"  {line} | {PTX.replace(*change).splitlines()[line - 1].strip()}" in text
    assert "did not build" in text
    assert "NVJITLINK_ERROR" not in text and "aborted" not in text


@needs_nvjitlink
def test_a_ptx_for_another_target_variant_is_refused_without_a_line():
    with pytest.raises(ImageError) as caught:
        ptx_check.check_ptx(PTX.replace(".target sm_90", ".target sm_90a"), "sm_90", "k.ptx")
    assert str(caught.value).startswith("k.ptx: PTX with .target 'sm_90a' cannot be compiled for architecture "
                                        "'sm_90' (nvJitLink 13.")


@needs_nvjitlink
def test_a_ptx_newer_than_nvjitlink_is_left_to_the_driver():
    note = ptx_check.check_ptx(PTX.replace(".version 8.0", ".version 99.9"), "sm_90", "k.ptx")
    assert note.startswith("PTX not checked before loading: its ISA is newer than this nvJitLink 13.")
    assert "Unsupported .version 99.9" in note and note.endswith("the driver decides")


@needs_nvjitlink
def test_a_target_nvjitlink_does_not_know_is_left_to_the_driver():
    note = ptx_check.check_ptx(PTX, "sm_999", "k.ptx")
    assert note.startswith("PTX not checked before loading: this nvJitLink 13.")
    assert "does not know the target (ERROR_UNRECOGNIZED_ARCH" in note


def test_without_nvjitlink_ptxas_checks_the_ptx(tmp_path, capsys, monkeypatch):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho \"ptxas $2, line 13; error   : Unknown modifier '.glbal'\" >&2\n"
                    "echo 'ptxas fatal   : Ptx assembly aborted due to errors' >&2\necho \"$1\" > \"$0.arch\"\n"
                    "exit 255\n")
    fake.chmod(0o755)
    monkeypatch.setattr(ptx_check, "nvjitlink_check", lambda text, arch: None)
    monkeypatch.setattr(ptx_check, "find_ptxas", lambda: fake)
    code, text = plan_of(tmp_path, PTX.replace("ld.global.f32 %f1", "ld.glbal.f33 %f1"), capsys)
    assert code == EXIT_FAILED
    ptx = tmp_path / "kernels" / "copy.ptx"
    assert f"{ptx}:13: Unknown modifier '.glbal' (ptxas refuses this PTX)\n  13 | ld.glbal.f33 %f1, [%rd1];" in text
    assert (tmp_path / "ptxas.arch").read_text() == "-arch=sm_90\n"


def test_without_nvjitlink_or_ptxas_the_plan_says_the_ptx_is_unchecked(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ptx_check, "nvjitlink_check", lambda text, arch: None)
    monkeypatch.setattr(ptx_check, "find_ptxas", lambda: None)
    code, text = plan_of(tmp_path, PTX.replace("ld.global.f32 %f1", "ld.glbal.f33 %f1"), capsys)
    assert code == EXIT_OK
    assert "PTX not checked before loading: neither nvJitLink (the nvidia-nvjitlink wheel) nor ptxas" in text


def test_the_child_says_when_no_nvjitlink_library_is_found(monkeypatch):
    from cuda.bindings import nvjitlink

    def missing():
        raise RuntimeError('Failure finding "libnvJitLink.so.13": No such file\n  listdir(...)')

    monkeypatch.setattr(nvjitlink, "version", missing)
    assert nvjitlink_child.answer("sm_90", PTX.encode()) == {
        "found": False, "reason": 'Failure finding "libnvJitLink.so.13": No such file'}


def test_a_child_that_dies_leaves_the_ptx_unchecked_with_the_reason(monkeypatch):
    monkeypatch.setattr(ptx_check.bounded, "python_child",
                        lambda *arguments: (["sh", "-c", "echo 'Segmentation fault' >&2; exit 139"], None))
    note = ptx_check.check_ptx(PTX, "sm_90", "k.ptx")
    assert note == ("PTX not checked before loading: nvJitLink's check ended with status 139 and no answer "
                    "(Segmentation fault)")


def test_a_check_past_its_time_bound_leaves_the_ptx_unchecked_and_nothing_running(monkeypatch, tmp_path):
    marker = tmp_path / "still-running"
    monkeypatch.setattr(ptx_check, "CHECK_TIMEOUT_S", 0.5)
    monkeypatch.setattr(ptx_check.bounded, "python_child",
                        lambda *arguments: (["sh", "-c", f"sleep 3; touch {marker}"], None))
    assert ptx_check.check_ptx(PTX, "sm_90", "k.ptx") == "PTX not checked before loading: nvJitLink ran past 0.5 s"
    time.sleep(3.5)
    assert not marker.exists()


def test_ptxas_diagnostics_become_lines_of_the_ptx():
    log = ("ptxas /tmp/x/kernel.ptx, line 2; fatal   : Unsupported .target 'sm_999'\n"
           "ptxas fatal   : Ptx assembly aborted due to errors\n")
    assert ptx_check.describe_errors(log, PTX, "k.ptx") == (
        "k.ptx:2: Unsupported .target 'sm_999' (ptxas refuses this PTX)\n  2 | .target sm_90")


def test_a_ptx_newer_than_ptxas_is_left_to_the_driver(tmp_path, monkeypatch):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho \"ptxas x.ptx, line 1; fatal   : Unsupported .version 9.9; current version is "
                    "'9.0'\" >&2\nexit 255\n")
    fake.chmod(0o755)
    monkeypatch.setattr(ptx_check, "nvjitlink_check", lambda text, arch: None)
    monkeypatch.setattr(ptx_check, "find_ptxas", lambda: fake)
    note = ptx_check.check_ptx(PTX, "sm_90", "k.ptx")
    assert note.startswith("PTX not checked before loading: its ISA is newer than this ptxas knows")
    fake.write_text("#!/bin/sh\necho 'ptxas x.ptx, line 13; error   : Unknown modifier' >&2\nexit 255\n")
    with pytest.raises(ImageError, match="k.ptx:13: Unknown modifier"):
        ptx_check.check_ptx(PTX, "sm_90", "k.ptx")


def test_a_refused_ptx_line_and_its_diagnostic_are_quoted_shortened():
    """A PTX may hold a data array of 200,000 characters on one line, and the checker's message may echo it: the
    error quotes their start and says how much was left out, never the whole line (twice)."""
    long_line = ".global .u8 table[200000] = {" + "1," * 100_000 + "};"
    text = ".version 8.0\n.target sm_90\n" + long_line + "\n"
    log = f"ptxas application ptx input, line 3; error   : Unexpected text {long_line}\n" \
          "ptxas fatal   : Ptx assembly aborted due to errors"
    said = ptx_check.describe_errors(log, text, "k.ptx", "nvJitLink 12.9")
    assert len(said) < 1000 and said.startswith("k.ptx:3: Unexpected text .global .u8 table")
    assert said.count("more characters)") == 2
    many = "\n".join(f"ptxas application ptx input, line 1; error   : bad {n}" for n in range(500))
    assert ptx_check.describe_errors(many, text, "k.ptx").endswith("... and 480 more")
