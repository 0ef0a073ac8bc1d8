"""The pytest plugin, exercised in inner pytest sessions (pytester)."""

import re

import pytest

from conftest import ROOT, _gpu_missing_reason, plugin_args

SEED = str(ROOT / "specs" / "seed.yaml")
NO_GPU = pytest.mark.skipif(_gpu_missing_reason() is None, reason="checks the behaviour on a machine with no GPU")


class _Inner:
    """pytester with driver-gemm's plugin loaded in every inner session, installed or not."""

    def __init__(self, pytester):
        self.pytester = pytester

    def runpytest(self, *args):
        return self.pytester.runpytest(*plugin_args(), *args)

    def makepyfile(self, *args, **kwargs):
        return self.pytester.makepyfile(*args, **kwargs)


@pytest.fixture
def inner(pytester):
    return _Inner(pytester)


def test_spec_cases_become_tests_with_readable_ids(inner):
    result = inner.runpytest("--driver-gemm-spec", SEED, "--collect-only", "-q")
    ids = [line.strip() for line in result.outlines if "::" in line]
    assert f"{SEED}::v4[BM=64,BN=64,BK=16,TM=4,TN=4]-1001x513x777" in ids
    assert f"{SEED}::cublas-1024x512x1024" in ids
    assert f"{SEED}::v2[TILE=32]-1024x512x1024" in ids
    assert len(ids) == 12


def test_two_specs_and_a_selection_by_id(inner):
    result = inner.runpytest("--driver-gemm-spec", SEED, "--driver-gemm-spec", str(ROOT / "specs" / "tiles.yaml"),
                             "--collect-only", "-q", "-k", "512x512x512 or 1001x513x777")
    ids = [line.strip() for line in result.outlines if "::" in line]
    assert len(ids) == 3 + 6 and all("512x512x512" in i or "1001x513x777" in i for i in ids)


@NO_GPU
def test_spec_cases_skip_with_the_reason_without_a_gpu(inner):
    result = inner.runpytest("--driver-gemm-spec", SEED, "-rs")
    result.assert_outcomes(skipped=12)
    result.stdout.fnmatch_lines(["*needs a GPU: no CUDA driver on this machine*"])


@NO_GPU
def test_gpu_marker_and_fixtures_skip_with_the_reason(inner):
    inner.makepyfile("""
        import pytest

        @pytest.mark.driver_gemm_gpu
        def test_marked():
            raise AssertionError("must not run")

        def test_device(driver_gemm_device):
            raise AssertionError("must not run")

        def test_runner(driver_gemm_run):
            raise AssertionError("must not run")

        def test_plain():
            pass
    """)
    result = inner.runpytest("-rs", "--strict-markers")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*needs a GPU: no CUDA driver on this machine*"])


@pytest.mark.parametrize("value", ["\uff11", "1_0", "-1", "gpu0"])
def test_a_device_variable_that_is_no_ordinal_is_a_usage_error_naming_it(inner, monkeypatch, value):
    monkeypatch.setenv("DRIVER_GEMM_DEVICE", value)
    inner.makepyfile("""
        import pytest

        @pytest.mark.driver_gemm_gpu
        def test_marked():
            pass
    """)
    result = inner.runpytest()
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*DRIVER_GEMM_DEVICE: a GPU's ordinal is a whole number of at least 0 in ASCII*"])


@pytest.mark.parametrize("args, words", [
    (["--driver-gemm-device", "-1"], "*--driver-gemm-device: a GPU's ordinal is 0, 1, ... ; got -1*"),
    (["--driver-gemm-device", "99999999999999999999"], "*--driver-gemm-device: a GPU's ordinal is 0, 1, ...*"),
    (["--driver-gemm-threshold", "5"], "*--driver-gemm-threshold: it widens the regression gate of "
                                       "--driver-gemm-baseline-results, which is not given*"),
])
def test_options_the_cli_refuses_are_usage_errors_in_the_plugin_too(inner, args, words):
    inner.makepyfile("def test_plain():\n    pass\n")
    result = inner.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([words])


FOREIGN_CONFTEST = """
    import pytest

    def pytest_configure(config):
        config.addinivalue_line("markers", "gpu: the rig's own marker, with a meaning of its own")
"""


