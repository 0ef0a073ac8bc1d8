"""A dispatch entry's ``params:`` gives each param one value of a kind params: take; a value that is not (a
number with a decimal point, a list, a mapping, nothing, a number beyond 64 bits) is refused naming the param and the
value it got, at its line in the spec."""

import pytest

from driver_gemm.cli.exit_codes import EXIT_USAGE
from driver_gemm.cli.main import main
from driver_gemm.errors import SpecError
from driver_gemm.specfile import load_spec

from test_spec import write

SPEC = """\
shapes: [[64, 64, 64], [128, 128, 128]]
kernels:
  - name: v4
    source: ../kernels/04_coarsen_2d.cu
    function: sgemm_coarsen_2d
    params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}
    block: [BN / TN, BM / TM]
    grid: [ceil(N / BN), ceil(M / BM)]
dispatch:
  v4:
    - {shape: 128x128x128, params: {BK: 8}}
    - shape: 64x64x64
      params:
        BK: 8
        BM: VALUE
"""

ENTRY_PARAM_LINE = 15     # the line of "BM: VALUE" above


@pytest.mark.parametrize("value, said", [
    ("32.0", "BM is 32.0, a number with a decimal point"),
    ("[32, 64]", "BM is a list of 2 ([32, 64])"),
    ("{a: 1}", "BM is a mapping"),
    ("~", "BM is nothing (null)"),
    ("123456789012345678901234567890", "BM is 123456789012345678901234567890, beyond the 64-bit whole numbers"),
])
def test_an_entry_param_that_is_not_one_value_is_refused_naming_the_param_and_its_value(tmp_path, value, said):
    path = write(tmp_path, SPEC.replace("VALUE", value))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    error = caught.value
    assert said in error.message
    assert error.field == "dispatch.v4[1].params.BM"
    assert error.where == f"{path}:{ENTRY_PARAM_LINE}"


def test_a_whole_float_is_refused_with_the_number_to_write_and_exit_2(tmp_path, capsys):
    path = write(tmp_path, SPEC.replace("VALUE", "32.0"))
    assert main(["plan", str(path), "--arch", "sm_90"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{path}:{ENTRY_PARAM_LINE}: dispatch.v4[1].params.BM: BM is 32.0" in err and "write 32" in err


def test_one_value_of_each_kind_is_taken(tmp_path):
    spec = load_spec(write(tmp_path, SPEC.replace("VALUE", "32")))
    assert dict(spec.dispatch["v4"].entries[1].params) == {"BK": 8, "BM": 32}
