"""The cuBLASLt baseline: the plan for every type and layout (checked by reading cuBLASLt's column-major
definition in NumPy), the support table's refusals, and on a GPU the matmuls against the float64 reference."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.gemm import dtypes, operands
from driver_gemm.measure import cublaslt
from driver_gemm.measure.cublaslt import CublasLtUnsupported, plan_matmul, simulate
from driver_gemm.gemm.dtypes import parse_types
from driver_gemm.gemm.operands import gemm_operands, parse_layout

LAYOUTS = ("NN", "NT", "TN", "TT")


def problem(code="NN", c_order="row", M=6, N=5, K=16, padded=False, batch=1):
    ld = {"a": (K if code[0] == "N" else M) + 16, "b": (N if code[1] == "N" else K) + 16,
          "c": (N if c_order == "row" else M) + 8} if padded else None
    strides = {"a": 4096, "b": 0, "c": 2048} if padded and batch > 1 else None
    return gemm_operands(M, N, K, orders=parse_layout(code, {"c": c_order}), ld=ld, batch=batch, strides=strides)


def check_plan_computes_the_gemm(types, gemm, alpha, beta, scale_a=1.0, scale_b=1.0):
    plan = plan_matmul(types, gemm, alpha, beta, scale_a=scale_a, scale_b=scale_b)
    inputs = operands.make_typed_inputs(gemm, types, seed=3, with_c=True)
    a_flat = gemm.a.pack(inputs.a, 0.0)
    b_flat = gemm.b.pack(inputs.b, 0.0)
    c_flat = gemm.c.pack(inputs.c0, 0.0)
    result = gemm.c.unpack(simulate(plan, a_flat, b_flat, c_flat))
    expected = operands.reference(inputs.a, inputs.b, alpha, beta, inputs.c0, scale_a=scale_a, scale_b=scale_b)
    assert np.allclose(result, expected, rtol=1e-12, atol=1e-12)
    return plan


@pytest.mark.parametrize("code", LAYOUTS)
@pytest.mark.parametrize("c_order", ["row", "col"])
@pytest.mark.parametrize("padded, batch", [(False, 1), (True, 1), (True, 3), (False, 2)])
def test_plan_computes_the_gemm_in_every_layout(code, c_order, padded, batch):
    types = parse_types({"a": "bf16"})
    plan = check_plan_computes_the_gemm(types, problem(code, c_order, padded=padded, batch=batch), 1.5, -0.25)
    assert plan.swapped == (c_order == "row")
    assert plan.a.batch_count == plan.b.batch_count == plan.c.batch_count == batch


@pytest.mark.parametrize("code, c_order, transa, transb, first", [
    ("NN", "row", "N", "N", "B"), ("NT", "row", "T", "N", "B"), ("TN", "row", "N", "T", "B"),
    ("TT", "row", "T", "T", "B"), ("NN", "col", "T", "T", "A"), ("NT", "col", "T", "N", "A"),
    ("TN", "col", "N", "T", "A"), ("TT", "col", "N", "N", "A"),
])
def test_transposes_and_operand_order(code, c_order, transa, transb, first):
    plan = plan_matmul(parse_types({"a": "fp16"}), problem(code, c_order))
    assert (plan.transa, plan.transb, plan.a.operand) == (transa, transb, first)
    assert (plan.m, plan.n, plan.k) == ((5, 6, 16) if c_order == "row" else (6, 5, 16))


def test_row_major_nn_plan_is_the_sgemm_baseline_call():
    """The existing SGEMM baseline calls cuBLAS with B first, m = N, n = M, lda = N, ldb = K, ldc = N."""
    plan = plan_matmul(dtypes.FP32, gemm_operands(100, 70, 40))
    assert (plan.m, plan.n, plan.k, plan.transa, plan.transb) == (70, 100, 40, "N", "N")
    assert (plan.a.operand, plan.a.ld, plan.b.operand, plan.b.ld, plan.c.ld) == ("B", 70, "A", 40, 70)
    assert plan.label == "cublaslt-fp32-NN"


@pytest.mark.parametrize("node, compute, scale_dtype, scale_type", [
    ({"a": "fp32"}, "COMPUTE_32F", "float32", 0),
    ({"a": "tf32"}, "COMPUTE_32F_FAST_TF32", "float32", 0),
    ({"a": "bf16"}, "COMPUTE_32F", "float32", 0),
    ({"a": "bf16", "c": "fp32"}, "COMPUTE_32F", "float32", 0),
    ({"a": "fp16"}, "COMPUTE_32F", "float32", 0),
    ({"a": "fp16", "accumulate": "fp16"}, "COMPUTE_16F", "float16", 2),
    ({"a": "int8"}, "COMPUTE_32I", "int32", 10),
])
def test_descriptor_for_each_type(node, compute, scale_dtype, scale_type):
    types = parse_types(node)
    plan = plan_matmul(types, problem("TN", K=24), 2.0, 0.5 if not types.a.is_integer else 1.0)
    attributes = plan.descriptor_attributes()
    assert (plan.compute_type, plan.scale_dtype, attributes["SCALE_TYPE"]) == (compute, scale_dtype, scale_type)
    assert attributes["COMPUTE_TYPE"] == cublaslt.COMPUTE_TYPES[compute]
    assert "A_SCALE_POINTER" not in attributes
    assert {layout.data_type for layout in (plan.a, plan.b)} == {types.a.cuda_data_type}
    assert plan.c.data_type == types.c.cuda_data_type


@pytest.mark.parametrize("node", [{"a": "e4m3", "c": "bf16"}, {"a": "e4m3", "c": "fp16"}, {"a": "e4m3"},
                                  {"a": "e4m3", "b": "e5m2", "c": "bf16"}, {"a": "e5m2", "b": "e4m3"}])
@pytest.mark.parametrize("c_order", ["row", "col"])
def test_fp8_plans_scale_pointers_and_the_tn_layout(node, c_order):
    types = parse_types(node)
    gemm = problem("NT", c_order, M=16, N=32, K=48, batch=2)
    plan = check_plan_computes_the_gemm(types, gemm, 1.0, 0.0, scale_a=0.5, scale_b=4.0)
    attributes = plan.descriptor_attributes()
    assert (plan.transa, plan.transb) == ("T", "N")
    assert plan.operand_scales == (0.5, 4.0)
    # cuBLASLt's A scale belongs to whichever of our operands is its A.
    assert attributes["A_SCALE_POINTER"] == f"scale_{plan.a.operand.lower()}"
    assert attributes["B_SCALE_POINTER"] == f"scale_{plan.b.operand.lower()}"


@pytest.mark.parametrize("node, gemm, reason", [
    ({"a": "e4m3", "c": "bf16"}, problem("NN", K=32, N=16), "fp8 needs cuBLASLt's TN layout"),
    ({"a": "e4m3", "c": "bf16"}, problem("TT", K=32, N=16), "(layout NT), not TT"),
    ({"a": "e4m3", "c": "bf16"}, gemm_operands(1001, 513, 777, orders=parse_layout("NT")),
     "A's ld is 777 e4m3 elements (pad it to a multiple of 16)"),
    ({"a": "e4m3", "c": "bf16"}, gemm_operands(64, 513, 64, orders=parse_layout("NT")),
     "C's ld is 513 bf16 elements (pad it to a multiple of 8)"),
    ({"a": "e5m2"}, problem("NT"), "e5m2 x e5m2"),
    ({"a": "e4m3", "accumulate": "fp16"}, problem("NT"), "fp8 accumulates in fp32"),
    ({"a": "bf16", "b": "fp16"}, problem(), "A (bf16) and B (fp16) must have one type"),
    ({"a": "bf16", "c": "fp16"}, problem(), "bf16 inputs give a bf16 or fp32 C, not fp16"),
    ({"a": "bf16", "accumulate": "fp16"}, problem(), "fp16 accumulation needs fp16 A, B and C"),
    ({"a": "fp32", "c": "bf16"}, problem(), "fp32 inputs give an fp32 C"),
])
def test_unsupported_combinations_are_refused_with_the_reason(node, gemm, reason):
    with pytest.raises(CublasLtUnsupported) as caught:
        plan_matmul(parse_types(node), gemm)
    assert reason in caught.value.reason
    assert str(caught.value).startswith("no cuBLASLt baseline for this combination (cublaslt-")


@pytest.mark.parametrize("gemm, reason", [
    # padded leading dimensions do not make the shape itself 16-byte aligned
    (gemm_operands(1001, 513, 777, orders=parse_layout("NT"), ld={"a": 784, "b": 784, "c": 520}),
     "K = 777 e4m3 elements is not a multiple of 16"),
    (gemm_operands(64, 36, 40, orders=parse_layout("NT"), ld={"a": 48, "b": 48, "c": 40}),
     "K = 40 e4m3 elements is not a multiple of 16"),
    # C row-major: its rows (N) are what must be whole 16-byte pieces, here of bf16
    (gemm_operands(64, 36, 64, orders=parse_layout("NT"), ld={"c": 40}),
     "C's contiguous extent (N) = 36 bf16 elements is not a multiple of 8"),
    # C column-major: its columns (M)
    (gemm_operands(36, 64, 64, orders=parse_layout("NT", {"c": "col"}), ld={"c": 40}),
     "C's contiguous extent (M) = 36 bf16 elements is not a multiple of 8"),
])
def test_fp8_matrix_dimensions_must_be_16_byte_aligned(gemm, reason):
    with pytest.raises(CublasLtUnsupported) as caught:
        plan_matmul(parse_types({"a": "e4m3", "c": "bf16"}), gemm)
    assert reason in caught.value.reason


def test_fp8_aligned_shapes_are_planned_whatever_m_is():
    # M (the columns of cuBLASLt's row-swapped D) is not a contiguous extent: 1000 is planned
    for M, N, K, c in ((1000, 512, 1024, "bf16"), (128, 96, 160, "fp16"), (1024, 516, 1024, "fp32")):
        plan = plan_matmul(parse_types({"a": "e4m3", "c": c}), gemm_operands(M, N, K, orders=parse_layout("NT")))
        assert (plan.m, plan.n, plan.k, plan.transa, plan.transb) == (N, M, K, "T", "N")
        # cuBLASLt's A is our B (K x N column-major: K rows), its B our A (row-major M x K read as K x M), its C
        # our row-major C read as N x M
        assert (plan.a.operand, plan.a.rows, plan.a.cols, plan.a.ld) == ("B", K, N, K)
        assert (plan.b.operand, plan.b.rows, plan.b.cols, plan.b.ld) == ("A", K, M, K)
        assert (plan.c.operand, plan.c.rows, plan.c.cols, plan.c.ld) == ("C", N, M, N)


def test_scales_only_for_fp8_and_fp16_scalars_must_be_exact():
    with pytest.raises(CublasLtUnsupported, match="scale factors are for fp8"):
        plan_matmul(parse_types({"a": "bf16"}), problem(), scale_a=2.0)
    with pytest.raises(CublasLtUnsupported, match="alpha = 0.1 is not exact in the scale type float16"):
        plan_matmul(parse_types({"a": "fp16", "accumulate": "fp16"}), problem(), alpha=0.1)


def test_labels_name_what_differs():
    bf16 = parse_types({"a": "bf16"})
    assert plan_matmul(bf16, problem("TN")).label == "cublaslt-bf16-TN"
    assert plan_matmul(bf16, problem("TN", batch=4)).label == "cublaslt-bf16-TN-x4"
    assert plan_matmul(bf16, problem("TN", padded=True)).label == "cublaslt-bf16-TN-ld"
    assert plan_matmul(bf16, problem("NN"), 2.0, 0.5).label == "cublaslt-bf16-NN-a2b0.5"
    assert plan_matmul(parse_types({"a": "e4m3", "c": "bf16"}), problem("NT", K=32, N=16)).label == \
        "cublaslt-e4m3-bf16-NT"
    assert plan_matmul(bf16, problem("TN")).key == plan_matmul(bf16, problem("TN")).key
    assert plan_matmul(bf16, problem("TN")).key != plan_matmul(bf16, problem("TN"), 1.0, 1.0).key


class RecordingDevice:
    """Stands in for a Device: every upload and allocation gets its own 256-byte aligned address."""

    def __init__(self):
        self.contents, self.next_address = {}, 1 << 20

    def make_current(self):
        pass

    def alloc(self, nbytes):
        from types import SimpleNamespace
        address, self.next_address = self.next_address, self.next_address + (nbytes + 255) // 256 * 256
        return SimpleNamespace(address=address, nbytes=nbytes)

    def upload(self, array, stream):
        buffer = self.alloc(np.asarray(array).nbytes)
        self.contents[buffer.address] = np.array(array)
        return buffer


def test_fp8_scale_pointers_are_separate_aligned_allocations_with_the_swapped_scales():
    """cuBLASLt refused every fp8 matmul while its A scale sat 4 bytes into a shared buffer: each scale now has its
    own allocation, and cuBLASLt's A (our B, C being row-major) gets scale_b."""
    lt = pytest.importorskip("nvmath.bindings.cublasLt")
    from types import SimpleNamespace

    set_attributes, matmul_calls = {}, []

    def set_desc(desc, attribute, pointer, size):
        value = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * size).from_address(pointer)).copy()
        set_attributes[lt.MatmulDescAttribute(attribute).name] = value.view(
            lt.get_matmul_desc_attribute_dtype(lt.MatmulDescAttribute(attribute)))[0]

    def heuristic(handle, desc, a, b, c, d, preference, requested, results, found):
        np.ctypeslib.ctypes.c_int32.from_address(found).value = 1

    fake = SimpleNamespace(
        cuBLASLtError=lt.cuBLASLtError, MatmulDescAttribute=lt.MatmulDescAttribute,
        MatrixLayoutAttribute=lt.MatrixLayoutAttribute, MatmulPreferenceAttribute=lt.MatmulPreferenceAttribute,
        get_matmul_desc_attribute_dtype=lt.get_matmul_desc_attribute_dtype,
        get_matrix_layout_attribute_dtype=lt.get_matrix_layout_attribute_dtype,
        get_matmul_preference_attribute_dtype=lt.get_matmul_preference_attribute_dtype,
        matmul_heuristic_result_dtype=lt.matmul_heuristic_result_dtype,
        matmul_desc_create=lambda compute, scale: 11, matmul_desc_set_attribute=set_desc,
        matrix_layout_create=lambda *args: 12, matrix_layout_set_attribute=lambda *args: None,
        matmul_preference_create=lambda: 13, matmul_preference_set_attribute=lambda *args: None,
        matmul_algo_get_heuristic=heuristic, matmul=lambda *args: matmul_calls.append(args),
        matmul_desc_destroy=None, matrix_layout_destroy=None, matmul_preference_destroy=None)
    device = RecordingDevice()
    runner = object.__new__(cublaslt.CublasLtMatmul)     # its library calls are the recording ones above
    runner.__dict__.update(_lt=fake, _device=device, _stream=SimpleNamespace(address=7), closed=True, handle=1,
                           workspace=device.alloc(64), workspace_bytes=64, _owned=[], _keep_alive=[])
    plan = plan_matmul(parse_types({"a": "e4m3", "c": "bf16"}), problem("NT", K=32, N=16), scale_a=0.5, scale_b=4.0)
    A, B, C = device.alloc(512), device.alloc(512), device.alloc(192)
    runner.prepare(plan, A, B, C)()
    a_scale, b_scale = int(set_attributes["A_SCALE_POINTER"]), int(set_attributes["B_SCALE_POINTER"])
    assert a_scale != b_scale and a_scale % 16 == 0 and b_scale % 16 == 0
    assert device.contents[a_scale].tolist() == [4.0] and device.contents[b_scale].tolist() == [0.5]
    (call,) = matmul_calls
    assert call[3] == B.address and call[5] == A.address      # cuBLASLt's A is our B
    assert call[8] == call[10] == C.address                   # D is C, in place


