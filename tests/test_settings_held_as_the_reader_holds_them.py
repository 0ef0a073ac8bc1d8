"""Settings and specs built or copied in Python are held to the spec reader's rules, in the reader's words."""

import dataclasses

import pytest

import driver_gemm as dg
from conftest import ROOT
from driver_gemm.errors import SpecError, WrongArgumentValue
from driver_gemm.specfile import limits

SEED = ROOT / "specs" / "seed.yaml"


def reader_refusal(verify: dict) -> str:
    with pytest.raises(SpecError) as refused:
        dg.spec_from_dict({"shapes": [[64, 64, 64]], "verify": verify, "kernels": [{
            "name": "v2", "source": str(ROOT / "kernels" / "02_smem_tiles.cu"), "function": "sgemm_smem_tiles",
            "params": {"TILE": 32}, "block": ["TILE", "TILE"], "grid": ["ceil(N / TILE)", "ceil(M / TILE)"]}]})
    return refused.value.message


@pytest.mark.parametrize("field, verify", [("rel_tolerance", {"tolerance": 2.0}),
                                           ("tf32_rel_tolerance", {"tf32_tolerance": 5.0})])
def test_a_hand_made_tolerance_that_passes_a_c_of_zeros_is_refused_in_the_readers_words(field, verify):
    value = next(iter(verify.values()))
    with pytest.raises(ValueError) as refused:
        dg.VerifySettings(**{field: value})
    assert isinstance(refused.value, WrongArgumentValue)
    assert f"VerifySettings.{field}: " in str(refused.value)
    assert reader_refusal(verify) in str(refused.value)
    # with an absolute bound the elements are checked, as the reader takes {rel: ..., abs: ...}
    assert getattr(dg.VerifySettings(**{field: value}, abs_tolerance=1e-3), field) == value


def test_a_copy_of_a_spec_keeps_a_shape_given_twice_once_as_the_reader_does():
    spec = dg.load_spec(SEED)
    twice = dataclasses.replace(spec, shapes=(spec.shapes[0], spec.shapes[1], spec.shapes[0]))
    assert twice.shapes == (spec.shapes[0], spec.shapes[1])
    assert len(dg.cases_of(twice)) == len(dg.cases_of(dataclasses.replace(spec, shapes=spec.shapes[:2])))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_copy_of_a_spec_with_a_scalar_that_is_not_finite_is_refused_at_the_scalar(value):
    spec = dg.load_spec(SEED)
    with pytest.raises(ValueError, match=r"Spec\.scalars\.alpha: must be a finite number"):
        dataclasses.replace(spec, scalars={**spec.scalars, "alpha": value})
    assert dataclasses.replace(spec, scalars={**spec.scalars, "alpha": 10 ** 30}).scalars["alpha"] == 10 ** 30


def test_a_copy_of_a_spec_keeps_its_dimensions_within_the_readers_bound():
    spec = dg.load_spec(SEED)
    with pytest.raises(WrongArgumentValue, match=r"Spec\.shapes\[0\]: .*MAX_DIMENSION"):
        dataclasses.replace(spec, shapes=(dg.Shape(limits.MAX_DIMENSION + 1, 1, 1),))
    assert dataclasses.replace(spec, shapes=(dg.Shape(limits.MAX_DIMENSION, 1, 1),)).shapes[0].M == limits.MAX_DIMENSION
