"""The public API end to end on a GPU: kernels launched by hand, interop with CuPy, graph timing, the plugin."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import driver_gemm as dg

from conftest import ROOT, SPECS, plugin_args
from gpu_specs import with_measure

pytestmark = pytest.mark.gpu


def test_compile_launch_and_check_by_hand():
    M, N, K = 100, 70, 40
    rng = np.random.default_rng(1)
    a = rng.random((M, K), dtype=np.float32)
    b = rng.random((K, N), dtype=np.float32)
    with dg.Device(0) as device:
        stream = device.stream()
        kernel = dg.load_kernel(device, ROOT / "kernels" / "02_smem_tiles.cu", "sgemm_smem_tiles<16>")
        assert kernel.resources.registers > 0 and kernel.attributes.static_shared_bytes == 2 * 16 * 16 * 4
        A, B = device.upload(a, stream), device.upload(b, stream)
        C = device.alloc(4 * M * N)
        kernel.launch((math.ceil(N / 16), math.ceil(M / 16)), (16, 16),
                      [("ptr", A), ("ptr", B), ("ptr", C), ("int32", M), ("int32", N), ("int32", K)], stream)
        c = C.download((M, N), np.float32, stream)
        assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
        gemm = dg.CublasSgemm(device, stream)
        D = device.alloc(4 * M * N)
        gemm(A, B, D, dg.Shape(M, N, K))
        assert np.allclose(D.download((M, N), np.float32, stream), c, rtol=1e-5, atol=1e-5)
        gemm.close()


def test_spec_built_in_python_and_results_as_json(tmp_path):
    spec = dg.spec_from_dict({
        "name": "python-built",
        "shapes": [[127, 33, 65]],
        "measure": {"min_samples": 3, "min_time_s": 0, "timeout_s": 0.05},
        "kernels": [{"name": "v1", "source": str(ROOT / "kernels" / "01_naive_col_on_x.cu"),
                     "function": "sgemm_naive_col_on_x", "block": [32, 32],
                     "grid": ["ceil(N / 32)", "ceil(M / 32)"]}],
    })
    run = dg.run_spec(spec)
    assert run.ok and [c.kernel for c in run.cases] == ["cublas", "v1"]
    again = dg.load_results(run.write_json(tmp_path / "r.json"))
    assert [c.verdict for c in dg.compare_runs(run, again)] == ["SAME", "SAME"]


def test_cupy_context_stream_and_memory():
    cp = pytest.importorskip("cupy")
    from cuda.bindings import driver

    M = N = K = 64
    a = cp.random.random((M, K), dtype=cp.float32)
    b = cp.random.random((K, N), dtype=cp.float32)
    c = cp.full((M, N), cp.nan, dtype=cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    _, context = driver.cuCtxGetCurrent()          # CuPy's (primary) context
    with dg.Device(0, context=int(context)) as device:
        assert not device.owns_context
        ours = device.stream(handle=stream.ptr)
        kernel = dg.load_kernel(device, ROOT / "kernels" / "01_naive_col_on_x.cu", "sgemm_naive_col_on_x")
        kernel.launch((2, 2), (32, 32), [("ptr", a.data.ptr), ("ptr", b.data.ptr), ("ptr", c.data.ptr),
                                         ("int32", M), ("int32", N), ("int32", K)], ours)
        stream.synchronize()
        assert cp.allclose(c, a @ b, rtol=1e-5)
        spec = dg.load_spec(SPECS / "seed.yaml").select(["v4"], ["127x33x65"])
        spec = with_measure(spec, min_time_s=0, timeout_s=0.05)
        run = dg.run_spec(spec, dg.RunOptions(), dg.Placement(context=int(context), stream=stream.ptr))
        assert run.ok
    # CuPy's context survived us: it still computes
    assert float(cp.sum(a @ b)) > 0


@pytest.mark.parametrize("kernel, shape, long", [("v4", "2048x2048x2048", True), ("v1", "32x32x32", False)])
def test_graph_mode_against_event_mode(kernel, shape, long, capsys):
    spec = dg.load_spec(SPECS / "seed.yaml").select([kernel], [shape])
    spec = with_measure(dataclasses.replace(spec, baseline=False), flush_l2=False, min_samples=20, min_time_s=0.2,
                        timeout_s=1.0)
    events = dg.run_spec(spec).cases[0].timing
    graph_spec = with_measure(spec, mode="graph", graph_launches=50)
    graph = dg.run_spec(graph_spec).cases[0].timing
    with capsys.disabled():
        print(f"\n{kernel} {shape}: events median {events.median_ms * 1e3:.2f} us, "
              f"graph per launch {graph.median_ms * 1e3:.2f} us")
    if long:
        assert graph.median_ms == pytest.approx(events.median_ms, rel=0.05)
    else:
        assert graph.median_ms < events.median_ms


def test_plugin_runs_spec_cases_on_the_gpu(pytester, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(f"""
shapes: [[127, 33, 65]]
measure: {{min_time_s: 0, timeout_s: 0.05}}
kernels:
  - name: v1
    source: {ROOT / 'kernels' / '01_naive_col_on_x.cu'}
    function: sgemm_naive_col_on_x
    block: [32, 32]
    grid: [ceil(N / 32), ceil(M / 32)]
  - name: v3-no-tail
    source: {ROOT / 'tests' / 'kernels' / 'v3_no_tail_write.cu'}
    function: sgemm_coarsen_1d_no_tail
    params: {{BM: 64, BN: 64, BK: 16, TN: 4}}
    block: [BN / TN, BM]
    grid: [ceil(N / BN), ceil(M / BM)]
    tile: [BM, BN]
""")
    result = pytester.runpytest(*plugin_args(), "--driver-gemm-spec", str(good), "--driver-gemm-allow-outside-sources",
                                "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*v3-no-tail*127x33x65: FAIL: 127 elements unwritten: columns 32*"])


def test_page_locked_arrays_copy_both_ways_and_unlock_when_closed():
    """Uploads from and downloads into page-locked arrays (a session's large operands and output copy) carry
    the same bytes as pageable ones; a closed lock unregisters, so the same memory can be locked again."""
    rng = np.random.default_rng(3)
    host = rng.random((512, 384), dtype=np.float32)
    with dg.Device(0) as device:
        stream = device.stream()
        buffer = device.alloc(host.nbytes)
        lock = device.page_lock(host)
        buffer.upload(host, stream)
        into = np.empty_like(host)
        with device.page_lock(into):
            assert buffer.download_into(into, stream) is into and np.array_equal(into, host)
        lock.close()
        device.page_lock(host).close()            # unregistered by the close above, so this lock succeeds
        assert np.array_equal(buffer.download((512, 384), np.float32, stream), host)
        with pytest.raises(ValueError):
            buffer.download_into(np.empty((600, 384), np.float32), stream)
