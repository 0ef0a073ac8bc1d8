"""check_kernel's ``tensors=``: the rig's own other tensors (a bias, a residual, an index) given by name to the
kernel's pointer arguments of ``signature=``. Each is packed as that tensor's address and handed to a
``reference=`` callable that has a ``tensors`` parameter; one the kernel cannot read as it is (another element type
than its pointer's, strided, on the host or another GPU, overlapping C), one no pointer argument takes, or a name
check_kernel gives itself is refused before anything launches, naming the tensor and what is wrong.

No GPU: the device's properties are an sm_90 stand-in, the kernel is compiled by NVRTC, and the case stops where it
would start on the GPU; the rig's input and reference steps then run with a stand-in session, and the arguments are
packed as the launch packs them."""

from __future__ import annotations

import struct
from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import TEST_KERNELS
from driver_gemm import check_kernel
from driver_gemm.cuda.interop import array_view
from driver_gemm.cuda.launch import PackedArguments
from driver_gemm.cuda.mangling import ParamType
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import ArgumentError, DriverGemmError, WrongArgumentType
from driver_gemm.measure.rig_operands import RigTensor, pointee_problem
from driver_gemm.runners import on_tensors
from driver_gemm.session.bind import launch_values

M, N, K = 64, 48, 32
SOURCE = TEST_KERNELS / "rig_bias.cu"
A_AT, B_AT, C_AT, BIAS_AT, RESIDUAL_AT = (0x7F0000000000 + step * 0x1000000 for step in range(5))
GRID = {"grid": ["ceil(N / 16)", "ceil(M / 16)"], "block": [16, 16], "tile": [16, 16], "epilogue": "overwrite"}
BIAS_SIGNATURE = ["A", "B", "bias", "C", "M", "N", "K"]


class Tensor:
    """A GPU array as the array interface describes it (nothing is read from its address here); `device` as torch
    says which GPU a tensor is on."""

    def __init__(self, shape: tuple, address: int, typestr: str = "<f4", strides: tuple | None = None,
                 device: int | None = None):
        self.__cuda_array_interface__ = {"version": 3, "shape": shape, "typestr": typestr,
                                         "data": (address, False), "strides": strides}
        if device is not None:
            self.device = SimpleNamespace(index=device)


class StoppedBeforeTheGpu(Exception):
    pass


class NoSession:
    def __init__(self, *args, **kwargs):
        self.stream = SimpleNamespace(synchronize=lambda: None)
        self.device = SimpleNamespace(synchronize=lambda: None)

    def close(self) -> None:
        pass


@pytest.fixture()
def rig(monkeypatch):
    """check_kernel up to the GPU on fp32 A (M x K), B (K x N) and C (M x N): returns a caller that gives what
    reached the GPU's step (the spec, the case and the rig's state), or raises what check_kernel raised."""
    monkeypatch.setattr(on_tensors, "read_properties",
                        lambda ordinal: SimpleNamespace(arch="sm_90", sm_count=132, name="stand-in", uuid="GPU-0",
                                                        ordinal=ordinal))
    monkeypatch.setattr(on_tensors, "limits_from_device", lambda properties: arch_limits("sm_90"))
    monkeypatch.setattr(on_tensors, "Session", NoSession)
    reached: dict = {}

    def execute(session, spec, case, compiled, steps):
        bound = dict(steps(case))
        reached.update(spec=spec, case=case, rig=bound["inputs"].keywords["rig"])
        raise StoppedBeforeTheGpu

    monkeypatch.setattr(on_tensors, "execute_case", execute)

    def call(function: str = "gemm_bias", signature=BIAS_SIGNATURE, **fields):
        reached.clear()
        try:
            check_kernel(SOURCE, function, Tensor((M, K), A_AT), Tensor((K, N), B_AT), Tensor((M, N), C_AT),
                         signature=signature, time=False, **GRID, **fields)
        except StoppedBeforeTheGpu:
            return SimpleNamespace(**reached)
        raise AssertionError("check_kernel returned without reaching the GPU's step")

    call.reached = reached
    return call