def test_enum_values_match_nvmath():
    nvmath_cublas = pytest.importorskip("nvmath.bindings.cublas")
    lt = pytest.importorskip("nvmath.bindings.cublasLt")
    for name, value in cublaslt.COMPUTE_TYPES.items():
        assert int(getattr(nvmath_cublas.ComputeType, name)) == value
    assert {name: int(getattr(nvmath_cublas.Operation, name)) for name in "NT"} == cublaslt.OPERATIONS
    assert int(lt.Order.COL) == cublaslt.ORDER_COL
    plan = plan_matmul(parse_types({"a": "e4m3"}), problem("NT", K=32, N=16))
    for name in plan.descriptor_attributes():
        assert hasattr(lt.MatmulDescAttribute, name)
    for name in plan.a.attributes():
        assert hasattr(lt.MatrixLayoutAttribute, name)


# ------------------------------------------------------------------------------------------------ GPU

# The fp8 cases: cuBLASLt refuses them when both scales share one allocation and takes them with a separate
# allocation each; fp8 -> fp32 is checked against the
# tolerance that admits Hopper's fp8 tensor-core accumulation (dtypes.FP8_TENSOR_CORE_UNIT_ROUNDOFF).
@pytest.mark.gpu
@pytest.mark.parametrize("node, code", [({"a": "bf16"}, "NN"), ({"a": "bf16"}, "TN"), ({"a": "fp16"}, "TT"),
                                        ({"a": "fp16", "c": "fp32"}, "NT"),
                                        ({"a": "e4m3", "c": "bf16"}, "NT"), ({"a": "e4m3", "b": "e5m2", "c": "fp16"}, "NT"),
                                        ({"a": "e4m3"}, "NT")])
