"""Kernels taking their arguments as outside kernels do, on a GPU: each case PASS, verified and timed.

specs/outside-args.yaml: a persistent kernel whose tiles come from an atomic counter in a zeroed
workspace (reset before every sample, or the second sample would find no tile left), a CUTLASS-style
nested Params struct with alpha and beta by pointer (described field by field, and made by a Python
builder), an epilogue that accumulates into C, and a split-K
kernel whose halves meet across a grid-wide barrier (a cooperative launch: launched otherwise it traps).
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from driver_gemm.runners.one_gpu import run_spec
from driver_gemm.session.state import RunOptions
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status

from conftest import ROOT, SPECS
from gpu_specs import quick, write_spec

pytestmark = pytest.mark.gpu

OUTSIDE_KERNELS = ("args-persistent", "args-params", "args-params-built", "args-accumulate", "args-grid-sync")


def assert_every_case(path, name: str, status: Status, *, count: int) -> list:
    """Run the spec at `path` quickly: kernel `name` has `count` cases, each ending in `status`. Its cases."""
    run = run_spec(quick(load_spec(path)), options=RunOptions())
    cases = [case for case in run.cases if case.name == name]
    assert len(cases) == count
    assert all(case.status == status for case in cases), [(c.shape.label, c.status, c.message) for c in cases]
    return cases


def test_outside_style_arguments_pass_on_a_small_awkward_shape_and_several_partial_tiles():
    # 1001 x 520 is 16 x 9 tiles of 64, the last row and column partial, taken by 144 blocks of the persistent
    # grid; 65 x 130 x 17 is 2 x 3 tiles, each partial in M or N, with a partial K step.
    spec = quick(load_spec(SPECS / "outside-args.yaml").select(kernels=OUTSIDE_KERNELS,
                                                                shapes=["1001x520x776", "65x130x17"]))
    run = run_spec(spec, options=RunOptions())
    cases = {(case.name, case.shape.label): case for case in run.cases if case.name in OUTSIDE_KERNELS}
    assert len(cases) == 10
    for key, case in cases.items():
        assert case.status == Status.PASS, (key, case.status, case.message)
        assert case.timing is not None and case.timing.median_ms > 0, key


def test_a_timed_persistent_kernel_still_computes_c_after_its_samples():
    # Timing reruns the kernel many times: each sample needs the counter zeroed again. Its times must be
    # those of a kernel that computes every tile (not of blocks that find the counter spent and return).
    spec = quick(load_spec(SPECS / "outside-args.yaml").select(kernels=["args-persistent", "args-accumulate"],
                                                                shapes=["4096x4096x4096"]))
    run = run_spec(spec, options=RunOptions())
    times = {case.name: case.timing.median_ms for case in run.cases if case.timing is not None}
    assert all(case.status in (Status.PASS, Status.REF) for case in run.cases), \
        [(case.name, case.status, case.message) for case in run.cases]
    # Both compute the same tiles with the same inner loop: an unreset counter would make args-persistent
    # a launch of empty blocks, far under a tenth of the other's time.
    assert times["args-persistent"] > 0.3 * times["args-accumulate"], times


ORDER_FROM_A_FILE = """
- name: args-persistent-file
  source: "@KERNELS@/outside/args_persistent_counter.cu"
  function: args_persistent_counter
  types: {a: bf16, b: bf16, c: fp32, accumulate: fp32}
  epilogue: overwrite
  block: [256]
  grid: ["min(2 * sm_count, ceil(N / 64) * ceil(M / 64))"]
  signature:
    - A
    - B
    - C
    - M
    - N
    - K
    - {name: tile_counter, type: buffer, element: int32, size: 1, fill: zero}
    - {name: tile_order, type: buffer, element: int32, size: ceil(N / 64) * ceil(M / 64),
       fill: {file: "tables/order-{M}x{N}.npy"}}
