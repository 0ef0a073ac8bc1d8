"""What ``tune`` writes (winners and dispatch specs) and what it refuses, from recorded results: no GPU."""

import json
from pathlib import Path

import pytest

from driver_gemm.cli import main
from driver_gemm.measure.stats import summarize
from driver_gemm.planning.cases import cases_of
from driver_gemm.results.records import CaseResult, RunResult
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status
from driver_gemm.tune.winners import (MixedGpusError, NoWinnerError, UnreadableSpecError, dispatch_spec,
                                      pick_winners, winners_spec)

ARGS = "const float* A, const float* B, float* C, int M, int N, int K, float alpha, float beta"
SOURCE = f"""\
#include "hdr.cuh"
template <int TILE, bool SWAP> __global__ void gemm_t({ARGS}) {{}}
template <typename T, int TILE> __global__ void gemm_ty({ARGS}) {{}}
template <int TILE, int SPLITS> __global__ void gemm_s({ARGS}) {{}}
template <int TILE, int SPLITS> __global__ void gemm_s2({ARGS}) {{}}
"""
LAUNCH = "block: [8, 8]\n    grid: [ceil(N / 8), ceil(M / 8)]\n    signature: [A, B, C, M, N, K, alpha, beta]"
SHAPES = "shapes: [[64, 64, 64], [512, 512, 512]]\n"


def project(tmp_path: Path, name: str, kernels: str, extra: str = "") -> Path:
    """A spec in specs/ of a project with kernels/k.cu and inc/hdr.cuh, whose kernel entries read `-I../inc`."""
    (tmp_path / "pyproject.toml").touch()
    for folder, file, text in (("kernels", "k.cu", SOURCE), ("inc", "hdr.cuh", "#define HDR 1\n")):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / file).write_text(text)
    (tmp_path / "specs").mkdir(exist_ok=True)
    path = tmp_path / "specs" / f"{name}.yaml"
    path.write_text(f"name: {name}\n{SHAPES}kernels:\n{kernels}{extra}")
    return path


def entry(name: str, function: str, params: str) -> str:
    return (f"  - name: {name}\n    source: ../kernels/k.cu\n    options: [-I../inc]\n    function: {function}\n"
            f"    params: {params}\n    {LAUNCH}\n")


def results(spec_path: Path, time, out: Path, gpu=lambda index: "NVIDIA H100 80GB HBM3") -> Path:
    """A results file with a row per kernel configuration and shape of the spec: `time(kernel, shape)` ms,
    or a Status for a row that did not pass."""
    spec = load_spec(spec_path)
    run = RunResult(spec=spec.name, spec_path=str(spec_path))
    for index, case in enumerate(c for c in cases_of(spec) if c.kernel is not None):
        value = time(case.kernel, case.shape)
        device = {"name": gpu(index), "uuid": f"GPU-{index % 2}", "ordinal": 0}
        if isinstance(value, Status):
            row = CaseResult(kernel=case.label, name=case.kernel.name, shape=case.shape, status=value,
                             params=dict(case.kernel.params))
        else:
            row = CaseResult(kernel=case.label, name=case.kernel.name, shape=case.shape, status=Status.PASS,
                             params=dict(case.kernel.params), timing=summarize([value] * 3) if value else None)
        row.device = type(row.device).from_dict(device)
        run.cases.append(row)
    return run.write_json(out)


def small_wins_small(kernel, shape):
    """The smallest SPLITS (or TILE) wins the small shape, the largest the large one."""
    value = kernel.params.get("SPLITS", kernel.params.get("TILE"))
    return 1.0 * value if shape.M == 64 else 100.0 / value


def test_two_entries_of_one_name_each_keep_their_own_function_in_the_dispatch_spec(tmp_path):
    spec_path = project(tmp_path, "s4", entry("k", "gemm_s", "{TILE: 8, SPLITS: [1, 2]}")
                        + entry("k", "gemm_s2", "{TILE: 16, SPLITS: [3, 4]}"))
    recorded = results(spec_path, small_wins_small, tmp_path / "r.json")
    out = tmp_path / "specs" / "d.yaml"
    assert main(["tune", str(spec_path), "--from", str(recorded), "--out", str(tmp_path / "specs" / "w.yaml"),
                 "--dispatch", str(out)]) == 0
    written = load_spec(out)
    picked = {case.shape.M: (case.kernel.function, case.kernel.params) for case in cases_of(written)
              if case.kernel is not None}
    assert picked[64] == ("gemm_s", {"TILE": 8, "SPLITS": 1})
    assert picked[512] == ("gemm_s2", {"TILE": 16, "SPLITS": 4})     # the winner's own entry, as a member
    assert [k.name for k in written.kernels] == ["k", "k-1"] and written.dispatch["k"].members == ("k-1",)


