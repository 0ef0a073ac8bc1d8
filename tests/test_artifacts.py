import numpy as np
import pytest

from driver_gemm.results.artifacts import NONFINITE, RIGHT, UNWRITTEN, WRONG, category_map, downsample, save_error_map
from driver_gemm.results.records import CaseResult
from driver_gemm.specfile.model import Shape
from driver_gemm.measure.verify import POISON_WORD, compare


def test_categories_and_their_precedence():
    shape = (4, 4)
    masks = {name: np.zeros(shape, bool) for name in ("unwritten", "wrong", "nonfinite")}
    masks["wrong"][0, 0] = masks["nonfinite"][1, 1] = masks["unwritten"][2, 2] = True
    categories = category_map(masks)
    assert categories[0, 0] == WRONG and categories[1, 1] == NONFINITE and categories[2, 2] == UNWRITTEN
    assert categories[3, 3] == RIGHT


def test_downsample_keeps_the_worst_element_of_each_cell():
    categories = np.zeros((3000, 10), np.uint8)
    categories[2999, 9] = UNWRITTEN
    small, step = downsample(categories, limit=1000)
    assert step == 3 and small.shape == (1000, 4) and small[-1, -1] == UNWRITTEN and small.sum() == UNWRITTEN
    same, step = downsample(categories[:10], limit=1000)
    assert step == 1 and same.shape == (10, 10)


def test_error_map_png(tmp_path):
    pytest.importorskip("matplotlib")
    expected = np.ones((130, 70))
    output = np.ones((130, 70), np.float32)
    output[:, 68:] = np.array(POISON_WORD, np.uint32).view(np.float32)
    verdict = compare(output, expected, rel_tolerance=1e-5)
    case = CaseResult(kernel="v4[BM=64,BN=64]", name="v4", shape=Shape(130, 70, 8), status="FAIL")
    path = save_error_map(verdict, case, tmp_path / "maps", tile=(64, 64))
    assert path == tmp_path / "maps" / "v4_BM_64_BN_64_130x70x8.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