def test_a_projects_own_gpu_marker_is_left_alone(pytester):
    """A rig with its own `gpu` marker, in a session where driver-gemm's plugin is loaded (as it is wherever
    driver-gemm is installed): its gpu tests run, no marker warning, and nothing of driver-gemm is imported."""
    pytester.makeconftest(FOREIGN_CONFTEST)
    pytester.makepyfile("""
        import sys

        import pytest

        @pytest.mark.gpu
        def test_on_the_rigs_gpu():
            loaded = sorted(name for name in sys.modules if name.startswith("driver_gemm."))
            # the plugin and the package's vocabulary of errors: nothing that imports NumPy, CUDA or rich
            assert loaded == ["driver_gemm.errors", "driver_gemm.pytest_plugin", "driver_gemm.version"], loaded
    """)
    result = pytester.runpytest_subprocess(*plugin_args(), "-rs", "--strict-markers", "-W", "error")
    result.assert_outcomes(passed=1)
    assert "needs a GPU" not in result.stdout.str() and "warning" not in result.stdout.str().lower()
    assert "driver_gemm_gpu" in pytester.runpytest_subprocess(*plugin_args(), "--markers").stdout.str()


def test_options_and_fixtures_carry_the_prefix(inner):
    help_text = inner.runpytest("--help").stdout.str()
    options = set(re.findall(r"--driver-gemm-[a-z-]*[a-z]", help_text))
    assert options == {"--driver-gemm-spec", "--driver-gemm-allow-outside-sources", "--driver-gemm-device",
                       "--driver-gemm-results", "--driver-gemm-min-pct", "--driver-gemm-baseline-results",
                       "--driver-gemm-threshold"}
    assert "--gemm-" not in help_text.replace("--driver-gemm-", "")
    fixtures = inner.runpytest("--fixtures").stdout.str()
    assert "driver_gemm_device" in fixtures and "driver_gemm_run" in fixtures
    assert " gemm_device" not in fixtures and " gemm_run" not in fixtures


def test_missing_spec_file_is_a_usage_error(inner):
    result = inner.runpytest("--driver-gemm-spec", "no/such.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--driver-gemm-spec: no such spec file no/such.yaml*"])


def test_a_wrong_spec_is_a_usage_error_and_outside_sources_need_leave(inner, tmp_path):
    spec = tmp_path / "outside.yaml"
    spec.write_text(f"""\
shapes: [[64, 64, 64]]
kernels:
  - name: v1
    source: {ROOT / 'kernels' / '01_naive_col_on_x.cu'}
    function: sgemm_naive_col_on_x
    block: [32, 32]
    grid: [ceil(N / 32), ceil(M / 32)]
""")
    refused = inner.runpytest("--driver-gemm-spec", str(spec), "--collect-only", "-q")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"*--driver-gemm-spec: {spec}:4: kernels[[]v1[]].source: an absolute source path*"])
    assert "INTERNALERROR" not in refused.stdout.str() + refused.stderr.str()
    allowed = inner.runpytest("--driver-gemm-spec", str(spec), "--driver-gemm-allow-outside-sources",
                              "--collect-only", "-q")
    allowed.stdout.fnmatch_lines(["*v1-64x64x64*"])


def test_device_option_and_environment(inner, monkeypatch):
    inner.makepyfile("""
        from driver_gemm import pytest_plugin

        def test_ordinal(pytestconfig):
            assert pytest_plugin._ordinal(pytestconfig) == 3
    """)
    assert inner.runpytest("--driver-gemm-device", "3").ret == 0
    monkeypatch.setenv("DRIVER_GEMM_DEVICE", "3")
    assert inner.runpytest().ret == 0


