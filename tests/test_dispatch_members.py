"""A dispatch table that picks among kernels: an entry naming another kernel of the spec (a member), which then
runs only where its family's table picks it, its rows counted as the family's."""

import pytest
import yaml

from driver_gemm.errors import SpecError
from driver_gemm.planning.cases import cases_of, kernels_of, new_record
from driver_gemm.runners.schedule import Task
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

from test_spec import write

FAMILY = """\
shapes:
  - [64, 32, 16]
  - [128, 128, 128]
  - [256, 256, 256]
kernels:
  - name: v4
    source: ../kernels/04_coarsen_2d.cu
    function: sgemm_coarsen_2d
    params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}
    block: [BN / TN, BM / TM]
    grid: [ceil(N / BN), ceil(M / BM)]
  - name: v2
    source: ../kernels/02_smem_tiles.cu
    function: sgemm_smem_tiles
    params: {TILE: 16}
    block: [TILE, TILE]
    grid: [ceil(N / TILE), ceil(M / TILE)]
  - name: v1
    source: ../kernels/01_naive_col_on_x.cu
    function: sgemm_naive_col_on_x
    block: [32, 32]
    grid: [ceil(M / 32), ceil(N / 32)]
dispatch:
  v4:
    - {shape: [64, 32, 16], kernel: v2, params: {TILE: 32}}
    - {shape: [128, 128, 128], params: {BK: 8}}
    - {shape: [256, 256, 256], kernel: v2, params: {TILE: 16}}
"""


def family_spec(tmp_path, text=FAMILY):
    return load_spec(write(tmp_path, text))


def test_an_entry_naming_a_member_runs_that_kernel_with_its_params(tmp_path):
    spec = family_spec(tmp_path)
    assert spec.dispatch_members == {"v2"}
    by_shape: dict[str, list] = {}
    for case in cases_of(spec):
        if not case.is_baseline:
            by_shape.setdefault(case.shape.label, []).append(case)
    # the member never runs on its own: each shape has the family's case and v1's, nothing more
    assert {shape: [c.label for c in cases] for shape, cases in by_shape.items()} == {
        "64x32x16": ["v2[TILE=32]", "v1"],
        "128x128x128": ["v4[BM=64,BN=64,BK=8,TM=4,TN=4]", "v1"],
        "256x256x256": ["v2[TILE=16]", "v1"],
    }
    member = by_shape["64x32x16"][0]
    assert member.kernel.function == "sgemm_smem_tiles" and member.dispatch.table == "v4"
    assert by_shape["128x128x128"][0].dispatch.table is None
    # the record is the family's row (its name), the label says what ran
    record = new_record(member, Status.PASS)
    assert (record.name, record.kernel, record.source.endswith("02_smem_tiles.cu")) == ("v4", "v2[TILE=32]", True)
    assert record.as_dict()["dispatch"]["table"] == "v4"
    # what is compiled: each configuration once, in the order the shapes first need it
    assert [k.label for k in kernels_of(spec)] == ["v2[TILE=32]", "v1", "v4[BM=64,BN=64,BK=8,TM=4,TN=4]",
                                                    "v2[TILE=16]"]


def test_selecting_a_family_keeps_its_members_and_a_member_alone_runs_everywhere(tmp_path):
    spec = family_spec(tmp_path)
    family = spec.select(["v4"])
    assert [k.name for k in family.kernels] == ["v4", "v2"]
    assert [c.label for c in cases_of(family) if not c.is_baseline] == [
        "v2[TILE=32]", "v4[BM=64,BN=64,BK=8,TM=4,TN=4]", "v2[TILE=16]"]
    alone = spec.select(["v2"])            # without its family, v2 is a kernel like any other
    assert alone.dispatch_members == frozenset()
    assert [c.label for c in cases_of(alone) if not c.is_baseline] == ["v2[TILE=16]"] * 3


def test_a_task_of_a_run_keeps_the_member_its_shapes_need(tmp_path):
    spec = family_spec(tmp_path)
    task = Task((Shape(64, 32, 16),), ("v2[TILE=32]",), 1.0)    # a shape's group of kernels, named by case label
    narrowed = task.spec_of(spec)
    assert [c.label for c in cases_of(narrowed) if not c.is_baseline] == ["v2[TILE=32]"]