def test_a_dispatch_spec_of_kernels_with_bool_and_type_params_reads_back(tmp_path):
    spec_path = project(tmp_path, "s1", entry("kb", "gemm_t", "{TILE: [8, 16], SWAP: [true, false]}")
                        + entry("ky", "gemm_ty", "{T: double, TILE: [8, 16]}"))
    recorded = results(spec_path, lambda k, s: small_wins_small(k, s) * (1 if k.params.get("SWAP", True) else 2),
                       tmp_path / "r.json")
    out = tmp_path / "specs" / "d.yaml"
    assert main(["tune", str(spec_path), "--from", str(recorded), "--out", str(tmp_path / "specs" / "w.yaml"),
                 "--dispatch", str(out)]) == 0
    written = load_spec(out)
    assert written.dispatch["kb"].entries[1].params == {"TILE": 16, "SWAP": True}
    assert written.dispatch["ky"].entries[0].params == {"T": "double", "TILE": 8}
    labels = {case.label for case in cases_of(written) if case.kernel is not None}
    assert labels == {"kb[TILE=8,SWAP=true]", "kb[TILE=16,SWAP=true]", "ky[TILE=8]", "ky[TILE=16]"}


def test_a_spec_that_would_not_read_back_is_an_error_and_is_not_written(tmp_path, capsys):
    # the two entries named k are of different precisions: a member of k's table would compute another GEMM
    spec_path = project(tmp_path, "s5", entry("k", "gemm_s", "{TILE: 8, SPLITS: [1, 2]}")
                        + entry("k", "gemm_s2", "{TILE: 16, SPLITS: [3, 4]}") + "    precision: tf32\n")
    recorded = results(spec_path, small_wins_small, tmp_path / "r.json")
    out = tmp_path / "specs" / "d.yaml"
    with pytest.raises(UnreadableSpecError, match="does not read back"):
        dispatch_spec(load_spec(spec_path), pick_winners(recorded), out)
    assert not out.exists()
    assert main(["tune", str(spec_path), "--from", str(recorded), "--out", str(tmp_path / "specs" / "w.yaml"),
                 "--dispatch", str(out)]) == 1
    assert "computes another GEMM" in capsys.readouterr().err and not out.exists()


def test_winners_and_dispatch_specs_in_another_folder_rebase_their_include_folders(tmp_path):
    spec_path = project(tmp_path, "s3", entry("km", "gemm_s", "[{TILE: 8, SPLITS: [1, 2]}, {TILE: 16, SPLITS: 4}]"))
    recorded = results(spec_path, small_wins_small, tmp_path / "r.json")
    deeper = tmp_path / "specs" / "sub" / "deeper"
    assert main(["tune", str(spec_path), "--from", str(recorded), "--out", str(deeper / "w.yaml"),
                 "--dispatch", str(deeper / "d.yaml")]) == 0
    for name in ("w.yaml", "d.yaml"):
        written = load_spec(deeper / name)
        assert "-I../../../inc" in (deeper / name).read_text()
        assert all(k.options == (f"--include-path={tmp_path.resolve() / 'inc'}",) for k in written.kernels)


def test_renamed_winners_take_no_name_the_sweep_already_has(tmp_path):
    spec_path = project(tmp_path, "nc", entry("k", "gemm_s", "{TILE: [8, 16], SPLITS: 1}")
                        + entry("k-1", "gemm_s2", "{TILE: 4, SPLITS: 1}"))
    by_tile = (lambda kernel, shape: 1.0 * kernel.params["TILE"] if shape.M == 64 else 100.0 / kernel.params["TILE"])
    recorded = results(spec_path, by_tile, tmp_path / "r.json")
    out = tmp_path / "specs" / "w.yaml"
    assert main(["tune", str(spec_path), "--from", str(recorded), "--out", str(out)]) == 0
    written = load_spec(out)
    functions = {}
    for kernel in written.kernels:
        functions.setdefault(kernel.name, set()).add(kernel.function)
    assert all(len(found) == 1 for found in functions.values()) and functions["k-1"] == {"gemm_s2"}
    assert sorted(functions) == ["k-1", "k-2", "k-3"]


