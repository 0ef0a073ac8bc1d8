"""What a rig meets when it calls the library wrongly, or sends its errors across processes: a DriverGemmError
naming what was wrong and where, of the kind (TypeError, ValueError) the docs promise."""

import dataclasses
import pickle
from types import MappingProxyType

import pytest

import driver_gemm as dg
from conftest import ROOT, plugin_args
from driver_gemm.cuda.compile import Cubin
from driver_gemm.cuda.interop import ArrayExport, array_view
from driver_gemm.cuda.occupancy import arch_limits, occupancy
from driver_gemm.cuda.resources import KernelResources
from driver_gemm.errors import (ArgumentError, CudaError, DriverGemmError, SpecError, WrongArgumentType,
                                WrongArgumentValue)
from driver_gemm.measure.cublaslt import CublasLtUnsupported
from driver_gemm.planning.buffer_plans import QuantizedFillFailed
from driver_gemm.results.records import OccupancyRecord
from driver_gemm.tune.strategies import Budget, BudgetError, make_strategy, parse_budget

SEED = ROOT / "specs" / "seed.yaml"
RESULTS = ROOT / "tests" / "data" / "results" / "seed-h200.json"


@pytest.mark.parametrize("error, fields", [
    (CudaError("cuLaunchKernel(sgemm)", "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access", 700, True),
     ("call", "name", "description", "code", "sticky")),
    (CublasLtUnsupported("fp8 x fp8", "no algorithm"), ("label", "reason")),
    (QuantizedFillFailed("B_scales", "its builder failed", hint="look at the builder"), ("buffer", "hint")),
    (SpecError("must be a number", where="spec.yaml:3", field="shapes[0]", hint="give one"),
     ("message", "where", "field", "hint")),
])
def test_an_error_crosses_a_process_boundary_with_its_fields(error, fields):
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and str(back) == str(error)
    assert all(getattr(back, name) == getattr(error, name) for name in fields)


def test_an_instance_not_compiled_is_named_with_those_the_image_holds():
    cubin = Cubin(image=b"", arch="sm_90", lowered_names={"sgemm_smem_tiles<32>": "_Z16sgemm_smem_tilesILi32EEv"},
                  resources={}, log="", options=(), nvrtc_version=(13, 1))
    for call in (cubin.symbol, cubin.resources_of, cubin.kernel_image):
        with pytest.raises(WrongArgumentValue, match=r"no instance 'sgemm_smem_tiles<16>' in this nvrtc image for "
                                                     r"sm_90; it holds sgemm_smem_tiles<32>"):
            call("sgemm_smem_tiles<16>")
    assert cubin.symbol("sgemm_smem_tiles<32>") == "_Z16sgemm_smem_tilesILi32EEv"


@pytest.mark.parametrize("data", [None, "shapes: []", [("shapes", [])]])
def test_spec_from_dict_given_no_mapping_is_a_type_error_naming_the_argument(data):
    with pytest.raises(TypeError, match="spec_from_dict: data: a spec as a mapping") as refused:
        dg.spec_from_dict(data)
    assert isinstance(refused.value, WrongArgumentType) and isinstance(refused.value, SpecError)


def test_spec_from_dict_reads_a_read_only_mapping():
    entry = {"name": "v2", "source": str(ROOT / "kernels" / "02_smem_tiles.cu"), "function": "sgemm_smem_tiles",
             "params": MappingProxyType({"TILE": 32}), "block": ["TILE", "TILE"],
             "grid": ["ceil(N / TILE)", "ceil(M / TILE)"]}
    spec = dg.spec_from_dict(MappingProxyType({"shapes": [[64, 64, 64]], "kernels": [entry]}))
    assert spec.kernels[0].params == {"TILE": 32}


@pytest.mark.parametrize("make", [lambda: Budget(seconds=-1), lambda: Budget(seconds=float("nan")),
                                  lambda: Budget(configurations=0), lambda: make_strategy("bogus")])
def test_a_budget_or_strategy_no_search_has_is_a_value_error(make):
    with pytest.raises(ValueError) as refused:
        make()
    assert isinstance(refused.value, BudgetError)


def test_a_strategy_named_by_no_text_is_a_type_error():
    with pytest.raises(WrongArgumentType, match=r"make_strategy: name is a strategy's name"):
        make_strategy(["random"])


@pytest.mark.parametrize("text, message", [("5m,1h", "two time limits"), ("40,50", "two configuration counts"),
                                           ("soon", "expected seconds like 300s")])
