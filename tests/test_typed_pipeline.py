"""Typed kernels from spec to verdict without a GPU: the operand fields and their errors at file:line, the new
expression names, typed planning, the cuBLASLt baseline rows, and the typed steps over stand-in device buffers."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.gemm import operands
from driver_gemm.measure.cublaslt import simulate
from driver_gemm.session import steps, typed_steps
from driver_gemm.planning.cases import cases_of, new_record
from driver_gemm.planning.case_plan import plan_launch
from driver_gemm.session.state import RunOptions, Session
from driver_gemm.results.records import CaseResult
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status, is_baseline_label

from conftest import ROOT

LIMITS = arch_limits("sm_90")
TYPED = ROOT / "kernels" / "types"

KERNEL = """\
  - name: {name}
    source: {source}
    function: gemm_naive_typed
    params: {{TA: dg::bfloat16_t, TB: dg::bfloat16_t, TC: dg::bfloat16_t, ACC: float, LA: dg::Row, LB: dg::Row}}
    signature: [A, B, C, M, N, K, lda, ldb, ldc, strideA, strideB, strideC, alpha, beta]
    block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16), batch]
"""


def spec_text(*extra: str, name: str = "k", shapes: str = "[[64, 48, 40]]", scalars: str = "") -> str:
    body = KERNEL.format(name=name, source="naive_typed.cu") + "".join(
        "    " + line + "\n" for line in extra)
    return f"name: t\n{scalars}shapes: {shapes}\nkernels:\n{body}"


def parse(text: str, tmp_path):
    for name in ("naive_typed.cu", "element_types.cuh"):
        (tmp_path / name).write_text((TYPED / name).read_text())
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return load_spec(path)


def line_of(text: str, needle: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), 1) if needle in line)


# ------------------------------------------------------------------------------------------------ fields

def test_typed_fields_are_read(tmp_path):
    text = spec_text("types: {a: bf16, c: fp32}", "layout: TN", "ld: {a: M + 8}",
                     "batch: {count: 3, stride: {b: 0}}")
    kernel = parse(text, tmp_path).kernels[0]
    assert kernel.is_typed and kernel.operands.types.label == "bf16-fp32"
    assert dict(kernel.operands.orders) == {"a": "col", "b": "row", "c": "row"}
    assert kernel.operands.ld["a"].source == "M + 8" and kernel.operands.strides["b"].source == "0"
    assert kernel.label == "k"          # C++ type parameters are not part of the label
    assert kernel.instance.startswith("gemm_naive_typed<dg::bfloat16_t, dg::bfloat16_t")


def test_untyped_kernels_stay_untyped_with_their_cublas_rows():
    spec = load_spec(ROOT / "specs" / "seed.yaml")
    assert not any(k.is_typed for k in spec.kernels)
    cases = cases_of(spec)
    assert {case.label for case in cases if case.is_baseline} == {"cublas"}
    assert all(case.baseline_label == "cublas" for case in cases if not case.is_baseline)


@pytest.mark.parametrize("extra, needle, message", [
    ("types: {a: bf17}", "types:", "unknown element type 'bf17'"),
    ("types: {a: bf16, d: fp32}", "types:", "unknown field 'd'"),
    ("types: {a: int8, b: fp16}", "types:", "8-bit integer inputs go together"),
    ("types: bf16", "types:", "types is a mapping"),
    ("layout: NX", "layout:", "two letters of N and T"),
    ("layouts: {a: diagonal}", "layouts:", "row or col"),
    ("ld: {d: 4}", "ld:", "unknown field 'd'"),
    ("ld: {a: Q + 1}", "ld:", "unknown name Q"),
    ("batch: {count: 2, steps: 3}", "batch:", "unknown field 'steps'"),
    ("scales: {a: 2.0}", "scales:", "fp8 inputs"),
    ("precision: tf32", "precision:", "types: {a: tf32}"),
    ("scalars: {gamma: 1}", "scalars:", "unknown field 'gamma'"),
])
def test_field_mistakes_name_file_line_and_field(tmp_path, extra, needle, message):
    text = spec_text(extra) if extra.startswith("types") else spec_text("types: {a: bf16}", extra)
    with pytest.raises(SpecError) as caught:
        parse(text, tmp_path)
    error = caught.value
    assert message in str(error), str(error)
    assert error.where.endswith(f":{line_of(text, needle)}"), (str(error), needle)
    assert error.field.startswith("kernels[k].")


def test_a_param_that_is_neither_a_number_nor_a_type_is_refused(tmp_path):
    text = spec_text().replace("LB: dg::Row}", "LB: 'dg::Row; int x'}")
    with pytest.raises(SpecError, match="whole numbers, true/false, C\\+\\+ type names"):
        parse(text, tmp_path)


def test_a_kernel_cannot_take_a_baseline_rows_name(tmp_path):
    with pytest.raises(SpecError, match="baseline row"):
        parse(spec_text(name="cublaslt-bf16-NN"), tmp_path)
    assert is_baseline_label("cublaslt-bf16-NN") and is_baseline_label("cublas") and not is_baseline_label("cublasx")


def test_the_shipped_types_spec_parses_and_plans_everywhere():
    spec = load_spec(ROOT / "specs" / "types.yaml")
    assert all(k.is_typed for k in spec.kernels)
    for shape in spec.shapes:
        for kernel in spec.kernels:
            assert plan_launch(kernel, shape, LIMITS, dict(spec.scalars)).valid, (kernel.label, shape)


# ------------------------------------------------------------------------------------------------ planning

def test_grids_and_arguments_use_the_layout_names(tmp_path):
    text = spec_text("types: {a: fp16}", "layout: TT", "ld: {a: M + 8, c: N + 8}",
                     "batch: {count: 4, stride: {b: 0, c: batch * 0 + M * ldc + 64}}")
    kernel = parse(text, tmp_path).kernels[0]
    plan = plan_launch(kernel, Shape(100, 30, 50), LIMITS, {})
    assert plan.valid, [str(p) for p in plan.problems]
    assert plan.config.grid == (2, 7, 4)
    values = plan.argument_values
    assert (values["lda"], values["ldb"], values["ldc"]) == (108, 50, 38)     # B column-major: tight ldb = K
    assert (values["strideA"], values["strideB"], values["strideC"]) == (108 * 50, 0, 100 * 38 + 64)
    assert plan.operands.batch == 4 and plan.operands.layout_code == "TT"


def test_untyped_kernels_see_tight_layout_names():
    kernel = load_spec(ROOT / "specs" / "types.yaml").kernels[0]
    untyped = type(kernel)(name="u", source=kernel.source, function="f", params={}, block=kernel.block,
                           grid=kernel.grid, shared_bytes=kernel.shared_bytes, signature=kernel.signature)
    plan = plan_launch(untyped, Shape(10, 20, 30), LIMITS, {})
    assert plan.valid and plan.config.grid[2] == 1
    assert {k: plan.argument_values[k] for k in ("lda", "ldb", "ldc", "strideA", "strideB", "strideC")} == \
        {"lda": 30, "ldb": 20, "ldc": 20, "strideA": 300, "strideB": 600, "strideC": 200}


@pytest.mark.parametrize("extra, field_name, words", [
    ("ld: {a: K - 1}", "ld.a", ["lda = 39", "lda >= 40"]),
    ("ld: {c: 3}", "ld.c", ["ldc = 3", "ldc >= 48"]),
    ("batch: {count: 2, stride: {a: 100}}", "batch.stride.a", ["batch stride of A, 100", ">= 2560"]),
    ("batch: {count: 2, stride: {c: 0}}", "batch.stride.c", ["batch stride of C, 0"]),
    ("batch: 0", "batch.count", ["positive integer"]),
])
def test_too_small_layouts_make_the_case_invalid_naming_operand_and_minimum(tmp_path, extra, field_name, words):
    text = spec_text("types: {a: bf16}", extra)
    kernel = parse(text, tmp_path).kernels[0]
    plan = plan_launch(kernel, Shape(64, 48, 40), LIMITS, {})
    assert not plan.valid
    problem = plan.problems[0]
    assert all(word in str(problem) for word in words), str(problem)
    assert problem.field == f"kernels[k].{field_name}"
    assert problem.where.endswith(f":{line_of(text, extra.split(':')[0] + ':')}")


def test_fp8_scales_are_folded_into_the_kernels_alpha(tmp_path):
    text = spec_text("types: {a: e4m3, c: bf16}", "layout: NT", "scales: {a: 0.5, b: 4.0}",
                     scalars="scalars: {alpha: 1.5}\n")
    kernel = parse(text, tmp_path).kernels[0]
    assert plan_launch(kernel, Shape(8, 8, 8), LIMITS, {}).argument_values["alpha"] == 1.5 * 0.5 * 4.0


def test_fp8_scales_whose_product_with_alpha_overflows_the_kernels_alpha_make_the_case_invalid(tmp_path):
    text = spec_text("types: {a: e4m3, c: bf16}", "layout: NT", "scales: {a: 1.0e+30, b: 1.0e+20}")
    kernel = parse(text, tmp_path).kernels[0]
    plan = plan_launch(kernel, Shape(8, 8, 8), LIMITS, {})
    (problem,) = plan.problems
    assert "alpha x the scales = 1e+50 is beyond the range of float32" in str(problem)
    assert problem.field == "kernels[k].scales"


# ------------------------------------------------------------------------------------------------ baselines

def two_kernels(tmp_path, second_extra: str, second_types: str = "types: {a: bf16}"):
    text = spec_text("types: {a: bf16}", name="k1") + KERNEL.format(name="k2", source="naive_typed.cu") + \
        "".join(f"    {line}\n" for line in (second_types, second_extra) if line)
    return parse(text, tmp_path)


def test_kernels_computing_the_same_matmul_share_one_cublaslt_row(tmp_path):
    spec = two_kernels(tmp_path, "layout: NN")
    cases = cases_of(spec)
    rows = [case for case in cases if case.is_baseline]
    assert [row.label for row in rows] == ["cublaslt-bf16-NN"]          # no FP32 cuBLAS row without FP32 kernels
    assert [case.baseline_label for case in cases if not case.is_baseline] == ["cublaslt-bf16-NN"] * 2


def test_different_matmuls_get_their_own_rows(tmp_path):
    spec = two_kernels(tmp_path, "scalars: {alpha: 2.0}")
    labels = [case.label for case in cases_of(spec) if case.is_baseline]
    assert labels == ["cublaslt-bf16-NN", "cublaslt-bf16-NN-a2b0"]
    padded = two_kernels(tmp_path, "ld: {a: K + 1}")
    padded_twice = [case.label for case in cases_of(padded) if case.is_baseline]
    assert padded_twice == ["cublaslt-bf16-NN", "cublaslt-bf16-NN-ld"]


def test_an_unsupported_combination_has_a_row_that_says_why(tmp_path):
    spec = two_kernels(tmp_path, "layout: NN", "types: {a: e5m2, b: e4m3, c: fp16}")
    rows = {case.label: case for case in cases_of(spec) if case.is_baseline}
    lt = rows["cublaslt-e5m2.e4m3-fp16-NN"].lt
    assert lt.plan is None and "layout NT" in lt.reason
    run = steps.start(rows["cublaslt-e5m2.e4m3-fp16-NN"], None, spec, None)
    typed_steps.load_lt(run)
    assert run.stopped and run.record.status == Status.INVALID and "layout NT" in run.record.message


def test_untyped_and_typed_kernels_keep_their_own_baselines():
    seedish = load_spec(ROOT / "specs" / "types.yaml")
    assert all(case.baseline_label.startswith("cublaslt-") for case in cases_of(seedish) if not case.is_baseline)
    record = CaseResult(kernel="v1", name="v1", shape=Shape(1, 1, 1), status=Status.PASS)
    assert record.baseline_label == "cublas" and "baseline" not in record.as_dict()
    typed = CaseResult(kernel="k", name="k", shape=Shape(1, 1, 1), status=Status.PASS, baseline=None,
                       operands={"layout": "NN"})
    assert typed.baseline_label is None          # an unsupported combination: no % figure
    lt = CaseResult(kernel="cublaslt-bf16-NN", name="cublaslt-bf16-NN", shape=Shape(1, 1, 1), status=Status.PASS)
    assert lt.is_baseline and lt.baseline_label == "cublaslt-bf16-NN"


# ------------------------------------------------------------------------------------------------ typed steps

class FakeBuffer:
    """Device memory as a byte array: upload and download behave as the real buffer's do."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.data = np.zeros(nbytes, np.uint8)

    def upload(self, array, stream):
        raw = np.ascontiguousarray(array).view(np.uint8).ravel()
        self.data[:raw.size] = raw

    def download(self, shape, dtype, stream):
        count = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return self.data[:count].view(dtype).reshape(shape).copy()

    def close(self):
        pass


