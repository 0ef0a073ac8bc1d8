"""Shape-dependent dispatch: the table built from winners, its spec field, and the choice for any shape."""

import pytest
import yaml

from driver_gemm.errors import SpecError
from driver_gemm.results.records import DispatchChoice, RunResult
from driver_gemm.specfile.model import Shape, parse_shape_text
from driver_gemm.specfile import load_spec, spec_from_dict
from driver_gemm.tune.dispatch_table import DispatchEntry, DispatchTable, build_dispatch, parse_dispatch, select_kernel
from driver_gemm.tune.winners import dispatch_spec, pick_winners

from test_spec import write
from test_tune import BK8, BK16, LARGE, SMALL, SWEEP, case

BIG, SMALL_TILE = {"BM": 128, "BK": 16}, {"BM": 32, "BK": 8}


def table():
    return DispatchTable("v8", (DispatchEntry(Shape(4096, 4096, 4096), BIG),
                                DispatchEntry(Shape(1024, 512, 1024), SMALL_TILE)))


@pytest.mark.parametrize("shape, params", [
    (Shape(4096, 4096, 4096), BIG),            # exact
    (Shape(1024, 512, 1024), SMALL_TILE),      # exact
    (Shape(8192, 8192, 8192), BIG),            # beyond the largest: the largest
    (Shape(256, 256, 256), SMALL_TILE),        # below the smallest: the smallest
    (Shape(2048, 2048, 2048), BIG),            # log distance: 0.48 * 3 from 4096^3 against 0, 1.9, 1.9 ... ours
    (Shape(1500, 1000, 1500), SMALL_TILE),
])
def test_nearest_in_log_space(shape, params):
    assert table().select(shape).params == params


def test_exact_then_ranges_then_nearest():
    ranged = DispatchTable("v8", (
        DispatchEntry(Shape(4096, 4096, 4096), BIG),
        DispatchEntry(Shape(1024, 512, 1024), SMALL_TILE, when={"M": (None, 3000), "N": (1, 3000)})))
    assert ranged.select(Shape(2900, 2900, 8192)).params == SMALL_TILE      # nearer 4096^3, but in the range
    assert ranged.select(Shape(3001, 2900, 8192)).params == BIG
    assert ranged.select(Shape(4096, 4096, 4096)).params == BIG
    tie = DispatchTable("k", (DispatchEntry(Shape(100, 100, 100), {"A": 1}), DispatchEntry(Shape(400, 400, 400), {"A": 2})))
    assert tie.select(Shape(200, 200, 200)).params == {"A": 1}               # equal distance: the earlier


def test_parse_dispatch_reads_what_is_written_and_names_mistakes():
    document = {"v8": table().as_document() + [{"shape": "512x512x512", "params": {"BM": 64}, "when": {"K": [1, None]}}]}
    parsed = parse_dispatch(yaml.safe_load(yaml.safe_dump(document)), kernel_names=["v8"])
    assert parsed["v8"].entries[:2] == table().entries
    assert parsed["v8"].entries[2].shape == Shape(512, 512, 512) and parsed["v8"].entries[2].when == {"K": (1, None)}
    lines = {"dispatch.v8[0].params": "spec.yaml:12"}
    cases = [
        ({"v9": [{"shape": [1, 1, 1], "params": {}}]}, "dispatch.v9", "no kernel named 'v9'"),
        ({"v8": []}, "dispatch.v8", "non-empty list"),
        ({"v8": [{"shape": [1, 1], "params": {}}]}, "dispatch.v8[0].shape", "[M, N, K]"),
        ({"v8": [{"shape": [1, 1, 1], "params": {"BM": 1.5}}]}, "spec.yaml:12: dispatch.v8[0].params", "whole numbers"),
        ({"v8": [{"shape": [1, 1, 1]}]}, "dispatch.v8[0]", "missing required field 'params'"),
        ({"v8": [{"shape": [1, 1, 1], "params": {}, "when": {"Q": [1, 2]}}]}, "dispatch.v8[0].when.Q", "use M, N or K"),
        ({"v8": [{"shape": [1, 1, 1], "params": {}, "when": {"M": [9, 2]}}]}, "dispatch.v8[0].when.M", "above high"),
        ({"v8": [{"shape": [1, 1, 1], "param": {}}]}, "dispatch.v8[0]", "unknown field 'param'"),
    ]
    for node, place, message in cases:
        with pytest.raises(SpecError) as raised:
            parse_dispatch(node, kernel_names=["v8"], where=lines.get)
        assert place in str(raised.value) and message in str(raised.value)


