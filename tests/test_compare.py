import pytest

from driver_gemm.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from driver_gemm.report.comparison import BROKEN, FASTER, FIXED, GONE, NEW, SAME, SLOWER, compare_runs, judge
from driver_gemm.results.records import CaseDevice, CaseResult, RunResult
from driver_gemm.status import Status
from driver_gemm.specfile.model import Shape
from driver_gemm.measure.stats import summarize

GPU = CaseDevice(name="NVIDIA H200", uuid="GPU-1")


def case(kernel, samples, status=Status.PASS, shape=Shape(64, 64, 64), device=GPU):
    return CaseResult(kernel=kernel, name=kernel, shape=shape, status=status,
                      timing=summarize(samples) if samples else None, device=device)


def test_overlapping_spreads_are_the_same():
    verdict, change = judge(case("k", [1.00, 1.02, 1.04, 1.06]), case("k", [1.03, 1.05, 1.07, 1.09]))
    assert verdict == SAME and change == pytest.approx(0.0294, abs=1e-3)


def test_separate_spreads_are_faster_or_slower():
    old = case("k", [1.00, 1.01, 1.02, 1.01])
    assert judge(old, case("k", [1.20, 1.21, 1.22, 1.21]))[0] == SLOWER
    verdict, change = judge(old, case("k", [0.80, 0.81, 0.80, 0.82]))
    assert verdict == FASTER and change == pytest.approx(-0.2, abs=0.01)
    assert judge(old, case("k", [1.03, 1.03, 1.03, 1.03]), threshold=0.05)[0] == SAME


def test_status_changes_come_first():
    assert judge(case("k", [1.0]), case("k", [0.5], status=Status.FAIL))[0] == BROKEN
    assert judge(case("k", [1.0], status=Status.FAIL), case("k", [2.0]))[0] == FIXED


def test_matching_by_kernel_shape_and_gpu():
    old = RunResult(spec="s", spec_path=None, cases=[case("a", [1.0, 1.0]), case("gone", [1.0, 1.0]),
                                                     case("a", [1.0, 1.0], shape=Shape(8, 8, 8))])
    new = RunResult(spec="s", spec_path=None, cases=[case("a", [2.0, 2.0]), case("fresh", [1.0, 1.0]),
                                                     case("a", [1.0, 1.0], shape=Shape(8, 8, 8),
                                                          device=CaseDevice(name="other GPU"))])
    verdicts = {(c.kernel, c.shape, c.gpu): c.verdict for c in compare_runs(old, new)}
    assert verdicts == {("a", "64x64x64", "NVIDIA H200"): SLOWER, ("fresh", "64x64x64", "NVIDIA H200"): NEW,
                        ("a", "8x8x8", "other GPU"): NEW, ("gone", "64x64x64", "NVIDIA H200"): GONE,
                        ("a", "8x8x8", "NVIDIA H200"): GONE}
    across = {(c.kernel, c.shape): c.verdict for c in compare_runs(old, new, across_gpus=True)}
    assert across[("a", "8x8x8")] == SAME


def test_a_dispatched_kernel_whose_pick_changed_is_one_case_named_by_its_kernel(tmp_path, capsys):
    from driver_gemm.results.records import DispatchChoice

    def dispatched(params, samples):
        found = case(f"v13[{params}]", samples)
        found.name, found.dispatch = "v13", DispatchChoice(entry=0, shape="64x64x64", rule="exact")
        return found

    old = RunResult(spec="s", spec_path=None, cases=[dispatched("SPLITS=8", [2.0, 2.01, 1.99]),
                                                     case("v4[T=8]", [1.0, 1.0])])
    new = RunResult(spec="s", spec_path=None, cases=[dispatched("SPLITS=4", [1.0, 1.01, 0.99]),
                                                     case("v4[T=16]", [1.0, 1.0])])
    found = {(c.kernel, c.verdict): c for c in compare_runs(old, new)}
    assert set(found) == {("v13", FASTER), ("v4[T=16]", NEW), ("v4[T=8]", GONE)}   # undispatched: by its label
    assert found[("v13", FASTER)].params_changed == ("v13[SPLITS=8]", "v13[SPLITS=4]")
    assert found[("v4[T=16]", NEW)].params_changed is None
    for name, run in (("old", old), ("new", new)):
        run.write_json(tmp_path / f"{name}.json")
    main(["compare", str(tmp_path / "old.json"), str(tmp_path / "new.json")])
    assert "v13 at 64x64x64: its dispatch picked another configuration: v13[SPLITS=8] -> v13[SPLITS=4]" in capsys.readouterr().out


def test_a_case_whose_batch_or_groups_differ_between_the_runs_is_said_to_time_other_work(tmp_path, capsys):
    from driver_gemm.results.records import OperandsRecord

    def typed(samples, **operands):
        found = case("grouped", samples)
        found.operands = OperandsRecord(types={"a": "bf16"}, **operands)
        return found

    old = RunResult(spec="s", spec_path=None, cases=[typed([1.0, 1.0], batch=1, groups={"layout": "contiguous",
                                                                                         "rows": [32, 32]}),
                                                     typed([1.0, 1.0], batch=2)])
    old.cases[1].kernel = old.cases[1].name = "batched"
    new = RunResult(spec="s", spec_path=None, cases=[typed([1.0, 1.0], batch=1, groups={"layout": "contiguous",
                                                                                         "rows": [10, 54]}),
                                                     typed([1.0, 1.0], batch=4)])
    new.cases[1].kernel = new.cases[1].name = "batched"
    found = {c.kernel: c for c in compare_runs(old, new)}
    assert found["grouped"].product_changed == "groups of rows 32, 32 -> 10, 54"
    assert found["batched"].product_changed == "a batch of 2 -> 4 matrices"
    assert compare_runs(old, old)[0].product_changed is None
    for name, run in (("old", old), ("new", new)):
        run.write_json(tmp_path / f"{name}.json")
    main(["compare", str(tmp_path / "old.json"), str(tmp_path / "new.json")])
    err = capsys.readouterr()
    assert "grouped at 64x64x64: the runs computed other products (groups of rows 32, 32 -> 10, 54)" in err.out + \
        err.err