@dataclass
class FakeSession:
    typed_buffers: dict = field(default_factory=dict)
    stream: object = None
    options: RunOptions = RunOptions()
    held: OrderedDict = field(default_factory=OrderedDict)

    # the inputs a shape's cases share, kept as a real session keeps them
    typed_inputs_for = Session.typed_inputs_for
    _let_go = Session._let_go
    _kept = Session._kept

    def buffers_of_sizes(self, sizes):
        for name, nbytes in sizes.items():
            if name not in self.typed_buffers or self.typed_buffers[name].nbytes < nbytes:
                self.typed_buffers[name] = FakeBuffer(max(nbytes, 1))
        return self.typed_buffers


def typed_run(spec, label_prefix="k"):
    case = next(c for c in cases_of(spec) if c.kernel is not None and c.kernel.name.startswith(label_prefix))
    from dataclasses import replace

    case = replace(case, plan=plan_launch(case.kernel, case.shape, LIMITS, dict(spec.scalars)))
    return steps.start(case, FakeSession(), spec, None)


def write_result(run, values: np.ndarray, *, skip_padding: bool = True, touch_padding: bool = False):
    """What a kernel would leave in C: `values` in the matrices, the padding as it was (or overwritten)."""
    layout, element = run.typed.operands.c, run.typed.types.c
    buffer = run.session.typed_buffers["C"]
    codes = buffer.data[:layout.elements * element.storage_bytes].view(element.storage_dtype).copy()
    codes[layout.offsets()] = operands.dtypes.encode(values, element)
    if touch_padding:
        codes[layout.padding_mask()] = 0
    buffer.data[:codes.nbytes] = codes.view(np.uint8)