"""


def test_a_tile_order_read_from_a_file_per_shape_reaches_the_kernel(tmp_path):
    # The persistent kernel computes the tile the order table names at each count: with each shape's own shuffled
    # order from a .npy file, every tile of C is written only if that table reached the kernel whole (a table of
    # zeros would compute tile 0 over and over, and leave the rest of C unwritten).
    path = write_spec(tmp_path, ORDER_FROM_A_FILE, ["[1001, 520, 776]", "[65, 130, 17]"])
    (tmp_path / "tables").mkdir()
    shuffle = np.random.default_rng(7)
    for rows, columns in ((1001, 520), (65, 130)):
        tiles = math.ceil(rows / 64) * math.ceil(columns / 64)
        np.save(tmp_path / "tables" / f"order-{rows}x{columns}.npy", shuffle.permutation(tiles).astype(np.int32))
    assert_every_case(path, "args-persistent-file", Status.PASS, count=2)




def test_a_tile_order_made_by_a_python_builder_per_case_reaches_the_kernel(tmp_path):
    # The same table computed by the spec's Python for each shape (the tiles in reverse) instead of saved: every
    # tile of C is written only if the builder's numbers reached the kernel whole; a builder that repeats tile 0
    # leaves the rest of C unwritten and the case FAILs.
    builder = ("def reverse(values):\n"
               "    tiles = -(-values['M'] // 64) * -(-values['N'] // 64)\n"
               "    return list(range(tiles - 1, -1, -1))\n\n"
               "def first_only(values):\n"
               "    return [0] * (-(-values['M'] // 64) * -(-values['N'] // 64))\n")
    for function, status in (("reverse", Status.PASS), ("first_only", Status.FAIL)):
        path = write_spec(tmp_path, ORDER_FROM_A_FILE.replace('{file: "tables/order-{M}x{N}.npy"}',
                                                              f'{{builder: "order.py:{function}"}}'),
                          ["[1001, 520, 776]", "[65, 130, 17]"])
        (tmp_path / "order.py").write_text(builder)
        assert_every_case(path, "args-persistent-file", status, count=2)


POINTER_ARRAYS = """
- name: args-pointer-arrays
  source: "@KERNELS@/outside/args_pointer_arrays.cu"
  function: args_pointer_arrays
  types: {a: fp32}
  batch: {count: 3}
  block: [16, 16]
  grid: [ceil(N / 16), ceil(M / 16), batch]
  tile: [16, 16]
  scalars: {alpha: 1.5, beta: 0.5}
  signature: [{name: Aarray, type: pointers, to: A}, {name: Barray, type: pointers, to: B},
              {name: Carray, type: pointers, to: C}, M, N, K, alpha, beta]
"""


def test_arrays_of_pointers_lead_the_kernel_to_each_matrix_of_the_batch(tmp_path):
    # Every matrix of the batch is checked: C[b] is right only where the kernel found A[b], B[b] and C[b] through
    # the arrays. Launched over two of the three matrices (grid z of 2), the third is never written and the case
    # FAILs; over one alone (grid z of 1) the plan already sees, from the kernel's blockIdx.z, that matrices 1-2
    # would be left, and the case is INVALID without a launch.
    path = write_spec(tmp_path, POINTER_ARRAYS, ["[130, 72, 40]", "[65, 130, 17]"])
    assert_every_case(path, "args-pointer-arrays", Status.PASS, count=2)
    path = write_spec(tmp_path, POINTER_ARRAYS.replace("ceil(M / 16), batch]", "ceil(M / 16), 2]"),
                      ["[130, 72, 40]"])
    assert_every_case(path, "args-pointer-arrays", Status.FAIL, count=1)
    path = write_spec(tmp_path, POINTER_ARRAYS.replace("ceil(M / 16), batch]", "ceil(M / 16), 1]"),
                      ["[130, 72, 40]"])
    [refused] = assert_every_case(path, "args-pointer-arrays", Status.INVALID, count=1)
    assert "matrices 1-2 would never be written" in refused.message and "grid z should be batch" in refused.message


CONSTANT_SCALE = """
- &both
  name: args-constant-scale
  source: "@KERNELS@/outside/args_constant_scale.cu"
  function: args_constant_scale
  block: [16, 16]
  grid: [ceil(N / 16), ceil(M / 16)]
  tile: [16, 16]
  constants:
    - {name: "epilogue::scale", type: float32, value: 1.0}
    - {name: column_scale, type: float32, value: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}
- <<: *both
  name: args-constant-unset
  constants:
    - {name: "epilogue::scale", type: float32, value: 1.0}