WIDE_FILLS = "wave_efficiency(M, N, 128, 256, 132) >= 0.8"


def test_a_condition_in_when_picks_by_how_well_the_tiles_fill_their_waves():
    # 128 x 256 tiles where they come near whole waves of 132 SMs, 64 x 64 ones elsewhere past M = 128
    document = {"v8": [
        {"shape": [4096, 4096, 4096], "params": {"BM": 128}, "when": {"M": [129, None], "if": WIDE_FILLS}},
        {"shape": [512, 512, 512], "params": {"BM": 64}, "when": {"M": [129, None]}}]}
    parsed = parse_dispatch(yaml.safe_load(yaml.safe_dump(document)), kernel_names=["v8"])["v8"]
    assert parsed.as_document() == document["v8"]                              # written back as read
    picks = {label: parsed.choose(parse_shape_text(label)) for label in
             ("2048x2048x64", "2048x3072x64", "2048x4096x64", "128x4096x64", "4096x4096x4096")}
    assert picks == {"2048x2048x64": (0, "when"),      # 128 tiles: 0.97 of a wave
                     "2048x3072x64": (1, "when"),      # 192 tiles: 0.73 of two waves
                     "2048x4096x64": (0, "when"),      # 256 tiles: 0.97 of two
                     "128x4096x64": (1, "nearest"),    # M under both ranges: the nearest, 512^3
                     "4096x4096x4096": (0, "exact")}


@pytest.mark.parametrize("condition, message", [
    ("BM >= 64", "reads BM: a dispatch condition reads only M, N and K"),
    ("M * N", "is a number, not a condition"),
    ("wave_efficiency(M)", "wave_efficiency() takes 5 arguments"),
    ("M >", "cannot parse"),
    (64, "must be a condition over M, N and K as text, got"),
    ("not M", "is no comparison"),                 # a size read as true or false holds for every shape
    ("M and N", "is no comparison"),
    ("M >= 128 and N", "is no comparison"),
    ("not (M >= 128) or K", "is no comparison"),
])
def test_a_condition_that_cannot_be_read_is_refused_naming_its_field(condition, message):
    node = {"v8": [{"shape": [1, 1, 1], "params": {}, "when": {"if": condition}}]}
    with pytest.raises(SpecError) as raised:
        parse_dispatch(node, kernel_names=["v8"])
    assert "dispatch.v8[0].when.if" in str(raised.value) and message in str(raised.value)


def test_a_condition_that_fails_on_a_shape_names_the_entry_and_the_shape():
    node = {"v8": [{"shape": [1, 1, 1], "params": {}, "when": {"if": "M // (N - 64) > 1"}}]}
    table = parse_dispatch(node, kernel_names=["v8"], where={"dispatch.v8[0].when.if": "spec.yaml:9"}.get)["v8"]
    assert table.choose(Shape(256, 128, 8)) == (0, "when")
    with pytest.raises(SpecError) as raised:
        table.choose(Shape(256, 64, 8))
    assert "spec.yaml:9: dispatch.v8[0].when.if" in str(raised.value) and "division by zero" in str(raised.value)
    assert "256x64x8" in str(raised.value)