@pytest.mark.parametrize("extra", [
    ("types: {a: bf16}", "layout: TN"),
    ("types: {a: fp16, c: fp32}", "layout: NT", "ld: {a: K + 3, c: N + 5}", "batch: {count: 3, stride: {b: 0}}",
     "scalars: {alpha: 1.5, beta: -0.5}"),
    ("types: {a: e4m3, c: bf16}", "layout: NT", "scales: {a: 0.5, b: 2.0}"),
])
def test_a_correct_typed_output_passes_and_a_k_tail_bug_fails(tmp_path, extra):
    spec = parse(spec_text(*extra, shapes="[[37, 29, 41]]"), tmp_path)
    run = typed_run(spec)
    typed_steps.inputs(run)
    typed_steps.reference_step(run)
    typed_steps._reset_output(run)
    expected = run.expected.copy()
    write_result(run, expected)
    verdict = typed_steps.check_output(run)
    assert verdict.status == Status.PASS, verdict.as_dict()
    assert verdict.padding_written == 0
    assert run.record.verification.tolerance == operands.dtypes.error_bound(run.typed.types, 41)

    typed = run.typed
    tail = operands.reference(typed.inputs.a[:, :, :32], typed.inputs.b[:, :32, :], typed.alpha, typed.beta,
                              typed.inputs.c0)
    typed_steps.reference_step(run)
    typed_steps._reset_output(run)
    write_result(run, tail)
    assert typed_steps.check_output(run).status == Status.FAIL
    steps.diagnose(run)
    assert "wrong" in run.record.diagnosis.summary