def test_cli_exit_codes(tmp_path, capsys):
    old = RunResult(spec="s", spec_path=None, cases=[case("v4", [1.0, 1.01, 0.99])])
    same = RunResult(spec="s", spec_path=None, cases=[case("v4", [1.0, 1.005, 0.995])])
    slower = RunResult(spec="s", spec_path=None, cases=[case("v4", [1.5, 1.51, 1.49])])
    for name, run in (("old", old), ("same", same), ("slower", slower)):
        run.write_json(tmp_path / f"{name}.json")
    assert main(["compare", str(tmp_path / "old.json"), str(tmp_path / "same.json")]) == EXIT_OK
    assert main(["compare", str(tmp_path / "old.json"), str(tmp_path / "slower.json")]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "SLOWER" in out and "+50.0%" in out and "1 cases: 1 SLOWER" in out
    assert main(["compare", str(tmp_path / "old.json"), str(tmp_path / "slower.json"), "--threshold", "60"]) == EXIT_OK
    assert main(["compare", str(tmp_path / "nope.json"), str(tmp_path / "old.json")]) == EXIT_USAGE


def test_compare_the_committed_h200_results_with_themselves(capsys):
    from conftest import ROOT

    path = str(ROOT / "tests" / "data" / "results" / "seed-h200.json")
    assert main(["compare", path, path]) == EXIT_OK
    assert "12 cases: 12 SAME" in capsys.readouterr().out


def with_samples(samples):
    """A TimingSummary that carries its raw samples, as the timing layer records them."""
    return summarize(samples)


def test_samples_decide_where_both_runs_have_them():
    from driver_gemm.report.comparison import samples_verdict, summary_verdict

    steady = [1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.01, 1.00, 0.99, 1.01]
    shifted = [v * 1.03 for v in steady]
    # quartiles do not overlap either way, but the samples also say a 3% shift is real
    assert samples_verdict(with_samples(steady), with_samples(shifted)) == SLOWER
    assert samples_verdict(with_samples(shifted), with_samples(steady)) == FASTER
    assert samples_verdict(with_samples(steady), with_samples(shifted), threshold=0.05) == SAME
    # two draws of the same noise: the same
    noisy_a = [1.00, 1.30, 0.95, 1.20, 1.05, 0.90, 1.25, 1.10, 1.15, 0.97]
    noisy_b = [1.02, 1.28, 0.97, 1.22, 1.04, 0.92, 1.24, 1.12, 1.16, 0.99]
    assert samples_verdict(with_samples(noisy_a), with_samples(noisy_b)) == SAME
    # separate quartiles, but too few samples for the rank test to call it: SAME
    few_a, few_b = [1.0, 1.02, 1.05, 1.0, 1.01, 1.2] * 2, [1.06, 1.08, 1.1, 1.07, 0.99, 1.3] * 2
    assert summary_verdict(summarize(few_a), summarize(few_b)) == SLOWER
    assert samples_verdict(with_samples(few_a), with_samples(few_b)) == SAME
    # without enough samples on both sides, the hook steps aside and the quartile rule judges
    assert samples_verdict(summarize(steady, keep_samples=False), with_samples(shifted)) is None
    assert samples_verdict(summarize(steady[:4]), summarize(shifted[:4])) is None
    old, new = case("k", steady), case("k", shifted)
    new.timing = with_samples(shifted)
    assert judge(old, new)[0] == SLOWER


def test_times_that_are_not_positive_numbers_are_never_judged():
    import dataclasses

    from driver_gemm.report.comparison import UNTIMED

    old = case("k", [1.0, 1.0, 1.0])
    for bad in (float("nan"), float("-inf"), 0.0, -1.0):
        new = case("k", [1.0, 1.0, 1.0])
        new.timing = dataclasses.replace(new.timing, median_ms=bad, q1_ms=bad, q3_ms=bad)
        assert judge(old, new) == (UNTIMED, None)
        assert judge(new, old) == (UNTIMED, None)


def test_results_without_cases_are_nothing_to_compare(tmp_path, capsys):
    empty = tmp_path / "empty.json"
    RunResult(spec="s", spec_path=None).write_json(empty)
    full = tmp_path / "full.json"
    RunResult(spec="s", spec_path=None, cases=[case("v4", [1.0, 1.0])]).write_json(full)
    assert main(["compare", str(full), str(empty)]) == EXIT_USAGE
    assert capsys.readouterr().err == f"driver-gemm: {empty}: no cases in these results: nothing to compare\n"


def test_runs_of_two_specs_with_no_case_in_common_say_nothing_was_compared(capsys):
    # Cases match by kernel and shape whatever spec ran them: a seed run against a run of another spec compares
    # nothing, and says so beside the spec each came from, rather than a bare tally of NEW and GONE.
    from conftest import ROOT

    seed = ROOT / "tests" / "data" / "results" / "seed-h200.json"
    other = ROOT / "bench" / "results" / "nvidia-h200" / "fp32.json.gz"
    assert main(["compare", str(seed), str(other)]) == EXIT_OK
    err = "".join(capsys.readouterr())
    assert "warning: the runs differ in spec: seed -> fast" in err
    assert "no case of one run is a case of the other (each is NEW or GONE): nothing was compared" in err
    assert main(["compare", str(seed), str(seed)]) == EXIT_OK
    assert "nothing was compared" not in "".join(capsys.readouterr())
