import re
from pathlib import Path

import pytest

from driver_gemm.results.records import CaseResult, RunResult
from driver_gemm.status import Status
from driver_gemm.specfile.model import Shape
from driver_gemm.specfile import load_spec
from driver_gemm.measure.stats import summarize
from driver_gemm.tune.winners import pick_winners, winners_spec

from test_spec import MINIMAL, write

SWEEP = MINIMAL.replace("BM: 64, BN: 64, BK: 16, TM: 4, TN: 4", "BM: 64, BN: 64, BK: [8, 16], TM: 4, TN: 4").replace(
    "  - [64, 32, 16]", "  - [64, 32, 16]\n  - [128, 128, 128]") + "    tile: [BM, BN]\n    require: ['blockDim_x * TN == BN']\n"


def case(label, shape, samples, status=Status.PASS):
    return CaseResult(kernel=label, name=label.split("[")[0], shape=shape, status=status,
                      timing=summarize(samples) if samples else None)


SMALL, LARGE = Shape(64, 32, 16), Shape(128, 128, 128)
BK8, BK16 = "v4[BM=64,BN=64,BK=8,TM=4,TN=4]", "v4[BM=64,BN=64,BK=16,TM=4,TN=4]"


def sweep_run():
    return RunResult(spec="s", spec_path=None, cases=[
        case("cublas", SMALL, [0.5]),
        case(BK8, SMALL, [1.00, 1.01, 0.99]), case(BK16, SMALL, [1.50, 1.52, 1.49]),      # BK=8 clearly
        case(BK8, LARGE, [2.00, 2.10, 1.90]), case(BK16, LARGE, [1.98, 2.08, 1.95]),      # within noise
        case("v5[X=1]", SMALL, None, status=Status.INVALID), case("v5[X=2]", SMALL, [3.0], status=Status.FAIL),
    ])


def test_winners_and_ties():
    picks = {(p.kernel, p.shape): p for p in pick_winners(sweep_run())}
    small = picks[("v4", "64x32x16")]
    assert small.best.kernel == BK8 and small.runner_up.kernel == BK16 and not small.tie
    assert round(small.margin, 3) == 0.5 and (small.tried, small.passed, small.invalid) == (2, 2, 0)
    large = picks[("v4", "128x128x128")]
    assert large.best.kernel == BK16 and large.tie
    nothing = picks[("v5", "64x32x16")]
    assert nothing.best is None and (nothing.tried, nothing.passed, nothing.invalid) == (2, 0, 1)
    assert ("cublas", "64x32x16") not in picks


def test_winners_spec_loads_back(tmp_path):
    spec = load_spec(write(tmp_path, SWEEP))
    assert [k.label for k in spec.kernels] == [BK8, BK16]
    out = winners_spec(spec, pick_winners(sweep_run()), tmp_path / "specs" / "winners.yaml")
    text = out.read_text()
    assert "# v4 at 64x32x16: v4-1 = " + BK8 + ", ahead of the runner-up (+50.0%)" in text
    assert "# v4 at 128x128x128: v4-2 = " + BK16 + ", a tie with the runner-up" in text
    assert "# v5 at 64x32x16: nothing passed" in text
    winners = load_spec(out)
    assert [(k.name, k.params["BK"]) for k in winners.kernels] == [("v4-1", 8), ("v4-2", 16)]
    assert winners.shapes == spec.shapes and winners.kernels[0].source == spec.kernels[0].source
    assert winners.kernels[0].tile[1].source == "BN" and winners.kernels[0].require[0].source == "blockDim_x * TN == BN"
    assert winners.measure == spec.measure


def test_one_winner_keeps_the_kernel_name(tmp_path):
    spec = load_spec(write(tmp_path, SWEEP))
    run = RunResult(spec="s", spec_path=None, cases=[case(BK8, SMALL, [1.0]), case(BK16, SMALL, [2.0])])
    winners_path = winners_spec(spec, pick_winners(run), tmp_path / "specs" / "w.yaml")
    winners = load_spec(winners_path, allow_outside_sources=True)   # its sources are the repository's
    assert [k.label for k in winners.kernels] == [BK8]


def test_a_winners_launch_values_are_written_back_as_values_not_template_arguments(tmp_path):
    # BK swept under values: (a number only the launch reads): the winner keeps BK there, and its instance stays
    # the template of the params alone.
    text = SWEEP.replace("BK: [8, 16], ", "").replace("TN: 4}", "TN: 4}\n    values: {BK: [8, 16]}")
    spec = load_spec(write(tmp_path, text))       # planned only: the kernel's own template would want BK
    labels = ["v4[BM=64,BN=64,TM=4,TN=4,BK=8]", "v4[BM=64,BN=64,TM=4,TN=4,BK=16]"]
    assert [k.label for k in spec.kernels] == labels and spec.kernels[0].instance == "sgemm_coarsen_2d<64, 64, 4, 4>"
    run = RunResult(spec="s", spec_path=None, cases=[case(labels[0], SMALL, [2.0]), case(labels[1], SMALL, [1.0])])
    written = winners_spec(spec, pick_winners(run), tmp_path / "specs" / "w.yaml")
    (winner,) = load_spec(written, allow_outside_sources=True).kernels
    assert winner.label == labels[1] and winner.launch_values == {"BK"} and winner.instance == spec.kernels[0].instance
    assert "values:" in written.read_text()


