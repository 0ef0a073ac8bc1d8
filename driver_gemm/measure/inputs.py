"""The inputs of a case: A, B (and C's starting values) drawn from a seed recorded with the case.

A case's seed comes from the spec's seed and the shape's name, so the same
case gets the same inputs in every run and on every GPU, every kernel of a
shape and its cuBLAS row are measured on the same operands, and a failure
can be reproduced from its record alone. The cases of one shape that run in
a row share one draw of them, and the references worked out from them
(`ShapeOperands`): at 16384^3, drawing A and B takes about 2.7 s and the
cuBLAS reference 1.1 s, per case.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..spec.model import Shape


def case_seed(base_seed: int, *parts: object) -> int:
    """A stable 63-bit seed for one case, from the spec's seed and what names the case."""
    text = "|".join(str(p) for p in (base_seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


@dataclass
class Inputs:
    """A, B (and C's starting values for kernels that read C), drawn uniformly from [-0.5, 0.5)."""

    seed: int
    A: np.ndarray
    B: np.ndarray
    C0: np.ndarray | None = None


def make_inputs(shape: Shape, seed: int, *, with_c: bool = False) -> Inputs:
    """Fresh float32 inputs for `shape` from `seed`; C's starting values too when the kernel reads C."""
    rng = np.random.default_rng(seed)

    def draw(rows: int, cols: int) -> np.ndarray:
        return (rng.random((rows, cols), dtype=np.float32) - np.float32(0.5))

    A = draw(shape.M, shape.K)
    B = draw(shape.K, shape.N)
    return Inputs(seed, A, B, draw(shape.M, shape.N) if with_c else None)


@dataclass
class ShapeOperands:
    """A shape's inputs, drawn once for the cases of the shape that run in a row, and the references worked out
    from them, by what decides a reference: (alpha, beta, whether C starts from C0) -> (float64 C, its name)."""

    shape: Shape
    inputs: Inputs
    references: dict = field(default_factory=dict)

    def inputs_for(self, reads_c: bool) -> Inputs:
        """The inputs of a case: C's starting values only for a kernel that reads C."""
        return Inputs(self.inputs.seed, self.inputs.A, self.inputs.B, self.inputs.C0 if reads_c else None)
