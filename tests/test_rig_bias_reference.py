"""check_kernel's own float64 reference applies what it draws into a kernel's buffers, as a spec's case does: the
bias of a ``bias:`` buffer and the factors of a ``scales:`` buffer, and ``elementwise=``'s functions. A stand-in
for the kernel's output that adds the bias passes the rig's check and one that leaves it out fails; a rig's own
``reference=`` beside drawn values is refused before anything runs.

No GPU: the device's properties are an sm_90 stand-in, the case stops where it would start on the GPU, and the
rig's reference and check steps then run on host arrays, C read back as the stand-in."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from driver_gemm import check_kernel
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import ArgumentError
from driver_gemm.gemm.operands import KernelOutput, TypedInputs
from driver_gemm.runners import on_tensors
from driver_gemm.session.typed_steps import typed_case
from driver_gemm.status import Status

M, N, K = 64, 48, 256

KERNEL = r"""
extern "C" __global__ void gemm_bias(const float* A, const float* B, const float* bias, float* C, int M, int N, int K)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum + bias[col];
}

extern "C" __global__ void gemm_scaled(const float* A, const float* B, float* C, const float* sa, int M, int N, int K)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[row * K + k] * sa[row * ((K + 127) / 128) + k / 128] * B[k * N + col];
    C[row * N + col] = sum;
}
"""
BIAS_SIGNATURE = ["A", "B", {"name": "bias", "type": "buffer", "element": "fp32", "size": "N", "bias": "N"}, "C",
                  "M", "N", "K"]
SCALES_SIGNATURE = ["A", "B", "C", {"name": "sa", "type": "buffer", "element": "fp32", "size": "M * ceil(K / 128)",
                                    "scales": {"of": "A", "block": [1, 128]}}, "M", "N", "K"]


class Tensor:
    """A GPU array as the array interface describes it: nothing is read from its address here."""

    def __init__(self, rows: int, cols: int, address: int):
        self.__cuda_array_interface__ = {"version": 3, "shape": (rows, cols), "typestr": "<f4",
                                         "data": (address, False), "strides": None}


class StoppedBeforeTheGpu(Exception):
    pass


class NoSession:
    def __init__(self, *args, **kwargs):
        self.stream = SimpleNamespace(synchronize=lambda: None)

    def close(self) -> None:
        pass


@pytest.fixture()
def rig(monkeypatch):
    """check_kernel up to the GPU: returns a caller that gives the planned case and spec of a check_kernel call."""
    monkeypatch.setattr(on_tensors, "read_properties",
                        lambda ordinal: SimpleNamespace(arch="sm_90", sm_count=132, name="stand-in", uuid="GPU-0",
                                                        ordinal=ordinal))
    monkeypatch.setattr(on_tensors, "limits_from_device", lambda properties: arch_limits("sm_90"))
    monkeypatch.setattr(on_tensors, "Session", NoSession)
    reached = {}

    def execute(session, spec, case, compiled, steps):
        reached.update(spec=spec, case=case)
        raise StoppedBeforeTheGpu

    monkeypatch.setattr(on_tensors, "execute_case", execute)

    def planned(function: str, signature: list, **fields):
        with pytest.raises(StoppedBeforeTheGpu):
            check_kernel(KERNEL, function, Tensor(M, K, 0x7F0000000000), Tensor(K, N, 0x7F0001000000),
                         Tensor(M, N, 0x7F0002000000), grid=["ceil(N / 16)", "ceil(M / 16)"], block=[16, 16],
                         signature=signature, time=False, **fields)
        return reached["case"], reached["spec"]

    return planned


def drawn_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return (rng.integers(-8, 9, (M, K)) / 16.0, rng.integers(-8, 9, (K, N)) / 16.0)


def checked(monkeypatch, case, spec, a: np.ndarray, b: np.ndarray, stand_in: np.ndarray):
    """The rig's reference and check steps on host copies `a`, `b`, with C read back as `stand_in` (the kernel's
    output, float32): the verdict the rig records."""
    run = SimpleNamespace(case=case, spec=spec, session=NoSession(), record=SimpleNamespace(), launch=None)
    run.typed = typed_case(run)
    run.typed.inputs = TypedInputs(0, a[None], b[None], None)
    rig_state = on_tensors.RigState(SimpleNamespace(c=SimpleNamespace(rows=M, cols=N, element="fp32")),
                                    (None, None, None), None)
    on_tensors.rig_reference(run, rig_state)
    values = stand_in.astype(np.float32)[None]
    monkeypatch.setattr(on_tensors, "_poison", lambda run, matrix: None)
    monkeypatch.setattr(on_tensors, "build_launch", lambda run, memory: lambda: None)
    monkeypatch.setattr(on_tensors, "_read_output",
                        lambda run, matrix: KernelOutput(values.astype(np.float64), values.view(np.uint32), 0))
    on_tensors.rig_launch_verify(run, rig_state)
    return run.verdict


def test_a_kernel_that_adds_its_drawn_bias_passes_and_one_that_leaves_it_out_fails(rig, monkeypatch):
    case, spec = rig("gemm_bias", BIAS_SIGNATURE)
    bias = case.plan.buffers["bias"].bias.values()
    assert np.abs(bias).max() > 0
    a, b = drawn_inputs()
    product = a.astype(np.float32) @ b.astype(np.float32)
    with_bias = checked(monkeypatch, case, spec, a, b, product + bias[None, :].astype(np.float32))
    assert with_bias.status == Status.PASS, with_bias.as_dict()
    without = checked(monkeypatch, case, spec, a, b, product)
    assert without.status == Status.FAIL
    assert without.wrong > 0


def test_a_kernel_that_applies_its_drawn_block_scales_passes_and_one_that_ignores_them_fails(rig, monkeypatch):
    case, spec = rig("gemm_scaled", SCALES_SIGNATURE)
    grid = case.plan.buffers["sa"].grid
    a, b = drawn_inputs()
    scaled_a = grid.applied(a[None])[0]
    assert not np.array_equal(scaled_a, a), "the drawn factors are not all 1"
    scaled = checked(monkeypatch, case, spec, a, b, scaled_a @ b)
    assert scaled.status == Status.PASS, scaled.as_dict()
    assert checked(monkeypatch, case, spec, a, b, a @ b).status == Status.FAIL


def test_elementwise_functions_are_applied_after_the_drawn_bias(rig, monkeypatch):
    case, spec = rig("gemm_bias", BIAS_SIGNATURE, elementwise=["relu", {"mul": 1.5}])
    bias = case.plan.buffers["bias"].bias.values()
    a, b = drawn_inputs()
    fused = 1.5 * np.maximum(a @ b + bias[None, :], 0.0)
    verdict = checked(monkeypatch, case, spec, a, b, fused)
    assert verdict.status == Status.PASS, verdict.as_dict()
    assert checked(monkeypatch, case, spec, a, b, 1.5 * (a @ b + bias[None, :])).status == Status.FAIL


@pytest.mark.parametrize("function, signature, fields, named", [
    ("gemm_bias", BIAS_SIGNATURE, {}, "bias"),
    ("gemm_scaled", SCALES_SIGNATURE, {}, "sa"),
    ("gemm_bias", BIAS_SIGNATURE, {"elementwise": ["relu"]}, "elementwise="),
])
def test_a_rigs_own_reference_beside_drawn_values_is_refused_before_the_gpu(rig, function, signature, fields,
                                                                            named):
    with pytest.raises(ArgumentError) as caught:
        rig(function, signature, reference=np.zeros((M, N)), **fields)
    assert caught.value.field == "reference" and named in caught.value.message
    assert "leave reference= out" in (caught.value.hint or "")

