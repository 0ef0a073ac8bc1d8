"""The baseline check's own logic, without a GPU: the interleaved order, medians of medians, timers, the table."""

import dataclasses
import importlib.util
import sys
import time
from pathlib import Path

import pytest

from driver_gemm.measure.clocks import GPU_IDLE, ClockReading

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("baseline_check", ROOT / "scripts" / "baseline_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module        # its dataclasses resolve their annotations through sys.modules
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_rounds_alternate_and_swap_the_side_that_goes_first(check):
    order = check.round_order(3)
    assert order == ["ours", "torch", "torch", "ours", "ours", "torch"]
    assert order[0] == "ours"                     # torch's budget is the time our first measurement took
    for rounds in range(1, 6):
        order = check.round_order(rounds)
        assert order.count("ours") == order.count("torch") == rounds
        pairs = [order[i:i + 2] for i in range(0, len(order), 2)]
        assert all(sorted(pair) == ["ours", "torch"] for pair in pairs)   # each round times both sides once


def test_a_side_is_the_median_of_its_rounds_medians(check):
    rounds = [check.SideRound(0.21, 1.0, 1600.0, 1550.0), check.SideRound(0.19, 1.1, 1500.0, 1490.0),
              check.SideRound(0.30, 0.9, 1700.0, 1650.0)]
    figures = check.side_figures(rounds)
    assert figures["ms"] == pytest.approx(0.21)    # not the mean (0.233): one slow round does not move it
    assert figures["mhz"] == pytest.approx(1600.0)
    assert figures["min_mhz"] == pytest.approx(1490.0)
    assert figures["round_ms"] == [0.21, 0.19, 0.30]
    even = check.side_figures(rounds[:2])
    assert even["ms"] == pytest.approx(0.20)
    no_clock = check.side_figures([check.SideRound(1.0, 1.0), check.SideRound(3.0, 1.0)])
    assert no_clock["ms"] == pytest.approx(2.0) and no_clock["mhz"] is None and no_clock["min_mhz"] is None
    assert check.side_figures([])["ms"] is None


def test_short_kernels_get_the_graph_timer_long_ones_do_bench(check):
    assert check.torch_timer_kind(0.008, graph_possible=True) == "cuda-graph"
    assert check.torch_timer_kind(0.008, graph_possible=False) == "do_bench+launch"   # the table says so
    assert check.torch_timer_kind(0.19, graph_possible=False) == "do_bench"
    assert check.torch_timer_kind(0.19, graph_possible=True) == "do_bench"
    assert check.torch_timer_kind(check.SMALL_KERNEL_MS, graph_possible=True) == "do_bench"


def test_do_bench_gets_the_time_our_side_took(check):
    assert check.do_bench_rep_ms(1.234) == 1234
    assert check.do_bench_rep_ms(0.0) == check.MIN_REP_MS


def test_clock_figures_leave_idle_readings_out(check):
    readings = [ClockReading(1980, GPU_IDLE), ClockReading(1620, 0x4), ClockReading(1500, 0x4),
                ClockReading(1700, 0)]
    assert check.clock_figures(readings) == (1620.0, 1500.0)
    assert check.clock_figures([ClockReading(1980, GPU_IDLE)]) == (None, None)
    assert check.clock_figures([]) == (None, None)


class FakeClocks:
    reference_mhz = 1980.0

    def __init__(self, values):
        self.values, self.reads = list(values), 0

    def read(self):
        self.reads += 1
        return ClockReading(self.values[(self.reads - 1) % len(self.values)]) if self.values else None


def test_clock_watch_reads_while_the_block_runs_and_stops_after(check):
    source = FakeClocks([1500, 1600, 1700])
    with check.ClockWatch(source, interval_s=0.005) as watch:
        time.sleep(0.1)
    reads = source.reads
    assert reads >= 3 and len(watch.readings) == reads
    time.sleep(0.03)
    assert source.reads == reads                   # the thread has ended with the block
    median, lowest = watch.figures()
    assert lowest == 1500.0 and median in (1500.0, 1600.0, 1700.0)
    with check.ClockWatch(None) as nothing:        # no NVML: no thread, no figures
        pass
    assert nothing.figures() == (None, None)


def test_a_row_compares_medians_of_medians_and_needs_a_good_check(check):
    ours = [check.SideRound(0.200, 1.0, 1610.0, 1590.0), check.SideRound(0.202, 1.0, 1600.0, 1580.0),
            check.SideRound(0.260, 1.0, 1500.0, 1480.0)]
    theirs = [check.SideRound(0.198, 1.0, 1605.0, 1590.0), check.SideRound(0.199, 1.0, 1602.0, 1585.0),
              check.SideRound(0.150, 1.0, 1800.0, 1700.0)]
    row = check.case_row("bf16", "NN", "4096x4096x4096", ours, theirs, torch_timer="do_bench",
                         check="ok (rel err 1e-03 over 16 rows)", error=None, limit_pct=3.0)
    assert row["ours_ms"] == pytest.approx(0.202) and row["torch_ms"] == pytest.approx(0.198)
    assert row["ratio"] == pytest.approx(0.202 / 0.198)
    assert row["within_limit"] is True
    assert row["ours_mhz"] == pytest.approx(1600.0) and row["torch_mhz"] == pytest.approx(1605.0)
    assert row["ours_min_mhz"] == 1480.0 and row["torch_min_mhz"] == 1585.0
    assert row["rounds"] == 3 and row["torch_round_ms"] == [0.198, 0.199, 0.150]

    tight = check.case_row("bf16", "NN", "4096x4096x4096", ours, theirs, torch_timer="do_bench",
                           check="ok", error=None, limit_pct=1.0)
    assert tight["within_limit"] is False          # 2.0% apart
    failed = check.case_row("bf16", "NN", "4096x4096x4096", ours, theirs, torch_timer="do_bench",
                            check="FAILED (rel err 1e+00 over 16 rows)", error=None, limit_pct=3.0)
    assert failed["within_limit"] is False
    cut = check.case_row("bf16", "NN", "8192x8192x8192", ours[:1], [], torch_timer=None, check="ok",
                         error="timeout (over 25 s)", limit_pct=3.0)
    assert cut["ratio"] is None and cut["within_limit"] is False and cut["rounds"] == 0


def test_the_table_shows_both_clocks_and_the_timer(check):
    ours = [check.SideRound(0.0082, 1.0, 1755.0, 1700.0)]
    theirs = [check.SideRound(0.0080, 1.0, 1740.0, 1700.0)]
    good = check.case_row("fp16", "NN", "1024x512x1024", ours, theirs, torch_timer="cuda-graph",
                          check="ok (rel err 2e-04 over 16 rows)", error=None, limit_pct=3.0)
    cut = check.case_row("fp16", "NN", "8192x8192x8192", [], [], torch_timer=None, check=None,
                         error="timeout (over 25 s)", limit_pct=3.0)
    header, first, second = check.format_table([good, cut], 3.0)
    assert "ours MHz" in header and "torch MHz" in header and "torch timer" in header and "within 3%" in header
    fields = first.split()
    assert fields[:6] == ["fp16", "NN", "1024x512x1024", "0.0082", "0.0080", f"{0.0082 / 0.0080:.3f}"]
    assert fields[6:10] == ["1755", "1740", "cuda-graph", "yes"]     # 2.5% apart, check ok: within 3%
    assert second.split()[3:10] == ["-", "-", "-", "-", "-", "-", "NO"]
    assert second.endswith("timeout (over 25 s)")


class Recorder:
    """What the fakes of one case saw, in order."""

    def __init__(self):
        self.calls = []


class FakeSummary:
    def __init__(self, median_ms, wall_s):
        self.median_ms, self.wall_s = median_ms, wall_s


class FakeTorch:
    class cuda:
        @staticmethod
        def synchronize():
            pass


class FakeStream:
    def synchronize(self):
        pass


class FakeFlusher:
    class buffer:
        nbytes = 1 << 20


def fake_case(check, monkeypatch, recorder, our_ms, graph_fails=False):
    """Wire run_case to fakes: our measurement, torch's timers, no GPU."""
    import driver_gemm.measure.timing as timing

    class FakeOurCase:
        check = "ok (rel err 1e-03 over 16 rows)"

        def __init__(self, *args):
            recorder.calls.append(("case", args[-1]))
            self.launch = lambda: None

        def close(self):
            recorder.calls.append(("closed",))

    walls = iter([0.8, 1.1, 0.9, 1.3])

    def fake_measure(launch, device, stream, settings, flusher, gate):
        wall = next(walls)
        recorder.calls.append(("ours", settings.timeout_s, wall))
        return FakeSummary(our_ms, wall), []

    class FakeGraphTimer:
        def __init__(self, torch, operation, flush_bytes):
            if graph_fails:
                raise TypeError("Event() got an unexpected keyword argument 'external'")
            recorder.calls.append(("graph built", flush_bytes))

        def median_ms(self, seconds):
            recorder.calls.append(("torch graph", seconds))
            return our_ms

    class FakeTorchSide:
        large_harness = "triton do_bench"

        def time_large(self, operation, seconds):
            recorder.calls.append(("torch do_bench", seconds))
            return our_ms * 1.01

        def time_burst(self, operation, seconds, launches, rest_ms):
            recorder.calls.append(("torch burst", launches, rest_ms))
            return our_ms

    monkeypatch.setattr(check, "OurCase", FakeOurCase)
    monkeypatch.setattr(check, "torch_operands", lambda torch, name, M, N, K: ("A", "B view", "B stored"))
    monkeypatch.setattr(check, "storage_codes", lambda torch, tensor: tensor)
    monkeypatch.setattr(check, "torch_operation", lambda torch, name, operands: (lambda: None))
    monkeypatch.setattr(check, "GraphTimer", FakeGraphTimer)
    monkeypatch.setattr(timing, "measure", fake_measure)
    return FakeTorchSide()


def case_args(check, rounds=2):
    return check.argparse.Namespace(our_timeout=1.0, rounds=rounds, shape_timeout=25, limit=3.0, kernels=False,
                                     kernel_launches=50, operands="torch")


def test_a_case_alternates_the_sides_and_gives_torch_the_time_ours_took(check, monkeypatch):
    recorder = Recorder()
    torch_side = fake_case(check, monkeypatch, recorder, our_ms=0.2)
    row = check.run_case("bf16", (4096, 4096, 4096), case_args(check, rounds=2), None, FakeStream(), None,
                         FakeFlusher(), None, FakeClocks([1600]), FakeTorch(), torch_side)
    assert recorder.calls[0] == ("case", ("A", "B stored"))      # torch's operands, B as it lies in memory
    del recorder.calls[0]
    sides = [call[0] for call in recorder.calls]
    assert sides == ["ours", "torch do_bench", "torch do_bench", "ours", "closed"]
    assert recorder.calls[1][1] == 0.8 and recorder.calls[2][1] == 0.8   # the wall time of the ours before them
    assert row["torch_timer"] == "do_bench" and row["rounds"] == 2
    assert row["ratio"] == pytest.approx(1 / 1.01) and row["within_limit"] is True
    assert row["ours_mhz"] == 1600.0 and row["torch_mhz"] == 1600.0


def test_a_burst_of_ours_is_set_against_torch_timed_as_a_warm_burst_not_by_do_bench(check, monkeypatch):
    recorder = Recorder()
    torch_side = fake_case(check, monkeypatch, recorder, our_ms=0.008)     # short: no graph either
    row = check.run_case("bf16", (1024, 512, 1024), case_args(check, rounds=1), None, FakeStream(), None,
                         FakeFlusher(), None, None, FakeTorch(), torch_side, "burst:8:1000")
    assert [call[0] for call in recorder.calls] == ["case", "ours", "torch burst", "closed"]
    assert recorder.calls[2] == ("torch burst", 8, 1000.0)
    assert row["torch_timer"] == "burst:8:1000" and row["samples"] == "burst:8:1000"


def test_own_operands_leave_our_side_to_draw_its_own(check, monkeypatch):
    recorder = Recorder()
    torch_side = fake_case(check, monkeypatch, recorder, our_ms=0.2)
    args = case_args(check, rounds=1)
    args.operands = "own"
    check.run_case("bf16", (4096, 4096, 4096), args, None, FakeStream(), None, FakeFlusher(), None,
                   FakeClocks([1600]), FakeTorch(), torch_side)
    assert recorder.calls[0] == ("case", None)


def test_a_short_kernel_is_timed_in_a_graph_and_falls_back_to_do_bench_if_it_cannot_be(check, monkeypatch):
    recorder = Recorder()
    torch_side = fake_case(check, monkeypatch, recorder, our_ms=0.008)
    row = check.run_case("fp16", (1024, 512, 1024), case_args(check, rounds=1), None, FakeStream(), None,
                         FakeFlusher(), None, None, FakeTorch(), torch_side)
    assert [call[0] for call in recorder.calls] == ["case", "ours", "graph built", "torch graph", "closed"]
    assert recorder.calls[2][1] == FakeFlusher.buffer.nbytes        # the same flush size as ours
    assert row["torch_timer"] == "cuda-graph" and row["ours_mhz"] is None

    recorder = Recorder()
    torch_side = fake_case(check, monkeypatch, recorder, our_ms=0.008, graph_fails=True)
    row = check.run_case("fp16", (1024, 512, 1024), case_args(check, rounds=1), None, FakeStream(), None,
                         FakeFlusher(), None, None, FakeTorch(), torch_side)
    assert [call[0] for call in recorder.calls] == ["case", "ours", "torch do_bench", "closed"]
    assert row["torch_timer"] == "do_bench+launch" and row["error"] is None


def test_kernel_figures_compare_the_summed_medians_and_the_kernel_names(check):
    ours = {"sm90_xmma_gemm_bf16": {"launches": 50, "median_us": 9.5}}
    same = check.kernel_figures(ours, {"sm90_xmma_gemm_bf16": {"launches": 50, "median_us": 10.0}})
    assert same["same_kernels"] and same["ours_us"] == 9.5 and same["ratio"] == pytest.approx(0.95)
    other = check.kernel_figures(ours, {"cutlass_a": {"launches": 50, "median_us": 8.0},
                                        "splitk_reduce": {"launches": 50, "median_us": 2.0}})
    assert not other["same_kernels"] and other["torch_us"] == 10.0
    assert check.kernel_figures({}, {})["ratio"] is None and not check.kernel_figures({}, {})["same_kernels"]
    rows = [{"combination": "bf16", "shape": "1024x512x1024", "kernels": other}, {"combination": "fp16"}]
    lines = check.kernel_table(rows)
    assert len(lines) == 2 and "NO: cutlass_a | splitk_reduce" in lines[1] and "0.950" in lines[1]
    assert check.kernel_table([{"combination": "fp16"}]) == []


def test_kernel_durations_keep_only_the_device_side_and_take_medians(check, monkeypatch):
    import types

    class Range:
        def __init__(self, us):
            self.us = us

        def elapsed_us(self):
            return self.us

    class Event:
        def __init__(self, name, device_type, us):
            self.name, self.device_type, self.time_range = name, device_type, Range(us)

    recorded = [Event("gemm", "DeviceType.CUDA", us) for us in (9.0, 10.0, 30.0)]
    recorded += [Event("cudaLaunchKernel", "DeviceType.CPU", 4.0), Event("gemm", "DeviceType.CUDA", 0)]

    class Session:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def events(self):
            return recorded

    profiler = types.SimpleNamespace(ProfilerActivity=types.SimpleNamespace(CUDA="cuda"),
                                     profile=lambda activities: Session())
    monkeypatch.setitem(sys.modules, "torch.profiler", profiler)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(profiler=profiler))
    calls = []
    result = check.kernel_durations(None, lambda: calls.append(1), lambda: None, launches=3)
    assert len(calls) == 4                                   # one outside the session, then the launches
    assert result == {"gemm": {"launches": 3, "median_us": 10.0}}


