"""The FAIL summary says where C is wrong and nothing untrue: the elements outside the places it names are called
right where they are, failures in separate blocks are named by their blocks (never a box taking in right blocks), a
batch's wholly unwritten matrix is named with its index, an error over nearly all of C is called spread (with the
part-of-K hint) rather than listing the elements that happen to be right, a triangle is named as one, and grouped
outputs name their groups. No GPU."""

from __future__ import annotations

import re

import numpy as np

from driver_gemm.gemm import dtypes
from driver_gemm.gemm.operands import KernelOutput
from driver_gemm.measure.verify import POISON_WORD, compare, compare_typed
from driver_gemm.results.diagnose import describe_region, diagnose_output

TILE = (64, 64)
POISON = np.array(POISON_WORD, np.uint32).view(np.float32)


def product(M: int, N: int, K: int, batch: int = 1, seed: int = 3) -> np.ndarray:
    """A float32-accumulated product of bf16-exact inputs, in float64: what a right kernel computes."""
    rng = np.random.default_rng(seed)
    a = dtypes.decode(dtypes.encode(rng.uniform(-1, 1, (batch, M, K)), "bf16"), "bf16")
    b = dtypes.decode(dtypes.encode(rng.uniform(-1, 1, (batch, K, N)), "bf16"), "bf16")
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float64)


def bf16_check(values: np.ndarray, expected: np.ndarray, K: int, matrices: int = 1, **options):
    """`values` (batch x M x N) written as bf16 C, checked against `expected` at bf16's tolerance, and diagnosed."""
    types = dtypes.GemmTypes(*(dtypes.element_type(name) for name in ("bf16", "bf16", "bf16", "fp32")))
    codes = dtypes.encode(values, types.c)
    output = KernelOutput(dtypes.decode(codes, types.c), codes, 0)
    verdict = compare_typed(output, expected, types.c, rel_tolerance=dtypes.error_bound(types, K))
    rows = values.shape[0] * values.shape[1]
    verdict.masks = {name: mask.reshape(rows, -1) for name, mask in verdict.masks.items()}
    flat_output, flat_expected = output.values.reshape(rows, -1), expected.reshape(rows, -1)
    return verdict, flat_output, flat_expected, diagnose_output(verdict, flat_output, flat_expected, Plan(),
                                                                matrices, **options)["summary"]


class Plan:
    tile = TILE
    config = None


def fp32_check(output: np.ndarray, expected: np.ndarray, K: int, matrices: int = 1, **options):
    output = np.asarray(output, np.float32)
    verdict = compare(output, expected, rel_tolerance=1e-6 * np.sqrt(K) + 2e-6)
    return verdict, diagnose_output(verdict, output, expected, Plan(), matrices, **options)["summary"]


def failed_of(verdict) -> np.ndarray:
    return verdict.masks["unwritten"] | verdict.masks["nonfinite"] | verdict.masks["wrong"]


def assert_named_blocks_fail(summary: str, failed: np.ndarray, height: int | None = None) -> None:
    """Every block (x, y) the summary names holds a failed element (of some matrix of the stack)."""
    height = height or failed.shape[0]
    stacked = failed.reshape(-1, height, failed.shape[1]).any(axis=0)
    for x, y in re.findall(r"\((\d+), (\d+)\)", summary):
        rows, cols = slice(int(y) * TILE[0], (int(y) + 1) * TILE[0]), slice(int(x) * TILE[1], (int(x) + 1) * TILE[1])
        assert stacked[rows, cols].any(), f"block ({x}, {y}) is right but named: {summary}"


def test_elements_outside_a_bad_tile_are_called_right_at_bf16_tolerance():
    expected = product(257, 193, 300)
    values = expected.copy()
    values[0, 128:192, 128:192] = values[0, 64:128, 128:192]       # block (2, 1)'s tile also stored over (2, 2)
    verdict, output, flat_expected, summary = bf16_check(values, expected, 300)
    assert "off too" not in summary and summary.endswith("every element elsewhere right"), summary
    outside = np.ones_like(output, dtype=bool)
    outside[128:192, 128:192] = False                             # what it says is true: outside the box, right
    assert np.linalg.norm(output[outside] - flat_expected[outside]) <= \
        verdict.tolerance * np.linalg.norm(flat_expected[outside])


def test_a_rolled_batch_at_bf16_is_named_whole_with_nothing_else_said_off():
    expected = product(64, 64, 32, batch=4)
    verdict, _, _, summary = bf16_check(np.roll(expected, 1, axis=0), expected, 32, matrices=4)
    assert "matrix 3 holds matrix 2's product" in summary and "off too" not in summary, summary
    assert "fail too" not in summary, summary


def test_failures_in_separate_blocks_are_named_by_their_blocks():
    expected = product(128, 128, 64)[0]
    swapped = expected.copy()
    swapped[0:64, 64:128], swapped[64:128, 0:64] = expected[64:128, 0:64], expected[0:64, 64:128]
    verdict, summary = fp32_check(swapped, expected, 64)
    assert summary.startswith("8192 elements wrong in blocks (1, 0) and (0, 1), every element of each"), summary
    assert_named_blocks_fail(summary, failed_of(verdict))
    expected = product(256, 256, 64)[0]
    output = expected.astype(np.float32)
    output[0:64, 0:64] = output[192:256, 192:256] = POISON
    output[70, 200] = POISON                                       # and one element of block (3, 1)
    verdict, summary = fp32_check(output, expected, 64)
    assert "in blocks (0, 0) (100%), (3, 1) (<1%) and (3, 3) (100%)" in summary, summary
    assert_named_blocks_fail(summary, failed_of(verdict))