def refusal(rig, error=ArgumentError, **fields) -> DriverGemmError:
    with pytest.raises(error) as caught:
        rig(**fields)
    assert not rig.reached, "refused only after the case went to the GPU"
    assert isinstance(caught.value, DriverGemmError)
    return caught.value


def packed_pointer(reached, name: str) -> int:
    """The 8 bytes the launch packs for pointer argument `name`, from the rig's memory as its input step binds it."""
    run = SimpleNamespace(case=reached.case, spec=reached.spec, session=NoSession(), record=SimpleNamespace(),
                          launch=None)
    on_tensors.rig_inputs(run, reached.rig)
    kernel = reached.case.kernel
    types, values = launch_values(kernel, reached.case.plan.argument_values, reached.rig.memory,
                                  lambda argument, position: (argument.ctype, None))
    packed = PackedArguments(types, values, [argument.name for argument in kernel.signature])
    position = [argument.name for argument in kernel.signature].index(name)
    storage = bytes(packed.storage)
    return struct.unpack_from("<Q", storage, packed.offsets[position])[0]


@pytest.mark.parametrize("written", ["bias", {"name": "bias", "type": "ptr"}])
def test_a_tensor_named_in_the_signature_is_packed_as_its_address(rig, written):
    bias = Tensor((N,), BIAS_AT)
    reached = rig(signature=["A", "B", written, "C", "M", "N", "K"], tensors={"bias": bias},
                  reference=np.zeros((M, N)))
    assert packed_pointer(reached, "bias") == BIAS_AT
    assert packed_pointer(reached, "C") == C_AT


def test_two_tensors_are_each_packed_and_the_reference_is_handed_them(rig):
    bias, residual = Tensor((N,), BIAS_AT), Tensor((M, N), RESIDUAL_AT)
    given = {}

    def reference(a, b, c, tensors):
        given.update(operands=(a, b, c), tensors=tensors)
        return np.ones((M, N))

    reached = rig("gemm_bias_residual", ["A", "B", "bias", "residual", "C", "M", "N", "K"],
                  tensors={"bias": bias, "residual": residual}, reference=reference)
    assert packed_pointer(reached, "bias") == BIAS_AT and packed_pointer(reached, "residual") == RESIDUAL_AT
    run = SimpleNamespace(case=reached.case, spec=reached.spec, session=NoSession(), record=SimpleNamespace(),
                          launch=None)
    on_tensors.rig_inputs(run, reached.rig)
    on_tensors.rig_reference(run, reached.rig)
    assert given["tensors"]["bias"] is bias and given["tensors"]["residual"] is residual
    assert np.array_equal(run.expected, np.ones((M, N))) and run.reference_name == on_tensors.RIG_REFERENCE


@pytest.mark.parametrize("reference", [lambda a, b, c: np.ones((M, N)), partial(lambda a, b, c, scale: scale
                                                                                * np.ones((M, N)), scale=1.0)])
def test_a_reference_without_a_tensors_parameter_is_called_with_the_operands_alone(rig, reference):
    reached = rig(tensors={"bias": Tensor((N,), BIAS_AT)}, reference=reference)
    run = SimpleNamespace(case=reached.case, spec=reached.spec, session=NoSession(), record=SimpleNamespace(),
                          launch=None)
    on_tensors.rig_inputs(run, reached.rig)
    on_tensors.rig_reference(run, reached.rig)
    assert np.array_equal(run.expected, np.ones((M, N)))


def test_a_tensor_of_another_element_type_than_the_kernels_pointer_is_refused_naming_both(rig):
    error = refusal(rig, tensors={"bias": Tensor((N,), BIAS_AT, typestr="<f2")})
    assert error.field == "tensors"
    assert "bias" in error.message and "float16" in error.message and "const float*" in error.message
    assert "parameter 3" in error.message


def test_an_index_tensor_wider_than_the_kernels_integers_is_refused(rig):
    error = refusal(rig, function="gemm_gathered_bias", signature=["A", "B", "bias", "columns", "C", "M", "N", "K"],
                    tensors={"bias": Tensor((N,), BIAS_AT), "columns": Tensor((N,), RESIDUAL_AT, typestr="<i8")})
    assert "columns" in error.message and "int64" in error.message and "4-byte" in error.message