def test_winners_keep_their_precision_and_arch(tmp_path):
    from conftest import SPECS

    spec = load_spec(SPECS / "sweep-v10.yaml").select(shapes=["4096x4096x4096"])
    best = next(k.label for k in spec.kernels if k.params["BK"] == 32 and k.params["STAGES"] == 4)
    run = RunResult(spec="s", spec_path=None, cases=[case(best, Shape(4096, 4096, 4096), [0.46])])
    winners_path = winners_spec(spec, pick_winners(run), tmp_path / "specs" / "w.yaml")
    winners = load_spec(winners_path, allow_outside_sources=True)   # its sources are the repository's
    assert [(k.label, k.precision, k.arch) for k in winners.kernels] == [(best, "tf32", "sm_90a")]


def test_configurations_refused_by_require_are_not_compiled(monkeypatch):
    from driver_gemm.planning import build
    from driver_gemm.cuda.occupancy import arch_limits
    from driver_gemm.planning.case_plan import plan_case

    from conftest import SPECS

    spec = load_spec(SPECS / "sweep-v8.yaml")
    limits = arch_limits("sm_90")
    refused = build.refused_everywhere(spec, limits)
    labels = {k.label: k for k in spec.kernels}
    # a 16 x 16 thread tile breaks 'TM * TN == 128'; a 256 x 256 block tile needs 512 threads
    assert any("TM=16,TN=16" in label for label in refused)
    assert any("BM=256,BN=256" in label for label in refused)
    assert "v8[BM=128,BN=256,BK=16,WM=64,WN=64,TM=16,TN=8,STAGES=3,GROUP=8,KSPLIT=1]" not in refused
    for label in refused:
        plan = plan_case(labels[label], spec.shapes[0], limits)
        assert not plan.valid and plan.problems and plan.resources is None

    compiled_instances = []
    monkeypatch.setattr(build, "compile_source",
                        lambda source, instances, arch, options, **_: compiled_instances.extend(instances) or object())
    compiled = build.compile_spec(spec, "sm_90", jobs=1, skip=refused)
    assert set(compiled) == set(labels) - refused
    assert not {labels[label].instance for label in refused} & set(compiled_instances)


