"""A padded leading dimension (ld:) that no argument passes: the kernel is not told it, so it reads the matrix as
tight. Noted at the ld: line, unless lda (ldb, ldc) is in the signature, a value or struct field reads it, or a
tensor map lays the matrix out."""

from __future__ import annotations

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile import Shape, load_spec

from test_spec import MINIMAL, write


def _notes(tmp_path, extra: str) -> list[str]:
    kernel = load_spec(write(tmp_path, MINIMAL + "    types: {a: fp32}\n" + extra)).kernels[0]
    plan = plan_case(kernel, Shape(64, 32, 16), arch_limits("sm_90"))
    return [note for note in plan.notes if "no argument passes it" in note]


def test_a_padded_ld_no_argument_passes_is_noted_at_its_line(tmp_path):
    note, = _notes(tmp_path, "    ld: {a: K + 8}\n")
    assert "spec.yaml:11: ld.a: A's leading dimension 'K + 8' pads its rows past the tight 16" in note
    assert "lda in the signature, a value or struct field reading lda, a tensor map over A" in note
    assert "takes A as tight and reads the wrong elements" in note


def test_a_padded_ld_the_kernel_is_told_of_is_not_noted(tmp_path):
    assert not _notes(tmp_path, "    ld: {a: K + 8, c: N + 4}\n    signature: [A, B, C, M, N, K, lda, ldc]\n")
    assert not _notes(tmp_path, "    ld: {a: K + 8}\n"
                                "    signature: [A, B, C, M, N, K, {name: stride, type: int64, value: lda * 4}]\n")
    # an ld: that is tight on this shape pads nothing
    assert not _notes(tmp_path, "    ld: {a: K}\n")


def test_each_padded_matrix_is_noted_on_its_own(tmp_path):
    notes = _notes(tmp_path, "    ld: {a: K + 8, c: N + 4}\n    signature: [A, B, C, M, N, K, lda]\n")
    assert [note.split(": ")[1] for note in notes] == ["ld.c"]
