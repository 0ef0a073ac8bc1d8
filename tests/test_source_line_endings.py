"""A kernel source's bad byte or NUL is said at its line as a C compiler counts lines: CR LF, a lone CR and a lone
LF each end one, so a file saved with old Mac or Windows line endings is told at the line an editor shows."""

import pytest

from driver_gemm.specfile.kernels import source_line_of

from malformed import MINIMAL, refused, write

KERNEL = "../kernels/04_coarsen_2d.cu"


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
@pytest.mark.parametrize("bad, message", [
    (b"// caf\xe9", "is not UTF-8 text: byte 0xe9"),
    (b"\0", "holds a NUL byte"),
], ids=["not UTF-8", "NUL"])
def test_a_bad_byte_is_said_at_its_line_whatever_ends_the_lines(tmp_path, monkeypatch, capsys, ending, bad,
                                                                   message):
    data = ending.join([b"// one", b"// two", bad, b"__global__ void k() {}", b""])
    write(tmp_path, MINIMAL)
    (tmp_path / "kernels" / "bad.cu").write_bytes(data)
    error = refused(tmp_path, MINIMAL.replace(KERNEL, "../kernels/bad.cu"), monkeypatch, capsys,
                    field="kernels[v4].source", message=message)
    assert "(line 3)" in error.message, error.message


def test_lines_are_counted_as_a_compiler_counts_them():
    data = b"a\r\nb\rc\nd\x85e"            # NEL ends a line to YAML, never to a C compiler
    assert [source_line_of(data, data.index(letter)) for letter in b"abcde"] == [1, 2, 3, 4, 4]
    assert source_line_of(b"a\r", 1) == 1 and source_line_of(b"a\r\nb", 3) == 2


@pytest.mark.parametrize("ending", ["\r", "\r\n", "\n"])
def test_a_nul_in_source_text_given_to_the_compiler_is_located_by_c_lines(ending):
    # compile_text's own refusal (a source given as text, a header read for it) counts a lone CR as a line end too.
    from driver_gemm.cuda.compile import refuse_nul
    from driver_gemm.errors import CompileError

    with pytest.raises(CompileError) as info:
        refuse_nul(ending.join(["// one", "// two", "int x;\x00"]), "k.cu")
    assert "k.cu:3:7:" in str(info.value)