"""


def test_constants_reach_the_kernels_constant_memory_and_a_case_that_sets_none_reads_the_images_own(tmp_path):
    # Both factors 1.0: C = A @ B only where both __constant__ variables were written. The second kernel shares
    # the module and sets only the scale, after the first set both: its column factors must be the image's zeros
    # again (C all zeros, FAIL), not what the first case left there.
    path = write_spec(tmp_path, CONSTANT_SCALE, ["[130, 72, 40]", "[65, 130, 17]"])
    run = run_spec(quick(load_spec(path)), options=RunOptions())
    statuses = {(case.name, case.shape.label): case.status for case in run.cases if case.name.startswith("args-")}
    assert statuses == {("args-constant-scale", "130x72x40"): Status.PASS,
                        ("args-constant-scale", "65x130x17"): Status.PASS,
                        ("args-constant-unset", "130x72x40"): Status.FAIL,
                        ("args-constant-unset", "65x130x17"): Status.FAIL}, statuses


SPLIT_THEN_SUM = """
- name: args-split-then-sum
  source: "@KERNELS@/outside/args_split_k_then_sum.cu"
  function: split_k_partials
  params: {SPLITS: 4}
  block: [16, 16]
  grid: [ceil(N / 16), ceil(M / 16), SPLITS]
  tile: [16, 16]
  scalars: {alpha: 1.5, beta: 0.5}
  signature: [A, B, {name: partials, type: buffer, element: float32, size: SPLITS * M * N}, M, N, K]
  then:
    - function: sum_partials<SPLITS>
      block: [256]
      grid: ['ceil(M * N / 256)']
      signature: [partials, C, M, N, alpha, beta]
"""


def test_a_gemm_of_two_launches_is_checked_and_timed_as_one_case(tmp_path):
    # C = 1.5 A @ B + 0.5 C only where the partial products landed in the workspace and the second launch summed
    # them: with the sum launched over half of C's elements, the other half keeps its start, and the case FAILs.
    path = write_spec(tmp_path, SPLIT_THEN_SUM, ["[130, 72, 40]", "[65, 130, 17]"])
    run = run_spec(quick(load_spec(path)), options=RunOptions())
    cases = [case for case in run.cases if case.name == "args-split-then-sum"]
    assert [case.status for case in cases] == [Status.PASS, Status.PASS], [case.message for case in cases]
    assert all(case.timing is not None and case.timing.median_ms > 0 for case in cases)
    path = write_spec(tmp_path, SPLIT_THEN_SUM.replace("ceil(M * N / 256)", "ceil(M * N / 512)"), ["[130, 72, 40]"])
    assert_every_case(path, "args-split-then-sum", Status.FAIL, count=1)


SCALES_THROUGH_A_MAP = """
- name: args-row-scale-map
  source: "@KERNELS@/outside/args_row_scale_map.cu"
  function: args_row_scale_map
  arch: sm_90a
  block: [16, 16]
  grid: [ceil(N / 16), ceil(M / 16)]
  tile: [16, 16]
  signature: [A, B, C, M, N, K, {name: row_scales, type: tensormap, tensor: scales, dims: [M], box: [16]},
              {name: scales, type: buffer, element: float32, size: M, fill: 1.0, pass: none}]
"""


def test_a_map_over_a_buffer_that_is_no_parameter_reaches_the_kernel(tmp_path):
    # Every row of C is scaled by the factor the map copies in: 1.0 only where it read the case's buffer.
    path = write_spec(tmp_path, SCALES_THROUGH_A_MAP, ["[1001, 520, 776]", "[65, 130, 17]"])
    assert_every_case(path, "args-row-scale-map", Status.PASS, count=2)


BLOCK_SCALED_FP8 = """
- name: fp8-block-scaled
  source: "@KERNELS@/outside/fp8_block_scaled.cu"
  function: fp8_block_scaled
  arch: sm_90
  types: {a: e4m3, b: e4m3, c: fp32, accumulate: fp32}
  layout: NT
  epilogue: overwrite
  block: [16, 16]
  grid: [ceil(N / 16), ceil(M / 16)]
  tile: [16, 16]
  signature: [A, B, C, M, N, K,
              {name: scales_a, type: buffer, element: float32, size: ceil(K / 128) * M,
               scales: {of: A, block: [1, 128], order: col}},
              {name: scales_b, type: buffer, element: float32, size: ceil(N / 128) * ceil(K / 128),
               scales: {of: B, block: [128, 128], order: ORDER_B}}]
"""


@pytest.mark.parametrize("order_b, status", [("col", Status.PASS), ("row", Status.FAIL)])
def test_block_scaled_fp8_passes_with_its_layouts_and_fails_where_the_spec_misplaces_bs_factors(tmp_path, order_b,
                                                                                                status):
    # The kernel reads B's factors as ceil(N / 128) rows of ceil(K / 128): described so, every case PASSes against a
    # reference that scales each block of A and B by its own factor; described row after row of the (K / 128) x
    # (N / 128) grid, the factors the kernel reads are not those the reference applies, and the check says so.
    path = write_spec(tmp_path, BLOCK_SCALED_FP8.replace("ORDER_B", order_b), ["[1001, 520, 776]", "[65, 300, 272]"])
    assert_every_case(path, "fp8-block-scaled", status, count=2)


BIAS_EPILOGUE = """
- name: args-bias
  source: "@KERNELS@/outside/args_bias.cu"
  function: args_bias
  types: {a: fp32}
  layout: NT
  epilogue: overwrite
  block: [16, 16]
  grid: [ceil(N / 16), ceil(M / 16)]
  tile: [16, 16]
  signature: [C, A, B, {name: bias, type: buffer, element: fp32, size: "max(M, N)", bias: ALONG}, M, N, K]
