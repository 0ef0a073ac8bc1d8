"""Every results file says what it was made from (`Provenance`), reads it back unchanged, and `compare` names
what differs between two runs' GPUs, driver and libraries."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from driver_gemm.results.provenance import Provenance, provenance_differences, versions_and_gpus
from driver_gemm.results.read import read_results
from driver_gemm.results.records import CaseLog, RunResult
from driver_gemm.results.settings import RunSettings
from driver_gemm.runners.environment import file_digests, git_state, provenance
from driver_gemm.specfile import load_spec

from conftest import ROOT

H200 = {"name": "NVIDIA H200", "uuid": "GPU-2199c805-1f36-0a0b-3ec5-766a7b211d93"}
FULL = Provenance(commit="e79fecf57b7bf93abd5c33cbaa6f759be5eafa13", dirty=False, spec_sha256="a" * 64,
                  sources={"kernels/k.cu": "b" * 64}, headers={"kernels/k.cuh": "c" * 64}, kernels={"k": "d" * 64},
                  versions={"driver": "580.159.04", "nvrtc": "13.0", "cublas": "13.1.0.3"}, gpus=[H200],
                  clocks_locked=True)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _project(tmp_path: Path, header: str = "#define TILE 16\n") -> Path:
    """A spec, a kernel and the header it includes, in a folder with a project marker."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "tile.cuh").write_text(header)
    (kernels / "k.cu").write_text('#include "tile.cuh"\nextern "C" __global__ void k(const float* A, const float* B, float* C) { C[0] = TILE; }\n')
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent("""\
        name: p
        shapes: [64x64x64]
        kernels:
          - name: k
            source: kernels/k.cu
            function: k
            block: [16, 16]
            grid: [1, 1]
            signature: [A, B, C]
        """))
    return spec


def test_a_results_file_and_a_case_log_read_the_provenance_back_unchanged(tmp_path):
    run = RunResult(spec="s", spec_path=None, provenance=FULL, settings=RunSettings(isolate=True))
    whole = run.write_json(tmp_path / "run.json")
    assert json.loads(whole.read_text())["provenance"]["commit"] == FULL.commit
    assert read_results(whole).run.provenance == FULL
    with CaseLog(tmp_path / "run.jsonl") as log:
        log.write_header(run)
    assert read_results(tmp_path / "run.jsonl").run.provenance == FULL


def test_a_run_without_provenance_writes_none_and_unknown_keys_are_kept(tmp_path):
    path = RunResult(spec="s", spec_path=None).write_json(tmp_path / "run.json")
    assert "provenance" not in json.loads(path.read_text())
    assert read_results(path).run.provenance is None
    later = {"commit": "abcdef0", "a_later_key": [1]}
    assert Provenance.from_json(later).to_json() == later


def test_the_schema_refuses_a_bad_provenance(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"spec": "s", "cases": [], "provenance": {"dirty": "yes"}}))
    with pytest.raises(Exception, match="provenance.dirty"):
        read_results(path)


def test_digests_cover_the_spec_the_source_and_the_header_it_includes(tmp_path):
    spec_path = _project(tmp_path)
    spec = load_spec(spec_path)
    found = provenance(spec, {"driver_version": 13000, "nvrtc_version": "13.0", "device": H200},
                       RunSettings(locked_sm_clock_mhz={"0": 1500}))
    assert found.spec_sha256 == hashlib.sha256(spec_path.read_bytes()).hexdigest()
    assert found.headers == {"kernels/tile.cuh": _sha("#define TILE 16\n")}
    assert list(found.sources) == ["kernels/k.cu"]
    assert found.gpus == [H200] and found.clocks_locked is True
    assert found.versions["nvrtc"] == "13.0" and found.versions["cuda_driver_api"] == "13000"
    # A changed header changes the kernel's digest, though its source is the same file.
    before = found.kernels["k"]
    (tmp_path / "kernels" / "tile.cuh").write_text("#define TILE 32\n")
    assert file_digests(load_spec(spec_path), tmp_path)[2]["k"] != before


def test_outside_a_git_checkout_commit_and_dirty_are_absent(tmp_path):
    spec = load_spec(_project(tmp_path))
    assert git_state(tmp_path) == (None, None)
    written = provenance(spec, {}).to_json()
    assert "commit" not in written and "dirty" not in written


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_git_checkout_gives_its_commit_and_whether_it_is_dirty(tmp_path):
    spec_path = _project(tmp_path)

    def git(*arguments):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *arguments],
                       check=True, capture_output=True)
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "kernels")
    commit, dirty = git_state(tmp_path)
    assert len(commit) == 40 and dirty is False
    (tmp_path / "kernels" / "k.cu").write_text("// changed\n")
    assert git_state(tmp_path) == (commit, True)
    assert provenance(load_spec(spec_path), {}).commit == commit


def _runs(old: Provenance | None, new: Provenance | None, old_env=None, new_env=None):
    return (old, old_env or {}), (new, new_env or {})


def test_compare_names_the_gpu_driver_and_library_that_differ():
    newer = Provenance(versions={"driver": "575.51.03", "nvrtc": "13.0", "cublas": "13.0.2.14"},
                       gpus=[{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1"}], clocks_locked=False,
                       kernels={"k": "e" * 64})
    warnings, notes = provenance_differences(*_runs(FULL, newer))
    assert warnings == ["GPU: NVIDIA H200 GPU-2199c805-1f36-0a0b-3ec5-766a7b211d93 -> NVIDIA H100 80GB HBM3 GPU-1",
                        "driver: 580.159.04 -> 575.51.03", "cublas: 13.1.0.3 -> 13.0.2.14",
                        "clocks locked: yes -> no"]
    assert notes == ["sources differ (by digest) for kernel(s) of the same name: k"]
    assert provenance_differences(*_runs(FULL, FULL)) == ([], [])


def test_files_without_provenance_are_compared_by_their_environment():
    old_env = {"driver_version": 12080, "nvrtc_version": "12.8", "device": H200}
    new_env = {"driver_version": 13000, "nvrtc_version": "12.8", "device": H200}
    warnings, _ = provenance_differences(*_runs(None, None, old_env, new_env))
    assert warnings == ["cuda-driver-api: 12080 -> 13000"]
    # A version that one run did not record is no difference.
    assert provenance_differences(*_runs(FULL, None, {}, {"nvrtc_version": "13.0", "device": H200})) == ([], [])
    assert versions_and_gpus(None, new_env)[1] == [H200]


def test_recorded_results_of_several_gpus_name_each_gpu():
    run = read_results(ROOT / "tests" / "data" / "results" / "mixed-1gpu.json.gz").run
    versions, gpus = versions_and_gpus(run.provenance, run.environment)
    assert gpus and all(gpu["uuid"].startswith("GPU-") for gpu in gpus)