def test_tune_from_results_of_a_spec_with_a_dispatch_table(tmp_path):
    spec_path = project(tmp_path, "s3", entry("km", "gemm_s", "[{TILE: 8, SPLITS: [1, 2]}, {TILE: 16, SPLITS: 4}]"))
    recorded = results(spec_path, small_wins_small, tmp_path / "r.json")
    dispatching = tmp_path / "specs" / "d.yaml"
    assert main(["tune", str(spec_path), "--from", str(recorded), "--out", str(tmp_path / "specs" / "w.yaml"),
                 "--dispatch", str(dispatching)]) == 0
    # a run of the dispatch spec: its rows are the configurations its table picked
    again = results(dispatching, small_wins_small, tmp_path / "rd.json")
    out = tmp_path / "specs" / "dw.yaml"
    assert main(["tune", str(dispatching), "--from", str(again), "--out", str(out),
                 "--dispatch", str(tmp_path / "specs" / "dd.yaml")]) == 0
    assert sorted(k.label for k in load_spec(out).kernels) == ["km-1[TILE=8,SPLITS=1]", "km-2[TILE=16,SPLITS=4]"]
    assert load_spec(tmp_path / "specs" / "dd.yaml").dispatch["km"].entries[1].params == {"TILE": 16, "SPLITS": 4}


def test_a_case_recorded_twice_in_a_json_file_does_not_tie_with_itself(tmp_path):
    spec_path = project(tmp_path, "s1", entry("kb", "gemm_t", "{TILE: [8, 16], SWAP: true}"))
    recorded = results(spec_path, small_wins_small, tmp_path / "r.json")
    document = json.loads(recorded.read_text())
    document["cases"].append(document["cases"][0])
    recorded.write_text(json.dumps(document))
    small = next(p for p in pick_winners(recorded) if p.shape == "64x64x64")
    assert small.best.kernel != small.runner_up.kernel and not small.tie and small.tried == 2


@pytest.mark.parametrize("option", ["--out", "--dispatch"])
def test_a_gz_output_is_refused_before_anything_is_written(tmp_path, option, capsys):
    spec_path = project(tmp_path, "s1", entry("kb", "gemm_t", "{TILE: [8, 16], SWAP: true}"))
    recorded = results(spec_path, small_wins_small, tmp_path / "r.json")
    winners = tmp_path / "specs" / "w.yaml"
    args = ["--out", str(tmp_path / "w.yaml.gz")] if option == "--out" else \
        ["--out", str(winners), "--dispatch", str(tmp_path / "d.yaml.gz")]
    assert main(["tune", str(spec_path), "--from", str(recorded), *args]) == 2
    assert f"{option}:" in capsys.readouterr().err
    assert not winners.exists() and not list(tmp_path.glob("*.gz"))


def test_no_configuration_passed_exits_1_naming_the_results(tmp_path, capsys):
    spec_path = project(tmp_path, "s1", entry("kb", "gemm_t", "{TILE: [8, 16], SWAP: true}"))
    failed = results(spec_path, lambda k, s: Status.FAIL, tmp_path / "failed.json")
    out = tmp_path / "specs" / "w.yaml"
    assert main(["tune", str(spec_path), "--from", str(failed), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "failed.json: no configuration of s1 passed" in err and "w.yaml" not in err and not out.exists()
    # a verify-only run: rows that passed with no time
    untimed = results(spec_path, lambda k, s: None, tmp_path / "verified.json")
    assert main(["tune", str(spec_path), "--from", str(untimed), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "4 configuration(s) of s1 passed, but none was timed: run with timing" in captured.err
    assert "passed, not timed" in captured.out
    with pytest.raises(NoWinnerError, match="none was timed"):
        winners_spec(load_spec(spec_path), pick_winners(untimed), out)


def test_results_of_two_gpu_models_are_ranked_together_only_when_asked(tmp_path, capsys):
    spec_path = project(tmp_path, "s1", entry("kb", "gemm_t", "{TILE: [8, 16], SWAP: true}"))
    mixed = results(spec_path, small_wins_small, tmp_path / "r.json",
                    gpu=lambda index: "NVIDIA H200" if index % 2 else "NVIDIA H100 80GB HBM3")
    out = tmp_path / "specs" / "w.yaml"
    assert main(["tune", str(spec_path), "--from", str(mixed), "--out", str(out)]) == 2
    assert "2 GPU models (NVIDIA H100 80GB HBM3, NVIDIA H200)" in capsys.readouterr().err and not out.exists()
    with pytest.raises(MixedGpusError):
        pick_winners(mixed)
    assert main(["tune", str(spec_path), "--from", str(mixed), "--out", str(out), "--across-gpus"]) == 0
    assert pick_winners(mixed, across_gpus=True)


def test_device_is_refused_with_from(tmp_path, capsys):
    spec_path = project(tmp_path, "s1", entry("kb", "gemm_t", "{TILE: [8, 16], SWAP: true}"))
    recorded = results(spec_path, small_wins_small, tmp_path / "r.json")
    assert main(["tune", str(spec_path), "--from", str(recorded), "--device", "3",
                 "--out", str(tmp_path / "specs" / "w.yaml")]) == 2
    assert "--device is an option of the search" in capsys.readouterr().err
