"""Which fp8 cuBLASLt matmuls run on this GPU: a probe for the support table.

    python3 scripts/probe_fp8.py     (on a GPU machine; one line per combination tried)
"""
import itertools
import numpy as np
import driver_gemm as dg
from driver_gemm.measure import cublaslt, dtypes, operands
from driver_gemm.measure.dtypes import parse_types
from driver_gemm.measure.operands import gemm_operands, parse_layout
from driver_gemm.measure.cublaslt import plan_matmul
from driver_gemm.measure.verify import compare

with dg.Device(0) as device:
    stream = device.stream()
    for c, code, batch, beta, scaled, K in itertools.product(["bf16", "fp16", "fp32"], ["NT", "TN", "NN"], [1, 3], [0.0, -0.5], [False, True], [160]):
        types = parse_types({"a": "e4m3", "c": c})
        try:
            gemm = gemm_operands(128, 96, K, orders=parse_layout(code), batch=batch)
            scales = {"scale_a": 0.5, "scale_b": 2.0} if scaled else {}
            plan = plan_matmul(types, gemm, 1.5, beta, **scales)
        except Exception as exc:
            print(c, code, batch, beta, scaled, "PLAN-REFUSED", str(exc)[:80]); continue
        inputs = operands.make_typed_inputs(gemm, types, seed=9, with_c=True)
        A = device.upload(np.frombuffer(operands.input_bytes(gemm.a, inputs.a, types.a), np.uint8), stream)
        B = device.upload(np.frombuffer(operands.input_bytes(gemm.b, inputs.b, types.b), np.uint8), stream)
        start = operands.output_bytes(gemm.c, types.c, inputs.c0)
        C = device.upload(np.frombuffer(start, np.uint8), stream)
        try:
            with cublaslt.CublasLtMatmul(device, stream) as lt:
                lt.prepare(plan, A, B, C)()
                raw = C.download((len(start),), np.uint8, stream).tobytes()
            output = operands.read_output(gemm.c, raw, types.c)
            expected = operands.reference(inputs.a, inputs.b, 1.5, beta, inputs.c0, **scales)
            v = compare(output.values.reshape(-1, gemm.N), expected.reshape(-1, gemm.N), rel_tolerance=dtypes.tolerance(types, gemm.K))
            print(c, code, batch, beta, scaled, v.status, v.rel_fro_error)
        except Exception as exc:
            print(c, code, batch, beta, scaled, "ERR", str(exc)[:90])
        for b in (A, B, C): b.close()