"""


@pytest.mark.parametrize("along, status", [("N", Status.PASS), ("M", Status.FAIL)])
def test_a_bias_epilogue_passes_as_described_and_fails_where_the_spec_puts_the_bias_on_the_other_axis(tmp_path,
                                                                                                      along, status):
    # The kernel adds bias[n] to every row: described along N, every case PASSes against a reference that adds the
    # drawn values; described along M, the reference adds a value per row, and the check says C is wrong.
    path = write_spec(tmp_path, BIAS_EPILOGUE.replace("ALONG", along), ["[1001, 520, 776]", "[65, 130, 17]"])
    assert_every_case(path, "args-bias", status, count=2)


BUILT_PARAMS = """
- name: args-params-built
  source: "@KERNELS@/outside/args_params_struct.cu"
  function: args_params_struct
  types: {a: bf16, b: bf16, c: fp32, accumulate: fp32}
  scalars: {alpha: 1.5, beta: -0.5}
  block: [256]
  grid: [ceil(M / 64), ceil(N / 64)]
  signature:
    - name: params
      type: struct
      builder: "@KERNELS@/outside/args_params_struct.py:FUNCTION"
      fields: [A, B, C, M, N, K, lda, ldb, ldc, {name: alpha, type: ptr}, {name: beta, type: ptr}]
"""


@pytest.mark.parametrize("function, status", [("params", Status.PASS), ("params_columns_swapped", Status.FAIL)])
def test_a_parameter_made_by_a_python_builder_reaches_the_kernel_as_it_made_it(tmp_path, function, status):
    # The builder's bytes are what the kernel reads: made as the kernel declares Params, every case PASSes; with
    # A's strides swapped the kernel multiplies A transposed, and the check says C is wrong.
    path = write_spec(tmp_path, BUILT_PARAMS.replace("FUNCTION", function), ["[1001, 520, 776]", "[65, 130, 17]"])
    assert_every_case(path, "args-params-built", status, count=2)


W4A16 = """
- name: args-w4a16
  source: "@KERNELS@/outside/args_w4a16.cu"
  function: args_w4a16
  params: {IGNORE_ZEROS: IGNORE}
  types: {a: fp16, b: fp16, c: fp16, accumulate: fp32}
  epilogue: overwrite
  block: [16, 16]
  grid: [ceil(N / 16), ceil(M / 16)]
  tile: [16, 16]
  signature:
    - A
    - {name: qweight, type: buffer, element: int32, size: K / 8 * N,
       quantized: {of: B, part: codes, bits: 4, group: 128, pack: {along: K}}}
    - {name: scales, type: buffer, element: float16, size: K / 128 * N, quantized: {of: B, part: scales}}
    - {name: qzeros, type: buffer, element: int32, size: K / 128 * ceil(N / 8),
       quantized: {of: B, part: zeros, pack: {along: N}}}
    - C
    - M
    - N
    - K
    - {name: group, type: int32, value: 128}