def test_a_budget_read_from_text_says_what_is_wrong_with_it(text, message):
    with pytest.raises(BudgetError, match=message):
        parse_budget(text)


class PathOfNoText:
    def __fspath__(self):
        return 7


def test_a_path_object_that_gives_no_path_is_named_at_the_argument():
    with pytest.raises(WrongArgumentType, match=r"load_spec: path is a path .* PathOfNoText whose __fspath__"):
        dg.load_spec(PathOfNoText())


def test_a_specs_text_given_for_its_path_is_said_to_be_text():
    text = SEED.read_text()
    with pytest.raises(WrongArgumentValue) as refused:
        dg.load_spec(text)
    message = str(refused.value)
    assert message.startswith("load_spec: path holds a line break") and "parse_spec" in message
    assert "\n" not in message and len(message) < 400


def test_a_place_holding_a_line_break_keeps_the_hint_after_the_cause():
    error = SpecError("cannot read spec\nsecond line of details", where="name: x\nshapes: []", hint="fix it")
    assert str(error) == "name: x\nshapes: []: cannot read spec\n  hint: fix it\nsecond line of details"


@pytest.mark.parametrize("changes, message", [
    ({"registers": "32"}, r"KernelResources\.registers: a whole number, got '32' \(str\)"),
    ({"registers": None}, r"KernelResources\.registers: a whole number, got None"),
    ({"barriers": 1.5}, r"KernelResources\.barriers: a whole number, got 1\.5"),
    ({"registers": -1}, r"KernelResources\.registers: at least 0, got -1"),
    ({"spill_load_bytes": "x"}, r"KernelResources\.spill_load_bytes: a whole number or None"),
])
def test_hand_made_resources_are_held_to_what_ptxas_reports(changes, message):
    with pytest.raises(DriverGemmError, match=message):
        KernelResources(**changes)
    assert KernelResources(spill_store_bytes=None, spill_load_bytes=None).spills_known is False


def test_a_plans_and_a_records_occupancy_hash():
    figures = occupancy(arch_limits("sm_90"), 256, 32, 0, 0)
    assert hash(figures) == hash(dataclasses.replace(figures)) and {figures} == {figures}
    record = OccupancyRecord.from_json(figures.as_dict() | {"newer_key": 1})
    assert {record: 1}[OccupancyRecord.from_json(figures.as_dict() | {"newer_key": 1})] == 1
    assert record.to_json()["limits"] == dict(figures.limits)


def test_a_run_a_rig_assembled_is_refused_at_the_entry_of_the_wrong_kind(tmp_path):
    run = dg.load_results(RESULTS)
    shaped = dataclasses.replace(run, cases=[run.cases[0], dataclasses.replace(run.cases[1], shape=(1, 2, 3))])
    with pytest.raises(WrongArgumentType, match=r"cases\[1\]\.shape is a Shape, got \(1, 2, 3\) \(tuple\)"):
        shaped.write_json(tmp_path / "shaped.json")
    junk = dataclasses.replace(run, cases=[run.cases[0], "v0"])
    with pytest.raises(WrongArgumentType, match=r"cases\[1\] is a CaseResult, got 'v0' \(str\)"):
        junk.write_json(tmp_path / "junk.json")
    assert not list(tmp_path.iterdir())


class InterfaceThatRaises:
    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("context is destroyed")


class DlpackOf:
    def __init__(self, export):
        self.export = export

    def __dlpack__(self, stream=None):
        return self.export.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.export.__dlpack_device__()


def test_an_array_whose_interface_cannot_be_read_says_what_reading_it_raised():
    with pytest.raises(ArgumentError, match="reading its __cuda_array_interface__ raised RuntimeError: context is "
                                            "destroyed"):
        array_view(InterfaceThatRaises())


def test_a_dlpack_device_id_below_0_is_named_as_the_operands():
    holder = DlpackOf(ArrayExport(0x7F0000001000, (4, 4), "float32", device_id=-1))
    with pytest.raises(ArgumentError, match="its DLPack device id is -1: not a GPU's ordinal"):
        array_view(holder)


def test_recorded_results_of_another_spec_say_whose_run_lacks_the_case(pytester):
    result = pytester.runpytest(*plugin_args(), "--driver-gemm-spec=fast", f"--driver-gemm-results={RESULTS}",
                                "-k", "v5 and 1024x512x1024")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{RESULTS} (a run of spec 'seed', not of 'fast') holds no result for this case*"])

