"""One limit on M, N and K: what the spec reader takes, a results file can hold."""
import json
from pathlib import Path

import pytest

import driver_gemm as dg
from driver_gemm.results.document_checks import SCHEMA_PATH
from driver_gemm.specfile.limits import MAX_DIMENSION

PROJECT = Path(__file__).resolve().parents[1]


def test_the_results_schema_holds_every_dimension_the_spec_reader_takes():
    shape = json.loads(SCHEMA_PATH.read_text())["$defs"]
    dimensions = next(value["properties"] for value in shape.values()
                      if isinstance(value, dict) and set(value.get("required", ())) == {"M", "N", "K"})
    assert {dimensions[name]["maximum"] for name in "MNK"} == {MAX_DIMENSION}


def _spec(m: int) -> dict:
    kernel = {"name": "k", "source": "kernels/00_naive_row_on_x.cu", "function": "sgemm_naive_row_on_x",
              "block": [32, 32], "grid": ["ceil(N / 32)", "ceil(M / 32)"]}
    return {"name": "s", "kernels": [kernel], "shapes": [[m, 1, 1]]}


def test_a_spec_shape_at_the_limit_is_read_and_one_past_it_refused():
    spec = dg.spec_from_dict(_spec(MAX_DIMENSION), base_dir=PROJECT)
    assert spec.shapes[0].M == MAX_DIMENSION
    with pytest.raises(dg.SpecError, match="shapes"):
        dg.spec_from_dict(_spec(MAX_DIMENSION + 1), base_dir=PROJECT)