def _recorded_sweep(spec) -> RunResult:
    """A recorded run of the sweep: BK 8 wins the small shape, BK 16 the large one."""
    run = RunResult(spec="s", spec_path=None, cases=[
        case(BK8, SMALL, [1.0, 1.01, 0.99]), case(BK16, SMALL, [1.5, 1.52, 1.49]),
        case(BK8, LARGE, [2.5, 2.6, 2.4]), case(BK16, LARGE, [2.0, 2.1, 1.9])])
    for c in run.cases:
        c.params = dict(next(k for k in spec.kernels if k.label == c.kernel).params)
    return run


def test_built_from_winners_and_applied_to_a_kernel(tmp_path):
    spec = load_spec(write(tmp_path, SWEEP))
    winners = pick_winners(_recorded_sweep(spec))
    tables = build_dispatch(winners)
    assert set(tables) == {"v4"}
    v4 = tables["v4"]
    assert select_kernel(spec.kernels[0], v4, SMALL).label == BK8
    assert select_kernel(spec.kernels[0], v4, Shape(100, 100, 100)).label == BK16    # nearer 128^3
    assert select_kernel(spec.kernels[0], v4, Shape(32, 32, 16)).label == BK8

    out = dispatch_spec(spec, winners, tmp_path / "specs" / "d.yaml")
    document = yaml.safe_load(out.read_text())
    dispatch = parse_dispatch(document.pop("dispatch"), kernel_names=[k["name"] for k in document["kernels"]])
    reloaded = spec_from_dict(document, base_dir=out.parent)
    assert [k.name for k in reloaded.kernels] == ["v4"]
    assert select_kernel(reloaded.kernels[0], dispatch["v4"], LARGE).label == BK16
    with pytest.raises(SpecError, match="do not have"):
        select_kernel(reloaded.kernels[0], DispatchTable("v4", (DispatchEntry(SMALL, {"XX": 1}),)), SMALL)


def _winners_dispatch_spec(tmp_path):
    spec = load_spec(write(tmp_path, SWEEP))
    return dispatch_spec(spec, pick_winners(_recorded_sweep(spec)), tmp_path / "specs" / "d.yaml")


def test_a_written_dispatch_spec_loads_and_runs_each_shape_with_its_entry(tmp_path):
    from driver_gemm.cuda.occupancy import arch_limits
    from driver_gemm.planning.build import launch_plans
    from driver_gemm.planning.cases import cases_of

    path = _winners_dispatch_spec(tmp_path)
    spec = load_spec(path).select(shapes=["64x32x16", "128x128x128", "100x100x100"])
    assert set(spec.dispatch) == {"v4"}
    kernels = {c.shape.label: c for c in cases_of(spec) if not c.is_baseline}
    assert kernels["64x32x16"].kernel.label == BK8 and kernels["64x32x16"].dispatch.rule == "exact"
    assert kernels["128x128x128"].kernel.label == BK16
    assert kernels["100x100x100"].kernel.label == BK16
    assert kernels["100x100x100"].dispatch == DispatchChoice(entry=1, shape="128x128x128", rule="nearest")
    # each case's chosen configuration is what gets planned (and compiled): the plans are keyed by it
    plans = launch_plans(spec, arch_limits("sm_90"))
    assert {case.key for case in kernels.values()} <= set(plans)
    from driver_gemm.planning.cases import new_record
    from driver_gemm.status import Status
    record = new_record(kernels["100x100x100"], Status.PASS)
    assert record.dispatch.rule == "nearest" and record.as_dict()["dispatch"]["entry"] == 1


@pytest.mark.parametrize("edit, field, message", [
    (lambda d: d["dispatch"].update(v9=d["dispatch"]["v4"]), "dispatch.v9", "no kernel named 'v9'"),
    (lambda d: d["dispatch"]["v4"][1]["params"].update(XX=1), "dispatch.v4[1].params", "XX, which kernel v4"),
    (lambda d: d["dispatch"]["v4"][0].update(shape=[1, 2]), "dispatch.v4[0].shape", "must be"),
    (lambda d: d["kernels"][0]["params"].update(BK=[8, 16]), "dispatch.v4", "kernel v4 sweeps 2 configurations"),
])
def test_dispatch_mistakes_name_the_file_line_and_field(tmp_path, edit, field, message):
    path = _winners_dispatch_spec(tmp_path)
    document = yaml.safe_load(path.read_text())
    edit(document)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    text = str(raised.value)
    assert message in text and field in text and f"{path}:" in text
    line = int(text.split(f"{path}:")[1].split(":")[0])
    assert line > path.read_text().splitlines().index("dispatch:")      # inside the dispatch field