def test_cublaslt_matmul_matches_the_reference(driver_gemm_device, node, code):
    from driver_gemm.measure.verify import compare

    device = driver_gemm_device
    stream = device.stream()
    types = parse_types(node)
    gemm = gemm_operands(128, 96, 160, orders=parse_layout(code), batch=3)
    alpha, beta = 1.5, -0.5
    scales = {"scale_a": 0.5, "scale_b": 2.0} if types.is_fp8 else {}
    plan = plan_matmul(types, gemm, alpha, beta, **scales)
    inputs = operands.make_typed_inputs(gemm, types, seed=9, with_c=True)
    A = device.upload(np.frombuffer(operands.input_bytes(gemm.a, inputs.a, types.a), np.uint8), stream)
    B = device.upload(np.frombuffer(operands.input_bytes(gemm.b, inputs.b, types.b), np.uint8), stream)
    start = operands.output_bytes(gemm.c, types.c, inputs.c0)
    C = device.upload(np.frombuffer(start, np.uint8), stream)
    with cublaslt.CublasLtMatmul(device, stream) as lt:
        lt.prepare(plan, A, B, C)()
        raw = C.download((len(start),), np.uint8, stream).tobytes()
    output = operands.read_output(gemm.c, raw, types.c)
    expected = operands.reference(inputs.a, inputs.b, alpha, beta, inputs.c0, **scales)
    verdict = compare(output.values.reshape(-1, gemm.N), expected.reshape(-1, gemm.N),
                      rel_tolerance=dtypes.error_bound(types, gemm.K))
    assert verdict.status == "PASS", verdict.as_dict()


@pytest.mark.gpu
def test_unsupported_at_run_time_is_refused_not_raised_as_a_crash(driver_gemm_device):
    """Where the table lets a combination through and the heuristic does not, the refusal has the same type."""
    device = driver_gemm_device
    stream = device.stream()
    with cublaslt.CublasLtMatmul(device, stream) as lt:
        plan = plan_matmul(parse_types({"a": "int8"}), gemm_operands(3, 3, 3, orders=parse_layout("TT")))
        buffers = [device.alloc(64) for _ in range(3)]
        try:
            lt.prepare(plan, *buffers)()
        except CublasLtUnsupported as exc:
            assert exc.reason