def test_a_row_per_sample_pattern_and_the_table_names_them(check):
    ours = [check.SideRound(0.20, 1.0, 1600.0, 1590.0)]
    theirs = [check.SideRound(0.19, 1.0, 1700.0, 1690.0)]
    flush = check.case_row("bf16", "NN", "4096x4096x4096", ours, theirs, torch_timer="do_bench", check="ok",
                           error=None, limit_pct=3.0)
    burst = check.case_row("bf16", "NN", "4096x4096x4096", ours, theirs, torch_timer="do_bench", check="ok",
                           error=None, limit_pct=3.0, samples="burst:8:100")
    assert flush["samples"] == "flush" and burst["samples"] == "burst:8:100"
    assert "samples" not in check.format_table([flush], 3.0)[0]          # the default table as it was
    header, first, second = check.format_table([flush, burst], 3.0)
    assert "samples" in header and " flush " in first and "burst:8:100" in second


# ------------------------------------------------------------------------- a spec's kernel (--kernel)

TMA_BF16 = ROOT / "specs" / "tma-bf16.yaml"


@pytest.mark.parametrize("value, named", [
    ("nocolon", "give SPEC.yaml:NAME"),
    (f"{ROOT}/specs/missing.yaml:v12p", "no spec file"),
    (f"{TMA_BF16}:v99", "no kernel named 'v99' (its kernels: v12, v12-bf16-out, v12p"),
    (f"{TMA_BF16}:", "give SPEC.yaml:NAME"),
])
def test_kernel_option_refuses_a_malformed_value_naming_it(check, capsys, value, named):
    with pytest.raises(SystemExit) as stop:
        check.main(["--kernel", value])
    assert stop.value.code == 2
    message = capsys.readouterr().err
    assert repr(value) in message and named in message
    assert "Traceback" not in message


