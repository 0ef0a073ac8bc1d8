"""What the pytest plugin says: usage errors that name their option, skips and failures reported at a place that
exists, a spec named twice collected once, and the runner fixture's refusals (inner pytest sessions, pytester)."""

import pytest

from conftest import ROOT, _gpu_missing_reason, plugin_args
from driver_gemm.specfile.shipped import resolve_spec

SEED = str(ROOT / "specs" / "seed.yaml")
SEED_RESULTS = str(ROOT / "tests" / "data" / "results" / "seed-h200.json")
NO_GPU = pytest.mark.skipif(_gpu_missing_reason() is None, reason="checks the behaviour on a machine with no GPU")


def run_inner(pytester, *args):
    return pytester.runpytest(*plugin_args(), "-p", "no:cacheprovider", *args)


@pytest.mark.parametrize("option", ["--driver-gemm-results", "--driver-gemm-baseline-results"])
@pytest.mark.parametrize("problem", ["missing", "unreadable"])
def test_a_results_file_that_cannot_be_read_is_a_usage_error_naming_its_option(pytester, option, problem):
    path = pytester.path / "results.json"
    if problem == "unreadable":
        path.write_text("{}")
    arguments = [f"{option}={path}"]
    if option != "--driver-gemm-results":
        arguments.append(f"--driver-gemm-results={SEED_RESULTS}")
    result = run_inner(pytester, f"--driver-gemm-spec={SEED}", *arguments)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}: {path}: *"])
    assert "Traceback" not in result.stderr.str()


@NO_GPU
def test_a_skipped_gpu_test_is_reported_at_the_test_not_at_the_plugin(pytester):
    pytester.makepyfile(test_rig="""
        import pytest

        @pytest.mark.driver_gemm_gpu
        def test_marked():
            raise AssertionError("must not run")
    """)
    result = run_inner(pytester, "-rs", f"--driver-gemm-spec={SEED}")
    result.assert_outcomes(skipped=13)
    skipped = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert any("test_rig.py:" in line for line in skipped), skipped
    assert any("seed.yaml" in line for line in skipped), skipped
    assert not any("pytest_plugin" in line for line in skipped), skipped


def test_a_shipped_spec_s_failing_ids_name_a_file_that_exists_from_the_current_folder(pytester, monkeypatch):
    # The rootdir (the folder of pytest.ini) is not the current folder: pytest prints ids from the current folder.
    pytester.makeini("[pytest]\n")
    below = pytester.mkdir("below")
    monkeypatch.chdir(below)
    result = run_inner(pytester, "-rf", "--driver-gemm-spec=seed", f"--driver-gemm-results={SEED_RESULTS}",
                       "--driver-gemm-min-pct=1000")
    failed = [line.split()[1] for line in result.outlines if line.startswith("FAILED")]
    assert failed, result.outlines
    for test_id in failed:
        spec_file = below / test_id.split("::")[0]
        assert spec_file.is_file() and spec_file.resolve() == resolve_spec("seed").resolve(), test_id


def test_the_same_spec_named_twice_is_collected_once(pytester):
    shipped = str(resolve_spec("seed"))   # the file the name "seed" reads, named a second time by its path
    once = run_inner(pytester, "--collect-only", "-q", f"--driver-gemm-spec={shipped}")
    twice = run_inner(pytester, "--collect-only", "-q", f"--driver-gemm-spec={shipped}", "--driver-gemm-spec=seed")
    ids_once = [line for line in once.outlines if "::" in line]
    ids_twice = [line for line in twice.outlines if "::" in line]
    assert ids_once and ids_twice == ids_once


@pytest.mark.parametrize("call, message", [
    ("run(3)", "*driver_gemm_run: spec is a spec file's path, a shipped spec's name, a Spec or a dict, got 3 (int)*"),
    ("run('seed', device=0, streem=None)", "*driver_gemm_run: streem= is no field of a Placement (it takes device=,*"),
])
def test_the_runner_fixture_refuses_a_wrong_argument_by_name(pytester, call, message):
    # The fixture's function, reached with the GPU check answered "present" and run_spec never called.
    pytester.makeconftest("""
        import pytest
        from driver_gemm import pytest_plugin

        @pytest.fixture(autouse=True)
        def gpu_present(monkeypatch):
            monkeypatch.setattr(pytest_plugin, "gpu_missing_reason", lambda config: None)
    """)
    pytester.makepyfile(f"""
        import pytest
        from driver_gemm.errors import WrongArgumentType

        def test_runner(driver_gemm_run):
            run = driver_gemm_run
            with pytest.raises(WrongArgumentType) as refused:
                {call}
            print("REFUSED:", refused.value)
    """)
    result = run_inner(pytester, "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*REFUSED: {message.lstrip('*')}"])
