"""Collecting the cases of a run on several GPUs: one row per baseline and GPU, each kernel against its own GPU's."""

from driver_gemm.measure.stats import summarize
from driver_gemm.runners.gpu_tasks import GpuBaselines, ResultCollector
from driver_gemm.results.records import CaseDevice, CaseResult, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

SHAPE = Shape(256, 256, 256)


def row(kernel, uuid, status=Status.PASS, ms=1.0):
    return CaseResult(kernel=kernel, name=kernel, shape=SHAPE, status=status,
                      timing=summarize([ms] * 3) if status == Status.PASS else None,
                      device=CaseDevice(name="H200", uuid=uuid, ordinal=0))


def test_gpus_of_two_machines_with_the_same_ordinal_keep_their_own_baselines():
    collector = ResultCollector(RunResult(spec="s", spec_path=None), [])
    collector.add(row("cublas", "GPU-a", ms=1.0).as_dict(), 0)
    collector.add(row("cublas", "GPU-b", ms=2.0).as_dict(), 0)       # the other machine's GPU 0
    collector.add(row("v4", "GPU-a").as_dict(), 0)
    collector.add(row("v8", "GPU-b").as_dict(), 0)
    against = {c.kernel: c.measured_against.device.uuid for c in collector.result.cases if not c.is_baseline}
    assert against == {"v4": "GPU-a", "v8": "GPU-b"}
    assert sum(c.is_baseline for c in collector.result.cases) == 2


def test_a_failed_baseline_run_again_and_passing_takes_the_failed_rows_place():
    failed = row("cublas", "GPU-a", status=Status.ERROR)
    result = RunResult(spec="s", spec_path=None, cases=[failed])          # kept from the run being resumed
    collector = ResultCollector(result, [failed])
    collector.add(row("cublas", "GPU-a", ms=1.5).as_dict(), 0)
    collector.add(row("v4", "GPU-a").as_dict(), 0)
    baselines = [c for c in result.cases if c.is_baseline]
    assert len(baselines) == 1 and baselines[0].ok and baselines[0].timing.median_ms == 1.5
    v4 = next(c for c in result.cases if c.kernel == "v4")
    assert v4.measured_against.kernel == "cublas"
    collector.add(row("cublas", "GPU-a", status=Status.FAIL).as_dict(), 0)   # a later failure replaces nothing
    assert [c.ok for c in result.cases if c.is_baseline] == [True]


def test_a_gpus_baselines_reuse_only_its_own_earlier_baselines_from_its_first_task():
    from driver_gemm.runners.schedule import Task
    from driver_gemm.specfile import load_spec

    from conftest import SPECS

    spec = load_spec(SPECS / "seed.yaml").select(["v4"], ["1024x512x1024"])
    earlier = [CaseResult(kernel="cublas", name="cublas", shape=spec.shapes[0], status=Status.PASS,
                          timing=summarize([1.0] * 3), device=CaseDevice(uuid="GPU-other", ordinal=0))]
    task = Task(shapes=spec.shapes, kernels=(spec.kernels[0].label,), kernels_s=1.0)
    assert GpuBaselines(0, "GPU-mine").inputs_of(spec, task, earlier).reused == []
    assert len(GpuBaselines(0, "GPU-other").inputs_of(spec, task, earlier).reused) == 1
