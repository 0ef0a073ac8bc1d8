"""A grid sized by the clusters that fit at once (`max_active_clusters`): estimated offline, planned again with the
driver's count once a run has loaded the kernel. No GPU."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.cuda.resources import KernelResources
from driver_gemm.errors import SpecError
from driver_gemm.planning.build import compile_spec, plan_cases, plan_with_drivers_count
from driver_gemm.planning.case_plan import plan_case, plan_launch, with_resources
from driver_gemm.specfile import Shape, load_spec, parse_spec

from conftest import SPECS

SM90 = arch_limits("sm_90")
# cluster_split_k's own resources would let many blocks share an SM; these hold one block an SM, as the
# persistent GEMMs' shared memory does.
ONE_BLOCK_AN_SM = KernelResources(registers=32, barriers=1, static_shared_bytes=200 * 1024)
EIGHT_BLOCKS_AN_SM = KernelResources(registers=32, barriers=1, static_shared_bytes=0)

CLUSTERS_OF_FOUR = """\
shapes:
  - [4096, 4096, 64]
kernels:
  - name: quads
    source: ../kernels/cluster_split_k.cu
    function: cluster_split_k
    block: [16, 16]
    grid: ["4 * min(max_active_clusters, ceil(N / 16) * ceil(M / 16))"]
    cluster: [4, 1, 1]