def test_kernel_option_refuses_cupti_durations_beside_it(check, capsys):
    with pytest.raises(SystemExit):
        check.main(["--kernel", f"{TMA_BF16}:v12p", "--kernels"])
    assert "--kernels" in capsys.readouterr().err


def test_a_kernel_value_gives_the_spec_entry_with_its_source_found(check):
    kernel = check.read_spec_kernel(f"{TMA_BF16}:v12p-bf16-out")
    assert kernel.name == "v12p-bf16-out" and kernel.dispatch is None
    assert Path(kernel.entry["source"]).is_file() and Path(kernel.entry["source"]).is_absolute()
    assert kernel.entry["signature"][0]["name"] == "map_a"            # the YAML anchor resolved
    running, source = check.kernel_params(kernel, (4096, 4096, 4096))
    assert (dict(running.params), source) == (kernel.entry["params"], "its own params")


def test_a_kernel_with_a_dispatch_table_runs_the_entry_for_the_shape(check):
    kernel = check.read_spec_kernel(f"{ROOT}/specs/suite.yaml:v13-bf16-out")
    assert kernel.dispatch is not None
    entries = kernel.dispatch.entries
    own = next(index for index, entry in enumerate(entries) if entry.kernel is None)
    shape = entries[own].shape
    running, source = check.kernel_params(kernel, (shape.M, shape.N, shape.K))
    assert source == f"dispatch: exact entry {own} ({shape.label})"
    assert running.name == "v13-bf16-out"
    assert dict(running.params) == {**kernel.entry["params"], **entries[own].params}
    # an entry naming a member runs the member's kernel entry, with the entry's params over its own
    picked = next(index for index, entry in enumerate(entries) if entry.kernel is not None)
    shape = entries[picked].shape
    running, source = check.kernel_params(kernel, (shape.M, shape.N, shape.K))
    member_entry, _ = kernel.members[entries[picked].kernel]
    assert running.name == entries[picked].kernel == member_entry["name"] and Path(member_entry["source"]).is_file()
    assert dict(running.params) == {**member_entry["params"], **entries[picked].params}