def test_the_plan_of_a_member_is_made_for_its_own_launch(tmp_path):
    from driver_gemm.cuda.occupancy import arch_limits
    from driver_gemm.planning.build import launch_plans

    plans = launch_plans(family_spec(tmp_path), arch_limits("sm_90"))
    assert plans["v2[TILE=32]", "64x32x16"].config.grid == (1, 2, 1)           # ceil(32 / 32), ceil(64 / 32): v2's grid
    assert plans["v4[BM=64,BN=64,BK=8,TM=4,TN=4]", "128x128x128"].config.grid == (2, 2, 1)


def _edited(edit):
    document = yaml.safe_load(FAMILY)
    edit(document)
    return yaml.safe_dump(document, sort_keys=False)


@pytest.mark.parametrize("edit, field, message", [
    (lambda d: d["dispatch"]["v4"][0].update(kernel="v9"), "dispatch.v4[0].kernel", "no kernel named 'v9'"),
    (lambda d: d["dispatch"]["v4"][0].update(kernel=7), "dispatch.v4[0].kernel", "must be the name of a kernel"),
    (lambda d: d["dispatch"]["v4"][0]["params"].update(BK=8), "dispatch.v4[0].params", "BK, which kernel v2"),
    (lambda d: d["dispatch"].update(v1=[{"shape": [1, 1, 1], "kernel": "v2", "params": {}}]),
     "dispatch.v1[0].kernel", "picked by the tables of v4 and v1"),
    (lambda d: d["dispatch"].update(v2=[{"shape": [1, 1, 1], "params": {"TILE": 16}}]),
     "dispatch.v4[0].kernel", "has a dispatch table of its own"),
    (lambda d: d["kernels"][1].update(precision="tf32"), "dispatch.v4[0].kernel", "computes another GEMM than v4"),
    (lambda d: d["kernels"][1]["params"].update(TILE=[16, 32]), "dispatch.v4[0].kernel", "kernel v2 sweeps 2 configurations"),
])
def test_member_mistakes_name_the_field(tmp_path, edit, field, message):
    path = write(tmp_path, _edited(edit))
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    text = str(raised.value)
    assert message in text and field in text and f"{path}:" in text


def test_the_suites_bf16_family_runs_v14_on_decode_and_v15_on_large_shapes_against_v13s_vendor_row():
    """v14 and v15 compute v13-bf16-out's GEMM (same types and layout), so their rows share the family's vendor row."""
    from pathlib import Path

    suite = load_spec(Path(__file__).resolve().parents[1] / "specs" / "suite.yaml").select(["v13-bf16-out"])
    assert {"v14-bf16-out", "v15-bf16-out"} <= set(suite.dispatch_members)
    rows = {c.shape.label: c for c in cases_of(suite) if not c.is_baseline}
    assert rows["1x4096x4096"].kernel.name == "v14-bf16-out" and rows["1x4096x4096"].dispatch.table == "v13-bf16-out"
    assert rows["4096x4096x4096"].kernel.name == "v15-bf16-out"
    assert rows["4096x4096x4096"].dispatch.table == "v13-bf16-out"
    assert rows["1024x512x1024"].kernel.name == "v13-bf16-out"
    baselines = {c.shape.label: c.label for c in cases_of(suite) if c.is_baseline}
    for shape in ("1x4096x4096", "4096x4096x4096"):
        assert rows[shape].baseline_label == baselines[shape] == "cublaslt-bf16-NN"


