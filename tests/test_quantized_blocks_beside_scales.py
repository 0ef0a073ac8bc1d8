"""A quantized B whose scales lie beside its codes in one buffer (llama.cpp's GGUF blocks: Q4_0 is {half d;
uint8_t qs[16]} per 32 weights of a row): a pack builder of the codes is given the scales drawn for the case and
lays both out, so such a codes part needs no scales part; without a builder it still does, and a scales part that
would reach the kernel in no way (pass: none) is told so."""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.quantized_layouts import draw_quantized
from driver_gemm.specfile import Shape, parse_spec

from conftest import ROOT

SOURCE = ROOT / "kernels/outside/args_w4a16.cu"

GGUF_BUILDER = '''
import numpy as np


def q4_0(values):
    # per column n of B and 32 rows of K: the scale as fp16, then 16 bytes of codes, byte j = q[j] | q[j + 16] << 4
    codes = np.asarray(values["codes"], dtype=np.int64)
    scales = np.asarray(values["scales"], dtype=np.float64)
    K, N = codes.shape
    out = np.zeros((N, K // 32, 18), dtype=np.uint8)
    for n in range(N):
        for block in range(K // 32):
            q = codes[block * 32:(block + 1) * 32, n]
            out[n, block, 0:2] = np.frombuffer(np.float16(scales[block, n]).tobytes(), dtype=np.uint8)
            out[n, block, 2:] = (q[:16] | (q[16:] << 4)).astype(np.uint8)
    return out.reshape(-1)
'''


def spec_text(codes: str, extra: str = "") -> str:
    return (f"shapes: [[1, 64, 256]]\nkernels:\n- name: q4_0\n  source: {SOURCE}\n  function: args_w4a16\n"
            "  types: {a: fp16, b: fp16, c: fp16, accumulate: fp32}\n  epilogue: overwrite\n  block: [32]\n"
            f"  grid: [N]\n  signature:\n    - {codes}\n    - A\n    - C\n    - K\n    - N\n{extra}")


BLOCKS = ("{name: vx, type: buffer, element: uint8, size: N * K / 32 * 18, "
          "quantized: {of: B, part: codes, bits: 4, group: 32, pack: {builder: 'pack.py:q4_0'}}}")


def test_codes_laid_out_by_a_builder_with_their_scales_need_no_scales_part(tmp_path):
    (tmp_path / "pack.py").write_text(GGUF_BUILDER)
    spec = parse_spec(spec_text(BLOCKS), tmp_path / "spec.yaml", allow_outside_sources=True)
    plan = plan_case(spec.kernels[0], Shape(1, 64, 256), arch_limits("sm_90"))
    assert plan.valid, [str(problem) for problem in plan.problems]
    draw = draw_quantized(256, 64, 4, 32, False, seed=3)
    laid = np.frombuffer(plan.buffers["vx"].initial_bytes(draw), dtype=np.uint8).reshape(64, 8, 18)
    # each block starts with its scale, as the builder was given it (a power of two, exact in fp16)
    assert np.array_equal(laid[:, :, 0:2].copy().view(np.float16)[:, :, 0].T, draw.scales().astype(np.float16))


def test_codes_laid_out_by_the_tool_still_need_a_scales_part_with_the_way_out_named():
    codes = ("{name: vx, type: buffer, element: uint8, size: N * K, "
             "quantized: {of: B, part: codes, bits: 4, group: 32}}")
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_text(codes), ROOT / "spec.yaml", allow_outside_sources=True)
    assert "B's codes need a buffer of their scales (part: scales)" in str(caught.value)
    assert "pack: {builder: ...}, which is given the scales" in caught.value.hint


def test_a_scales_part_passed_in_no_way_is_told_that_a_builder_embeds_them(tmp_path):
    (tmp_path / "pack.py").write_text(GGUF_BUILDER)
    scales = ("    - {name: d, type: buffer, element: float16, size: K / 32 * N, pass: none, "
              "quantized: {of: B, part: scales}}\n")
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_text(BLOCKS, scales), tmp_path / "spec.yaml", allow_outside_sources=True)
    assert "buffer d has pass: none, but no tensor map reads it" in str(caught.value)
    assert caught.value.hint.startswith("B's scales stored beside the codes in one buffer (GGUF's blocks) are laid out "
                                        "by the codes' pack: {builder: ...}, which is given them: leave this entry out")