def test_the_kernels_types_and_layout_pick_the_combination(check):
    fp32_out = check.kernel_combination(check.read_spec_kernel(f"{TMA_BF16}:v12p").entry)
    bf16_out = check.kernel_combination(check.read_spec_kernel(f"{TMA_BF16}:v12p-bf16-out").entry)
    fp8 = check.kernel_combination(check.read_spec_kernel(f"{ROOT}/specs/fp8.yaml:v13-fp8").entry)
    tf32 = check.kernel_combination(check.read_spec_kernel(f"{ROOT}/specs/tma.yaml:v11").entry)
    assert (fp32_out.a, fp32_out.c, fp32_out.layout) == ("bf16", "fp32", "NN")
    assert (bf16_out.a, bf16_out.c, bf16_out.torch_op) == ("bf16", "bf16", "torch.mm")
    assert (fp8.a, fp8.c, fp8.layout, fp8.scales, fp8.torch_op) == ("e4m3", "bf16", "NT", (0.5, 2.0),
                                                                    "torch._scaled_mm")
    assert (tf32.a, tf32.c) == ("tf32", "fp32")
    assert check.kernel_fields({"precision": "tf32", "signature": ["C"]}, tf32) == \
        {"signature": ["C"], "types": {"a": "tf32", "b": "tf32"}}


