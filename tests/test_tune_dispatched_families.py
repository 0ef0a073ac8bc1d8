"""A tune of a spec whose kernel families have ``dispatch:`` tables, up to its first GPU call (`prepare_cases` and the
groups the strategy is given): each family is measured as its table picks per shape, under the family's name, its
members never searched as families of their own, and a pick that cannot launch is a pruned record, not a crash."""

from __future__ import annotations

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.planning.cases import cases_of
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status
from driver_gemm.tune.search import dispatched_families_note, family_of, prepare_cases

from test_spec import write

V3 = """\
  - name: v3
    source: ../kernels/03_coarsen_1d.cu
    function: sgemm_coarsen_1d
    params: {BM: 64, BN: 64, BK: 16, TN: 4}
    block: [BN / TN, BM]
    grid: [ceil(N / BN), ceil(M / BM)]
    tile: [BM, BN]
    require:
      - blockDim_x * TN == BN
      - blockDim_y == BM
      - (BM * BK) % threads == 0
      - (BK * BN) % threads == 0
      - K % BK == 0
"""
V4 = """\
  - name: v4
    source: ../kernels/04_coarsen_2d.cu
    function: sgemm_coarsen_2d
    params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}
    block: [BN / TN, BM / TM]
    grid: [ceil(N / BN), ceil(M / BM)]
    tile: [BM, BN]
    require:
      - blockDim_x * TN == BN
      - blockDim_y * TM == BM
      - (BM * BK) % threads == 0
      - (BK * BN) % threads == 0
      - K % BK == 0
"""
SHAPES = "shapes:\n  - [1024, 512, 1024]\n  - [1001, 513, 777]\n  - [64, 64, 64]\n  - [4096, 4096, 4096]\n"
# v4's own params are picked on no shape; 1001x513x777 (K = 777) is INVALID for the pick of its nearest entry
OWN_TABLE = SHAPES + "kernels:\n" + V4 + """\
dispatch:
  v4:
    - {shape: [1024, 512, 1024], params: {BM: 128, TM: 8}}
    - {shape: [2048, 2048, 2048], params: {BM: 32, TM: 2}, when: {M: [1, 2000], if: "M > 100"}}
    - {shape: [64, 64, 64], params: {BN: 128, TN: 8}, when: {M: [1, 5000]}}
"""
# a member picked on 64x64x64, INVALID there (BM = 128 rows of threads)
MEMBER_TABLE = SHAPES + "kernels:\n" + V3 + V4 + """\
  - name: v2
    source: ../kernels/02_smem_tiles.cu
    function: sgemm_smem_tiles
    params: {TILE: 32}
    block: [TILE, TILE]
    grid: [ceil(N / TILE), ceil(M / TILE)]
dispatch:
  v4:
    - {shape: [1024, 512, 1024], params: {BM: 128, TM: 8}}
    - {shape: [4096, 4096, 4096], params: {BM: 128, TM: 8}}
    - {shape: [64, 64, 64], kernel: v3, params: {BM: 128}}
"""


def no_compiler(spec, arch, skip=frozenset()):
    return {}


def prepared(tmp_path, text):
    spec = load_spec(write(tmp_path, text))
    return spec, prepare_cases(spec, arch_limits("sm_90"), "sm_90", 132, compile=no_compiler)


def test_a_family_is_measured_as_its_table_picks_on_every_shape(tmp_path):
    spec, tune = prepared(tmp_path, OWN_TABLE)
    picked = {case.key: case for case in cases_of(spec) if not case.is_baseline}
    groups = tune.groups(spec)
    searched = {(configuration.label, shape.label) for space, shape in groups for configuration in space}
    # every pick the plan keeps is searched, the family's own params on none of its shapes
    assert searched == set(tune.cases) and searched | {(p.kernel, p.shape) for p in tune.pruned} == set(picked)
    assert spec.kernels[0].label not in {label for label, _ in searched}
    for space, shape in groups:
        assert len(space) == 1 and (space[0].label, shape.label) in picked      # the table's one pick
        assert family_of(tune.cases[space[0].label, shape.label]) == "v4"


def test_a_member_is_searched_in_its_family_and_an_invalid_pick_is_a_pruned_record(tmp_path):
    spec, tune = prepared(tmp_path, MEMBER_TABLE)
    families = {(family_of(tune.cases[configuration.label, shape.label]), shape.label)
                for space, shape in tune.groups(spec) for configuration in space}
    assert {family for family, _ in families} == {"v4", "v2"}      # v3 is no family of its own
    invalid = {record.shape.label: record for record in tune.pruned_records}
    assert set(invalid) == {"1001x513x777", "64x64x64"}
    assert all(record.status == Status.INVALID and record.name == "v4" for record in invalid.values())
    assert invalid["64x64x64"].kernel.startswith("v3[") and invalid["64x64x64"].dispatch.table == "v4"
    assert invalid["1001x513x777"].kernel.startswith("v4[BM=128")


def test_the_note_names_each_dispatched_family_and_its_members(tmp_path):
    spec = load_spec(write(tmp_path, MEMBER_TABLE))
    note = dispatched_families_note(spec)
    assert note is not None and "v4 (members v3)" in note and "v2" not in note
    assert "one configuration per shape" in note and "sweep spec" in note
    assert dispatched_families_note(load_spec(write(tmp_path, SHAPES + "kernels:\n" + V4, "plain.yaml"))) is None
