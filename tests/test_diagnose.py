import numpy as np

from driver_gemm.results.diagnose import describe_region, diagnose_output, ranges_text
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.specfile.model import Shape
from driver_gemm.specfile import load_spec
from driver_gemm.measure.verify import POISON_WORD, compare

from conftest import SPECS


def test_ranges_text():
    assert ranges_text([1, 2, 3, 7, 9, 10]) == "1-3, 7, 9-10"
    assert ranges_text([]) == "" and ranges_text([5]) == "5"


def test_unwritten_rows_in_words():
    mask = np.zeros((1001, 513), bool)
    mask[960:] = True
    assert describe_region(mask, "unwritten", (64, 64)) == \
        "21033 elements unwritten: rows 960-1000 = block row 15, every column"
    assert describe_region(mask, "unwritten") == "21033 elements unwritten: rows 960-1000, every column"


def test_unwritten_column_in_words():
    mask = np.zeros((1001, 513), bool)
    mask[:, 512] = True
    assert describe_region(mask, "unwritten", (64, 64)) == \
        "1001 elements unwritten: columns 512 = block column 8, every row"


def test_edges_and_patches_in_words():
    mask = np.zeros((100, 100), bool)
    mask[96:] = True
    mask[:, 97:] = True
    assert describe_region(mask, "wrong") == \
        "688 elements wrong: rows 96-99 and columns 97-99 (the edges of C)"
    patch = np.zeros((128, 128), bool)
    patch[64:96:2, 0:64] = True
    text = describe_region(patch, "wrong", (64, 64))
    assert text == "1024 elements wrong within rows 64-94, columns 0-63 (block rows 1, block columns 0), 52% of that box"
    single = np.zeros((130, 70), bool)
    single[129, 3] = True
    assert describe_region(single, "wrong", (64, 64)) == "1 element wrong at row 129, column 3 (block (0, 2))"


def seed_kernel(name):
    return next(k for k in load_spec(SPECS / "seed.yaml").kernels if k.name == name)


def test_diagnosis_traces_elements_to_blocks_and_threads():
    kernel = seed_kernel("v4")
    shape = Shape(130, 70, 8)
    plan = plan_case(kernel, shape, arch_limits("sm_90"))
    expected = np.ones((130, 70))
    output = np.ones((130, 70), np.float32)
    output[:, 68:] = np.array(POISON_WORD, np.uint32).view(np.float32)   # last 2 columns never written
    output[129, 3] = 7.0                                                  # one wrong value
    verdict = compare(output, expected, rel_tolerance=1e-5)
    report = diagnose_output(verdict, output, expected, plan)
    assert report["unwritten"] == 260 and report["wrong"] == 1 and report["right"] == 130 * 70 - 261
    assert report["summary"] == ("260 elements unwritten: columns 68-69 = block column 1, every row; "
                                 "1 element wrong at row 129, column 3 (block (0, 2)); every other element right")
    first = report["first_mismatches"][0]
    assert first == {"row": 0, "col": 68, "expected": 1.0, "got": None, "kind": "unwritten",
                     "block": [1, 0], "thread": [1, 0]}
    wrong = [m for m in report["first_mismatches"] if m["kind"] == "wrong"]
    assert not wrong  # the first ten are all unwritten, in row-major order


def test_diagnosis_without_a_tile_names_no_blocks():
    kernel = seed_kernel("v0")
    plan = plan_case(kernel, Shape(4, 4, 4), arch_limits("sm_90"))
    expected = np.ones((4, 4))
    output = np.ones((4, 4), np.float32)
    output[2, 1] = 3.0
    verdict = compare(output, expected, rel_tolerance=1e-5)
    report = diagnose_output(verdict, output, expected, plan)
    assert report["first_mismatches"] == [{"row": 2, "col": 1, "expected": 1.0, "got": 3.0, "kind": "wrong"}]
    assert report["summary"] == "1 element wrong at row 2, column 1; every other element right"


def _verdict_of(output, expected, tolerance=1e-5, **options):
    output = np.asarray(output, np.float32)
    return compare(output, expected, rel_tolerance=tolerance, **options), output


def test_full_rows_and_columns_inside_c_are_not_its_edges():
    mask = np.zeros((200, 136), bool)
    mask[100] = True
    mask[:, 70] = True
    assert describe_region(mask, "unwritten", (64, 64)) == ("335 elements unwritten: rows 100 = block row 1 and "
                                                           "columns 70 = block column 1, every element of each")
    column = np.zeros((1024, 800), bool)
    column[::2, 600] = True
    assert "columns 600," in describe_region(column, "wrong")
    assert describe_region(np.ones((1, 1), bool), "unwritten") == "1 element unwritten at row 0, column 0"


