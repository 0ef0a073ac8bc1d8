"""The words every layer uses for what happened to a case, and the names of the baseline rows.

One vocabulary, imported wherever a status is made, read or shown, so that a
new status is added in one place. `Status` is a ``str`` enum: it compares
equal to its text, is written to JSON as that text, and reads back from it.
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """What one case came to."""

    PASS = "PASS"         # verified within tolerance (and timed, unless the run verifies only)
    FAIL = "FAIL"         # ran, but the output is wrong: the diagnosis says where
    ERROR = "ERROR"       # could not run: compile error, CUDA error, fault, or any other exception in its steps
    INVALID = "INVALID"   # refused before launching: a launch check or a `require:` constraint failed
    REF = "REF"           # a baseline case that was not itself checked (its output is the reference)
    TIMEOUT = "TIMEOUT"   # still running after measure.case_timeout_s; stopped with its worker

    def __str__(self) -> str:
        return self.value

    @property
    def ok(self) -> bool:
        """PASS, or a baseline that served as the reference: the case's figures can be trusted."""
        return self in (Status.PASS, Status.REF)


# cuBLAS rows, one per math mode; the kernels of a precision are measured against its row.
BASELINE_LABELS = {"fp32": "cublas", "tf32": "cublas-tf32"}
# cuBLASLt rows are named for what they compute (`measure.cublaslt.baseline_label`): cublaslt-bf16-TN, ...
CUBLASLT_PREFIX = "cublaslt"


def is_baseline_label(label: str) -> bool:
    """True for the name of a baseline row: cuBLAS SGEMM in FP32 or TF32 math, or any cuBLASLt row."""
    return label in BASELINE_LABELS.values() or label == CUBLASLT_PREFIX or label.startswith(CUBLASLT_PREFIX + "-")