def test_unwritten_columns_and_padding_writes_are_found(tmp_path):
    spec = parse(spec_text("types: {a: bf16}", "ld: {c: N + 4}", shapes="[[20, 24, 16]]"), tmp_path)
    run = typed_run(spec)
    typed_steps.inputs(run)
    typed_steps.reference_step(run)
    typed_steps._reset_output(run)
    layout, element = run.typed.operands.c, run.typed.types.c
    codes = run.session.typed_buffers["C"].data[:layout.elements * 2].view(np.uint16)
    values = run.expected.reshape(1, 20, 24).copy()
    written = codes.copy()
    written[layout.offsets()[:, :, :16]] = operands.dtypes.encode(values[:, :, :16], element)   # columns 16-23 never
    run.session.typed_buffers["C"].data[:written.nbytes] = written.view(np.uint8)
    verdict = typed_steps.check_output(run)
    assert verdict.status == Status.FAIL and verdict.unwritten == 20 * 8
    steps.diagnose(run)
    assert "columns 16-23" in run.record.diagnosis.summary

    typed_steps._reset_output(run)
    write_result(run, run.expected.reshape(1, 20, 24), touch_padding=True)
    verdict = typed_steps.check_output(run)
    assert verdict.status == Status.FAIL and verdict.padding_written == 20 * 4 and verdict.unwritten == 0


