"""plan_case refuses scalars and SM counts no caller means, naming the argument, as a DriverGemmError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import driver_gemm as dg
from driver_gemm.errors import DriverGemmError

SEED = Path(__file__).resolve().parents[1] / "specs" / "seed.yaml"


@pytest.fixture(scope="module")
def kernel():
    return dg.load_spec(SEED).kernels[0]


@pytest.mark.parametrize("scalars", [2.5, "alpha", [("alpha", 1.0)], {"alpha": "1"}, {"alpha": True},
                                     {"alpha": np.True_}, {1: 1.0}])
def test_scalars_that_are_not_names_to_numbers_are_refused(kernel, scalars):
    with pytest.raises(DriverGemmError, match="plan_case: scalars map names to numbers") as info:
        dg.plan_case(kernel, dg.Shape(64, 64, 64), dg.arch_limits("sm_90"), scalars=scalars)
    assert isinstance(info.value, TypeError)


def test_numpy_numbers_are_taken_as_scalars(kernel):
    plan = dg.plan_case(kernel, dg.Shape(64, 64, 64), dg.arch_limits("sm_90"),
                        scalars={"alpha": np.float32(2), "beta": np.int64(0)})
    assert plan.scalars == {"alpha": 2.0, "beta": 0.0}
    assert all(type(value) is float for value in plan.scalars.values())


@pytest.mark.parametrize("sm_count", [0, -1, 1 << 40])
def test_an_sm_count_out_of_range_is_a_library_error(kernel, sm_count):
    with pytest.raises(DriverGemmError, match="plan_case: sm_count is 1 to") as info:
        dg.plan_case(kernel, dg.Shape(64, 64, 64), dg.arch_limits("sm_90"), sm_count=sm_count)
    assert isinstance(info.value, ValueError)
