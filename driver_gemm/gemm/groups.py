"""Grouped GEMMs: one B per group, and each group's own rows of A and C (a mixture of experts' layers).

Group g computes ``C[rows of g] = alpha * A[rows of g] @ B[g] + beta * C0[rows of g]``; N and K are
every group's. Groups may instead share W weight matrices (flashinfer's segment GEMM and its
``weight_indices``, a mixture of experts' token groups over its experts): B then holds W matrices and
group g multiplies by ``B[weight_index[g]]``. Two layouts, as the kernels that take them lay their
operands out:

- ``contiguous``: A (M x K) and C (M x N) are one matrix each, the groups' rows one after another,
  each group's first row a multiple of `align` (the rows between them, and past the last group,
  belong to none); B is G matrices of K x N (W where the groups share weights).
- ``masked``: A, C and B are G matrices each (A: M x K, C: M x N; B: W where the groups share
  weights); group g holds the first `rows[g]` rows of its matrices, at most M.

A row no group holds is the kernel's to write or leave: it is neither checked nor counted. Pure: no
GPU. The spec field (``groups:``) is read by `specfile.typed`.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from ..errors import DriverGemmError

LAYOUTS = ("contiguous", "masked")
# The most groups a GEMM may have: far above any mixture of experts, and small enough to lay out before the plan's
# memory checks see the buffers.
MAX_GROUPS = 1 << 16
# How the rows are shared out when the spec lists none: evenly, or drawn (some groups may get none).
ROW_RULES = ("even", "random")
# What a buffer of the kernel's own may hold about the groups (``groups: KIND``), each an integer sequence.
METADATA = {
    "rows": "each group's row count (G)",
    "starts": "each group's first row in A and C (G)",
    "ends": "the row after each group's last (G): the cumulative counts where the groups are packed",
    "offsets": "0 and then each group's end (G + 1)",
    "row_group": "each row's group, or -1 for a row no group holds (M; masked: G x M)",
    "problems": "each group's (rows, N, K), three to a group (3 G)",
    "weight_index": "each group's weight: the matrix of B it multiplies by, where the groups share weights (G)",
}
# What masked groups have no use for: each starts its own matrix, so their first rows and ends say nothing.
CONTIGUOUS_ONLY = ("starts", "ends", "offsets")
# Which weight each group takes where the groups share W of them and the spec lists none: group g takes weight
# g % W (cyclic), or a draw in which every weight is taken by some group (random). Both use every weight, so they
# need W <= G.
WEIGHT_RULES = ("cyclic", "random")
# The most weights the groups may share: as many matrices of B as groups may have.
MAX_WEIGHTS = MAX_GROUPS
# How many entries of the group -> weight mapping a plan's note lists before it stops.
SHOWN_WEIGHTS = 64


class GroupsError(DriverGemmError, ValueError):
    """Why groups cannot be laid out on a shape (said at the spec's ``groups:`` by the caller)."""


@dataclass(frozen=True)
class GemmGroups:
    """The groups of a grouped GEMM on one shape: layout, each group's rows and first row, and M, N, K."""

    layout: str
    rows: tuple[int, ...]
    starts: tuple[int, ...]   # contiguous: the first row in A and C; masked: 0 in each group's matrix
    M: int                    # contiguous: the rows of A and C; masked: the rows of each group's matrices
    N: int
    K: int
    align: int = 1
    weights: int | None = None                  # the matrices of B the groups share; None: a B per group
    weight_index: tuple[int, ...] = ()          # shared weights: the matrix of B each group multiplies by
    weight_rule: str | None = None              # how weight_index was chosen: a rule of WEIGHT_RULES, None: listed

    @property
    def count(self) -> int:
        return len(self.rows)

    @property
    def shares_weights(self) -> bool:
        return self.weights is not None

    @property
    def b_matrices(self) -> int:
        """The matrices of B: one per group, or the weights the groups share."""
        return self.weights if self.weights is not None else self.count

    def weight_of(self, group: int) -> int:
        """The matrix of B group `group` multiplies by."""
        return self.weight_index[group] if self.weights is not None else group

    @property
    def total_rows(self) -> int:
        return sum(self.rows)

    @property
    def flops(self) -> int:
        """The floating-point operations of the groups' products: 2 N K for each row a group holds."""
        return 2 * self.total_rows * self.N * self.K

    def row_groups(self) -> np.ndarray:
        """The group of every row of C as stored, -1 for rows no group holds: M of them (contiguous), or G x M,
        matrix after matrix (masked)."""
        matrices = self.count if self.layout == "masked" else 1
        group = np.full((matrices, self.M), -1, dtype=np.int64)
        for g, (start, rows) in enumerate(zip(self.starts, self.rows)):
            group[g if self.layout == "masked" else 0, start:start + rows] = g
        return group.reshape(-1)

    def held_rows(self) -> np.ndarray:
        """True for the rows of C (batch x M, as `row_groups` orders them) that some group holds."""
        return (self.row_groups() >= 0).reshape(self.count if self.layout == "masked" else 1, self.M)

    def metadata(self, kind: str) -> list[int]:
        """The integers of a buffer holding `kind` (a key of `METADATA`)."""
        if kind == "rows":
            return list(self.rows)
        if kind in CONTIGUOUS_ONLY and self.layout == "masked":
            raise GroupsError(f"masked groups each start their own matrix, so their {kind} say nothing: a buffer "
                              "of masked groups holds their rows, row_group or problems")
        if kind == "starts":
            return list(self.starts)
        if kind == "ends":
            return [start + rows for start, rows in zip(self.starts, self.rows)]
        if kind == "offsets":
            return [0] + self.metadata("ends")
        if kind == "row_group":
            return self.row_groups().tolist()
        if kind == "problems":
            return [value for rows in self.rows for value in (rows, self.N, self.K)]
        if kind == "weight_index":
            if self.weights is None:
                raise GroupsError("holds each group's weight, but the groups each have their own B: a buffer of "
                                  "weight_index is for groups that share weights (groups: {..., weights: COUNT, "
                                  "weight_index: cyclic|random|[INDEX, ...]})")
            return list(self.weight_index)
        raise GroupsError(f"a buffer holds one of {', '.join(METADATA)} about the groups, not {kind!r}")

    def product(self, a: np.ndarray, b: np.ndarray, alpha: float = 1.0, beta: float = 0.0,
                c0: np.ndarray | None = None) -> np.ndarray:
        """Each group's ``alpha * A[rows] @ B[w] + beta * C0[rows]``, w the group's weight (`weight_of`: g where
        each group has its own B), batch x M x N like C (1 x M x N contiguous, G x M x N masked), in the dtype of A
        and B's product; rows no group holds are 0."""
        a, b = (operand[None] if operand.ndim == 2 else operand for operand in (a, b))
        if b.shape[0] < self.b_matrices:
            raise ValueError(f"B holds {b.shape[0]} matrices, but the groups multiply by {self.b_matrices}")
        dtype = np.result_type(a.dtype, b.dtype)
        out = np.zeros((a.shape[0], self.M, self.N), dtype=np.float64)
        for g, (start, rows) in enumerate(zip(self.starts, self.rows)):
            if rows == 0:
                continue
            matrix = g if self.layout == "masked" else 0
            out[matrix, start:start + rows] = np.matmul(a[matrix, start:start + rows].astype(dtype),
                                                       b[self.weight_of(g)].astype(dtype))
        if alpha != 1.0:
            out *= alpha
        if beta != 0.0:
            if c0 is None:
                raise ValueError("beta is not 0: the product needs C's starting values")
            out += beta * np.asarray(c0, np.float64).reshape(out.shape) * self.held_rows()[:, :, None]
        return out

    def describe(self) -> str:
        shown = ", ".join(map(str, self.rows[:8])) + (", ..." if self.count > 8 else "")
        where = (f"starts a multiple of {self.align}, " if self.align > 1 else "") if self.layout == "contiguous" \
            else f"each in its own {self.M}-row matrix, "
        capacity = self.M * (self.count if self.layout == "masked" else 1)
        unheld = f"; the {capacity - self.total_rows:,} rows of C no group holds are not checked" \
            if capacity > self.total_rows else ""
        return (f"{self.count} {self.layout} groups of N = {self.N}, K = {self.K}: rows {shown} ({where}"
                f"{self.total_rows:,} rows in all{unheld}){self.describe_weights()}")

    def describe_weights(self) -> str:
        """Where the groups share weights, how many and which group takes which: "; sharing 2 weights of B, group
        -> weight 0, 1, 0, 1 (g % 2)"; else nothing."""
        if self.weights is None:
            return ""
        shown = ", ".join(map(str, self.weight_index[:SHOWN_WEIGHTS])) + \
            (f", ... ({self.count:,} in all)" if self.count > SHOWN_WEIGHTS else "")
        how = {"cyclic": f"g % {self.weights}", "random": "drawn, every weight taken"}.get(self.weight_rule or "",
                                                                                          "listed")
        plural = "weight" if self.weights == 1 else "weights"
        return f"; sharing {self.weights} {plural} of B, group -> weight {shown} ({how})"

    def as_dict(self) -> dict:
        shared = {"weights": self.weights, "weight_index": list(self.weight_index),
                  "weight_rule": self.weight_rule or "listed"} if self.weights is not None else {}
        return {"layout": self.layout, "rows": list(self.rows), "starts": list(self.starts), "align": self.align,
                **shared}


def make_groups(layout: str, M: int, N: int, K: int, *, count: int | None = None,
                rows: str | list[int] = "even", align: int = 1, weights: int | None = None,
                weight_index: str | list[int] | None = None) -> GemmGroups:
    """`count` groups laid out in `layout` on an M x N x K shape: their rows listed, or shared out by a rule of
    `ROW_RULES` (``random`` draws from the shape and the count, the same on every run). With `weights`, the groups
    share that many matrices of B, each group's listed in `weight_index` or chosen by a rule of `WEIGHT_RULES`
    (``cyclic`` when none is given). `GroupsError` where the rows do not fit or a weight does not exist."""
    if layout not in LAYOUTS:
        raise GroupsError(f"layout is {' or '.join(LAYOUTS)}, got {layout!r}")
    if align < 1:
        raise GroupsError(f"align is a row count of 1 or more, got {align}")
    if layout == "masked" and align != 1:
        raise GroupsError("align is for contiguous groups: a masked group starts its own matrix")
    if count is not None and not 1 <= count <= MAX_GROUPS:
        raise GroupsError(f"a grouped GEMM has 1 to {MAX_GROUPS:,} groups, got {count:,}")
    if isinstance(rows, str):
        if count is None:
            raise GroupsError("a grouped GEMM's rows shared out by a rule need a count of groups")
        if rows not in ROW_RULES:
            raise GroupsError(f"rows is a list of counts, or one of {', '.join(ROW_RULES)}; got {rows!r}")
        listed = _shared_out(layout, rows, count, M, align, seed=[M, N, K, count, align])
    else:
        listed = list(rows)
        if count is not None and count != len(listed):
            raise GroupsError(f"count is {count}, but rows lists {len(listed)} groups")
        if not 1 <= len(listed) <= MAX_GROUPS:
            raise GroupsError(f"a grouped GEMM has 1 to {MAX_GROUPS:,} groups; rows lists {len(listed):,}")
        negative = [(g, value) for g, value in enumerate(listed) if value < 0]
        if negative:
            raise GroupsError(f"group {negative[0][0]} has {negative[0][1]} rows: a count is 0 or more")
    if not any(listed):
        # Nothing would be checked or timed as work: a decode shape under DeepGEMM's 128-row alignment, say.
        raise GroupsError(f"the {len(listed):,} groups hold no rows on this shape (M = {M:,}"
                          + (f", groups starting at multiples of {align}" if align > 1 else "") + "): nothing to check")
    shared = _shared_weights(len(listed), weights, weight_index)
    if layout == "masked":
        over = [(g, value) for g, value in enumerate(listed) if value > M]
        if over:
            raise GroupsError(f"group {over[0][0]} has {over[0][1]} rows, more than its matrix's M = {M}")
        return GemmGroups(layout, tuple(listed), (0,) * len(listed), M, N, K, 1, *shared)
    starts, next_row = [], 0
    for value in listed:
        start = -(-next_row // align) * align
        starts.append(start)
        next_row = start + value
    if next_row > M:
        raise GroupsError(f"the groups' rows ({', '.join(map(str, listed[:8]))}{', ...' if len(listed) > 8 else ''})"
                          + (f", each starting at a multiple of {align}," if align > 1 else "")
                          + f" reach row {next_row:,}, past A's and C's M = {M:,}")
    return GemmGroups(layout, tuple(listed), tuple(starts), M, N, K, align, *shared)


def _shared_weights(count: int, weights: int | None, weight_index: str | list[int] | None
                    ) -> tuple[int | None, tuple[int, ...], str | None]:
    """The weights `count` groups share, each group's, and the rule that chose them (None where listed); (None, (),
    None) where each group has its own B. `GroupsError` for an index without weights, a rule that cannot use every
    weight, or a listed index that is no weight."""
    if weights is None:
        if weight_index is not None:
            raise GroupsError("weight_index says which weight each group takes, but the groups share none: give "
                              "weights, the count of B's matrices (groups: {..., weights: 4, weight_index: ...})")
        return None, (), None
    if not 1 <= weights <= MAX_WEIGHTS:
        raise GroupsError(f"the groups share 1 to {MAX_WEIGHTS:,} weights, got {weights:,}")
    rule = "cyclic" if weight_index is None else weight_index
    if isinstance(rule, str):
        if rule not in WEIGHT_RULES:
            raise GroupsError(f"weight_index is a list of each group's weight, or one of {', '.join(WEIGHT_RULES)};"
                              f" got {rule!r}")
        if weights > count:
            raise GroupsError(f"{weights:,} weights over {count:,} groups: weight_index {rule} gives every weight a "
                              f"group, so there are at most as many weights as groups; list weight_index to leave "
                              f"weights unused")
        if rule == "cyclic":
            return weights, tuple(g % weights for g in range(count)), rule
        rng = np.random.default_rng([zlib.crc32(b"weights"), count, weights])
        index = rng.integers(0, weights, size=count)
        index[rng.permutation(count)[:weights]] = np.arange(weights)   # every weight taken by some group
        return weights, tuple(int(value) for value in index), rule
    listed = list(rule)
    if len(listed) != count:
        raise GroupsError(f"weight_index lists {len(listed):,} weights for {count:,} groups: one per group")
    wrong = next(((g, value) for g, value in enumerate(listed) if not 0 <= value < weights), None)
    if wrong is not None:
        raise GroupsError(f"weight_index[{wrong[0]}] is {wrong[1]}: group {wrong[0]}'s weight is one of B's "
                          f"{weights:,} matrices, 0 to {weights - 1:,}")
    return weights, tuple(listed), None


def _shared_out(layout: str, rule: str, count: int, M: int, align: int, seed: list[int]) -> list[int]:
    """Rows for `count` groups by `rule`: masked, each group's M (even) or a draw in [0, M]; contiguous, M's
    blocks of `align` rows shared evenly (the first groups one more where they do not divide) or at random
    cut points (a group may get none), a drawn group then leaving up to `align` - 1 rows of its last block."""
    rng = np.random.default_rng([zlib.crc32(rule.encode()), *seed])
    if layout == "masked":
        if rule == "even":
            return [M] * count
        return [int(value) for value in rng.integers(0, M + 1, size=count)]
    blocks = M // align
    if rule == "even":
        share, extra = divmod(blocks, count)
        return [(share + (g < extra)) * align for g in range(count)]
    cuts = np.sort(rng.integers(0, blocks + 1, size=count - 1))
    spans = np.diff(np.concatenate([[0], cuts, [blocks]])) * align
    short = rng.integers(0, align, size=count) if align > 1 else np.zeros(count, dtype=np.int64)
    return [int(max(span - cut, 0)) if span else 0 for span, cut in zip(spans, short)]
