"""The inputs of a case: A, B (and C's starting values) drawn from a seed recorded with the case.

A case's seed comes from the spec's seed and the names of the kernel and the
shape, so the same case gets the same inputs in every run and on every GPU,
and a failure can be reproduced from its record alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

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