@pytest.mark.parametrize("entry, named", [
    ({"types": {"a": "int8"}}, "int8/int8 -> int32, layout NN"),
    ({"types": {"a": "bf16", "c": "fp32"}, "layout": "TN"}, "bf16/bf16 -> fp32, layout TN"),
    ({"types": {"a": "bf16"}, "layouts": {"a": "col"}}, "sets layouts"),
])
def test_an_unsupported_combination_is_refused_saying_what_it_is(check, entry, named):
    with pytest.raises(check.KernelUnsupported) as refused:
        check.kernel_combination(entry)
    assert named in str(refused.value)


class FakeTensor:
    def __init__(self, shape, dtype, transposed=False):
        self.shape, self.dtype, self.transposed = shape, dtype, transposed

    def __mul__(self, other):
        return self

    def __sub__(self, other):
        return self

    def to(self, dtype):
        return FakeTensor(self.shape, dtype, self.transposed)

    def t(self):
        return FakeTensor(self.shape[::-1], self.dtype, not self.transposed)


class FakeTensorTorch:
    """torch's names the kernel rows use: dtypes as strings, tensors that remember their shape and dtype."""

    bfloat16, float16, float32, float64, float8_e4m3fn = "bfloat16", "float16", "float32", "float64", "float8"

    def __init__(self):
        import types
        self.mm_calls = []
        self.backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)))

    def rand(self, *shape, device, dtype="float32"):
        return FakeTensor(shape, dtype)

    def empty(self, *shape, device, dtype):
        return FakeTensor(shape, dtype)

    def tensor(self, value, device):
        return FakeTensor((), "float32")

    def mm(self, a, b, out_dtype=None):
        self.mm_calls.append((a.dtype, b.dtype, out_dtype))
        return FakeTensor((a.shape[0], b.shape[1]), out_dtype or a.dtype)


