"""A launch of then: that reads C through a pointer to const and writes its own buffer (row statistics before a
softmax's normalisation, an amax after the GEMM): C only reaching const parameters is judged over the case's whole
sequence of launches, not refused in a launch that only reads it."""

from __future__ import annotations

from driver_gemm.cuda.mangling import demangle
from driver_gemm.cuda.signature_check import check_signature, writes_output
from driver_gemm.specfile.model import Argument

FOUR_SLOTS = [(i, 0, size) for i, size in enumerate([8, 8, 4, 4])]
ROW_STATS = "_Z9row_statsPKfPfii"           # row_stats(const float* C, float* stats, int M, int N)
ROW_NORMALIZE = "_Z13row_normalizePfPKfii"  # row_normalize(float* C, const float* stats, int M, int N)
GEMM = "_Z4gemmPKfS0_Pfiii"                 # gemm(const float* A, const float* B, float* C, int M, int N, int K)


def _signature(*names: str) -> tuple[Argument, ...]:
    return tuple(Argument(name, "ptr" if name in ("A", "B", "C", "stats") else "int32") for name in names)


def test_a_launch_that_reads_c_through_const_is_not_refused_where_another_launch_writes_c():
    stats = _signature("C", "stats", "M", "N")
    types = demangle(ROW_STATS).params
    assert writes_output(types, stats) is False
    assert check_signature(FOUR_SLOTS, types, stats, output_written_elsewhere=True) == []


def test_c_passed_only_to_const_is_still_named_where_no_other_launch_writes_it():
    # The same launch alone (no launch of its case writes C): C would be left unwritten.
    (problem,) = check_signature(FOUR_SLOTS, demangle(ROW_STATS).params, _signature("C", "stats", "M", "N"))
    assert "C, the output, is passed only to parameters that point to const" in problem
    assert "parameter 1 (C) is const float*" in problem and "check the signature's order" in problem


def test_which_launches_write_c_as_their_types_say():
    assert writes_output(demangle(ROW_NORMALIZE).params, _signature("C", "stats", "M", "N")) is True
    assert writes_output(demangle(GEMM).params, _signature("A", "B", "C", "M", "N", "K")) is True
    # C does not reach a launch that takes no C, and a signature of another length says nothing.
    assert writes_output(demangle(ROW_STATS).params, _signature("A", "stats", "M", "N")) is None
    assert writes_output(demangle(ROW_STATS).params, _signature("C", "stats", "M")) is None
    # An extern "C" kernel's symbol gives no types.
    assert writes_output(None, _signature("C", "stats", "M", "N")) is None