def test_tune_from_recorded_results_needs_no_gpu(tmp_path, capsys):
    from driver_gemm.cli import main

    spec_path = write(tmp_path, SWEEP)
    recorded = sweep_run()
    recorded.spec = "spec"                                               # the spec's name (its file's stem)
    recorded.cases = [c for c in recorded.cases if c.shape == SMALL]      # stopped before the large shape
    results = recorded.write_json(tmp_path / "stopped.json")
    out = tmp_path / "specs" / "w.yaml"
    assert main(["tune", str(spec_path), "--from", str(results), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 configuration(s) of the sweep have no result here" in printed     # both, at the large shape
    winners = load_spec(out)
    assert [(k.name, k.params["BK"]) for k in winners.kernels] == [("v4", 8)]
    # results that hold nothing of the spec are a usage error naming the file
    other = RunResult(spec="x", spec_path=None, cases=[case("v9[A=1]", SMALL, [1.0])]).write_json(tmp_path / "x.json")
    assert main(["tune", str(spec_path), "--from", str(other), "--out", str(out)]) == 2
    assert "x.json" in capsys.readouterr().err


def test_winners_keep_everything_that_made_the_measurement(tmp_path):
    text = SWEEP + ("scalars: {alpha: 1.5, beta: 0.0}\nbaseline: false\n"
                    "verify: {tolerance: {rel: 2.0e-5, abs: 1.0e-6}, seed: 7, reference: cpu}\n"
                    "measure: {min_samples: 20, flush_l2: false}\n")
    spec = load_spec(write(tmp_path, text))
    winners = load_spec(winners_spec(spec, pick_winners(sweep_run()), tmp_path / "specs" / "w.yaml"))
    assert winners.scalars == spec.scalars and winners.baseline is False
    assert winners.verify == spec.verify and winners.measure == spec.measure


@pytest.mark.parametrize("verify", ["", "verify: {tolerance: {abs: 1.0e-6}}\n", "verify: {tolerance: 1.0e-5}\n"])
def test_winners_leave_a_tolerance_the_spec_left_to_the_kernels(tmp_path, verify):
    spec = load_spec(write(tmp_path, SWEEP + verify))
    written = winners_spec(spec, pick_winners(sweep_run()), tmp_path / "specs" / "w.yaml")
    assert load_spec(written).verify == spec.verify
    assert bool(re.search(r"^\s+tolerance:", written.read_text(), re.M)) == bool(verify)


def test_results_of_another_spec_are_refused(tmp_path):
    from driver_gemm.errors import SpecError
    from driver_gemm.tune.winners import check_results_match

    spec = load_spec(write(tmp_path, SWEEP))
    check_results_match(spec, RunResult(spec=spec.name, spec_path=None, cases=sweep_run().cases), "ok.json")
    with pytest.raises(SpecError, match=r"other.json: these results are of spec 'sweep-v8', not 'spec'"):
        check_results_match(spec, RunResult(spec="sweep-v8", spec_path=None, cases=sweep_run().cases), "other.json")
    with pytest.raises(SpecError, match="made from specs/sweep-v8.yaml"):
        check_results_match(spec, RunResult(spec="", spec_path="specs/sweep-v8.yaml", cases=[]), "r.json")
    with pytest.raises(SpecError, match="no case of these results is a kernel configuration of spec"):
        check_results_match(spec, RunResult(spec=spec.name, spec_path=None,
                                            cases=[case("v9[A=1]", SMALL, [1.0])]), "r.json")


def test_without_out_the_winners_go_under_results(tmp_path):
    from driver_gemm.tune.winners import NoWinnerError, default_winners_path

    spec = load_spec(write(tmp_path, SWEEP))
    assert default_winners_path(spec).parts == ("results", "spec-winners.yaml")
    nothing = RunResult(spec="s", spec_path=None, cases=[case(BK8, SMALL, None, status=Status.FAIL)])
    with pytest.raises(NoWinnerError, match="no configuration of spec passed"):     # the results' cases failed: exit 1
        winners_spec(spec, pick_winners(nothing), tmp_path / "w.yaml")
    assert not (tmp_path / "w.yaml").exists()


def test_pruning_before_compile_gives_its_reasons():
    from driver_gemm.cuda.compile import KernelResources
    from driver_gemm.cuda.occupancy import arch_limits
    from driver_gemm.planning.case_plan import plan_case
    from driver_gemm.tune.prepare import prune_plans

    from conftest import SPECS

    spec = load_spec(SPECS / "sweep-v8.yaml")
    limits, shape = arch_limits("sm_90"), spec.shapes[0]
    plans = [plan_case(k, shape, limits) for k in spec.kernels]
    kept, pruned = prune_plans(plans)
    assert len(kept) + len(pruned) == len(plans) and kept and pruned
    assert all(p.reason.startswith("invalid: ") for p in pruned)
    assert {p.kernel for p in pruned} == {p.kernel.label for p in plans if not p.valid}
    good = kept[0].kernel
    spilling = plan_case(good, shape, limits, KernelResources(registers=255, spill_store_bytes=64, spill_load_bytes=32))
    crowded = plan_case(good, shape, limits, KernelResources(registers=32, static_shared_bytes=240 * 1024))
    kept, pruned = prune_plans([spilling, crowded])
    reasons = [p.reason for p in pruned]
    assert "spills registers: 64 bytes stored, 32 loaded per thread" in reasons[0]
    assert reasons[1].startswith("invalid: ") and "shared memory" in reasons[1]
    assert prune_plans([spilling], allow_spills=True)[0] == [spilling]


def test_compiling_in_processes_keeps_each_jobs_outcome(tmp_path, monkeypatch):
    from driver_gemm.errors import CompileError
    from driver_gemm.tune.prepare import CompileJob, compile_in_processes

    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    good = tmp_path / "good.cu"
    good.write_text("template <int N> __global__ void scale(float *x) { x[threadIdx.x] *= N; }\n")
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void broken(float *x) { x[0] = undefined_name; }\n")
    jobs = [CompileJob(good, ("scale<2>",), "sm_90"), CompileJob(bad, ("broken",), "sm_90"),
            CompileJob(good, ("scale<4>",), "sm_90")]
    outcomes = compile_in_processes(jobs, workers=2)
    assert [type(o).__name__ for o in outcomes] == ["Cubin", "CompileError", "Cubin"]
    assert outcomes[0].image and "scale<2>" in outcomes[0].lowered_names
    assert "undefined_name" in str(outcomes[1]) and "undefined_name" in outcomes[1].log
    assert isinstance(outcomes[1], CompileError)


SHIPPED_SPECS = sorted((Path(__file__).resolve().parent.parent / "specs").glob("*.yaml"))


@pytest.mark.parametrize("spec_path", SHIPPED_SPECS, ids=[p.stem for p in SHIPPED_SPECS])
def test_a_winner_of_any_shipped_spec_is_written_back_with_every_field_it_had(spec_path, tmp_path):
    """Tensor maps, clusters, types, layouts, binaries...: the winners spec describes the same kernel."""
    import dataclasses

    spec = load_spec(spec_path)
    first = {}
    for kernel in spec.kernels:           # one configuration of each kernel family wins
        first.setdefault(kernel.name, kernel)
    shape = spec.shapes[0]
    run = RunResult(spec=spec.name, spec_path=str(spec_path))
    for kernel in first.values():
        run.cases.append(CaseResult(kernel=kernel.label, name=kernel.name, shape=shape, status=Status.PASS,
                                    params=dict(kernel.params), timing=summarize([1.0, 1.0, 1.0])))
    written = load_spec(winners_spec(spec, pick_winners(run), tmp_path / "specs" / "w.yaml"),
                        allow_outside_sources=True)
    assert len(written.kernels) == len(first)
    # where and how each file was read (the winners are read with allow_outside_sources), not what it says
    ignored = {"where", "field_path", "field_lines", "entry", "allow_outside_headers", "project"}
    for again, kernel in zip(written.kernels, first.values()):
        for name in (f.name for f in dataclasses.fields(kernel) if f.name not in ignored):
            assert getattr(again, name) == getattr(kernel, name), (spec_path.name, kernel.label, name)


def test_a_winners_spec_elsewhere_still_finds_the_builder_and_the_fill_file_its_kernel_reads(tmp_path):
    # The signature names files relative to the spec, as source does: written into another folder, the winners
    # spec names the same files (a fill file's {M} and {N} kept), and reads back the same kernel.
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "k.cu").write_text("struct P { int m; }; __global__ void f(P p, int* order) {}\n")
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "p.py").write_text("def make(values):\n    return values['M'].to_bytes(4, 'little')\n")
    spec_path = tmp_path / "project" / "spec.yaml"
    spec_path.parent.mkdir()
    spec_path.write_text(
        "shapes: [[64, 64, 64]]\nkernels:\n  - {name: k, source: ../k.cu, function: f, block: [1], grid: [1],\n"
        "     signature: [{name: p, type: struct, builder: '../host/p.py:make', fields: [A, B, C, M]},\n"
        "                 {name: order, type: buffer, element: int32, size: 4,\n"
        "                  fill: {file: 'tables/order-{M}x{N}.npy'}}]}\n")
    spec = load_spec(spec_path)
    run = RunResult(spec=spec.name, spec_path=str(spec_path))
    run.cases.append(CaseResult(kernel="k", name="k", shape=spec.shapes[0], status=Status.PASS,
                                timing=summarize([1.0, 1.0, 1.0])))
    written = load_spec(winners_spec(spec, pick_winners(run), tmp_path / "out" / "deeper" / "w.yaml"),
                        allow_outside_sources=True)
    [before], [after] = spec.kernels, written.kernels
    assert after.signature[0].builder == before.signature[0].builder
    assert after.signature[0].builder.path == (tmp_path / "host" / "p.py").resolve()
    [(_, old_buffer)], [(_, new_buffer)] = before.device_buffers(), after.device_buffers()
    assert new_buffer.buffer.file == "../../project/tables/order-{M}x{N}.npy"
    assert (new_buffer.buffer.file_folder / new_buffer.buffer.file).resolve() == \
        (old_buffer.buffer.file_folder / old_buffer.buffer.file).resolve()