def test_the_kernels_types_pick_torchs_operands_and_op(check):
    torch = FakeTensorTorch()
    fp32_out = check.kernel_combination({"types": {"a": "bf16", "c": "fp32"}})
    operands = check.kernel_torch_operands(torch, fp32_out, 256, 128, 64)
    assert (operands.a.shape, operands.a.dtype) == ((256, 64), "bfloat16")
    assert (operands.b.shape, operands.b.dtype, operands.b.transposed) == ((64, 128), "bfloat16", False)
    assert (operands.c.shape, operands.c.dtype) == ((256, 128), "float32")
    operands.operation()
    assert torch.mm_calls[-1] == ("bfloat16", "bfloat16", "float32")      # torch writes fp32 too
    expected = operands.reference(operands.a, operands.b, operands.c)
    assert expected.dtype == "float64" and operands.reference() is expected   # worked out once

    bf16_out = check.kernel_torch_operands(torch, check.kernel_combination({"types": {"a": "bf16"}}), 256, 128, 64)
    assert bf16_out.c.dtype == "bfloat16" and bf16_out.torch_op == "torch.mm"
    fp8 = check.kernel_torch_operands(
        torch, check.kernel_combination({"types": {"a": "e4m3", "c": "bf16"}, "layout": "NT"}), 256, 128, 64)
    assert (fp8.b.shape, fp8.b.dtype, fp8.b.transposed) == ((64, 128), "float8", True)   # B column-major: a view
    assert fp8.c.dtype == "bfloat16"
    # The suite's TF32 kernel takes B column-major: torch.mm with TF32 on a transposed view of an N x K tensor.
    tf32_nt = check.kernel_combination(check.read_spec_kernel(f"{ROOT}/specs/suite.yaml:v13-tf32").entry)
    assert (tf32_nt.a, tf32_nt.c, tf32_nt.layout, tf32_nt.torch_op) == ("tf32", "fp32", "NT", "torch.mm allow_tf32")
    tf32 = check.kernel_torch_operands(torch, tf32_nt, 256, 128, 64)
    assert (tf32.b.shape, tf32.b.dtype, tf32.b.transposed) == ((64, 128), "float32", True)
    tf32.operation()
    assert torch.mm_calls[-1] == ("float32", "float32", None) and torch.backends.cuda.matmul.allow_tf32
    fp8_fp32 = check.kernel_combination(check.read_spec_kernel(f"{ROOT}/specs/fp8.yaml:v13-fp8-fp32-out").entry)
    assert (fp8_fp32.c, fp8_fp32.layout, fp8_fp32.torch_op) == ("fp32", "NT", "torch._scaled_mm out_dtype=float32")