def test_a_plan_says_which_entry_of_its_table_picked_each_dispatched_case_and_by_which_rule(tmp_path):
    from driver_gemm.planning.spec_plan import plan_spec

    text = FAMILY.replace("  - [256, 256, 256]\nkernels:", "  - [256, 256, 256]\n  - [300, 300, 300]\n"
                          "  - [640, 640, 640]\nkernels:")
    text += "    - {shape: [512, 512, 512], params: {BK: 16}, when: {M: [600, null], if: \"N % 64 == 0\"}}\n"
    plans = {(plan.kernel.label, plan.shape.label): plan for plan in plan_spec(family_spec(tmp_path, text),
                                                                                  arch="sm_90").plans}
    picked = {key: [note for note in plan.notes if note.startswith("picked by")] for key, plan in plans.items()}
    assert picked[("v2[TILE=32]", "64x32x16")] == ["picked by v4's dispatch table: entry 0 (64x32x16), the entry of "
                                                   "this very shape"]
    assert picked[("v2[TILE=16]", "300x300x300")] == ["picked by v4's dispatch table: entry 2 (256x256x256), the "
                                                      "nearest of its shapes"]
    assert picked[("v4[BM=64,BN=64,BK=16,TM=4,TN=4]", "640x640x640")] == [
        "picked by v4's dispatch table: entry 3 (512x512x512), its when: holds here"]
    assert picked[("v1", "300x300x300")] == []                                   # no table: nothing to say


TYPED_FAMILY = """\
shapes: [[64, 64, 64], [128, 128, 128]]
kernels:
  - name: fam
    source: ../kernels/types/naive_typed.cu
    function: gemm_naive_typed
    types: {a: fp32}
    layout: NT
    params: {TA: float, TB: float, TC: float, ACC: float, LA: dg::Row, LB: dg::Col}
    signature: [A, B, C, M, N, K, lda, ldb, ldc, strideA, strideB, strideC, alpha, beta]
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16), batch]
  - name: mem
    source: ../kernels/types/naive_typed.cu
    function: gemm_naive_typed
    types: {a: fp32}
    layout: NT
    params: {TA: float, TB: float, TC: float, ACC: float, LA: dg::Row, LB: dg::Col}
    signature: [A, B, C, M, N, K, lda, ldb, ldc, strideA, strideB, strideC, alpha, beta]
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16), batch]
dispatch:
  fam:
    - {shape: [128, 128, 128], kernel: mem, params: {}}
    - {shape: [64, 64, 64], params: {}}
"""

BIAS_MEMBER = """\
  - name: mem
    source: ../kernels/outside/args_bias.cu
    function: args_bias
    types: {a: fp32}
    layout: NT
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16)]
    signature: [C, A, B, {name: bias, type: buffer, element: fp32, size: N, bias: N}, M, N, K]
dispatch:"""


@pytest.mark.parametrize("member, differs", [
    ("    batch: {count: 3}\n", "batch 3, not 1"),
    ("    scalars: {alpha: 1.5, beta: -0.5}\n", "alpha and beta 1.5 and -0.5, not 1 and 0"),
    ("    ld: {a: K + 4}\n",
     "leading dimensions on 128x128x128 {a: 132, b: 128, c: 128}, not {a: 128, b: 128, c: 128}"),
    (None, "bias along N, not none"),
])
def test_a_member_that_computes_another_product_or_vendor_row_is_refused_naming_both(tmp_path, member, differs):
    # Its rows would be counted as the family's and timed against the family's vendor row, though the reference
    # checks it against another product (a batch of 3, other scalars, a bias) or cuBLASLt runs another matmul
    # (padded A: a "-ld" row).
    if member is None:
        text = TYPED_FAMILY[:TYPED_FAMILY.index("  - name: mem")] + BIAS_MEMBER + TYPED_FAMILY.split("dispatch:")[1]
    else:
        text = TYPED_FAMILY.replace("dispatch:", member + "dispatch:")
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    line = text.splitlines().index("    - {shape: [128, 128, 128], kernel: mem, params: {}}") + 1
    assert str(raised.value).startswith(f"{path}:{line}: dispatch.fam[0].kernel: kernel mem computes another GEMM "
                                        f"than fam: {differs} (hint: "), str(raised.value)


def test_a_member_given_its_inputs_otherwise_computes_the_same_gemm(tmp_path):
    # Another signature order or another kernel of the same product is what a table picks among.
    spec = load_spec(write(tmp_path, TYPED_FAMILY))
    assert spec.dispatch_members == {"mem"}
    baselines = {c.shape.label: c.baseline_label for c in cases_of(spec) if not c.is_baseline}
    assert baselines == {"64x64x64": "cublaslt-fp32-NT", "128x128x128": "cublaslt-fp32-NT"}
