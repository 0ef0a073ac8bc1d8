"""A prebuilt PTX is assembled by ptxas at plan time: a misspelt instruction or an unknown target is refused with
the PTX's line; without ptxas the plan says the PTX is unchecked."""

from __future__ import annotations

import pytest

from driver_gemm.cli import EXIT_FAILED, EXIT_OK, main
from driver_gemm.cuda import ptx_check
from driver_gemm.errors import ImageError

from test_spec import MINIMAL, write

needs_ptxas = pytest.mark.skipif(ptx_check.find_ptxas() is None, reason="needs ptxas (the CUDA toolkit)")

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


def plan_of(tmp_path, ptx, capsys):
    spec = write(tmp_path, SPEC)
    (tmp_path / "kernels" / "copy.ptx").write_text(ptx)
    code = main(["plan", "--arch", "sm_90", str(spec)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@needs_ptxas
def test_good_ptx_plans_ok(tmp_path, capsys):
    code, text = plan_of(tmp_path, PTX, capsys)
    assert code == EXIT_OK, text
    assert "not checked" not in text


@needs_ptxas
@pytest.mark.parametrize("change, line, expected", [
    (("ld.global.f32 %f1", "ld.glbal.f33 %f1"), 13, "Unknown modifier '.glbal'"),
    ((".target sm_90", ".target sm_999"), 2, "Unsupported .target 'sm_999'"),
])
def test_bad_ptx_is_refused_at_plan_with_its_line(tmp_path, capsys, change, line, expected):
    code, text = plan_of(tmp_path, PTX.replace(*change), capsys)
    assert code == EXIT_FAILED
    ptx = tmp_path / "kernels" / "copy.ptx"
    assert f"{ptx}:{line}: {expected} (ptxas refuses this PTX)" in text
    assert f"  {line} | {PTX.replace(*change).splitlines()[line - 1].strip()}" in text
    assert "did not build" in text


def test_without_ptxas_the_plan_says_the_ptx_is_unchecked(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ptx_check, "find_ptxas", lambda: None)
    code, text = plan_of(tmp_path, PTX, capsys)
    assert code == EXIT_OK
    assert "PTX not checked before loading: no ptxas here" in text


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
    monkeypatch.setattr(ptx_check, "find_ptxas", lambda: fake)
    note = ptx_check.check_ptx(PTX, "sm_90", "k.ptx")
    assert note.startswith("PTX not checked before loading: its ISA is newer than this ptxas")
    fake.write_text("#!/bin/sh\necho 'ptxas x.ptx, line 13; error   : Unknown modifier' >&2\nexit 255\n")
    with pytest.raises(ImageError, match="k.ptx:13: Unknown modifier"):
        ptx_check.check_ptx(PTX, "sm_90", "k.ptx")
