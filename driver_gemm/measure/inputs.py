"""The inputs of a case: A, B (and C's starting values) drawn from a seed recorded with the case.

A case's seed comes from the spec's seed and the shape's name, so the same case gets the same
inputs in every run and on every GPU, a shape's kernels and cuBLAS row share operands, and a failure
can be reproduced from its record alone. The cases of one shape on one GPU share one draw and the
references worked out from it (`ShapeOperands`, kept by the GPU's session), since drawing and the
reference cost seconds at large shapes.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..gemm.operands import impose_structure
from ..specfile.model import Shape


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


# Elements drawn from one generator: the operands are cut into blocks of rows of about this size, each block
# drawn from its own generator seeded by (seed, operand, block), so that the blocks can be drawn on several
# threads and the values depend on neither the thread count nor which other operands are drawn.
DRAW_BLOCK_ELEMENTS = 1 << 20
# Threads drawing blocks side by side (NumPy's generators fill arrays without the GIL): one thread takes
# seconds to draw A and B at the largest shapes.
DRAW_THREADS = max(1, min(8, os.cpu_count() or 1))
OPERANDS = {"A": 0, "B": 1, "C0": 2}


def draw_operand(seed: int, operand: str, rows: int, cols: int) -> np.ndarray:
    """`operand`'s values for `seed`: float32, uniform in [-0.5, 0.5), drawn block by block of rows."""
    out = np.empty((rows, cols), dtype=np.float32)
    rows_per_block = max(1, DRAW_BLOCK_ELEMENTS // max(cols, 1))
    blocks = range(-(-rows // rows_per_block))

    def fill(block: int) -> None:
        part = out[block * rows_per_block:(block + 1) * rows_per_block]
        np.random.default_rng((seed, OPERANDS[operand], block)).random(out=part, dtype=np.float32)
        part -= np.float32(0.5)

    if len(blocks) <= 1 or DRAW_THREADS <= 1:
        for block in blocks:
            fill(block)
    else:
        with concurrent.futures.ThreadPoolExecutor(min(DRAW_THREADS, len(blocks))) as pool:
            list(pool.map(fill, blocks))
    return out


def make_inputs(shape: Shape, seed: int, *, with_c: bool = False,
                structure: Mapping[str, str] | None = None) -> Inputs:
    """Fresh float32 inputs for `shape` from `seed`; C's starting values too when the kernel reads C (A and B are
    the same either way). `structure` ({"a": "upper", ...}, words of `gemm.operands.STRUCTURES`) is imposed on A
    and B once drawn, so the values they keep are those drawn without it."""
    structure = structure or {}
    return Inputs(seed, impose_structure(draw_operand(seed, "A", shape.M, shape.K), structure.get("a")),
                  impose_structure(draw_operand(seed, "B", shape.K, shape.N), structure.get("b")),
                  draw_operand(seed, "C0", shape.M, shape.N) if with_c else None)


@dataclass
class ShapeOperands:
    """A shape's inputs, drawn once for the shape's cases on one GPU, and the references worked out from them, by
    what decides a reference: (alpha, beta, whether C starts from C0) -> (float64 C, its name)."""

    shape: Shape
    inputs: Inputs
    references: dict = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """Host bytes held: the inputs and the references."""
        arrays = [self.inputs.A, self.inputs.B, self.inputs.C0, *(expected for expected, _ in self.references.values())]
        return sum(array.nbytes for array in arrays if array is not None)

    def inputs_for(self, reads_c: bool) -> Inputs:
        """The inputs of a case: C's starting values only for a kernel that reads C (drawn on first need)."""
        if reads_c and self.inputs.C0 is None:
            self.inputs.C0 = draw_operand(self.inputs.seed, "C0", self.shape.M, self.shape.N)
        return Inputs(self.inputs.seed, self.inputs.A, self.inputs.B, self.inputs.C0 if reads_c else None)
