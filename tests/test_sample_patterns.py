"""Sample patterns: read from a spec (``measure.samples``) and from ``run --samples``, refused with what is
accepted, recorded in the settings' form; what the sampler queues for each (flush, do_bench's 256 MB, a warm
burst timed together, a rest before each sample with the clock read while it runs); batches of resting
patterns kept short."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.measure.clocks import GPU_IDLE, ClockReading
from driver_gemm.measure.timing import MAX_BATCH, EventSampler, L2Flusher, one_by_one_batch, sample_loop
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import MeasureSettings
from driver_gemm.specfile.sample_patterns import DO_BENCH_FLUSH_BYTES, SamplePattern

from test_spec import MINIMAL, write
from test_timing import FakeGpu


@pytest.mark.parametrize("text, kind, pause, launches, label", [
    ("flush", "flush", 0.0, 1, "flush"), ("do-bench", "do-bench", 0.0, 1, "do-bench"),
    ("flush-idle:1", "flush-idle", 1.0, 1, "flush-idle:1"), ("flush-idle:0.5", "flush-idle", 0.5, 1, "flush-idle:0.5"),
    ("burst", "burst", 100.0, 8, "burst:8:100"), ("burst:4", "burst", 100.0, 4, "burst:4:100"),
    ("burst:8:5000", "burst", 5000.0, 8, "burst:8:5000")])
def test_patterns_are_read_and_written_back(text, kind, pause, launches, label):
    pattern = SamplePattern.parse(text)
    assert (pattern.kind, pattern.pause_ms, pattern.launches, pattern.label) == (kind, pause, launches, label)
    assert SamplePattern.parse(pattern.label) == pattern


@pytest.mark.parametrize("text, detail", [
    ("flush:2", ""), ("idle", ""), ("flush-idle", ""), ("flush-idle:0", "not above 0"),
    ("flush-idle:nan", "not above 0"), ("flush-idle:x", "not a number"), ("burst:0", "count of launches"),
    ("burst:8:-1", "not above 0"), ("burst:1:2:3", ""), ("do-bench:256", "")])
def test_other_patterns_are_refused_saying_what_is_accepted(text, detail):
    with pytest.raises(ValueError, match="give flush, flush-idle:MS, do-bench, burst, burst:N or burst:N:MS") as info:
        SamplePattern.parse(text)
    assert detail in str(info.value)


def test_what_each_pattern_writes_before_a_sample():
    l2 = 120 << 20
    assert SamplePattern.parse("flush").flush_bytes(l2, True) == l2
    assert SamplePattern.parse("flush").flush_bytes(l2, False) == 0           # measure.flush_l2: false
    assert SamplePattern.parse("flush-idle:1").flush_bytes(l2, True) == l2
    assert SamplePattern.parse("do-bench").flush_bytes(l2, False) == DO_BENCH_FLUSH_BYTES == 256 << 20
    assert SamplePattern.parse("burst").flush_bytes(l2, True) == 0            # a warm L2


def test_a_spec_names_its_pattern_and_a_wrong_one_is_refused_where_it_is(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + "measure: {samples: burst}\n"))
    assert spec.measure.samples == "burst:8:100" and spec.measure.pattern.launches == 8
    assert load_spec(write(tmp_path, MINIMAL)).measure.samples == "flush"
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, MINIMAL + "measure: {samples: dobench}\n"))
    assert info.value.field == "measure.samples" and "give flush" in info.value.message
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, MINIMAL + "measure: {samples: 3}\n"))
    assert info.value.field == "measure.samples" and "got" in info.value.message
    with pytest.raises(SpecError, match="graph mode .* flush only"):
        load_spec(write(tmp_path, MINIMAL + "measure: {mode: graph, samples: do-bench}\n"))


def test_the_shipped_spec_schema_takes_the_patterns():
    jsonschema = pytest.importorskip("jsonschema")
    import json
    from driver_gemm.specfile import load as loader

    schema = json.loads((loader.Path(loader.__file__).parent / "schema.json").read_text())
    samples = schema["properties"]["measure"]["properties"]["samples"]
    for good in ("flush", "do-bench", "flush-idle:1.5", "burst", "burst:8", "burst:8:5000"):
        jsonschema.validate(good, samples)
    for bad in ("dobench", "burst:", "idle:1"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, samples)


# ------------------------------------------------------------------------------------------- the sampler

class Log:
    def __init__(self):
        self.calls = []

    def add(self, what):
        self.calls.append(what)


class FakeEvent:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def record(self, stream):
        self.log.add(self.name)

    def synchronize(self):
        self.log.add("sync")

    def close(self):
        pass


def sampler(pattern: str, clocks=None):
    log = Log()
    names = iter(["start", "end"] * (2 * MAX_BATCH))
    device = SimpleNamespace(event=lambda: FakeEvent(log, next(names)))
    gate = SimpleNamespace(hold=lambda: log.add("hold"), release=lambda: log.add("release"))
    made = EventSampler(device, "stream", lambda: log.add("launch"), lambda: log.add("flush"), gate,
                        pattern=SamplePattern.parse(pattern), clocks=clocks,
                        sleep=lambda seconds: log.add(f"rest {seconds * 1e3:g} ms"))
    return made, log


def test_flush_and_do_bench_queue_a_batch_back_to_back_behind_one_gate():
    for pattern in ("flush", "do-bench"):
        made, log = sampler(pattern)
        made.queue(0, 2)
        assert log.calls == ["hold", "flush", "start", "launch", "end", "flush", "start", "launch", "end", "release"]


def test_a_burst_times_its_launches_together_after_a_rest_each():
    made, log = sampler("burst:3:50")
    made.queue(0, 2)
    one = ["rest 50 ms", "hold", "flush", "start", "launch", "launch", "launch", "end", "release", "sync"]
    assert log.calls == one + one     # the flush given is the pattern's: none, for a burst (`L2Flusher.writing`)


def test_a_resting_pattern_reads_the_clock_while_each_sample_runs():
    busy, idle = ClockReading(1650, 0), ClockReading(1980, GPU_IDLE)
    readings = iter([busy, idle, ClockReading(1700, 0)])
    log = Log()
    clocks = SimpleNamespace(read=lambda: (log.add("clock"), next(readings))[1])
    made, made_log = sampler("flush-idle:1", clocks)
    made_log.calls = log.calls = []
    made.queue(0, 2)
    assert made_log.calls[:7] == ["rest 1 ms", "hold", "flush", "start", "launch", "end", "release"]
    assert made.read_clock(0, 2) == busy            # the idle reading is not the sample's clock
    made.queue(2, 1)
    assert made.read_clock(2, 1).sm_mhz == 1700     # each batch its own readings


def test_back_to_back_patterns_read_the_clock_now():
    clocks = SimpleNamespace(read=lambda: ClockReading(1600, 0))
    made, _ = sampler("flush", clocks)
    assert made.read_clock(0, 4).sm_mhz == 1600
    assert sampler("flush")[0].read_clock(0, 4) is None


def test_resting_batches_hold_a_quarter_second_of_rest_at_most():
    assert one_by_one_batch(SamplePattern.parse("flush")) == MAX_BATCH
    assert one_by_one_batch(SamplePattern.parse("flush-idle:1")) == MAX_BATCH
    assert one_by_one_batch(SamplePattern.parse("flush-idle:10")) == 25
    assert one_by_one_batch(SamplePattern.parse("burst")) == 2
    assert one_by_one_batch(SamplePattern.parse("burst:8:5000")) == 1
    gpu = FakeGpu(lambda count, batch: 1.0)
    settings = dataclasses.replace(MeasureSettings(), samples="burst:8:100", min_samples=10, min_time_s=0.0)
    sample_loop(gpu, settings, now=gpu.now, sleep=lambda s: None)
    assert max(gpu.batch_sizes) <= 2


class FakeBuffer:
    def __init__(self, nbytes, log):
        self.nbytes, self.log = nbytes, log

    def fill_u32(self, word, stream, nbytes=None):
        self.log.add(("fill", self.nbytes, nbytes))

    def close(self):
        self.log.add(("close", self.nbytes))


def test_the_flusher_writes_each_patterns_bytes_and_makes_do_benchs_buffer_once():
    log = Log()
    device = SimpleNamespace(properties=SimpleNamespace(l2_bytes=50 << 20),
                             alloc=lambda nbytes: (log.add(("alloc", nbytes)), FakeBuffer(nbytes, log))[1])
    flusher = L2Flusher(device, "stream")
    assert flusher.writing(flusher.buffer.nbytes) == flusher.flush
    flusher.writing(0)()
    first = flusher.writing(DO_BENCH_FLUSH_BYTES)
    flusher.writing(DO_BENCH_FLUSH_BYTES)()
    first()
    flusher.close()
    assert log.calls == [("alloc", 100 << 20), ("alloc", 256 << 20), ("fill", 256 << 20, 256 << 20),
                         ("fill", 256 << 20, 256 << 20), ("close", 100 << 20), ("close", 256 << 20)]


def test_do_benchs_flush_writes_zeros_and_the_l2_flush_a_changing_word():
    words = []
    buffer = SimpleNamespace(nbytes=100 << 20, close=lambda: None,
                             fill_u32=lambda word, stream, nbytes=None: words.append((word, nbytes)))
    device = SimpleNamespace(properties=SimpleNamespace(l2_bytes=50 << 20), alloc=lambda nbytes: buffer)
    flusher = L2Flusher(device, "stream")
    pattern = SamplePattern.parse("do-bench")
    zeros = flusher.writing(pattern.flush_bytes(flusher.buffer.nbytes, True), pattern.writes_zeros)
    zeros()
    zeros()
    flusher.flush()
    flusher.flush()
    assert words[:2] == [(0, DO_BENCH_FLUSH_BYTES)] * 2
    assert words[2][0] != words[3][0] and 0 not in (words[2][0], words[3][0])
    assert not SamplePattern.parse("flush").writes_zeros and not SamplePattern.parse("burst").writes_zeros


def test_run_samples_replaces_every_specs_pattern_and_graph_mode_keeps_flush(tmp_path):
    from driver_gemm.cli.run import with_sample_pattern
    from driver_gemm.errors import UsageError

    spec = load_spec(write(tmp_path, MINIMAL + "measure: {samples: burst, min_samples: 4}\n"))
    (changed,) = with_sample_pattern([spec], "do-bench")
    assert changed.measure.samples == "do-bench" and changed.measure.min_samples == 4
    assert with_sample_pattern([spec], None) == [spec]
    graph = load_spec(write(tmp_path, MINIMAL + "measure: {mode: graph}\n", "graph.yaml"))
    assert with_sample_pattern([graph], "flush")[0].measure.samples == "flush"
    with pytest.raises(UsageError, match="graph mode"):
        with_sample_pattern([graph], "burst:4")


@pytest.mark.gpu
@pytest.mark.parametrize("pattern", ["flush", "flush-idle:1", "do-bench", "burst:4:5"])
def test_each_pattern_times_a_launch_on_the_gpu(driver_gemm_device, pattern):
    from driver_gemm.measure.timing import LaunchGate, measure

    device = driver_gemm_device
    stream = device.stream()
    flusher, gate = L2Flusher(device, stream), LaunchGate(device, stream)
    work = device.alloc(64 << 20)
    try:
        settings = dataclasses.replace(MeasureSettings(), samples=pattern, min_samples=5, min_time_s=0.0,
                                       timeout_s=1.0)
        summary, samples = measure(lambda: work.fill_u32(7, stream), device, stream, settings, flusher, gate)
        assert summary.samples == len(samples) >= 3 and summary.median_ms > 0
        assert summary.launches_per_sample == (4 if pattern.startswith("burst") else 1)
        if pattern == "do-bench":
            assert flusher.larger is not None and flusher.larger.nbytes == DO_BENCH_FLUSH_BYTES
    finally:
        work.close()
        gate.close()
        flusher.close()