def test_a_cublaslt_row_checks_what_cublaslt_computes(tmp_path):
    spec = parse(spec_text("types: {a: bf16, c: fp32}", "layout: TN", "batch: 2", "scalars: {beta: 0.25}",
                           shapes="[[33, 17, 29]]"), tmp_path)
    case = next(c for c in cases_of(spec) if c.lt is not None)
    assert case.lt.plan is not None and case.label == "cublaslt-bf16-fp32-TN-x2-a1b0.25"
    run = steps.start(case, FakeSession(), spec, None)
    assert new_record(case, Status.PASS).operands.layout == "TN"
    typed_steps.inputs(run)
    typed_steps.reference_step(run)
    typed_steps._reset_output(run)
    typed, buffers = run.typed, run.session.typed_buffers
    flat = {key: operands.dtypes.decode(buffers[key.upper()].data[:getattr(typed.operands, key).elements *
                                                                   getattr(typed.types, key).storage_bytes]
                                        .view(getattr(typed.types, key).storage_dtype), getattr(typed.types, key))
            for key in "abc"}
    result = simulate(case.lt.plan, flat["a"], flat["b"], flat["c"])
    write_result(run, typed.operands.c.unpack(result))
    assert typed_steps.check_output(run).status == Status.PASS


def test_the_cases_of_one_matmul_on_a_shape_and_its_vendor_row_share_one_draw_and_one_reference(tmp_path, monkeypatch):
    # k1 and k2 compute the same bf16 matmul (one cuBLASLt row); k3 writes fp32: a matmul of its own.
    text = spec_text("types: {a: bf16}", name="k1") + KERNEL.format(name="k2", source="naive_typed.cu") + \
        "    types: {a: bf16}\n" + KERNEL.format(name="k3", source="naive_typed.cu") + "    types: {a: bf16, c: fp32}\n"
    spec = parse(text, tmp_path)
    draws, products = [], []
    make, multiply = typed_steps.make_typed_inputs, typed_steps.reference
    monkeypatch.setattr(typed_steps, "make_typed_inputs", lambda *a, **k: draws.append(a[1]) or make(*a, **k))
    monkeypatch.setattr(typed_steps, "reference", lambda *a, **k: products.append(1) or multiply(*a, **k))
    session = FakeSession()
    runs = {}
    for case in cases_of(spec):
        if case.kernel is not None:
            from dataclasses import replace

            case = replace(case, plan=plan_launch(case.kernel, case.shape, LIMITS, dict(spec.scalars)))
        run = runs[case.label] = steps.start(case, session, spec, None)
        typed_steps.inputs(run)
        typed_steps.reference_step(run)
    same = [runs[label] for label in ("k1", "k2", "cublaslt-bf16-NN")]
    assert all(run.typed.inputs is same[0].typed.inputs and run.expected is same[0].expected for run in same)
    assert {run.record.seed for run in runs.values()} == {same[0].record.seed}       # the shape's seed
    assert len(draws) == 2 and len(products) == 2                  # the bf16 matmul once, k3's fp32 one once
    assert runs["k3"].typed.inputs is not same[0].typed.inputs
    # The same numbers in both matmuls' A and B: one seed, and bf16 inputs either way.
    assert np.array_equal(runs["k3"].typed.inputs.a, same[0].typed.inputs.a)
    # Every case uploads them again, as laid out: an earlier kernel's stray write into A cannot fail the next.
    buffer = session.typed_buffers["A"]
    buffer.data[:] = 0
    typed_steps.inputs(runs["k2"])
    assert buffer.data[:len(same[0].typed.held.uploads["A"])].tobytes() == same[0].typed.held.uploads["A"]