class FakeRecord:
    def __init__(self, median_ms, wall_s, ok=True, message=""):
        import types
        self.ok, self.status, self.message = ok, "PASS" if ok else "FAIL", message
        self.timing = types.SimpleNamespace(median_ms=median_ms, wall_s=wall_s) if ok else None
        self.verification = types.SimpleNamespace(rel_fro_error=2e-3)


def fake_kernel_case(check, monkeypatch, recorder, our_ms=0.5, ok=True):
    """run_kernel_case wired to fakes: check_kernel, torch's operands and timers."""
    import driver_gemm

    torch_side = fake_case(check, monkeypatch, recorder, our_ms)
    walls = iter([0.8, 1.1, 0.9, 1.3])

    def fake_check_kernel(source, function, a, b, c, **keywords):
        recorder.calls.append(("ours", source, function, (a, b, c), keywords))
        return FakeRecord(our_ms, next(walls), ok, "12 of 16777216 elements wrong, first at (0, 3)")

    def fake_operands(torch, combination, M, N, K):
        recorder.calls.append(("operands", combination.c, (M, N, K)))
        return check.KernelOperands("A", "B", "C", lambda: None, "torch's product", combination.torch_op)

    monkeypatch.setattr(driver_gemm, "check_kernel", fake_check_kernel)
    monkeypatch.setattr(check, "kernel_torch_operands", fake_operands)
    return torch_side


