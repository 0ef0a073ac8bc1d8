"""A refused PTX's line and its checker's message are quoted as text a terminal shows: a control character in
either (an escape sequence, a bell, a carriage return) is written as an escape, never echoed."""

from driver_gemm.cuda import ptx_check

ESCAPE = "\x1b]0;owned\x07"      # sets a terminal's title, then rings its bell


def echoes_a_control(said: str) -> bool:
    """Whether `said` holds a C0 or C1 control character other than the line breaks between its parts."""
    return any((ord(character) < 32 or 0x7f <= ord(character) <= 0x9f) and character != "\n" for character in said)


def test_a_control_character_in_the_quoted_ptx_line_is_escaped():
    text = f".version 8.0\n.target sm_90\n\tld.glbal.f32 \t%f1, [%rd1]; // {ESCAPE}\r\n"
    log = "ptxas application ptx input, line 3; error   : Unknown modifier '.glbal'\n"
    said = ptx_check.describe_errors(log, text, "k.ptx")
    assert said.startswith("k.ptx:3: Unknown modifier '.glbal' (ptxas refuses this PTX)")
    assert "3 | ld.glbal.f32  %f1, [%rd1]; // \\x1b]0;owned\\x07" in said, said
    assert not echoes_a_control(said), said


def test_a_control_character_in_the_checkers_message_is_escaped():
    log = f"ptxas application ptx input, line 1; error   : Unexpected {ESCAPE}\x08\x9bforged\n"
    said = ptx_check.describe_errors(log, ".version 8.0\n", "k.ptx", "nvJitLink 12.9")
    assert "Unexpected \\x1b]0;owned\\x07\\x08\\x9bforged" in said, said
    assert not echoes_a_control(said), said


def test_a_log_without_diagnostics_is_quoted_escaped():
    said = ptx_check.describe_errors(f"something {ESCAPE} went wrong\n", ".version 8.0\n", "k.ptx")
    assert said.startswith("k.ptx: ptxas refused it: something \\x1b]0;owned\\x07 went wrong"), said
