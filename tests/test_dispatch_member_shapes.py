"""A dispatch table's member computes its family's GEMM on every shape the table picks it for, not only on its
entry's shape: where a `when:` or the nearest-shape rule gives it a shape on which a batch count or a leading
dimension computed from the shape differs from the family's, that case is INVALID, naming the entry, the rule and
what differs."""

from driver_gemm.cli.main import main
from driver_gemm.cli.exit_codes import EXIT_FAILED, EXIT_OK
from driver_gemm.planning.cases import cases_of, member_problem
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape

from test_spec import write

TYPED = """\
    source: ../kernels/types/{source}
    function: {function}
    types: {{a: bf16, b: bf16, c: bf16, accumulate: fp32}}
    layout: NN
    params: {{TA: dg::bfloat16_t, TB: dg::bfloat16_t, TC: dg::bfloat16_t, ACC: float, LA: dg::Row, LB: dg::Row{tile}}}
    signature: [A, B, C, M, N, K, lda, ldb, ldc, strideA, strideB, strideC, alpha, beta]
"""

FAMILY_AND_MEMBER = f"""\
shapes:
  - [1024, 512, 1024]
  - [1001, 513, 777]
  - [64, 64, 64]
  - [1024, 512, 2048]
kernels:
  - name: fam
{TYPED.format(source="naive_typed.cu", function="gemm_naive_typed", tile="")}\
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16), batch]
  - name: mem
{TYPED.format(source="smem_typed.cu", function="gemm_smem_typed", tile=", TILE: 16")}\
    block: [TILE, TILE]
    grid: [ceil(N / TILE), ceil(M / TILE), batch]
    MEMBER_FIELD
dispatch:
  fam:
    - {{shape: [1024, 512, 1024], kernel: mem, params: {{TILE: 32}}, when: {{M: [900, 2000]}}}}
    - {{shape: [64, 64, 64], params: {{}}}}
"""


def spec_with(tmp_path, member_field: str):
    return write(tmp_path, FAMILY_AND_MEMBER.replace("MEMBER_FIELD", member_field))


def plans_by_case(path):
    return {(plan.kernel.name, plan.shape.label): plan for plan in plan_spec(load_spec(path), arch="sm_90").plans}


def test_a_member_whose_batch_count_follows_k_is_invalid_where_its_when_gives_it_another_batch(tmp_path):
    path = spec_with(tmp_path, "batch: {count: ceil(K / 1024)}")
    plans = plans_by_case(path)
    # the entry's own shape and the one of a batch of 1 are the family's GEMM: they stay ok
    assert plans[("mem", "1024x512x1024")].valid and plans[("mem", "1001x513x777")].valid
    invalid = plans[("mem", "1024x512x2048")]
    assert not invalid.valid
    problem = invalid.problems[0]
    text = str(problem)
    # what differs, which entry of which table picked the member there, and by which rule
    assert "kernel mem computes another GEMM than fam on 1024x512x2048: batch 2, not 1" in text
    assert "picked by fam's dispatch table: entry 0 (1024x512x1024), its when: holds here" in text
    assert "dispatch.fam[0]" in problem.hint
    # located at the member's entry in the spec
    assert problem.where.startswith(str(path)) and problem.field == "kernels[mem]"
    assert main(["plan", str(path), "--arch", "sm_90"]) == EXIT_FAILED


def test_a_member_whose_leading_dimension_pads_k_is_invalid_where_k_is_no_multiple(tmp_path, capsys):
    path = spec_with(tmp_path, "ld: {a: ceil(K / 16) * 16}")
    plans = plans_by_case(path)
    assert plans[("mem", "1024x512x1024")].valid and plans[("mem", "1024x512x2048")].valid
    text = str(plans[("mem", "1001x513x777")].problems[0])
    assert "leading dimensions on 1001x513x777 {a: 784, b: 513, c: 513}, not {a: 777, b: 513, c: 513}" in text
    assert "its when: holds here" in text


def test_a_shape_the_nearest_rule_gives_a_member_is_checked_too(tmp_path, capsys):
    path = spec_with(tmp_path, "batch: {count: ceil(K / 1024)}")
    # M = 3000 is outside the entry's when:, and 1024x512x1024 is the nearest of the table's shapes
    assert main(["plan", str(path), "--arch", "sm_90", "-s", "3000x600x3000", "--csv"]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "batch 3, not 1; picked by fam's dispatch table: entry 0 (1024x512x1024), the nearest of its shapes" in out
    spec = load_spec(path)
    member = next(case.kernel for case in cases_of(spec) if case.kernel is not None and case.kernel.name == "mem")
    assert member_problem(spec, member, Shape(3000, 600, 3000)) is not None
    assert member_problem(spec, member, Shape(64, 64, 64)) is None      # not picked there: the family's own entry


def test_a_member_equal_by_value_on_every_picked_shape_stays_ok(tmp_path):
    path = spec_with(tmp_path, 'ld: {a: K * 1, b: N + 0, c: "max(N, 1)"}')
    assert all(plan.valid for plan in plans_by_case(path).values())
    assert main(["plan", str(path), "--arch", "sm_90"]) == EXIT_OK


def test_the_launch_plans_that_run_and_tune_use_refuse_the_same_case(tmp_path):
    from driver_gemm.cuda.occupancy import arch_limits
    from driver_gemm.planning.build import launch_plans

    plans = launch_plans(load_spec(spec_with(tmp_path, "batch: {count: ceil(K / 1024)}")), arch_limits("sm_90"))
    by_case = {(kernel.split("[")[0], shape): plan for (kernel, shape), plan in plans.items()}
    assert by_case[("mem", "1024x512x1024")].valid
    invalid = by_case[("mem", "1024x512x2048")]
    assert not invalid.valid and "computes another GEMM than fam" in str(invalid.problems[0])