def test_a_kernel_case_checks_on_torchs_tensors_and_alternates_with_torch(check, monkeypatch):
    recorder = Recorder()
    torch_side = fake_kernel_case(check, monkeypatch, recorder, our_ms=0.5)
    kernel = check.read_spec_kernel(f"{TMA_BF16}:v12p-bf16-out")
    row = check.run_kernel_case(kernel, (4096, 4096, 4096), case_args(check, rounds=2), FakeClocks([1600]),
                                FakeTorch(), torch_side, 1 << 20, "stream", "do-bench")
    assert recorder.calls[0] == ("operands", "bf16", (4096, 4096, 4096))
    assert [call[0] for call in recorder.calls[1:]] == ["ours", "torch do_bench", "torch do_bench", "ours"]
    assert recorder.calls[2][1] == 0.8 and recorder.calls[3][1] == 0.8    # torch gets our round's wall time
    _, source, function, tensors, keywords = recorder.calls[1]
    assert source == kernel.entry["source"] and function == "gemm_bf16_tma_ws_persistent"
    assert tensors == ("A", "B", "C")                                       # the tensors torch multiplies
    assert keywords["reference"] == "torch's product" and keywords["stream"] == "stream"
    assert keywords["params"] == kernel.entry["params"] and keywords["grid"] == kernel.entry["grid"]
    for field in ("signature", "shared_bytes", "types", "arch", "require"):
        assert keywords[field] == kernel.entry[field]
    assert "layout" not in keywords and "name" in keywords
    assert keywords["measure"]["samples"] == "do-bench" and keywords["measure"]["timeout_s"] == 1.0
    assert row["kernel"] == "v12p-bf16-out[CWG=2,STAGES=4,GROUP=8,OUT=16,BDESC=0,PINGPONG=0]"
    assert row["params_from"] == "its own params" and row["torch_op"] == "torch.mm"
    assert row["check"] == "PASS (rel err 2.0e-03)" and row["passed"] is True and row["error"] is None
    assert row["pct_of_torch"] == pytest.approx(101.0) and row["torch_timer"] == "do_bench"
    assert row["ours_mhz"] == 1600.0 and row["torch_mhz"] == 1600.0
    lines = check.format_kernel_table([row])
    assert "% torch" in lines[0] and "torch MHz" in lines[0]
    assert lines[1].startswith(row["kernel"]) and " 101.0 " in lines[1] and "PASS" in lines[1]


def test_a_failing_check_is_that_rows_error_and_the_rounds_stop(check, monkeypatch):
    recorder = Recorder()
    torch_side = fake_kernel_case(check, monkeypatch, recorder, ok=False)
    kernel = check.read_spec_kernel(f"{TMA_BF16}:v12p")
    row = check.run_kernel_case(kernel, (4096, 4096, 4096), case_args(check, rounds=2), None, FakeTorch(),
                                torch_side, 1 << 20, None, "do-bench")
    assert [call[0] for call in recorder.calls] == ["operands", "ours"]
    assert row["error"] == "FAIL: 12 of 16777216 elements wrong, first at (0, 3)" and row["passed"] is False
    assert row["ours_ms"] is None and row["pct_of_torch"] is None


def test_an_unsupported_kernel_is_a_row_with_its_error_and_nothing_runs(check, monkeypatch):
    recorder = Recorder()
    torch_side = fake_kernel_case(check, monkeypatch, recorder)
    kernel = check.read_spec_kernel(f"{TMA_BF16}:v12p")
    int8 = dataclasses.replace(kernel, entry={**kernel.entry, "types": {"a": "int8"}})
    row = check.run_kernel_case(int8, (4096, 4096, 4096), case_args(check), None, FakeTorch(), torch_side,
                                1 << 20, None, "do-bench")
    assert recorder.calls == []
    assert row["error"].startswith("not run: int8/int8 -> int32, layout NN") and row["passed"] is False
    assert row["combination"] == "-" and check.format_kernel_table([row])[1].split()[1] == "-"


def test_clock_watch_figures_since_a_moment_keep_only_the_later_readings(check):
    watch = check.ClockWatch(None)
    watch.readings = [ClockReading(1900), ClockReading(1500), ClockReading(1600)]
    watch.stamps = [1.0, 2.0, 3.0]
    assert watch.figures(since=2.0) == (1550.0, 1500.0)      # our timing window only: not the check before it
    assert watch.figures() == (1600.0, 1500.0)
    assert watch.figures(since=4.0) == (None, None)