"""


def parse(text: str):
    return parse_spec(textwrap.dedent(text), SPECS / "active-clusters-test.yaml")


def quads(text: str = CLUSTERS_OF_FOUR):
    return parse(text).kernels[0]


def test_offline_the_count_is_the_sms_blocks_over_the_clusters_blocks():
    shape = Shape(4096, 4096, 64)
    plan = plan_case(quads(), shape, SM90, ONE_BLOCK_AN_SM)
    assert plan.valid and plan.config.grid == (4 * 33, 1, 1)
    assert plan.as_dict()["max_active_clusters"] == {"count": 33, "counted_by": "estimate"}
    assert ("grid reads max_active_clusters = 33, estimated as 132 SMs x 1 block an SM / 4 blocks a cluster, an "
            "upper bound (a cluster's blocks share one GPC); a run takes the driver's count for the loaded kernel"
            in plan.notes)
    # Blocks that share an SM are counted once the resources say how many do.
    many = plan_case(quads(), shape, SM90, EIGHT_BLOCKS_AN_SM)
    assert many.occupancy.blocks_per_sm == 8 and many.active_clusters.count == 132 * 8 // 4
    assert many.config.grid == (4 * 264, 1, 1)
    assert any("132 SMs x 8 blocks an SM" in note for note in many.notes)
    smaller = dataclasses.replace(SM90, typical_sm_count=114)
    assert plan_case(quads(), shape, smaller, ONE_BLOCK_AN_SM).config.grid == (4 * 28, 1, 1)


def test_the_drivers_count_replaces_the_estimate_and_is_kept():
    shape = Shape(4096, 4096, 64)
    plan = with_resources(plan_launch(quads(), shape, SM90, driver_active_clusters=30), EIGHT_BLOCKS_AN_SM, SM90)
    assert plan.config.grid == (120, 1, 1) and plan.active_clusters.by_driver
    assert plan.as_dict()["max_active_clusters"] == {"count": 30, "counted_by": "driver"}
    assert "grid reads max_active_clusters = 30, the driver's count for the loaded kernel " \
           "(cuOccupancyMaxActiveClusters)" in plan.notes
    # A grid smaller than the clusters that fit takes the tiles alone.
    assert plan_launch(quads(), Shape(64, 64, 64), SM90, driver_active_clusters=30).config.grid == (64, 1, 1)


def test_without_a_cluster_it_counts_blocks():
    kernel = quads(CLUSTERS_OF_FOUR.replace("    cluster: [4, 1, 1]\n", "")
                   .replace('"4 * min(max_active_clusters', '"min(max_active_clusters'))
    plan = plan_case(kernel, Shape(4096, 4096, 64), SM90, EIGHT_BLOCKS_AN_SM)
    assert plan.config.grid == (132 * 8, 1, 1) and plan.active_clusters.cluster_size is None
    assert any("estimated as 132 SMs x 8 blocks an SM;" in note for note in plan.notes)
    counted = plan_launch(kernel, Shape(4096, 4096, 64), SM90, driver_active_clusters=1000)
    assert counted.config.grid == (1000, 1, 1)
    assert "(cuOccupancyMaxActiveBlocksPerMultiprocessor x SMs)" in counted.notes[0]


def test_arguments_and_buffers_may_read_it():
    text = CLUSTERS_OF_FOUR + textwrap.indent(textwrap.dedent("""\
        signature:
          - A
          - B
          - C
          - {name: clusters, type: int32, value: max_active_clusters}
          - {name: work, type: buffer, element: int32, size: max_active_clusters * 2}
        """), "    ")
    plan = plan_launch(quads(text), Shape(4096, 4096, 64), SM90, driver_active_clusters=30)
    assert plan.valid and plan.argument_values["clusters"] == 30
    assert plan.buffers["work"].count == 60


def test_a_kernel_that_does_not_read_it_has_no_count():
    kernel = load_spec(SPECS / "seed.yaml").kernels[0]
    plan = plan_launch(kernel, Shape(64, 64, 64), SM90)
    assert plan.active_clusters is None and "max_active_clusters" not in plan.as_dict()
    assert not any("max_active_clusters" in note for note in plan.notes)


@pytest.mark.parametrize("field, line, text", [     # the spec's `line` made `text`; no line: `text` added
    ("block", "block: [16, 16]", "block: [16, max_active_clusters]"),
    ("shared_bytes", None, "shared_bytes: max_active_clusters * 16"),
    ("require", None, "require: [max_active_clusters > 2]"),
    ("cluster", "cluster: [4, 1, 1]", "cluster: [max_active_clusters, 1, 1]"),
])
def test_what_it_is_counted_for_cannot_read_it(field, line, text):
    source = CLUSTERS_OF_FOUR.replace(line, text) if line else CLUSTERS_OF_FOUR + f"    {text}\n"
    with pytest.raises(SpecError) as caught:
        parse(source)
    message = str(caught.value)
    assert f"kernels[quads].{field}: " in message
    assert "reads max_active_clusters, which only the grid and the signature's values and buffer sizes may read" \
        in message


def test_it_cannot_be_a_param():
    with pytest.raises(SpecError, match="must be a C identifier other than .*max_active_clusters"):
        parse(CLUSTERS_OF_FOUR.replace("    block:", "    params: {max_active_clusters: 2}\n    block:"))


def test_no_cluster_that_fits_is_a_problem_of_the_grid():
    few = dataclasses.replace(SM90, typical_sm_count=3)
    plan = plan_case(quads(), Shape(4096, 4096, 64), few, ONE_BLOCK_AN_SM)
    assert not plan.valid
    assert any("max_active_clusters is 0: no cluster of 4 blocks fits at once" in str(p) and "grid" in str(p)
               for p in plan.problems)
    assert not plan_launch(quads(), Shape(4096, 4096, 64), SM90, driver_active_clusters=0).valid


def test_a_run_plans_a_compiled_kernel_again_with_the_drivers_count():
    spec = parse(CLUSTERS_OF_FOUR)
    kernel, = spec.kernels
    cubin = compile_spec(spec, "sm_90")[kernel.label]
    shape = Shape(4096, 4096, 64)
    again = plan_with_drivers_count(plan_launch(kernel, shape, SM90), cubin, SM90, 30)
    assert again.valid and again.config.grid == (120, 1, 1) and again.resources is not None
    assert again.active_clusters.by_driver and again.occupancy is not None


def test_the_shipped_persistent_grids_keep_one_block_an_sm_and_take_fewer_clusters_where_fewer_fit():
    # v13 with K split four ways at a shape of 192 tiles: 33 clusters by the SM count, 30 where 30 fit.
    spec = load_spec(SPECS / "sweep-band.yaml").select(kernels=["v13-bf16-out"], shapes=["288x8192x8192"])
    split_four = next(k for k in spec.kernels if k.params["SPLITS"] == 4 and k.params["BN"] == 128
                      and k.params["CWG"] == 2)
    shape = Shape(288, 8192, 8192)
    assert plan_launch(split_four, shape, SM90).config.grid == (132, 1, 1)
    assert plan_launch(split_four, shape, SM90, driver_active_clusters=30).config.grid == (120, 1, 1)
    assert plan_launch(split_four, shape, SM90, driver_active_clusters=62).config.grid == (132, 1, 1)


def test_planned_again_for_the_blocks_an_sm_holds_a_case_keeps_its_memory_refusal():
    # cluster_split_k holds eight blocks an SM, so its estimate is made again once compiled; the refusal that the
    # memory check added to the launch plan (C alone is 160 GB at 200000 x 200000) must survive that.
    spec = parse(CLUSTERS_OF_FOUR.replace("  - [4096, 4096, 64]", "  - [4096, 4096, 64]\n  - [200000, 200000, 64]"))
    cases, _ = plan_cases(spec, SM90, "sm_90", 132)
    plans = {case.shape.label: case.plan for case in cases if case.kernel is not None}
    assert plans["4096x4096x64"].valid and plans["4096x4096x64"].active_clusters.blocks_per_sm == 8
    huge = plans["200000x200000x64"]
    assert huge.active_clusters.blocks_per_sm == 8
    assert any("memory" in str(problem) for problem in huge.problems), [str(p) for p in huge.problems]