def test_an_index_tensor_of_the_kernels_integers_is_taken(rig):
    reached = rig("gemm_gathered_bias", ["A", "B", "bias", "columns", "C", "M", "N", "K"],
                  tensors={"bias": Tensor((N,), BIAS_AT), "columns": Tensor((N,), RESIDUAL_AT, typestr="<i4")},
                  reference=np.zeros((M, N)))
    assert packed_pointer(reached, "columns") == RESIDUAL_AT


@pytest.mark.parametrize("tensor, says", [
    (Tensor((N,), BIAS_AT, strides=(8,)), "strides"),                          # every other float: a strided view
    (Tensor((N, 2), BIAS_AT, strides=(4, 4 * N)), "contiguous"),             # column-major
    (Tensor((N,), C_AT + 16), "overlaps C"),
    (Tensor((N,), BIAS_AT, device=1), "GPU 1"),
    (np.zeros(N, dtype=np.float32), "host"),
    (3, "no device array"),
])
def test_a_tensor_the_kernel_cannot_read_as_it_is_is_refused_naming_it(rig, tensor, says):
    error = refusal(rig, tensors={"bias": tensor})
    assert error.field == "tensors" and "bias" in error.message and says in error.message, error


def test_a_tensor_no_pointer_argument_takes_is_refused_naming_it(rig):
    error = refusal(rig, tensors={"bias": Tensor((N,), BIAS_AT), "gamma": Tensor((N,), RESIDUAL_AT)})
    assert error.field == "tensors" and "gamma" in error.message and "bias" not in error.message.split(":")[0]
    assert "gamma" in (error.hint or "")
    assert "not given" in refusal(rig, signature=None, tensors={"bias": Tensor((N,), BIAS_AT)}).message


@pytest.mark.parametrize("entry, says", [
    ({"name": "bias", "type": "ptr", "value": "C"}, "value"),
    ({"name": "bias", "type": "buffer", "element": "fp32", "size": "N"}, "buffer"),
])
def test_a_signature_entry_that_says_something_else_of_a_tensor_is_refused(rig, entry, says):
    error = refusal(rig, signature=["A", "B", entry, "C", "M", "N", "K"], tensors={"bias": Tensor((N,), BIAS_AT)})
    assert error.field == "signature[2]" and "bias" in error.message and says in error.message


@pytest.mark.parametrize("name", ["C", "M", "alpha", "scale_a", "my-bias", 7])
def test_a_name_check_kernel_gives_itself_or_no_c_identifier_is_refused(rig, name):
    error = refusal(rig, tensors={name: Tensor((N,), BIAS_AT)})
    assert error.field == "tensors" and str(name) in error.message


def test_tensors_of_another_kind_than_a_mapping_are_a_type_error(rig):
    error = refusal(rig, error=WrongArgumentType, tensors=[Tensor((N,), BIAS_AT)])
    assert "tensors" in str(error) and isinstance(error, TypeError)


@pytest.mark.parametrize("pointee, typestr, judged", [
    ("const float*", "<f4", False), ("float*", "<f2", True), ("const __half*", "<f2", False),
    ("const __nv_bfloat16*", "<f4", True), ("const double*", "<f8", False), ("const double*", "<f4", True),
    ("const int*", "<i4", False), ("const int*", "<i8", True), ("const long long*", "<i8", False),
    ("const unsigned char*", "<f2", False),      # raw bytes: any element
    ("const void*", "<f4", False), ("const float4*", "<f2", False), ("float**", "<f4", False),
])
def test_a_pointee_is_judged_against_the_tensors_element_as_an_operands_is(pointee, typestr, judged):
    tensor = RigTensor("bias", array_view(Tensor((N,), BIAS_AT, typestr=typestr)))
    problem = pointee_problem(tensor, ParamType("pointer", 8, pointee), "parameter 3 of gemm")
    assert (problem is not None) == judged, problem
    if judged:
        assert "bias" in problem and pointee in problem and "parameter 3 of gemm" in problem
