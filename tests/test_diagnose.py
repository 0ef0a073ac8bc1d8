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
                                 "1 element wrong at row 129, column 3 (block (0, 2))")
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