def test_a_condition_of_comparisons_joined_by_and_or_not_is_read():
    node = {"v8": [{"shape": [1, 1, 1], "params": {}, "when": {"if": "not (M >= 128) or (N > 4 and K % 8 == 0)"}}]}
    entry = parse_dispatch(node, kernel_names=["v8"])["v8"].entries[0]
    assert entry.contains(Shape(64, 1, 1)) and entry.contains(Shape(256, 8, 16))
    assert not entry.contains(Shape(256, 8, 9))


def _typed_params_spec(tmp_path, entries: str, params: str = "{TILE: 8, SWAP: true, T: float}"):
    arguments = "float* A, float* B, float* C, int M, int N, int K"
    (tmp_path / "k.cu").write_text(f"template <int TILE, bool SWAP, typename T> __global__ void g({arguments}) {{}}\n"
                                   f'extern "C" __global__ void p({arguments}) {{}}\n')
    path = tmp_path / "spec.yaml"
    path.write_text(f"shapes: [[64, 64, 64], [512, 512, 512]]\nkernels:\n"
                    f"  - {{name: kb, source: k.cu, function: g, params: {params}, block: [TILE, TILE],\n"
                    f"     grid: [ceil(N / TILE), ceil(M / TILE)], signature: [A, B, C, M, N, K]}}\n"
                    f"  - {{name: kp, source: k.cu, function: p, block: [8, 8], grid: [8, 8], "
                    f"signature: [A, B, C, M, N, K]}}\n"
                    f"dispatch:\n{entries}")
    return path


def test_dispatch_params_take_every_kind_a_kernels_params_take(tmp_path):
    path = _typed_params_spec(tmp_path, "  kb:\n    - {shape: [64, 64, 64], params: {TILE: 8, SWAP: true, T: double}}\n"
                                        "    - {shape: [512, 512, 512], params: {TILE: 16, SWAP: false}}\n")
    spec = load_spec(path)
    assert spec.dispatch["kb"].entries[0].params == {"TILE": 8, "SWAP": True, "T": "double"}
    from driver_gemm.planning.cases import cases_of
    picked = {case.shape.M: case.kernel.params for case in cases_of(spec) if case.kernel is not None
              and case.kernel.name == "kb"}
    assert picked == {64: {"TILE": 8, "SWAP": True, "T": "double"}, 512: {"TILE": 16, "SWAP": False, "T": "float"}}
    assert picked[64]["SWAP"] is True


@pytest.mark.parametrize("params, message", [
    ("{TILE: [8, 16]}", "no lists"),
    ("{T: delete}", "a C++ keyword"),                     # the kernel's own reader of params: says what is wrong
    ("{TILE: M}", "reads the shape"),
    ("{TILE: 1.5}", "whole numbers"),
])
def test_dispatch_params_are_read_as_the_kernels_params_are(tmp_path, params, message):
    path = _typed_params_spec(tmp_path, f"  kb:\n    - {{shape: [64, 64, 64], params: {params}}}\n")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    assert "dispatch.kb[0].params" in str(raised.value) and message in str(raised.value)


def test_dispatch_params_for_a_kernel_without_params_are_refused_at_the_entry(tmp_path):
    path = _typed_params_spec(tmp_path, "  kp:\n    - {shape: [64, 64, 64], params: {TILE: 8}}\n"
                                        "    - {shape: [512, 512, 512], params: {}}\n")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    text = str(raised.value)
    assert f"{path}:8: dispatch.kp[0].params: sets TILE, which kernel kp does not have" in text
    assert "it has no params" in text
