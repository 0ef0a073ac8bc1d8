"""Which fp8 cuBLASLt matmuls run on this GPU, and with which descriptor: a probe for the support table.

    python3 scripts/probe_fp8.py [--out DIR]        (on a GPU machine; well under a minute)

Three parts, one line per attempt, a summary last:

1. The fixed path: `cublaslt.plan_matmul` and `CublasLtMatmul.prepare`, as the
   pipeline runs them, for every fp8 combination the specs and tests use
   (e4m3 -> bf16 / fp16 / fp32, e5m2 x e4m3 -> bf16, e4m3 x e5m2 -> fp16), batch 1 and 3, beta 0
   and -0.5, scales 1/1 and 0.5/2, and the plan-time refusals (NN layout,
   unaligned K, e5m2 x e5m2). Each row: ACCEPTED with the relative Frobenius
   error against float64, REFUSED-AT-PLAN with the reason, or NOT-SUPPORTED
   when cuBLASLt itself refused.
2. Variants built here directly with nvmath's cuBLASLt bindings on one shape,
   so that if the fixed path still fails the row that works shows what it
   wants: scale pointers packed in one buffer (the old path: second one at +4
   bytes), in separate allocations (the fix), or not set at all; D in place
   (D = C, the old and current path) or in a buffer of its own; fast
   accumulation off or on; C type = D type (always here). Then shapes around
   the 16-byte dimension rule (K = 776 / 784, N = 516 / 520, M = 1000) with
   the plan's rule bypassed, to show whether the rule is as strict as cuBLAS
   says. cuBLASLt's own log (level 5) of the first variant of each scale
   placement goes to DIR/cublaslt-fp8.<placement>.log. Outcomes: ACCEPTED
   (with the error against float64), HEURISTIC-ERROR or NO-ALGORITHM (refused
   when planning), MATMUL-REFUSED (the heuristic offered an algorithm and
   cublasLtMatmul refused it: the old symptom), ERROR (anything else).
3. torch._scaled_mm on the same e4m3 inputs at 1024x512x1024 (scales 0.5 and
   2, bf16 out): its error against float64 and its difference from ours.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

import numpy as np

import driver_gemm as dg
from driver_gemm.gemm import dtypes, operands
from driver_gemm.measure import cublaslt
from driver_gemm.gemm.dtypes import parse_types
from driver_gemm.gemm.operands import gemm_operands, parse_layout

ALPHA = 1.5
FIXED_TYPES = [{"a": "e4m3", "c": "bf16"}, {"a": "e4m3", "c": "fp16"}, {"a": "e4m3"},
               {"a": "e5m2", "b": "e4m3", "c": "bf16"}, {"a": "e4m3", "b": "e5m2", "c": "fp16"}]
counts: dict[str, int] = {}


def say(*parts) -> None:
    print(*parts, flush=True)


def tally(outcome: str) -> str:
    counts[outcome] = counts.get(outcome, 0) + 1
    return outcome


def rel_error(got: np.ndarray, expected: np.ndarray) -> float:
    got, expected = np.asarray(got, np.float64).ravel(), np.asarray(expected, np.float64).ravel()
    return float(np.linalg.norm(got - expected) / max(np.linalg.norm(expected), 1e-300))


def uploaded(device, stream, gemm, types, inputs):
    A = device.upload(np.frombuffer(operands.input_bytes(gemm.a, inputs.a, types.a), np.uint8), stream)
    B = device.upload(np.frombuffer(operands.input_bytes(gemm.b, inputs.b, types.b), np.uint8), stream)
    start = operands.output_bytes(gemm.c, types.c, inputs.c0)
    C = device.upload(np.frombuffer(start, np.uint8), stream)
    return A, B, C, len(start)


# ------------------------------------------------------------------------------------------ 1. fixed path

def fixed_path(device, stream, lt) -> None:
    say("--- 1. the fixed path (plan_matmul + CublasLtMatmul.prepare)")
    shapes = [(128, 96, 160), (1024, 512, 1024)]
    for node, (M, N, K), batch, beta, scaled in itertools.product(FIXED_TYPES, shapes, [1, 3], [0.0, -0.5],
                                                                  [False, True]):
        if (M, N, K) != shapes[0] and (batch, beta, scaled) != (1, 0.0, True):
            continue                                   # the big shape once, as the 3 % check runs it
        types = parse_types(node)
        scales = {"scale_a": 0.5, "scale_b": 2.0} if scaled else {}
        label = f"{types.label:<14} NT {M}x{N}x{K} x{batch} beta={beta:<4} scales={'0.5/2' if scaled else '1/1'}"
        gemm = gemm_operands(M, N, K, orders=parse_layout("NT"), batch=batch)
        attempt_fixed(device, stream, lt, label, types, gemm, beta, scales)
    say("--- 1b. refused at plan time (no GPU call)")
    for node, code, (M, N, K), ld in [({"a": "e4m3", "c": "bf16"}, "NN", (128, 96, 160), None),
                                      ({"a": "e5m2", "b": "e4m3", "c": "fp16"}, "NN", (128, 96, 160), None),
                                      ({"a": "e4m3", "c": "bf16"}, "NT", (1001, 513, 777),
                                       {"a": 784, "b": 784, "c": 520}),
                                      ({"a": "e5m2", "c": "bf16"}, "NT", (128, 96, 160), None)]:
        types = parse_types(node)
        gemm = gemm_operands(M, N, K, orders=parse_layout(code), ld=ld)
        attempt_fixed(device, stream, lt, f"{types.label:<14} {code} {M}x{N}x{K}{' ld' if ld else ''}", types,
                      gemm, 0.0, {})


def attempt_fixed(device, stream, lt, label, types, gemm, beta, scales) -> None:
    try:
        plan = cublaslt.plan_matmul(types, gemm, ALPHA, beta, **scales)
    except cublaslt.CublasLtUnsupported as exc:
        say(f"{label}  {tally('REFUSED-AT-PLAN')}: {exc.reason}")
        return
    inputs = operands.make_typed_inputs(gemm, types, seed=9, with_c=True)
    A, B, C, nbytes = uploaded(device, stream, gemm, types, inputs)
    try:
        lt.prepare(plan, A, B, C)()
        stream.synchronize()
        output = operands.read_output(gemm.c, C.download((nbytes,), np.uint8, stream).tobytes(), types.c)
        expected = operands.reference(inputs.a, inputs.b, ALPHA, beta, inputs.c0, **scales)
        error = rel_error(output.values, expected)
        ok = error <= dtypes.tolerance(types, gemm.K)
        say(f"{label}  {tally('ACCEPTED')} rel_err={error:.2e} {'within' if ok else 'OUTSIDE'} tolerance")
    except cublaslt.CublasLtUnsupported as exc:
        say(f"{label}  {tally('NOT-SUPPORTED')}: {exc.reason}")
    except Exception as exc:  # noqa: BLE001 -- a probe reports every outcome and goes on
        say(f"{label}  {tally('ERROR')}: {type(exc).__name__}: {str(exc)[:160]}")
    finally:
        for buffer in (A, B, C):
            buffer.close()


# -------------------------------------------------------------------------------------------- 2. variants

class Variants:
    """cuBLASLt calls built here for C = alpha * A @ B + beta * C with A row-major and B column-major (our NT),
    C row-major: cuBLASLt's TN on (B, A), m = N, n = M, with knobs the fixed path does not have."""

    def __init__(self, device, stream, log_path: Path):
        from nvmath.bindings import cublasLt
        self.lt, self.device, self.stream = cublasLt, device, stream
        device.make_current()             # the handle must belong to the context of the stream it runs on
        self.handle = cublasLt.create()
        self.workspace = device.alloc(cublaslt.WORKSPACE_BYTES)
        self.log_path = log_path
        self.logged: set[str] = set()

    def close(self) -> None:
        self.lt.destroy(self.handle)
        self.workspace.close()

    def _log(self, path: str | None, level: int) -> None:
        """cuBLASLt's own log into `path` at `level` (5: every call, with the reason for a refusal)."""
        try:
            if path:
                self.lt.logger_open_file(path)
            self.lt.logger_set_level(level)
        except Exception as exc:  # noqa: BLE001 -- the log is a help, not the probe
            say(f"(cuBLASLt logger unavailable: {exc})")

    def _attr(self, setter, handle, attribute, value, dtype_of):
        buffer = np.array(value, dtype=dtype_of(attribute))
        setter(handle, int(attribute), buffer.ctypes.data, buffer.nbytes)

    def run(self, *args, **kwargs):
        """`attempt`, with any other failure reported as that variant's outcome."""
        try:
            return self.attempt(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 -- a probe reports every outcome and goes on
            return tally("ERROR"), f"{type(exc).__name__}: {str(exc)[:160]}"

    def attempt(self, types, M, N, K, beta, *, scales_mode, out_of_place, fast_accum, scales=(0.5, 2.0), ld=None):
        """(outcome, relative error or reason) for one variant; `ld` pads leading dimensions (a, b, c)."""
        lt, device, stream = self.lt, self.device, self.stream
        gemm = gemm_operands(M, N, K, orders=parse_layout("NT"), ld=ld)
        inputs = operands.make_typed_inputs(gemm, types, seed=5, with_c=True)
        A, B, C, nbytes = uploaded(device, stream, gemm, types, inputs)
        D = device.upload(np.zeros(nbytes, np.uint8), stream) if out_of_place else C
        owned, created = [A, B, C] + ([D] if out_of_place else []), []
        log_it = scales_mode not in self.logged
        try:
            if log_it:
                self.logged.add(scales_mode)
                self._log(str(self.log_path.with_suffix(f".{scales_mode}.log")), 5)
            desc = lt.matmul_desc_create(cublaslt.COMPUTE_TYPES["COMPUTE_32F"], dtypes.ELEMENT_TYPES["fp32"]
                                         .cuda_data_type)
            created.append((lt.matmul_desc_destroy, desc))
            attribute, dtype_of = lt.MatmulDescAttribute, lt.get_matmul_desc_attribute_dtype
            set_desc = lt.matmul_desc_set_attribute
            self._attr(set_desc, desc, attribute.TRANSA, 1, dtype_of)
            self._attr(set_desc, desc, attribute.TRANSB, 0, dtype_of)
            # cuBLASLt's A is our B: its A scale is scale_b.
            lt_scales = (scales[1], scales[0])
            if scales_mode == "packed":
                # exactly as before the fix: [scale_a, scale_b] in one buffer, so cuBLASLt's A scale at +4 bytes
                both = device.upload(np.array(scales, np.float32), stream)
                owned.append(both)
                pointers = (both.address + 4, both.address)
            elif scales_mode == "separate":
                each = [device.upload(np.array([value], np.float32), stream) for value in lt_scales]
                owned += each
                pointers = tuple(buffer.address for buffer in each)
            else:
                pointers = None
            if pointers:
                self._attr(set_desc, desc, attribute.A_SCALE_POINTER, pointers[0], dtype_of)
                self._attr(set_desc, desc, attribute.B_SCALE_POINTER, pointers[1], dtype_of)
            if fast_accum:
                self._attr(set_desc, desc, attribute.FAST_ACCUM, 1, dtype_of)
            layouts = {}
            for role, element, rows, cols, ld in (("A", types.b, K, N, gemm.b.ld), ("B", types.a, K, M, gemm.a.ld),
                                                  ("C", types.c, N, M, gemm.c.ld), ("D", types.c, N, M, gemm.c.ld)):
                layouts[role] = lt.matrix_layout_create(element.cuda_data_type, rows, cols, ld)
                created.append((lt.matrix_layout_destroy, layouts[role]))
            d_layout = layouts["D"] if out_of_place else layouts["C"]
            preference = lt.matmul_preference_create()
            created.append((lt.matmul_preference_destroy, preference))
            self._attr(lt.matmul_preference_set_attribute, preference,
                       lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES, cublaslt.WORKSPACE_BYTES,
                       lt.get_matmul_preference_attribute_dtype)
            results = np.zeros(1, dtype=lt.matmul_heuristic_result_dtype)
            found = np.zeros(1, dtype=np.int32)
            try:
                lt.matmul_algo_get_heuristic(self.handle, desc, layouts["A"], layouts["B"], layouts["C"], d_layout,
                                             preference, 1, results.ctypes.data, found.ctypes.data)
            except lt.cuBLASLtError as exc:
                return tally("HEURISTIC-ERROR"), str(exc)[:100]
            if found[0] < 1:
                return tally("NO-ALGORITHM"), "the heuristic found none"
            # without scale pointers the scales go into alpha
            scalars = np.array([ALPHA * scales[0] * scales[1] if pointers is None else ALPHA, beta], np.float32)
            try:
                lt.matmul(self.handle, desc, scalars.ctypes.data, B.address, layouts["A"], A.address, layouts["B"],
                          scalars.ctypes.data + 4, C.address, layouts["C"], D.address, d_layout,
                          results.ctypes.data, self.workspace.address, cublaslt.WORKSPACE_BYTES, stream.address)
            except lt.cuBLASLtError as exc:
                return tally("MATMUL-REFUSED"), str(exc)[:100]
            stream.synchronize()
            output = operands.read_output(gemm.c, D.download((nbytes,), np.uint8, stream).tobytes(), types.c)
            expected = operands.reference(inputs.a, inputs.b, ALPHA, beta, inputs.c0, scale_a=scales[0],
                                          scale_b=scales[1])
            error = rel_error(output.values, expected)
            return tally("ACCEPTED"), f"rel_err={error:.2e}"
        finally:
            if log_it:
                self._log(None, 0)
            for destroy, handle in reversed(created):
                destroy(handle)
            for buffer in owned:
                buffer.close()


def variants(device, stream, out: Path) -> None:
    say("--- 2. variants (built here; e4m3 -> bf16 unless said)")
    probe = Variants(device, stream, out / "cublaslt-fp8.log")
    try:
        bf16 = parse_types({"a": "e4m3", "c": "bf16"})
        for scales_mode, out_of_place, fast_accum, beta in itertools.product(
                ["packed", "separate", "none"], [False, True], [False, True], [0.0, -0.5]):
            outcome, detail = probe.run(bf16, 128, 96, 160, beta, scales_mode=scales_mode,
                                        out_of_place=out_of_place, fast_accum=fast_accum)
            say(f"scales={scales_mode:<8} D={'own buffer' if out_of_place else 'in place'} "
                f"fast_accum={int(fast_accum)} beta={beta:<4} 128x96x160  {outcome} {detail}")
        say("--- 2b. the 16-byte dimension rule (separate scales, in place, plan rule bypassed; "
            "leading dimensions padded to 16 bytes where given, so that only the dimension is off)")
        padded_k = {"a": 784, "b": 784}
        for node, (M, N, K), ld in [({"a": "e4m3", "c": "bf16"}, (1024, 512, 784), None),
                                    ({"a": "e4m3", "c": "bf16"}, (1024, 512, 776), padded_k),
                                    ({"a": "e4m3", "c": "bf16"}, (1024, 512, 777), padded_k),
                                    ({"a": "e4m3", "c": "bf16"}, (1024, 520, 1024), None),
                                    ({"a": "e4m3", "c": "bf16"}, (1024, 516, 1024), {"c": 520}),
                                    ({"a": "e4m3", "c": "bf16"}, (1000, 512, 1024), None),
                                    ({"a": "e4m3", "c": "bf16"}, (1001, 512, 1024), None),
                                    ({"a": "e4m3"}, (1024, 516, 1024), None),
                                    ({"a": "e5m2", "c": "bf16"}, (128, 96, 160), None)]:
            types = parse_types(node)
            outcome, detail = probe.run(types, M, N, K, 0.0, scales_mode="separate", out_of_place=False,
                                        fast_accum=False, ld=ld)
            say(f"{types.label:<14} {M}x{N}x{K}{' ld ' + str(ld) if ld else ''}  {outcome} {detail}")
    finally:
        probe.close()


# ---------------------------------------------------------------------------------------------- 3. torch

CROSS_SHAPE = (1024, 512, 1024)


def ours_for_cross_check(device, stream, lt):
    """(inputs, float64 expected, our C or the reason we have none) for the torch comparison."""
    M, N, K = CROSS_SHAPE
    types = parse_types({"a": "e4m3", "c": "bf16"})
    gemm = gemm_operands(M, N, K, orders=parse_layout("NT"))
    inputs = operands.make_typed_inputs(gemm, types, seed=21)
    expected = operands.reference(inputs.a, inputs.b, scale_a=0.5, scale_b=2.0)[0]
    plan = cublaslt.plan_matmul(types, gemm, 1.0, 0.0, scale_a=0.5, scale_b=2.0)
    A, B, C, nbytes = uploaded(device, stream, gemm, types, inputs)
    try:
        lt.prepare(plan, A, B, C)()
        stream.synchronize()
        ours = operands.read_output(gemm.c, C.download((nbytes,), np.uint8, stream).tobytes(), types.c).values[0]
    except cublaslt.CublasLtUnsupported as exc:
        ours = exc.reason
    finally:
        for buffer in (A, B, C):
            buffer.close()
    return (gemm, types, inputs), expected, ours


def torch_cross_check(case, expected, ours) -> None:
    """torch._scaled_mm on the same bytes; run after driver-gemm's context is closed (no shared context)."""
    M, N, K = CROSS_SHAPE
    say(f"--- 3. torch._scaled_mm on the same inputs (e4m3 -> bf16, {M}x{N}x{K}, scales 0.5 and 2)")
    if isinstance(ours, str):
        say(f"ours refused: {ours}")
    else:
        say(f"ours: rel_err vs float64 {rel_error(ours, expected):.2e}")
    try:
        import torch
    except ImportError as exc:
        say(f"torch unavailable: {exc}")
        return
    gemm, types, inputs = case
    a_bytes = operands.input_bytes(gemm.a, inputs.a, types.a)           # row-major M x K
    b_bytes = operands.input_bytes(gemm.b, inputs.b, types.b)           # column-major K x N: N rows of K
    try:
        a = torch.frombuffer(bytearray(a_bytes), dtype=torch.uint8).view(torch.float8_e4m3fn).reshape(M, K).cuda()
        b = torch.frombuffer(bytearray(b_bytes), dtype=torch.uint8).view(torch.float8_e4m3fn).reshape(N, K).cuda()
        scale_a = torch.tensor(0.5, device="cuda")
        scale_b = torch.tensor(2.0, device="cuda")
        theirs = torch._scaled_mm(a, b.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
        theirs = theirs.float().cpu().numpy().astype(np.float64)
    except Exception as exc:  # noqa: BLE001
        say(f"torch._scaled_mm failed: {type(exc).__name__}: {str(exc)[:200]}")
        return
    say(f"torch._scaled_mm: rel_err vs float64 {rel_error(theirs, expected):.2e}")
    if not isinstance(ours, str):
        say(f"ours vs torch: rel diff {rel_error(ours, theirs):.2e}, max |diff| {np.max(np.abs(ours - theirs)):.3g}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")),
                        help="where cuBLASLt's logs go (default $OUT or .)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    cross = None
    with dg.Device(0) as device:
        stream = device.stream()
        with cublaslt.CublasLtMatmul(device, stream) as lt:
            for name, part in (("1", lambda: fixed_path(device, stream, lt)),
                               ("2", lambda: variants(device, stream, args.out)),
                               ("3", lambda: ours_for_cross_check(device, stream, lt))):
                try:
                    result = part()
                    cross = result if name == "3" else cross
                except Exception as exc:  # noqa: BLE001 -- one broken part must not hide the others
                    say(f"PART {name} FAILED: {type(exc).__name__}: {str(exc)[:300]}")
    if cross is not None:
        try:
            torch_cross_check(*cross)
        except Exception as exc:  # noqa: BLE001
            say(f"PART 3 FAILED: {type(exc).__name__}: {str(exc)[:300]}")
    say(f"=== fp8 probe summary ({time.perf_counter() - started:.1f} s): " +
        ", ".join(f"{name} {count}" for name, count in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