def test_a_winners_spec_written_outside_its_kernels_project_says_it_needs_leave(tmp_path, caplog):
    # as tune writes results/SPEC-winners.yaml from a folder outside the project: its relative sources leave the
    # project of the folder it is in, which plan and run refuse without --allow-outside-sources
    from driver_gemm.errors import SpecError
    from driver_gemm.tune.winners import dispatch_spec

    (tmp_path / "project").mkdir()
    spec = load_spec(write(tmp_path / "project", SWEEP))
    picks = pick_winners(sweep_run())
    elsewhere = tmp_path / "elsewhere" / "results"
    for written in (winners_spec(spec, picks, elsewhere / "w.yaml"), dispatch_spec(spec, picks, elsewhere / "d.yaml")):
        assert written.read_text().splitlines()[0] == (
            "# its kernels' files lie outside this file's project: plan and run it with --allow-outside-sources")
        assert f"{written} names files outside its project ({elsewhere})" in caplog.text
        with pytest.raises(SpecError, match="leaves the spec's project"):
            load_spec(written)
        assert load_spec(written, allow_outside_sources=True).kernels
    caplog.clear()
    inside = winners_spec(spec, picks, tmp_path / "project" / "results" / "w.yaml")
    assert "--allow-outside-sources" not in inside.read_text() and not caplog.text
    assert load_spec(inside).kernels