def test_many_failing_blocks_name_only_failing_ones():
    expected = product(384, 384, 32)[0]
    output = expected.astype(np.float32)
    for block in range(6):                                         # the diagonal blocks, one element each
        output[block * 64 + 5, block * 64 + 9] += 10.0
    verdict, summary = fp32_check(output, expected, 32)
    assert summary.startswith("6 elements wrong in 6 blocks: (0, 0) (<1%), (1, 1) (<1%)"), summary
    assert_named_blocks_fail(summary, failed_of(verdict))
    assert summary.endswith("every element elsewhere right"), summary


def test_a_wholly_unwritten_matrix_of_a_batch_is_named_with_its_index():
    expected = product(64, 64, 32, batch=4).reshape(256, 64)
    output = expected.astype(np.float32)
    output[192:256] = POISON                                      # matrix 3 never written
    for b in range(3):
        output[b * 64 + 5 + b, 5 + b] = POISON
    verdict, summary = fp32_check(output, expected, 32, matrices=4)
    assert "matrix 3: never written (all 4096 elements unwritten)" in summary, summary
    assert "matrix 0: 1 element unwritten at row 5, column 5" in summary, summary
    rolled = np.roll(expected.reshape(4, 64, 64), -1, axis=0).reshape(256, 64).astype(np.float32)
    rolled[192:256] = POISON
    verdict, summary = fp32_check(rolled, expected, 32, matrices=4)
    assert "matrix 2 holds matrix 3's product" in summary and "matrix 3: never written" in summary, summary


def test_more_failing_matrices_than_described_are_counted_grammatically():
    expected = product(64, 64, 32, batch=4).reshape(256, 64)
    output = expected.astype(np.float32)
    for b, count in enumerate((1, 5, 9, 7)):                      # matrix 0 has the fewest failures
        output[b * 64, :count] += 10.0
    verdict, summary = fp32_check(output, expected, 32, matrices=4)
    assert "matrix 0 fails too: 1 element wrong" in summary, summary
    assert "matrix 2: 9 elements wrong" in summary and "matrices 0" not in summary, summary


def test_an_error_over_nearly_all_of_c_is_called_spread_with_the_part_of_k_hint():
    rng = np.random.default_rng(4)
    a, b = rng.uniform(-1, 1, (257, 300)), rng.uniform(-1, 1, (300, 193))
    expected = a @ b
    dropped = a[:, :288] @ b[:288]                                # the last 12 of K dropped
    verdict, summary = fp32_check(dropped, expected, 300)
    assert verdict.wrong * 10 >= 9 * expected.size and verdict.wrong < expected.size
    assert "nearly every element (all but" in summary and "part of K dropped" in summary, summary
    assert "all but 1" not in summary and "(row" not in summary, summary     # no element named right by chance
    diagonal = np.where(np.eye(96, dtype=bool), 1.0, 3.0)
    verdict, summary = fp32_check(diagonal, np.ones((96, 96)), 8)
    assert summary.startswith("9120 elements wrong: all but 96, the diagonal"), summary


def test_a_triangle_is_named_and_a_symmetric_product_is_not_called_transposed():
    lower = np.tril(np.ones((128, 128), bool), -1)
    assert describe_region(lower, "unwritten", TILE) == \
        "8128 elements unwritten: the lower triangle below the diagonal, every element of it"
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (128, 64))
    gram = a @ a.T
    output = gram.astype(np.float32)
    output[lower] = POISON                                         # a SYRK that wrote the upper triangle only
    verdict, summary = fp32_check(output, gram, 64)
    assert "transposed" not in summary and "the lower triangle below the diagonal" in summary, summary


def test_grouped_outputs_name_their_groups():
    held = [10, 64, 30]                                            # masked groups: group g in matrix g, rows held
    expected = np.zeros((3, 64, 64))
    full = product(64, 64, 32, batch=3)
    row_groups = np.full((3, 64), -1)
    for g, rows in enumerate(held):
        expected[g, :rows] = full[g, :rows]
        row_groups[g, :rows] = g
    values = expected.copy()
    values[2, :30] = expected[1, :30]                              # group 2 holds group 1's product
    _, _, _, summary = bf16_check(values, expected, 32, matrices=3, row_groups=row_groups.reshape(-1))
    assert summary.startswith("group 2 holds group 1's product"), summary
    contiguous = np.repeat([0, 1, 1, 3], 64)[:, None]               # rows 0-63 group 0, 64-191 group 1, ...
    expected = product(256, 64, 32)[0]
    output = expected.astype(np.float32)
    output[70:80] += 10.0
    output[200:210] += 10.0
    verdict, summary = fp32_check(output, expected, 32, row_groups=contiguous.reshape(-1))
    assert "(in the rows of groups 1, 3)" in summary, summary