def test_malformed_spec_is_reported_with_its_place(inner, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("shapes: [[1, 2, 3]]\nkernels:\n  - blok: 1\n")
    result = inner.runpytest("--driver-gemm-spec", str(bad))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--driver-gemm-spec: *bad.yaml:3: kernels[[]0[]].blok: unknown field 'blok'*"])


SEED_RESULTS = str(ROOT / "tests" / "data" / "results" / "seed-h200.json")


def test_gates_on_recorded_results_fail_each_gated_case_with_its_figures(inner):
    # seed-h200.json: v4 reaches 33.5% and 41.6% of cuBLAS, v2 27.2% and 29.7%, v0 1.6% and 6.2%
    result = inner.runpytest("--driver-gemm-spec", SEED, "--driver-gemm-results", SEED_RESULTS,
                             "--driver-gemm-min-pct", "25", "--driver-gemm-min-pct", "v4=40", "-k", "v4 or v2 or v0")
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines([
        "*v4*1024x512x1024: min-pct gate: measured 33.5% of cuBLAS (* ms), required 40.0% of cuBLAS (noise *%)*",
        "*v0 at 1001x513x777: min-pct gate: measured 6.2% of cuBLAS*required 25.0%*"])


def test_no_regression_against_the_same_results_and_a_bad_gate_is_a_usage_error(inner):
    result = inner.runpytest("--driver-gemm-spec", SEED, "--driver-gemm-results", SEED_RESULTS,
                             "--driver-gemm-baseline-results", SEED_RESULTS)
    result.assert_outcomes(passed=12)
    older = str(ROOT / "tests" / "data" / "results" / "seed-before-h200.json")
    compared = inner.runpytest("--driver-gemm-spec", SEED, "--driver-gemm-results", SEED_RESULTS,
                               "--driver-gemm-baseline-results", older, "--driver-gemm-threshold", "1000")
    compared.assert_outcomes(passed=12)
    bad = inner.runpytest("--driver-gemm-spec", SEED, "--driver-gemm-results", SEED_RESULTS,
                          "--driver-gemm-min-pct", "fast")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--driver-gemm-min-pct 'fast': expected a percentage*"])


@pytest.mark.parametrize("options, message", [
    (["--driver-gemm-results", str(ROOT / "tests" / "data" / "results" / "tf32-h200.json")],
     "*--driver-gemm-results: *tf32-h200.json: no case of these results (spec 'tf32') is a case of this run*"),
    (["--driver-gemm-results", SEED_RESULTS,
      "--driver-gemm-baseline-results", str(ROOT / "tests" / "data" / "results" / "tf32-h200.json")],
     "*--driver-gemm-baseline-results: *tf32-h200.json: no case of these results*"
     "the regression gate would compare nothing*"),
    (["--driver-gemm-results", SEED_RESULTS, "--driver-gemm-min-pct", "v99=50"],
     "*--driver-gemm-min-pct: *no kernel named 'v99'*"),
    (["--driver-gemm-results", SEED_RESULTS, "--driver-gemm-min-pct", "inf"],
     "*--driver-gemm-min-pct 'inf': the percentage must be*"),
    (["--driver-gemm-results", SEED_RESULTS, "--driver-gemm-baseline-results", SEED_RESULTS,
      "--driver-gemm-threshold", "nan"],
     "*--driver-gemm-threshold is a percentage from 0 to below 1,000,000*"),
])
def test_options_that_could_never_fail_a_case_are_usage_errors(inner, options, message):
    """Results of another spec, or a gate on a kernel the spec lacks, would pass or fail every case unchecked."""
    result = inner.runpytest("--driver-gemm-spec", SEED, *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize("args", [
    ["--driver-gemm-min-pct", "99"],
    ["--driver-gemm-results", SEED_RESULTS, "--driver-gemm-min-pct", "99"],
    ["--driver-gemm-baseline-results", SEED_RESULTS],
    ["--driver-gemm-baseline-results", SEED_RESULTS, "--driver-gemm-threshold", "5"],
])
def test_a_gate_without_a_spec_to_judge_is_a_usage_error(inner, args):
    # it would pass the session without checking anything
    inner.makepyfile("def test_plain():\n    pass\n")
    result = inner.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{args[0]}: it judges the cases of --driver-gemm-spec, which is not given*"])


@pytest.mark.parametrize("value", ["abc", "1,2", "-1"])
def test_a_device_variable_is_nothing_to_a_session_that_uses_no_gpu_of_driver_gemms(inner, monkeypatch, value):
    monkeypatch.setenv("DRIVER_GEMM_DEVICE", value)
    inner.makepyfile("def test_plain():\n    pass\n")
    inner.runpytest().assert_outcomes(passed=1)


def test_a_device_variable_is_checked_for_a_session_that_uses_the_gpu_fixtures(inner, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_DEVICE", "abc")
    inner.makepyfile("def test_device(driver_gemm_device):\n    pass\n")
    result = inner.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*DRIVER_GEMM_DEVICE: a GPU's ordinal is a whole number of at least 0 in ASCII*"])
