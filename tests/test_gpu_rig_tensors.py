"""check_kernel's ``tensors=`` on a GPU, with torch tensors: a kernel that adds the rig's bias (and residual) PASSes
against a reference that adds them, handed the tensors, and FAILs against one that leaves the bias out; a bias of
another element type than the kernel's pointer is refused before anything launches."""

from __future__ import annotations

import pytest

import driver_gemm as dg
from driver_gemm.errors import ArgumentError
from driver_gemm.status import Status

from conftest import TEST_KERNELS

pytestmark = pytest.mark.gpu

SOURCE = TEST_KERNELS / "rig_bias.cu"
LAUNCH = {"grid": ["ceil(N / 16)", "ceil(M / 16)"], "block": [16, 16], "tile": [16, 16], "epilogue": "overwrite",
          "time": False}
M, N, K = 130, 72, 96


def operands(torch):
    generator = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(M, K, device="cuda", generator=generator)
    b = torch.randn(K, N, device="cuda", generator=generator)
    bias = 4.0 * torch.randn(N, device="cuda", generator=generator)
    return a, b, torch.empty(M, N, device="cuda"), bias


def test_a_kernel_adding_the_rigs_bias_passes_with_a_reference_that_adds_it_and_fails_with_one_that_does_not():
    torch = pytest.importorskip("torch")
    a, b, c, bias = operands(torch)
    handed = {}

    def with_bias(a, b, c, tensors):
        handed.update(tensors)
        return (a.double() @ b.double() + tensors["bias"].double()).float()

    record = dg.check_kernel(SOURCE, "gemm_bias", a, b, c, signature=["A", "B", "bias", "C", "M", "N", "K"],
                             tensors={"bias": bias}, reference=with_bias, **LAUNCH)
    assert record.status == Status.PASS, record.message
    assert record.verification.reference == "rig" and handed["bias"] is bias
    assert torch.allclose(c, a @ b + bias, rtol=1e-4, atol=1e-3)

    without = dg.check_kernel(SOURCE, "gemm_bias", a, b, c, signature=["A", "B", {"name": "bias", "type": "ptr"}, "C",
                                                                     "M", "N", "K"],
                              tensors={"bias": bias}, reference=lambda a, b, c: a @ b, **LAUNCH)
    assert without.status == Status.FAIL, without.message


def test_two_tensors_reach_the_kernel_and_the_reference():
    torch = pytest.importorskip("torch")
    a, b, c, bias = operands(torch)
    residual = torch.randn(M, N, device="cuda")
    record = dg.check_kernel(SOURCE, "gemm_bias_residual", a, b, c,
                             signature=["A", "B", "bias", "residual", "C", "M", "N", "K"],
                             tensors={"bias": bias, "residual": residual},
                             reference=lambda a, b, c, tensors: a @ b + tensors["bias"] + tensors["residual"],
                             **LAUNCH)
    assert record.status == Status.PASS, record.message


def test_a_bias_of_another_element_type_is_refused_before_the_launch():
    torch = pytest.importorskip("torch")
    a, b, c, bias = operands(torch)
    c.fill_(7.0)
    with pytest.raises(ArgumentError) as caught:
        dg.check_kernel(SOURCE, "gemm_bias", a, b, c, signature=["A", "B", "bias", "C", "M", "N", "K"],
                        tensors={"bias": bias.half()}, reference=lambda a, b, c: a @ b, **LAUNCH)
    assert "bias" in caught.value.message and "float16" in caught.value.message
    assert bool((c == 7.0).all()), "C was written: the kernel ran"