def test_nan_and_infinity_are_named_apart_from_wrong_values():
    expected = np.ones((8, 8))
    output = np.ones((8, 8))
    output[5, 7] = np.nan
    output[2, 2] = 9.0
    verdict, output = _verdict_of(output, expected)
    summary = diagnose_output(verdict, output, expected)["summary"]
    assert summary == ("1 element NaN or infinite at row 5, column 7; 1 element wrong at row 2, column 2; "
                       "every other element right")


def test_a_spread_error_and_the_elements_around_a_named_one_are_called_off_not_right():
    rng = np.random.default_rng(1)
    expected = rng.uniform(-1, 1, (64, 64))
    spread = expected * 1.0005                                     # every element off by 5e-4: no element 10x off
    verdict, output = _verdict_of(spread, expected, 2e-4)
    assert verdict.wrong == 0
    assert diagnose_output(verdict, output, expected)["summary"].startswith(
        "no element is 10x the tolerance off, but the relative Frobenius error 5.00e-04 exceeds the tolerance 2.0e-04")
    spread[3, 3] = 40.0
    verdict, output = _verdict_of(spread, expected, 2e-4)
    summary = diagnose_output(verdict, output, expected)["summary"]
    assert summary.startswith("1 element wrong at row 3, column 3; the other elements are off too: their relative "
                              "Frobenius error is 5.00e-04")


def test_an_absolute_tolerance_exceeded_is_named_with_its_element():
    expected = np.ones((8, 8))
    output = np.ones((8, 8))
    output[3, 4] += 5e-6
    verdict, output = _verdict_of(output, expected, abs_tolerance=1e-6)
    assert verdict.status == "FAIL" and verdict.wrong == 0
    assert diagnose_output(verdict, output, expected)["summary"] == (
        "the largest absolute error, 5.01e-06 at row 3, column 4, exceeds the absolute tolerance 1.0e-06")


def test_padding_written_is_named():
    expected = np.ones((4, 4))
    verdict, output = _verdict_of(np.ones((4, 4)), expected)
    verdict.padding_written, verdict.status = 5, "FAIL"
    assert diagnose_output(verdict, output, expected)["summary"].startswith("5 elements written into C's padding")


def test_a_transposed_or_scaled_c_is_recognised():
    rng = np.random.default_rng(2)
    expected = rng.uniform(-1, 1, (48, 48))
    verdict, output = _verdict_of(expected.T, expected)
    assert diagnose_output(verdict, output, expected)["summary"].startswith("C holds the product transposed")
    verdict, output = _verdict_of(2 * expected, expected)
    assert diagnose_output(verdict, output, expected)["summary"].startswith("every element is the product times 2 ")


def test_a_batch_is_described_matrix_by_matrix_with_its_own_blocks():
    kernel = seed_kernel("v4")
    plan = plan_case(kernel, Shape(100, 64, 8), arch_limits("sm_90"))
    rng = np.random.default_rng(3)
    expected = rng.uniform(-1, 1, (300, 64))                      # three matrices of 100 x 64, stacked
    output = expected.copy()
    output[100:164, 0:64] = np.array(POISON_WORD, np.uint32).view(np.float32)   # matrix 1's first block row
    verdict, output = _verdict_of(output, expected)
    report = diagnose_output(verdict, output, expected, plan, matrices=3)
    assert report["summary"].startswith("matrix 1: 4096 elements unwritten: rows 0-63 = block row 0, every column")
    assert report["first_mismatches"][0] == {"row": 0, "col": 0, "expected": float(expected[100, 0]), "got": None,
                                             "kind": "unwritten", "matrix": 1, "block": [0, 0], "thread": [0, 0]}
    swapped = expected.copy()
    swapped[100:200] = expected[0:100]                            # matrix 1 computed from matrix 0's operands
    verdict, output = _verdict_of(swapped, expected)
    assert "matrix 1 holds matrix 0's product" in diagnose_output(verdict, output, expected, plan, matrices=3)[
        "summary"]


def test_nearly_all_of_c_is_named_by_the_few_elements_left():
    mask = np.ones((96, 80), bool)
    mask[94, 42] = False
    assert describe_region(mask, "wrong") == "7679 elements wrong: all but 1 (row 94, column 42)"