"""


@pytest.mark.parametrize("ignore, status", [("false", Status.PASS), ("true", Status.FAIL)])
def test_a_w4a16_kernel_dequantizes_its_packed_codes_to_the_b_it_is_checked_against(tmp_path, ignore, status):
    # B is drawn as (q - z) * s and handed to the kernel as GPTQ lays it out (codes packed along K, fp16 scales, zero
    # points packed along N): dequantized as laid out, every case PASSes against the float64 product with that B,
    # N = 515 leaving the last word of zero points partly filled; a kernel that takes every zero point for 8 FAILs.
    path = write_spec(tmp_path, W4A16.replace("IGNORE", ignore), ["[1001, 515, 768]", "[64, 4096, 4096]"])
    assert_every_case(path, "args-w4a16", status, count=2)


def test_the_spec_entries_of_w4a16_pass_and_the_vendor_row_times_an_fp16_gemm_of_the_shape():
    # The vendor row multiplies an ordinary fp16 B of the same shape, drawn apart from the quantized one: its own
    # reference, its own PASS.
    spec = quick(load_spec(SPECS / "outside-args.yaml").select(kernels=["args-w4a16", "args-w4a16-symmetric"],
                                                                shapes=["1001x520x776"]))
    run = run_spec(spec, options=RunOptions())
    statuses = {case.name: case.status for case in run.cases}
    assert statuses.get("args-w4a16") == Status.PASS and statuses.get("args-w4a16-symmetric") == Status.PASS, \
        [(case.name, case.status, case.message) for case in run.cases]
    assert all(case.status in (Status.PASS, Status.REF) for case in run.cases), \
        [(case.name, case.status, case.message) for case in run.cases]


CODEBOOK = """
- name: args-codebook
  source: "@KERNELS@/outside/args_codebook.cu"
  function: args_codebook
  params: {AFFINE: WRONG}
  types: {a: fp16, b: fp16, c: fp16, accumulate: fp32}
  epilogue: overwrite
  block: [16, 16]
  grid: [ceil(N / 16), ceil(M / 16)]
  tile: [16, 16]
  signature:
    - A
    - {name: codes, type: buffer, element: uint32, size: N * ceil(K / 8),
       quantized: {of: B, part: codes, bits: 4, group: 64, codebook: TABLE, order: col, pack: {along: K}}}
    - {name: absmax, type: buffer, element: float32, size: N * K / 64, quantized: {of: B, part: scales, order: col}}
    - {name: table, type: buffer, element: float32, size: 16, quantized: {of: B, part: codebook}}
    - C
    - M
    - N
    - K
    - {name: group, type: int32, value: 64}
"""


@pytest.mark.parametrize("table, wrong, status", [("nf4", "false", Status.PASS), ("fp4", "false", Status.PASS),
                                                  ("nf4", "true", Status.FAIL)])
def test_a_codebook_kernel_dequantizes_its_codes_through_the_table_it_is_given(tmp_path, table, wrong, status):
    # bitsandbytes' layouts: W = B^T's codes packed along K a row of W after another, a scale per group of a row of W
    # (order: col), the NF4 or FP4 table in a buffer; B is drawn as table[q] * s, so a kernel that looks its codes up
    # PASSes against the float64 product, and one that reads them as signed integers (q - 8) FAILs.
    path = write_spec(tmp_path, CODEBOOK.replace("WRONG", wrong).replace("TABLE", table),
                      ["[1, 4096, 4096]", "[77, 515, 1024]"])
    assert_every_case(path, "args-codebook", status, count=2)


GROUPED = ("grouped-ends", "grouped-row-index", "grouped-masked", "grouped-pointers")


def test_grouped_gemms_pass_in_every_layout_and_their_vendor_row_is_the_dense_product():
    # Contiguous groups found by their ends, by each row's group (padding rows between groups left alone), masked
    # groups in matrices of their own, and CUTLASS's arrays of pointers: each PASSes on the rows its groups hold,
    # with GFLOP/s of those rows; the vendor rows (the dense product, the batch of full matrices) PASS on their own.
    spec = quick(load_spec(SPECS / "outside-grouped.yaml"))
    run = run_spec(spec, options=RunOptions())
    kernels = [case for case in run.cases if case.name in GROUPED]
    assert len(kernels) == 8
    for case in kernels:
        assert case.status == Status.PASS, (case.name, case.shape.label, case.status, case.message)
        rows = sum(case.operands.groups["rows"])
        assert case.verification.elements == rows * case.shape.N
        assert case.gflops == pytest.approx(2 * rows * case.shape.N * case.shape.K / case.timing.median_ms / 1e6)
        assert case.pct_cublas is not None
    assert all(case.status in (Status.PASS, Status.REF) for case in run.cases), \
        [(case.name, case.status, case.message) for case in run.cases]


def test_a_grouped_kernel_that_reads_the_first_groups_b_for_every_group_fails_past_the_first_group(tmp_path):
    # The rows of group 0 are right and every other group's wrong: the diagnosis puts each mismatch back at its row
    # of C, with its group.
    shutil.copytree(ROOT / "kernels", tmp_path / "kernels")
    path = tmp_path / "grouped.yaml"
    path.write_text((SPECS / "outside-grouped.yaml").read_text().replace("../kernels/", "kernels/")
                    .replace("SAME_B: false", "SAME_B: true"))
    spec = quick(load_spec(path).select(kernels=["grouped-ends"], shapes=["1001x520x776"]))
    run = run_spec(spec, options=RunOptions())
    case = next(case for case in run.cases if case.name == "grouped-ends")
    first = case.operands.groups["rows"][0]
    assert case.status == Status.FAIL, case.message
    assert case.diagnosis.first_mismatches and all(entry["group"] >= 1 and entry["row"] >= first
                                                   for entry in case.diagnosis.first_mismatches)
