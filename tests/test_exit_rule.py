"""One exit-code rule for every command: what the cases come to decides 0 or 1, with or without a GPU, and a tool
that only an option's extra needs is a note, not exit 3."""

from __future__ import annotations

import pytest

from driver_gemm.cli import EXIT_FAILED, EXIT_OK, main
from driver_gemm.cli.exit_codes import EXIT_CODES_HELP
from driver_gemm.cuda import sass

from conftest import ROOT, SPECS, _gpu_missing_reason
from test_spec import MINIMAL, write

NO_GPU = pytest.mark.skipif(_gpu_missing_reason() is None, reason="checks the behaviour on a machine with no GPU")
INVALID = MINIMAL.replace("block: [BN / TN, BM / TM]", "block: [4096, 1]")


def test_the_rule_is_in_the_help_and_the_guide():
    assert "one rule for every command" in EXIT_CODES_HELP and "plan --sass" in EXIT_CODES_HELP
    guide = (ROOT / "docs" / "commands.md").read_text()
    assert "One rule for every command" in guide and "`plan --sass` without cuobjdump" in guide


@NO_GPU
@pytest.mark.parametrize("command", [["plan"], ["plan", "--arch", "sm_90"], ["run"], ["tune"]])
def test_one_invalid_case_exits_1_from_every_command(tmp_path, monkeypatch, capsys, command):
    spec = write(tmp_path, INVALID)
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert main([*command, str(spec)]) == EXIT_FAILED
    captured = capsys.readouterr()
    assert "block x extent 4096" in captured.out + captured.err and "Traceback" not in captured.err
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("text, code", [(MINIMAL, EXIT_OK), (INVALID, EXIT_FAILED)])
def test_plan_sass_without_a_disassembler_prints_the_plan_with_a_note(tmp_path, monkeypatch, capsys, text, code):
    monkeypatch.setattr(sass, "find_disassembler", lambda: None)
    spec = write(tmp_path, text)
    assert main(["plan", "--arch", "sm_90", str(spec)]) == code
    without = capsys.readouterr().out
    assert main(["plan", "--arch", "sm_90", "--sass", str(spec)]) == code
    captured = capsys.readouterr()
    assert captured.out.startswith(without.rstrip("\n").rsplit("\n", 1)[0])       # the same plan
    if text is MINIMAL:
        assert "note: --sass: no instruction mix: disassembling needs cuobjdump or nvdisasm" in \
            captured.out + captured.err


def test_plan_of_the_seed_spec_is_0(capsys):
    assert main(["plan", "--arch", "sm_90", str(SPECS / "seed.yaml")]) == EXIT_OK
